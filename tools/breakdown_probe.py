"""One benchmark process of tools/process_breakdown.py: where its time goes, printed as one line of JSON.

Run as a build server runs (``python -S``, the build's sys.path entries in PYTHONPATH, the environment's
site-packages without install_build's switch), then, in the order a process meets them: the imports, asv's
discovery of the whole suite (what asv's forkserver pre-imports every round), the workload's setup taken apart
(model build, ``.to``, warm-up, guard) where the row is a model step, and asv_runner's own setup and SAMPLES
samples (do_run's wall: the timed calls and, before each, asv's re-run of setup, shown alone as "setup again").

    python -S tools/breakdown_probe.py BENCHMARK_DIR BENCHMARK_ID SAMPLES LAUNCHED
"""

from __future__ import annotations

import json
import sys
import time

STARTED = time.time()


def main(argv: list[str]) -> int:
    benchmark_dir, benchmark_id, samples, launched = argv[0], argv[1], int(argv[2]), float(argv[3])
    from mpsbench.regressions import serve_build  # standard library only: the servers' own sys.path fix

    serve_build._site_without_switch()
    took: dict[str, float] = {"interpreter start": STARTED - launched}

    def timed(name: str, work: object) -> object:
        clock = time.perf_counter()
        value = work() if callable(work) else None
        took[name] = time.perf_counter() - clock
        return value

    timed("import torch", lambda: __import__("torch"))
    timed("import asv_runner", lambda: __import__("asv_runner.discovery"))
    from asv_runner.discovery import disc_benchmarks, get_benchmark_from_name

    benchmark = timed("import the benchmark module", lambda: get_benchmark_from_name(benchmark_dir, benchmark_id))
    timed("discovery (every module)", lambda: list(disc_benchmarks(benchmark_dir, ignore_import_errors=True)))
    for name in ("torchvision", "transformers"):
        try:
            timed(f"import {name}", lambda name=name: __import__(name))
        except ImportError:
            took[f"import {name}"] = float("nan")
    params = tuple(benchmark._current_params)  # type: ignore[attr-defined]
    kind = {"Training": "training", "Inference": "inference"}.get(benchmark.name.split(".")[-2])  # type: ignore[attr-defined]
    if kind is not None and len(params) == 3:  # a model step: its setup taken apart (suite.prepare's pieces)
        from mpsbench.measure import accuracy, correctness, models, workloads

        device, model, batch_size = params
        timed("setup: model build", lambda: models.get(model).build())
        workload = timed("setup: build + .to + batch", lambda: workloads.build(kind, device, model, batch_size))
        took["setup: .to + batch"] = took.pop("setup: build + .to + batch") - took["setup: model build"]
        timed("setup: warm-up", workload.warm_up)  # type: ignore[attr-defined]
        # suite.guard's parts: the correctness patterns (once per process, device and dtype), then the model's
        # own check against the cpu (once per workload)
        timed("setup: guard: patterns", lambda: correctness.verify(device, workload.dtype))  # type: ignore[attr-defined]
        if accuracy.needed(device):
            timed("setup: guard: accuracy", lambda: accuracy.verify(workload))  # type: ignore[arg-type]
        workloads.forget()

    class Attributes:  # asv's -a repeat, as asv_runner's get_benchmark_from_name inserts extra params
        repeat = samples

    benchmark._attr_sources.insert(0, Attributes)  # type: ignore[attr-defined]
    skipped = timed("setup (asv's do_setup, whole)", benchmark.do_setup)  # type: ignore[attr-defined]
    result = {} if skipped else timed("samples (asv's do_run)", benchmark.do_run)  # type: ignore[attr-defined]
    timed("teardown", benchmark.do_teardown)  # type: ignore[attr-defined]
    # asv_runner re-runs teardown and setup before every sample (redo_setup): with the workload cached, what is left
    timed("setup again (before each sample)", benchmark.do_setup)  # type: ignore[attr-defined]
    benchmark.do_teardown()  # type: ignore[attr-defined]
    values = result.get("samples", []) if isinstance(result, dict) else []
    print(json.dumps({"took": took, "fastest": min(values, default=float("nan"))}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
