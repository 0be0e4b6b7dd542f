"""``mpsbench ops-rank``: rank the op benchmarks by slowdown between two builds.

A model that got slower between two builds is made of ops; this command reads the op benchmarks' results of both
builds and lists every combination (benchmark, device, op, dtype, size) timed in both, the slowest-grown first, by the
ratio of its time per call after to before.

Measuring is mpsbench results record's job: given two commits, it prints the command that records each build's op
benchmarks (what is missing only, never replacing a value) and ranks the stored results; given two results files, it
ranks those. Only time_ benchmarks count (the track_ rates come from the same calls); a benchmark whose version
changed is left out and counted.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mpsbench.context import Suite
from mpsbench.core import asv, text
from mpsbench.core.errors import UserError
from mpsbench.regressions import rule
from mpsbench.results import recorded

MODULE = "benchmark_ops"  # the asv module whose benchmarks are ranked


@dataclass(frozen=True)
class Options:
    before: str  # two results files, or two commits of a results folder
    after: str
    results_dir: Path | None = None  # for commits (default: the config's results_dir)
    machine: str | None = None  # for commits (default: the only one)
    top: int | None = None  # the N largest ratios only


@dataclass(frozen=True)
class Slowdown:
    benchmark: str  # class and method, e.g. "MemoryBoundOps.time_forward"
    params: tuple[str, ...]  # e.g. ("cuda", "gather", "float16", "medium")
    before: float  # seconds per call
    after: float
    judgement: rule.Judgement  # the rule's word on the change, from the recorded statistics

    @property
    def ratio(self) -> float:
        return self.after / self.before


@dataclass(frozen=True)
class Ranking:
    slowdowns: list[Slowdown]  # largest ratio first
    version_changed: list[str]  # benchmarks left out: their version differs between the runs


def load(path: Path) -> Any:
    """An asv ``Results`` read from ``path``, or a one-line error naming the file."""
    if not path.is_file():
        raise UserError(f"no results file {str(path)!r}")
    try:
        return recorded.read(path)
    except recorded.RecordedError as exc:
        raise UserError(f"{str(path)!r} is not an asv 0.6 results file: {exc}") from None


def op_times(
    results: Any,
) -> dict[tuple[str, tuple[str, ...]], tuple[recorded.Row, recorded.Measured]]:
    """Every op ``time_`` combination with a number (not failed, not skipped): its row and seconds per call."""
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
    """Every combination timed in both runs, the largest after/before ratio first, judged with ``thresholds``."""
    versions_before, versions_after = before.benchmark_version, after.benchmark_version
    changed = sorted(
        key.partition(".")[2]
        for key in set(versions_before) & set(versions_after)
        if key.startswith(MODULE + ".") and versions_before[key] != versions_after[key]
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

    lines = ["no op benchmark was timed in both runs"]
    if ranking.slowdowns:
        rows = [
            [
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
        ]
        for place, found in enumerate(ranking.slowdowns[:top], 1):
            rows.append(
                [
                    str(place),
                    f"{found.ratio:.2f}x",
                    human_value(found.before, "seconds"),
                    human_value(found.after, "seconds"),
                    found.judgement.label,
                    found.benchmark,
                    *found.params,
                ]
            )
        lines = [
            text.table(rows),
            f"{len(ranking.slowdowns)} combinations timed in both runs; ratio = after / before time per call",
        ]
        if top is not None and top < len(ranking.slowdowns):
            lines.append(f"(the {top} largest shown; --top 0 shows all)")
    if ranking.version_changed:
        lines.append(
            f"left out, version changed between the runs: {', '.join(ranking.version_changed)}"
        )
    return "\n".join(lines)


def find_results(results_dir: Path, commit: str, machine: str | None) -> Path:
    """The one results file of ``commit`` (a hash or a unique prefix) on ``machine``."""
    if not results_dir.is_dir():
        raise UserError(f"no results directory {str(results_dir)!r}")
    machines = sorted(path.parent.name for path in results_dir.glob("*/machine.json"))
    if machine is None:
        if len(machines) != 1:
            found = ", ".join(machines) or "none"
            raise UserError(
                f"{str(results_dir)!r} holds results of several machines or none ({found}); pass --machine"
            )
        machine = machines[0]
    elif machine not in machines:
        raise UserError(
            f"no machine {machine!r} in {str(results_dir)!r}; choose one of: {', '.join(machines) or 'none'}"
        )
    full = recorded.full_hash(results_dir, machine, commit)  # RecordedError: one line, exit 2
    paths = sorted((results_dir / machine).glob(f"{full}-*.json")) if full else []
    if not paths:
        raise UserError(
            f"no results for commit {commit} on machine {machine} in {str(results_dir)!r}"
        )
    if len(paths) > 1:
        names = ", ".join(str(path) for path in paths)
        raise UserError(
            f"commit {commit} has results in several environments ({names}); pass the two files instead"
        )
    return paths[0]


def run(suite: Suite, options: Options) -> int:
    as_files = [
        name.endswith(".json") or Path(name).is_file() for name in (options.before, options.after)
    ]
    if all(as_files):
        before_path, after_path = Path(options.before), Path(options.after)
    elif any(as_files):
        raise UserError(
            f"give two results files or two commits, not one of each: {options.before!r}, {options.after!r}"
        )
    else:
        print(
            "# record the op benchmarks of both builds (what is missing only; never a bare asv run, README):"
        )
        machine_option = (
            f" --machine {options.machine}"
            if options.machine
            else ' --machine "$(mpsbench machine --quiet)"'
        )
        for commit in (
            options.before,
            options.after,
        ):  # record runs asv with this platform's launch method
            print(
                f"mpsbench results record --config {suite.config_path}{machine_option} -- -b {MODULE} {commit}^!"
            )
        results_dir = options.results_dir or suite.conf.results
        before_path, after_path = (
            find_results(results_dir, commit, options.machine)
            for commit in (options.before, options.after)
        )
        print(f"# ranking {before_path} -> {after_path}")
    # two files from elsewhere, with no asv.conf.json here: asv's own threshold
    thresholds = suite.conf.thresholds if suite.config_path.is_file() else {}
    print(format_ranking(rank(load(before_path), load(after_path), thresholds), options.top))
    return 0
