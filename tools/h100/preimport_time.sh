#!/bin/bash
# What asv's forkserver does before its first fork, timed in fresh interpreters: the benchmark package under the
# run_server mode (models.preload: torch, torchvision, transformers), then asv_runner's discovery of every module.
#     bash tools/h100/preimport_time.sh TREE [TREE ...]     (alternating, 3 rounds)
for round in 1 2 3; do
    for tree in "$@"; do
        (cd "$tree" && PYTHONPATH="$tree/src:$tree:${PYTHONPATH:-}" ${PYTHON:-python3} -c "
import sys, time
t0 = time.perf_counter()
sys.argv[1:] = ['run_server', 'benchmarks']
import asv_runner.server  # noqa: F401  (what asv's benchmark.py imports in every mode)
import benchmarks
t1 = time.perf_counter()
from asv_runner.discovery import disc_benchmarks
n = len(list(disc_benchmarks('benchmarks', ignore_import_errors=True)))
t2 = time.perf_counter()
print(f'{sys.argv[0]} round $round {\"$tree\"}: preload {t1 - t0:.2f} s, discovery {t2 - t1:.2f} s ({n} benchmarks)')
")
    done
done
