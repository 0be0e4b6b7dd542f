"""asv for tests: results files written through asv's own classes, as ``asv run`` writes them, and asv run on
this checkout's suite with every folder it writes under a test's own.

``values`` map ``(kind, metric, device, model, batch)`` to a number: a step time in
seconds for ``time_step``, samples/s for ``track_throughput``.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from asv.results import Results
from asv.runner import BenchmarkResult

# Real asv results folders (benchmarks.json and one folder per machine) from recorded runs; the
# recorded runs' pages in docs/evidence describe them (recorded-cpu-run, gpu-compile, gpu-recorded-run).
RECORDED = Path(__file__).resolve().parent / "data" / "recorded"

PARAM_NAMES = ["device", "model", "batch_size"]
KINDS = ("training", "inference")
METRICS = ("time_step", "track_throughput")


def benchmark(
    kind: str,
    metric: str,
    devices: list[str],
    models: list[str],
    batches: list[int],
    version: str = "1",
) -> dict[str, object]:
    """A benchmarks.json entry for ``benchmark_models.<Kind>.time_step`` or ``<Kind>Capacity.track_throughput``."""
    return {
        "name": f"benchmark_models.{kind.title()}{'' if metric == 'time_step' else 'Capacity'}.{metric}",
        "params": [
            [repr(d) for d in devices],
            [repr(m) for m in models],
            [str(b) for b in batches],
        ],
        "param_names": PARAM_NAMES,
        "version": version,
        "code": "",
        "type": metric.split("_")[0],
        "unit": "seconds" if metric == "time_step" else "samples/s",
    }


def write_results(
    results_dir: Path,
    machine: str,
    commit: str,
    date_ms: int,
    values: dict[tuple[str, str, str, str, int], float],
    devices: list[str],
    models: list[str],
    batches: list[int],
    version: str = "1",
    samples: dict[tuple[str, str, str, str, int], list[float]] | None = None,
    python: str = "3.11",
) -> dict[str, dict[str, object]]:
    """One machine's results file for one build (and its machine.json); the benchmarks it holds, by name.

    ``samples`` give a value its samples instead (one timed call each): asv computes the median and the
    statistics it records (ci_99_a/b, q_25/q_75, repeat) as ``asv run`` does, and keeps the samples too.
    ``python`` other than 3.11 names its own environment, as asv's matrix of Pythons does.
    """
    samples = samples or {}
    (results_dir / machine).mkdir(parents=True, exist_ok=True)
    (results_dir / machine / "machine.json").write_text(
        json.dumps({"machine": machine, "version": 1})
    )
    env_name = "existing-py" if python == "3.11" else f"virtualenv-py{python}"
    result = Results(
        {"machine": machine, "python": python}, {}, commit, date_ms, python, env_name, {}
    )
    benchmarks = {}
    for kind in KINDS:
        for metric in METRICS:
            entry = benchmark(kind, metric, devices, models, batches, version)
            benchmarks[str(entry["name"])] = entry
            keys = [(kind, metric, d, m, b) for d in devices for m in models for b in batches]
            grid = [values.get(key, min(samples[key]) if key in samples else None) for key in keys]
            if any(value is not None for value in grid):
                result.add_result(
                    entry,
                    BenchmarkResult(
                        result=grid,
                        samples=[samples.get(key) for key in keys],
                        number=[1 if key in samples else None for key in keys],
                        errcode=0,
                        stderr="",
                        profile=None,
                    ),
                    record_samples=bool(samples),
                )
    result.save(str(results_dir))
    return benchmarks


def write_benchmarks(results_dir: Path, benchmarks: dict[str, dict[str, object]]) -> None:
    """The benchmarks.json that asv run writes beside the machines' folders."""
    (results_dir / "benchmarks.json").write_text(json.dumps({**benchmarks, "version": 2}))


def write_track(
    results_dir: Path,
    machine: str,
    commit: str,
    date_ms: int,
    name: str,
    param_names: list[str],
    params: list[list[object]],
    unit: str,
    values: dict[tuple[object, ...], float | None],
) -> dict[str, object]:
    """One ``track_`` benchmark's results file for one build: ``values`` per combination (None: asv's failure;
    absent: skipped). Its own environment name, so that it sits beside write_results' file of the same build."""
    entry = {
        "name": name,
        "params": [[repr(value) for value in axis] for axis in params],
        "param_names": param_names,
        "version": "1",
        "code": "",
        "type": "track",
        "unit": unit,
    }
    (results_dir / machine).mkdir(parents=True, exist_ok=True)
    (results_dir / machine / "machine.json").write_text(
        json.dumps({"machine": machine, "version": 1})
    )
    result = Results(
        {"machine": machine, "python": "3.11"},
        {},
        commit,
        date_ms,
        "3.11",
        f"existing-py-{name.rsplit('.', 2)[-2].lower()}",
        {},
    )
    keys = list(itertools.product(*params))
    grid = [values.get(key, math.nan) for key in keys]
    result.add_result(
        entry,
        BenchmarkResult(
            result=grid,
            samples=[None] * len(keys),
            number=[None] * len(keys),
            errcode=0,
            stderr="",
            profile=None,
        ),
    )
    result.save(str(results_dir))
    return {name: entry}


def suite_asv(
    work: Path, **environment: str | None
) -> Callable[..., subprocess.CompletedProcess[str]]:
    """``asv COMMAND ARGS`` on this checkout's suite and this environment's torch, as machine ``ci``.

    Its config is the suite's with results, environments and html in ``work``, and HOME is ``work/home``: nothing
    is written into the checkout or the user's home. ``environment`` sets variables (None removes one); the
    selection's switches are removed unless given.
    """
    from mpsbench.core import asvconf
    from mpsbench.measure import selection

    config = asvconf.load(asvconf.ROOT / asvconf.CONFIG).derive(
        work, work / "timeline", ["release"]
    )
    env = dict(os.environ, HOME=str(work / "home"))
    for name, value in {
        selection.FULL_SWEEP_ENV: None,
        selection.DEVICES_ENV: None,
        **environment,
    }.items():
        env.pop(name, None) if value is None else env.__setitem__(name, value)

    def asv(command: str, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "asv", command, "--config", str(config), *args],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
        )

    machine = asv("machine", "--yes", "--machine", "ci")
    assert machine.returncode == 0, machine.stdout + machine.stderr
    return asv
