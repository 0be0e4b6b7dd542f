"""Which combinations this run times, so asv starts no process for the rest; only a device this
machine plainly lacks is left out (the benchmarked build's torch decides the rest)."""

from __future__ import annotations

import functools
import itertools
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mpsbench.core import asv
from mpsbench.core.errors import UserError
from mpsbench.measure import devices, selection


@dataclass(frozen=True)
class Combination:
    name: str  # "benchmark_models.Training.time_step('cpu', 'mlp', 8)", or a bare name
    reason: str | None


def discover(benchmark_dir: Path) -> list[Any]:
    """asv_runner's own discovery, importing the package under its folder's name."""
    from mpsbench.core.asv_internals import disc_benchmarks

    root = benchmark_dir.resolve()
    if not (root / "__init__.py").is_file():
        raise UserError(
            f"{benchmark_dir} is not a benchmark package (no __init__.py); pass the suite's"
            " benchmark folder (benchmarks in this checkout)"
        )

    def suite_modules() -> list[str]:
        return [name for name in sys.modules if name.partition(".")[0] == root.name]

    saved = {name: sys.modules.pop(name) for name in suite_modules()}
    parent = str(root.parent)
    sys.path.insert(0, parent)
    try:
        return list(disc_benchmarks(str(root)))
    finally:
        sys.path.remove(parent)
        for name in suite_modules():
            del sys.modules[name]
        sys.modules.update(saved)


@dataclass(frozen=True)
class Row:
    """One combination as asv runs it alone."""

    name: str
    # asv's: the benchmark's name, then -INDEX into the product of its params (asv_runner's
    # set_param_idx) where it has params
    benchmark_id: str
    device: str | None


def _each(benchmarks: Sequence[Any]) -> Iterator[tuple[Any, Row, list[Any]]]:
    for benchmark in benchmarks:
        for index, shown in enumerate(itertools.product(*benchmark.params)):
            params = asv.param_values(shown)
            device = dict(zip(benchmark.param_names, params)).get("device")
            benchmark_id = f"{benchmark.name}-{index}" if benchmark.params else benchmark.name
            row = Row(asv.combination(benchmark.name, shown), benchmark_id, device)
            yield benchmark, row, params


def rows(benchmarks: Sequence[Any]) -> list[Row]:
    return [row for _, row, _ in _each(benchmarks)]


def combinations(benchmarks: Sequence[Any]) -> list[Combination]:
    absent = functools.cache(devices.absent_reason)
    found = []
    for benchmark, row, params in _each(benchmarks):
        reason = absent(row.device) if row.device else None
        if reason is None and params:
            reason = selection.left_out(benchmark.name.split(".")[-2], *params)
        found.append(Combination(row.name, reason))
    return found


def selected(found: Sequence[Combination], bench: Sequence[str] = ()) -> list[str]:
    """The combinations this run times, narrowed by asv's -b regexes."""
    runs = [combination.name for combination in found if combination.reason is None]
    runs = asv.matching(runs, bench) if bench else runs
    if not runs:
        raise UserError(
            "no benchmark combination runs here with this MPSBENCH_DEVICES"
            + (f" and -b {' -b '.join(bench)}" if bench else "")
        )
    return runs
