"""mpsbench ops-rank: the op combinations timed in two results files or commits, largest slowdown
first; time_ benchmarks only, those whose version changed left out and named."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mpsbench.context import Suite
from mpsbench.core import asv, text
from mpsbench.core.errors import UserError
from mpsbench.regressions import rule
from mpsbench.results import recorded

MODULE = "benchmark_ops"
HEADER = [
    "rank",
    "ratio",
    "before",
    "after",
    "change",
    "benchmark",
    "device",
    "op",
    "dtype",
    "size",
]


@dataclass(frozen=True)
class Options:
    before: str  # a results file, or a commit
    after: str
    results_dir: Path | None = None
    machine: str | None = None
    top: int | None = None


@dataclass(frozen=True)
class Slowdown:
    benchmark: str  # class.method
    params: tuple[str, ...]
    before: float  # seconds
    after: float
    judgement: rule.Judgement

    @property
    def ratio(self) -> float:
        return self.after / self.before


@dataclass(frozen=True)
class Ranking:
    slowdowns: list[Slowdown]
    version_changed: list[str]


def load(path: Path) -> Any:
    if not path.is_file():
        raise UserError(f"no results file {str(path)!r}")
    try:
        return recorded.read(path)
    except recorded.RecordedError as exc:
        raise UserError(f"{str(path)!r} is not an asv 0.6 results file: {exc}") from None


def op_times(
    results: Any,
) -> dict[tuple[str, tuple[str, ...]], tuple[recorded.Row, recorded.Measured]]:
    """Op time_ combinations with a number (not failed or skipped)."""
    times = {}
    for row, measured in recorded.rows(results).items():
        module, _, benchmark = row.benchmark.partition(".")
        if (
            module == MODULE
            and benchmark.rpartition(".")[2].startswith("time_")
            and measured.value > 0
        ):
            times[(benchmark, tuple(map(str, asv.param_values(row.params))))] = (row, measured)
    return times


def rank(before: Any, after: Any, thresholds: dict[str, float] | None = None) -> Ranking:
    """The combinations timed in both runs, largest after/before first."""
    old_versions, new_versions = before.benchmark_version, after.benchmark_version
    changed = sorted(
        key.partition(".")[2]
        for key in old_versions.keys() & new_versions.keys()
        if key.startswith(f"{MODULE}.") and old_versions[key] != new_versions[key]
    )
    old, new = op_times(before), op_times(after)
    slowdowns = [
        Slowdown(
            *key,
            old[key][1].value,
            new[key][1].value,
            rule.judge(thresholds or {}, old[key][0].entry, "seconds", old[key][1], new[key][1]),
        )
        for key in old.keys() & new.keys()
        if key[0] not in changed
    ]
    slowdowns.sort(key=lambda found: (-found.ratio, found.benchmark, found.params))
    return Ranking(slowdowns, changed)


def format_ranking(ranking: Ranking, top: int | None = None) -> str:
    from mpsbench.core.asv_internals import human_value

    found = ranking.slowdowns
    lines = ["no op benchmark was timed in both runs"]
    if found:
        rows = [
            [
                str(place),
                f"{s.ratio:.2f}x",
                *(human_value(v, "seconds") for v in (s.before, s.after)),
                s.judgement.label,
                s.benchmark,
                *s.params,
            ]
            for place, s in enumerate(found[:top], 1)
        ]
        lines = [
            text.table([HEADER, *rows]),
            f"{len(found)} combinations timed in both runs; ratio = after / before time per call",
        ]
        if len(rows) < len(found):
            lines.append(f"(the {top} largest shown; --top 0 shows all)")
    if ranking.version_changed:
        changed = ", ".join(ranking.version_changed)
        lines.append(f"left out, version changed between the runs: {changed}")
    return "\n".join(lines)


def find_results(results_dir: Path, commit: str, machine: str | None) -> Path:
    """The results file of ``commit`` (a hash prefix) on ``machine``."""
    where = repr(str(results_dir))
    if not results_dir.is_dir():
        raise UserError(f"no results directory {where}")
    machines = sorted(path.parent.name for path in results_dir.glob("*/machine.json"))
    named = ", ".join(machines) or "none"
    if machine is None:
        if len(machines) != 1:
            raise UserError(
                f"{where} holds {len(machines)} machines' results ({named}): pass --machine"
            )
        machine = machines[0]
    elif machine not in machines:
        raise UserError(f"no machine {machine!r} in {where}; choose one of: {named}")
    full = recorded.full_hash(results_dir, machine, commit)
    paths = sorted((results_dir / machine).glob(f"{full}-*.json")) if full else []
    if not paths:
        raise UserError(f"no results for commit {commit} on machine {machine} in {where}")
    if len(paths) > 1:
        raise UserError(
            f"commit {commit} has results in several environments"
            f" ({', '.join(map(str, paths))}); pass the two files instead"
        )
    return paths[0]


def run(suite: Suite, options: Options) -> int:
    given = (options.before, options.after)
    paths = [Path(name) for name in given]
    as_files = {name.endswith(".json") or Path(name).is_file() for name in given}
    if len(as_files) > 1:
        raise UserError(
            f"give two results files or two commits, not one of each: {options.before!r},"
            f" {options.after!r}"
        )
    if as_files == {False}:
        print("# record both builds' op benchmarks (only what is missing):")
        machine = options.machine or '"$(mpsbench machine --quiet)"'
        for commit in given:
            print(
                f"mpsbench results record --config {suite.config_path} --machine {machine}"
                f" -- -b {MODULE} {commit}^!"
            )
        results_dir = options.results_dir or suite.conf.results
        paths = [find_results(results_dir, commit, options.machine) for commit in given]
        print(f"# ranking {paths[0]} -> {paths[1]}")
    # files from elsewhere: asv's own threshold
    thresholds = suite.conf.thresholds if suite.config_path.is_file() else {}
    print(format_ranking(rank(load(paths[0]), load(paths[1]), thresholds), options.top))
    return 0
