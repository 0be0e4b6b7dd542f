"""Run asv so that recorded results only grow: measure what is missing into scratch, then merge it in.

asv replaces what it re-runs, and its --skip-existing-successful re-runs a whole benchmark when one
combination failed and skips a combination new to it. So mpsbench results record, holding the results
folder's lock (the one every writer of it takes), first merges what an interrupted run left in scratch; then,
for every build of the range, it runs asv for exactly the selected combinations (-b, or this machine's preselection)
that have no value (a failure counts as missing, n/a as recorded), builds with the same missing set together,
into RESULTS.scratch, and merges each value in as soon as asv has measured it, combination by combination
(core/asv_saving.py; the merge is results merge's). --remeasure runs them all again; each value it replaces is
kept in RESULTS-replaced.jsonl.

RANGE is ALL (every build of the config's branches), HASHFILE:path, a git range of the timeline (timeline
hashes from mpsbench build list, HASH^! or OLD..NEW, channels and tags; not CHANNEL@ID), or absent (each
branch's newest build).
"""

from __future__ import annotations

import collections
import contextlib
import json
import shlex
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from mpsbench.core import asv, asv_saving, files, git, progress, ranges, settings
from mpsbench.core.asvconf import AsvConf
from mpsbench.core.errors import UserError
from mpsbench.measure import preselect
from mpsbench.results import merge, recorded, watch

BENCHMARKS_FAILED = 3  # asv ran, and some benchmark failed (its results say which); 2 stays a usage mistake
# The first tier (issue 32): on the newest build, each seed model's training and inference step on the devices
# present, at the batches this run's selection times them (measure/selection.py decides which)
FIRST_TIER = r"^benchmark_models\.(?:Training|Inference)\.time_step\("

log = progress.logger(__name__)


class RecordError(UserError):
    """The run cannot start as asked (nothing selected, --quick); a range naming no build is a ranges.RangeError."""


def recorded_names(results: Path, machine: str, commit: str, environment: str = "*") -> set[str]:
    """The combinations that hold a value in this machine's results for the build, named as -b sees them."""
    names: set[str] = set()
    for path in sorted((results / machine).glob(f"{commit[:8]}-{environment}.json")):
        try:
            result = recorded.read(path, machine)
        except recorded.RecordedError as exc:
            raise RecordError(f"results file {path} cannot be read ({exc})") from None
        if result.commit_hash == commit:
            names.update(row.entry for row in recorded.rows(result))
    return names


def scratch_root(results: Path) -> Path:
    return results.parent / f"{results.name}.scratch"


def _merge_scratch(results: Path, scratch: Path, replace: bool, quiet: bool = False) -> merge.Report | None:
    if not (scratch / "results").is_dir():
        return None
    report = merge.merge(results, [scratch / "results"], update_benchmarks=True, replace=replace)
    for line in report.conflicts + report.refused + report.corrupt:
        log.warning(line)
    if not quiet and (report.copied or report.merged or report.replaced):
        log.info(report.summary(results))
    return report


def _end_left_behind(scratch: Path) -> None:
    """End the asv forkserver (and what it runs) that a run killed with kill -9 left behind, by the pid and start
    time its events recorded: nobody else's process, even if the pid was reused since."""
    import psutil

    found = []
    events = scratch / asv_saving.EVENTS
    for line in events.read_text().splitlines() if events.is_file() else []:
        with contextlib.suppress(ValueError, KeyError, TypeError, psutil.Error):
            event = json.loads(line)
            if event.get("event") == "forkserver":
                process = psutil.Process(int(event["pid"]))
                if abs(process.create_time() - float(event["created"])) < 1e-3:
                    found.append(process)
    if found:
        log.info(f"ending the asv forkserver a stopped run left running (pid {', '.join(str(p.pid) for p in found)})")
        asv.end(found)


def recover(results: Path, root: Path) -> None:
    """Merge what interrupted runs left in scratch (never replacing), then remove it, and the temporary files
    that a merge killed before its rename left beside the recorded files (each recorded file is intact)."""
    for leftover in [*results.glob(".*.tmp"), *results.glob("*/.*.tmp")]:
        leftover.unlink()
    for folder in sorted(path for path in root.iterdir() if path.is_dir()) if root.is_dir() else []:
        _end_left_behind(folder)
        report = _merge_scratch(results, folder, replace=False)
        if report is not None and (report.copied or report.merged):
            log.info(f"recovered an interrupted run's results from {folder}: {report.summary(results)}")
        shutil.rmtree(folder)


def newest_first(timeline: Path, commits: Sequence[str]) -> list[str]:
    """The builds by their date (a timeline commit's date is its build's), newest first; ties keep their order."""
    dates = git.text(timeline, "show", "-s", "--format=%ct", *commits).split() if commits else []
    return [commit for _, commit in sorted(zip(dates, commits, strict=True), key=lambda pair: -int(pair[0]))]


def steps(commits: Sequence[str], missing: dict[str, tuple[str, ...]]) -> list[watch.Step]:
    """Newest build first, its first tier before the rest, then each older build's missing combinations."""
    planned = []
    for number, commit in enumerate(commits):
        names = missing[commit]
        first = tuple(asv.matching(names, [FIRST_TIER])) if number == 0 else ()
        rest = tuple(name for name in names if name not in first)
        planned += [watch.Step(commit, first, "first tier")] if first and rest else []
        planned += [watch.Step(commit, rest or first, "the rest" if first and rest else "every combination")] if names else []
    return planned


@dataclass(frozen=True)
class Selection:
    names: tuple[str, ...]  # the combinations a run times
    default_size: int  # how many this machine's preselection times: the size docs/budget.md's measured build ran
    left_out: str | None  # what -b found that only skips here, and why; None: nothing


def select(conf: AsvConf, bench: Sequence[str]) -> Selection:
    """The combinations a run times: this machine's preselection, or those of it that -b's patterns find (asv's
    re.search). RecordError where -b finds none, or only combinations that would skip here: asv starts a process for
    each combination it selects, even one whose setup only skips (measure/preselect.py)."""
    found = preselect.combinations(preselect.discover(conf.benchmarks))
    default = preselect.selected(found)
    if not bench:
        return Selection(tuple(default), len(default), None)
    shown = " -b ".join(map(shlex.quote, bench))
    asked = set(asv.matching([combination.name for combination in found], bench))
    if not asked:
        raise RecordError(f"no benchmark matches -b {shown}; `mpsbench preselect --list` lists every combination")
    runs = tuple(combination.name for combination in found if combination.name in asked and combination.reason is None)
    left = collections.Counter(combination.reason for combination in found
                               if combination.name in asked and combination.reason is not None)
    reasons = "; ".join(f"{reason} ({count})" for reason, count in left.most_common(3)) + ("; ..." if len(left) > 3 else "")
    if not runs:
        raise RecordError(f"none of the {len(asked)} combinations -b {shown} finds runs on this machine: {reasons}")
    said = (f"-b: {len(runs)} of the {len(asked)} combinations it finds run here, the rest would only skip"
            f" (`mpsbench preselect --list` says why for each): {reasons}") if left else None
    return Selection(runs, len(default), said)


def check_meaning(run: asv.RunArgs) -> None:
    """RecordError, before anything runs, where an asv option (--quick, -a repeat=1, --set-commit-hash) or an
    MPSBENCH_* setting would change what the recorded values mean; a --dry-run saves nothing and may."""
    if run.dry_run:
        return
    if run.changes_values:
        raise RecordError(f"{run.changes_values[0]}; add --dry-run for a throw-away run, or leave it out")
    if (refusal := settings.recording_refusal()) is not None:
        raise RecordError(refusal)


def record(conf: AsvConf, machine: str, asv_args: Sequence[str], remeasure: bool = False,
           facts: watch.Builds | None = None, after: Callable[[watch.Step, bool], None] | None = None,
           selection: Selection | None = None) -> int:
    """Run what is missing (everything selected, with ``remeasure``) and merge it in: 0, or BENCHMARKS_FAILED.

    One asv run per build, newest build first (its first tier before the rest); each combination merged into the
    record as soon as asv has measured it (:mod:`mpsbench.core.asv_saving`); a build that ``facts`` says does not fit
    on the disk is skipped with one line. Ctrl-C or SIGTERM ends every process of the run, merges what it measured
    and raises :class:`asv.Stopped`. ``after(step, build_done)`` is called after each step that ran (the site is
    published there: after the first tier, and after each build). ``selection``: :func:`select`'s, made already.
    """
    run = asv.run_args(asv_args)
    check_meaning(run)
    results = conf.results
    if conf.repo is None:
        raise RecordError(f"{conf.path}: repo must be the timeline's folder, not a URL")
    commits = newest_first(conf.repo, ranges.builds(conf.repo, conf.branches, run.range))
    chosen = selection or select(conf, run.bench)
    wanted = chosen.names
    if chosen.left_out is not None:
        log.info(chosen.left_out)
    with files.lock(results, wait=False):
        root = scratch_root(results)
        recover(results, root)
        missing = {}
        for commit in commits:
            have = set() if remeasure else recorded_names(results, machine, commit, run.environment)
            missing[commit] = tuple(name for name in wanted if name not in have)
        planned = steps([commit for commit in commits if missing[commit]], missing)
        if not planned:
            log.info(f"every selected combination ({len(wanted)}) is recorded for the {len(commits)} builds: nothing to run")
            return 0
        gpu = not any("'cpu'" in name for name in wanted)
        watching = watch.Watch(planned, watch.Costs(results, machine, gpu, chosen.default_size), facts)
        print(watching.plan())
        status = 0
        for step in planned:
            if not watching.begin(step):
                continue
            scratch = asv.scratch(root)
            hashfile = scratch / "builds.txt"
            # One build per run, in our order: with --interleave-rounds (asv's default outside --dry-run) a 2-round
            # benchmark's first pass walks the builds in reverse, and asv saves each build's half-sampled first round
            # before its second. --no-interleave-rounds: all rounds in this build, only the final values saved.
            options = [*run.rest, "--no-interleave-rounds", "-b", asv.pattern(step.names)]
            command = asv.run_command(conf.scratch(scratch), machine, options, [step.commit], hashfile, saving=True)

            def measured(scratch: Path = scratch, final: bool = False) -> None:
                done = watching.poll(scratch)
                if done or final:  # each value into the record as soon as asv has saved it
                    _merge_scratch(results, scratch, remeasure, quiet=not final)
                    watch.add(results, machine, done)

            try:
                code = asv.supervise(command, conf.root, asv.only(hashfile), measured)
            finally:  # stopped or not: what asv measured goes into the record now
                measured(final=True)
                shutil.rmtree(scratch)
            status = BENCHMARKS_FAILED if code else status
            if after is not None:
                after(step, step is planned[-1] or planned[planned.index(step) + 1].commit != step.commit)
        watching.end()
        return status
