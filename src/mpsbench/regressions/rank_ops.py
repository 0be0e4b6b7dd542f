"""``mpsbench ops-rank``: rank the op benchmarks by slowdown between two builds.

A model that got slower between two builds is made of ops; this command reads the op benchmarks' results of both
builds and lists every combination (benchmark, device, op, dtype, size) timed in both, the slowest-grown first, by the
ratio of its time per call after to before.

Measuring is asv's job: given two commits, it prints the ``asv run`` for each and ranks the stored
results; given two results files, it ranks those. Only ``time_`` benchmarks count (the ``track_``
rates come from the same calls); a benchmark whose ``version`` changed is left out and counted.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mpsbench import command
from mpsbench.regressions import factor, rule
from mpsbench.results import asvconf, recorded

MODULE = "benchmark_ops"  # the asv module whose benchmarks are ranked
DEFAULT_RESULTS_DIR = ".asv/results"


class RankError(command.UserError):
    """Results that cannot be found, read or compared: the message says which and why."""


@dataclass(frozen=True)
class Slowdown:
    """One combination's time per call in both runs."""

    benchmark: str  # class and method, e.g. "MemoryBoundOps.time_forward"
    params: tuple[str, ...]  # e.g. ("cuda", "gather", "float16", "medium")
    before: float  # seconds per call
    after: float
    judgement: rule.Judgement  # the rule's word on the change, from the recorded statistics

    @property
    def ratio(self) -> float:
        """after / before: above 1 is a slowdown."""
        return self.after / self.before


@dataclass(frozen=True)
class Ranking:
    slowdowns: list[Slowdown]  # largest ratio first
    version_changed: list[str]  # benchmarks left out: their version differs between the runs


def load(path: Path) -> Any:
    """An asv ``Results`` read from ``path``, or a one-line error naming the file."""
    if not path.is_file():
        raise RankError(f"no results file {str(path)!r}")
    try:
        return recorded.read(path)
    except recorded.RecordedError as exc:
        raise RankError(f"{str(path)!r} is not an asv 0.6 results file: {exc}") from None


def _param_value(text: str) -> str:
    """asv stores each param as its repr ("'cuda'"): show the value."""
    return text[1:-1] if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"" else text


def op_times(results: Any) -> dict[tuple[str, tuple[str, ...]], tuple[recorded.Row, recorded.Measured]]:
    """Every op ``time_`` combination with a number (not failed, not skipped): its row and seconds per call."""
    times = {}
    for row, measured in recorded.rows(results).items():
        module, _, benchmark = row.benchmark.partition(".")
        if module == MODULE and benchmark.rpartition(".")[2].startswith("time_") and measured.value > 0:
            times[(benchmark, tuple(map(_param_value, row.params)))] = (row, measured)
    return times


def rank(before: Any, after: Any, thresholds: dict[str, float] | None = None) -> Ranking:
    """Every combination timed in both runs, the largest after/before ratio first, judged with ``thresholds``."""
    versions_before, versions_after = before.benchmark_version, after.benchmark_version
    changed = sorted(
        key.partition(".")[2] for key in set(versions_before) & set(versions_after)
        if key.startswith(MODULE + ".") and versions_before[key] != versions_after[key]
    )
    old, new = op_times(before), op_times(after)
    slowdowns = []
    for key in old.keys() & new.keys():
        (row, was), (_, now) = old[key], new[key]
        if key[0] not in changed:
            slowdowns.append(Slowdown(*key, was.value, now.value, rule.judge(thresholds or {}, row.entry, "seconds", was, now)))
    slowdowns.sort(key=lambda found: (-found.ratio, found.benchmark, found.params))
    return Ranking(slowdowns, changed)


def format_ranking(ranking: Ranking, top: int | None = None) -> str:
    """The ranking as a table, with a line for what was left out."""
    from asv.util import human_value

    if not ranking.slowdowns:
        lines = ["no op benchmark was timed in both runs"]
    else:
        shown = ranking.slowdowns if top is None else ranking.slowdowns[:top]
        rows = [["rank", "ratio", "before", "after", "change", "benchmark", "device", "op", "dtype", "size"]]
        for place, found in enumerate(shown, 1):
            rows.append([str(place), f"{found.ratio:.2f}x", human_value(found.before, "seconds"),
                         human_value(found.after, "seconds"), found.judgement.label, found.benchmark, *found.params])
        lines = [command.table(rows)]
        lines.append(f"{len(ranking.slowdowns)} combinations timed in both runs; ratio = after / before time per call")
        if top is not None and top < len(ranking.slowdowns):
            lines.append(f"(the {top} largest shown; --top 0 shows all)")
    if ranking.version_changed:
        lines.append(f"left out, version changed between the runs: {', '.join(ranking.version_changed)}")
    return "\n".join(lines)


def asv_run_command(commit: str, config: Path, machine: str | None) -> str:
    """The asv command that measures the op benchmarks of one commit (one build of a timeline)."""
    try:
        launch = asvconf.launch_method(factor.read_config(config))  # this platform's, as scripts/bench
    except factor.FactorError as exc:
        raise RankError(str(exc)) from None
    machine_option = f" --machine {machine}" if machine else ""
    return f"asv run --config {config}{machine_option} -b {MODULE} --launch-method {launch} {commit}^!"


def find_results(results_dir: Path, commit: str, machine: str | None) -> Path:
    """The one results file of ``commit`` (a hash or a unique prefix) on ``machine``."""
    from asv import results as asv_results
    from asv import util

    if not results_dir.is_dir():
        raise RankError(f"no results directory {str(results_dir)!r}")
    machines = sorted(path.parent.name for path in results_dir.glob("*/machine.json"))
    if machine is None:
        if len(machines) != 1:
            found = ", ".join(machines) or "none"
            raise RankError(f"{str(results_dir)!r} holds results of several machines or none ({found}); pass --machine")
        machine = machines[0]
    elif machine not in machines:
        raise RankError(f"no machine {machine!r} in {str(results_dir)!r}; choose one of: {', '.join(machines) or 'none'}")
    try:
        full = asv_results.get_result_hash_from_prefix(str(results_dir), machine, commit)
    except util.UserError as exc:
        raise RankError(str(exc)) from None
    paths = sorted((results_dir / machine).glob(f"{full}-*.json")) if full else []
    if not paths:
        raise RankError(f"no results for commit {commit} on machine {machine} in {str(results_dir)!r}")
    if len(paths) > 1:
        names = ", ".join(str(path) for path in paths)
        raise RankError(f"commit {commit} has results in several environments ({names}); pass the two files instead")
    return paths[0]


def run(args: argparse.Namespace) -> int:
    """Rank two results files, or two commits' stored results after printing the asv commands."""
    if args.top is not None and args.top < 0:
        raise RankError(f"--top must be 0 (all) or more, got {args.top}")
    as_files = [text.endswith(".json") or Path(text).is_file() for text in (args.before, args.after)]
    if all(as_files):
        before_path, after_path = Path(args.before), Path(args.after)
    elif any(as_files):
        raise RankError(f"give two results files or two commits, not one of each: {args.before!r}, {args.after!r}")
    else:
        print("# measure the op benchmarks of both builds (asv continuous -b benchmark_ops does both and compares):")
        for commit in (args.before, args.after):
            print(asv_run_command(commit, args.config, args.machine))
        before_path = find_results(args.results_dir, args.before, args.machine)
        after_path = find_results(args.results_dir, args.after, args.machine)
        print(f"# ranking {before_path} -> {after_path}")
    thresholds = factor.thresholds(args.config) if args.config.is_file() else {}  # two files from elsewhere: asv's 5%
    print(format_ranking(rank(load(before_path), load(after_path), thresholds), args.top or None))
    return 0


def add_subcommand(commands: Any) -> None:
    parser = commands.add_parser(
        "ops-rank", help="rank the op benchmarks by slowdown between two builds",
        description=__doc__.split("\n\n")[1] if __doc__ else None,
    )
    parser.add_argument("before", help="the older build: an asv results .json file, or a commit hash (prefix)")
    parser.add_argument("after", help="the newer build: as BEFORE")
    parser.add_argument("--results-dir", type=Path, default=Path(DEFAULT_RESULTS_DIR),
                        help=f"where asv stores results, for commits (default {DEFAULT_RESULTS_DIR})")
    parser.add_argument("--machine", default=None, help="the asv machine name, for commits (default: the only one)")
    parser.add_argument("--config", type=Path, default=factor.CONFIG,
                        help=f"the asv config the printed commands use (default {factor.CONFIG}; the timeline's for builds)")
    parser.add_argument("--top", type=int, default=None, help="show the N largest ratios only (default all)")
    parser.set_defaults(func=run)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m mpsbench.regressions.rank_ops``: the same command, through the ``mpsbench`` parser."""
    from mpsbench import cli

    return cli.main(["ops-rank", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
