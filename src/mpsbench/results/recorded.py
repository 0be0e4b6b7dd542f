"""The one reader of asv results folders; an unreadable file is an error."""

from __future__ import annotations

import itertools
import json
import math
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mpsbench.core import asv, asv_internals, progress
from mpsbench.core.errors import UserError, first_line

log = progress.logger(__name__)


@dataclass(frozen=True)
class Unit:
    """Better direction, smallest change, allowed values (docs/explanation/integrity.md)."""

    name: str
    higher_is_better: bool = False
    floor: float = 0.0  # smaller absolute changes are none
    least: float = -math.inf
    most: float = math.inf


DAY = 86400.0  # asv's timeout ends any timed step first
PIB_IN_MIB = float(2**30)
UNITS = {
    unit.name: unit
    for unit in (
        Unit("seconds", floor=5e-6, least=1e-9, most=DAY),  # below 5 us is timer jitter
        Unit("MiB", floor=1.0, least=0.0, most=PIB_IN_MIB),  # below a MiB: allocator rounding
        Unit("MiB/100 steps", floor=1.0, least=-PIB_IN_MIB, most=PIB_IN_MIB),
        Unit("ops", floor=1.0, least=0.0),  # one new fallback op is a change
        Unit("fraction", floor=0.01, least=0.0, most=1.0),
        *(Unit(rate, True, least=1 / DAY, most=1e12) for rate in ("samples/s", "images/s")),
        Unit("GFLOP/s", True, least=1e-6, most=1e8),
        Unit("GB/s", True, least=1e-6, most=1e6),
        Unit("samples", True, least=0.0),
        *(Unit(amount, least=0.0) for amount in ("relative error", "ratio", "macOS version")),
        *(Unit(share, least=0.0, most=1.0) for share in ("on", "on battery")),
        Unit("threads", least=1.0, most=1e6),
    )
}


def unit(name: str) -> Unit:
    return UNITS.get(name) or Unit(name)


class RecordedError(UserError):
    """No results, or a file asv cannot read."""


@dataclass(frozen=True)
class Measured:
    value: float
    stats: dict[str, Any] | None = None
    samples: tuple[float, ...] | None = None


@dataclass(frozen=True)
class Row:
    benchmark: str
    params: tuple[str, ...]  # asv's reprs, in param_names order

    @property
    def entry(self) -> str:
        return asv.combination(self.benchmark, self.params)


@dataclass
class Recorded:
    values: dict[tuple[str, str], dict[Row, Measured]]
    dates: dict[str, int]  # ms
    units: dict[str, str]
    files: int = 0
    failed: dict[tuple[str, str], set[Row]] = field(default_factory=dict)

    @property
    def machines(self) -> list[str]:
        return sorted({machine for machine, _ in self.values})

    def builds(self, machine: str) -> list[str]:
        found = {commit for m, commit in self.values if m == machine}
        return sorted(found, key=lambda commit: (self.dates.get(commit, 0), commit))

    def get(self, machine: str, commit: str, row: Row) -> Measured | None:
        return self.values.get((machine, commit), {}).get(row)

    def add(self, result: Any) -> None:
        self.files += 1
        self.dates[result.commit_hash] = int(result.date or 0)
        key = (result.params["machine"], result.commit_hash)
        self.values.setdefault(key, {}).update(rows(result))
        self.failed.setdefault(key, set()).update(
            row for row, value, _, _ in _cells(result) if value is None
        )


def benchmarks(results_dir: Path) -> dict[str, dict[str, Any]]:
    """benchmarks.json's entries; none where unreadable."""
    try:
        listed = raw(results_dir / asv.BENCHMARKS)
    except RecordedError:
        return {}
    return {name: entry for name, entry in listed.items() if isinstance(entry, dict)}


def benchmark_units(results_dir: Path) -> dict[str, str]:
    return {name: str(b.get("unit", "")) for name, b in benchmarks(results_dir).items()}


def _cells(result: Any) -> Iterator[tuple[Row, Any, Any, Any]]:
    for name in result.get_all_result_keys():
        params = result.get_result_params(name)
        for combination, *cells in zip(
            itertools.product(*params),
            result.get_result_value(name, params),
            result.get_result_stats(name, params),
            result.get_result_samples(name, params),
        ):
            yield Row(name, tuple(combination)), *cells


def rows(result: Any) -> dict[Row, Measured]:
    return {
        row: Measured(float(value), stats or None, tuple(map(float, samples)) if samples else None)
        for row, value, stats, samples in _cells(result)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    }


UNREADABLE = (asv_internals.UserError, OSError, ValueError, KeyError, TypeError, AttributeError)


def read(path: Path | str, machine: str | None = None) -> Any:
    try:
        return asv_internals.Results.load(str(path), machine_name=machine)
    except UNREADABLE as exc:
        raise RecordedError(first_line(exc)) from None


def raw(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise RecordedError(f"{path}: {exc}") from None
    if not isinstance(data, dict):
        raise RecordedError(f"{path}: not a JSON object")
    return data


def same(one: Path, other: Path) -> bool:
    first, second = one.read_bytes(), other.read_bytes()
    try:
        return first == second or bool(json.loads(first) == json.loads(second))
    except ValueError:
        return False


def machine_named(path: Path) -> str:
    try:
        found = asv_internals.load_json(str(path), api_version=asv_internals.Machine.api_version)
        name = found.get("machine")
    except UNREADABLE as exc:
        raise RecordedError(str(exc)) from None
    if not isinstance(name, str):
        raise RecordedError(f"{path} names no machine")
    return name


def filename(machine: str, commit: str, environment: str) -> str:
    return str(asv_internals.get_filename(machine, commit, environment))


def full_hash(results_dir: Path, machine: str, prefix: str) -> str | None:
    try:
        found = asv_internals.get_result_hash_from_prefix(str(results_dir), machine, prefix)
    except asv_internals.UserError as exc:
        raise RecordedError(str(exc)) from None
    return None if found is None else str(found)


def commits(results_dir: Path, machine: str) -> set[str]:
    folder = results_dir / machine
    return {result.commit_hash for result in _results(folder, False)} if folder.is_dir() else set()


def _results(results_dir: Path, strict: bool) -> Iterator[Any]:
    if not results_dir.is_dir():
        raise RecordedError(f"results directory {results_dir} does not exist")
    for root, filename, machine in asv_internals.iter_results_paths(str(results_dir)):
        try:
            yield result_file(os.path.join(root, filename), machine)
        except RecordedError as exc:
            if strict:
                raise
            log.warning(f"{exc}: skipped")


def result_file(path: Path | str, machine: str) -> Any:
    try:
        return read(path, machine)
    except RecordedError as exc:
        raise RecordedError(f"results file {path} cannot be read ({exc})") from None


def load(results_dir: Path, strict: bool = True) -> Recorded:
    """Every results file; an unreadable one is an error if ``strict``, else a warning."""
    if not (found := load_each_python(results_dir, strict, each=False)):
        raise RecordedError(f"results directory {results_dir} holds no asv results files")
    return found[""]


def load_each_python(
    results_dir: Path, strict: bool = True, each: bool = True
) -> dict[str, Recorded]:
    """By the Python they ran under, where ``each``."""
    found: dict[str, Recorded] = {}
    units = benchmark_units(results_dir)
    for result in _results(results_dir, strict):
        python = str(result.params.get("python")) if each else ""
        found.setdefault(python, Recorded({}, {}, units)).add(result)
    return found
