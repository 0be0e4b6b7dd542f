"""One shared measurement (a setup_cache family), timed in a fresh interpreter and in a fork of one that imported
what asv's forkserver imports: where a forked lookup's measuring gains or loses (issue 31, docs/explanation/budget.md).

    MPSBENCH_DEVICES=cpu .venv/bin/python tools/fork_probe.py patterns fresh frozen fresh frozen

Each mode runs in a process of its own, one after the other, so alternate them to measure in one sitting:
fresh (this interpreter imports only what the measuring needs, within the timed seconds, as a setup_cache's
interpreter does), forked (a fork after the forkserver's imports) and frozen (the same, with the forkserver's
gc.freeze()). It prints the family, the mode, the seconds and the 1-minute load average.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import inspect
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
MODES = ("fresh", "forked", "frozen")


def _families() -> dict[str, Callable[[], Any]]:
    # the suite's modules by name: benchmarks/ is asv's, not a typed package
    benchmark_models = importlib.import_module("benchmarks.benchmark_models")
    benchmark_patterns = importlib.import_module("benchmarks.benchmark_patterns")
    from mpsbench.measure import epoch, figures, measured

    return {
        "patterns": inspect.unwrap(benchmark_patterns._measure_patterns),
        "epoch": lambda: epoch.measure_selection("Epoch"),
        "capacity": lambda: measured.measure_kinds(figures.capacity, benchmark_models.TrainingCapacity,
                                                   benchmark_models.InferenceCapacity),
    }


def _timed(family: str, mode: str) -> None:
    started = time.perf_counter()
    _families()[family]()
    load = os.getloadavg()[0]
    print(f"{family} {mode}: {time.perf_counter() - started:.1f} s, load {load:.2f}", flush=True)


def _one(family: str, mode: str) -> None:
    """In this process: measure ``family`` as ``mode`` says."""
    if mode == "fresh":
        _timed(family, mode)
        return
    from mpsbench.measure import models

    for package in models.PRELOADED:  # what the forkserver imports (models.preload_for_forkserver)
        __import__(package)
    if mode == "frozen":
        gc.freeze()
    child = os.fork()
    if child == 0:
        try:
            _timed(family, mode)
        finally:
            os._exit(0)
    os.waitpid(child, 0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("family", choices=("patterns", "epoch", "capacity"))
    parser.add_argument("modes", nargs="+", choices=MODES)
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)  # a child's single mode
    args = parser.parse_args()
    if args.one:
        _one(args.family, args.modes[0])
        return 0
    for mode in args.modes:  # each mode in a new interpreter: nothing imported or collected carries over
        subprocess.run([sys.executable, __file__, "--one", args.family, mode], cwd=ROOT, check=True)
    return 0


if __name__ == "__main__":
    sys.path[:0] = [str(ROOT), str(ROOT / "src")]
    sys.exit(main())
