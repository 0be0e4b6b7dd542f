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
import shlex
import shutil
import time
from collections.abc import Generator, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from mpsbench.core import asv, asv_saving, files, git, progress, ranges, settings
from mpsbench.core.asvconf import AsvConf
from mpsbench.core.errors import UserError
from mpsbench.measure import preselect, quiet
from mpsbench.results import held, merge, recorded, watch

BENCHMARKS_FAILED = 3  # some benchmark failed; 2 stays a usage mistake
# The first tier, on the newest build: each seed model's training and inference step
FIRST_TIER = r"^benchmark_models\.(?:Training|Inference)\.time_step\("

log = progress.logger(__name__)


def recorded_names(results: Path, machine: str, commit: str, environment: str = "*") -> set[str]:
    """The build's combinations this machine's record settles, named as -b sees them: each with a
    value, and each seen to skip here (:func:`mpsbench.results.watch.skipped`: asv's NaN also means
    "not run"). A failure settles nothing: it runs again."""
    names: set[str] = set(watch.skipped(results, machine, commit))
    for path in sorted((results / machine).glob(f"{commit[:8]}-{environment}.json")):
        try:
            result = recorded.read(path, machine)
        except recorded.RecordedError as exc:
            raise UserError(f"results file {path} cannot be read ({exc})") from None
        if result.commit_hash == commit:
            names.update(row.entry for row in recorded.rows(result))
    return names


def asv_log(results: Path) -> Path:
    """Where a record run's asv writes its lines (beside the results folder, which asv reads)."""
    return results.parent / f"{results.name}-asv.log"


def _say_failure(path: Path, offset: int, code: int, lines: int = 12) -> None:
    """Show asv's last lines of this step after a non-zero exit."""
    with open(path, "rb") as handle:
        handle.seek(offset)
        tail = handle.read().decode("utf-8", "replace").strip().splitlines()[-lines:]
    log.warning(
        f"asv exited with status {code}; its last lines (all of them in {path}):\n  "
        + "\n  ".join(tail)
    )


def scratch_root(results: Path) -> Path:
    return results.parent / f"{results.name}.scratch"


def _merge_scratch(
    results: Path,
    scratch: Path,
    replace: bool,
    silent: bool = False,
    accept: bool = False,
    again: Sequence[str] = (),
) -> tuple[merge.Report | None, list[held.Held]]:
    """Merge what asv saved in ``scratch`` except values judged disturbed, which are returned."""
    if not (scratch / "results").is_dir():
        return None, []
    judged, kept_out = held.judged(results, scratch, accept, again)
    report = merge.merge(results, [judged], update_benchmarks=True, replace=replace)
    for line in report.conflicts + report.refused + report.corrupt:
        log.warning(line)
    if not silent and (report.copied or report.merged or report.replaced):
        log.info(report.summary(results))
    return report, kept_out


def _end_left_behind(scratch: Path) -> None:
    """End the asv forkserver a killed run left behind, matched by pid and start time (safe against
    pid reuse)."""
    import psutil

    found = []
    for event in asv_saving.read_events(scratch)[0]:
        with contextlib.suppress(ValueError, KeyError, TypeError, psutil.Error):
            if event.get("event") == "forkserver":
                process = psutil.Process(int(event["pid"]))
                if abs(process.create_time() - float(event["created"])) < 1e-3:
                    found.append(process)
    if found:
        log.info(
            f"ending the asv forkserver a stopped run left running (pid {', '.join(str(p.pid) for p in found)})"
        )
        asv.end(found)


def recover(results: Path, root: Path) -> None:
    """Merge what interrupted runs left in scratch (never replacing) and remove it, with a killed
    merge's temporary files."""
    for leftover in [*results.glob(".*.tmp"), *results.glob("*/.*.tmp")]:
        leftover.unlink()
    for folder in sorted(path for path in root.iterdir() if path.is_dir()) if root.is_dir() else []:
        _end_left_behind(folder)
        report, _ = _merge_scratch(results, folder, replace=False, accept=quiet.accept_busy())
        if report is not None and (report.copied or report.merged):
            log.info(
                f"recovered an interrupted run's results from {folder}: {report.summary(results)}"
            )
        shutil.rmtree(folder)


def newest_first(timeline: Path, commits: Sequence[str]) -> list[str]:
    """The builds by date, newest first; ties keep their order."""
    dates = git.text(timeline, "show", "-s", "--format=%ct", *commits).split() if commits else []
    return [
        commit
        for _, commit in sorted(zip(dates, commits, strict=True), key=lambda pair: -int(pair[0]))
    ]


def steps(commits: Sequence[str], missing: dict[str, tuple[str, ...]]) -> list[watch.Step]:
    """Newest build first (its first tier, then the rest), then each older build's missing ones."""
    planned = []
    for number, commit in enumerate(commits):
        names = missing[commit]
        first = tuple(asv.matching(names, [FIRST_TIER])) if number == 0 else ()
        rest = tuple(name for name in names if name not in first)
        planned += [watch.Step(commit, first, "first tier")] if first and rest else []
        planned += (
            [
                watch.Step(
                    commit, rest or first, "the rest" if first and rest else "every combination"
                )
            ]
            if names
            else []
        )
    return planned


@dataclass(frozen=True)
class Selection:
    names: tuple[str, ...]
    default_size: int  # the size of this machine's preselection
    left_out: str | None  # what -b found that only skips here


def select(conf: AsvConf, bench: Sequence[str]) -> Selection:
    """The combinations a run times: this machine's preselection, or what -b finds (re.search).
    UserError where -b finds none or only ones that skip here (asv would start a process each)."""
    found = preselect.combinations(preselect.discover(conf.benchmarks))
    default = preselect.selected(found)
    if not bench:
        return Selection(tuple(default), len(default), None)
    shown = " -b ".join(map(shlex.quote, bench))
    asked = set(asv.matching([combination.name for combination in found], bench))
    if not asked:
        raise UserError(
            f"no benchmark matches -b {shown}; `mpsbench preselect --list` lists every combination"
        )
    runs = tuple(
        combination.name
        for combination in found
        if combination.name in asked and combination.reason is None
    )
    left = collections.Counter(
        combination.reason
        for combination in found
        if combination.name in asked and combination.reason is not None
    )
    reasons = "; ".join(f"{reason} ({count})" for reason, count in left.most_common(3)) + (
        "; ..." if len(left) > 3 else ""
    )
    if not runs:
        raise UserError(
            f"none of the {len(asked)} combinations -b {shown} finds runs on this machine: {reasons}"
        )
    said = (
        (
            f"-b: {len(runs)} of the {len(asked)} combinations it finds run here, the rest would only skip"
            f" (`mpsbench preselect --list` says why for each): {reasons}"
        )
        if left
        else None
    )
    return Selection(runs, len(default), said)


def check_meaning(run: asv.RunArgs) -> None:
    """UserError, before anything runs, where an asv option (--quick, -a repeat=1, --set-commit-hash) or an
    MPSBENCH_* setting would change what the recorded values mean; a --dry-run saves nothing and may.
    A bad quiet-gate setting first."""
    quiet.wait_seconds()
    quiet.accept_busy()
    if run.dry_run:
        return
    if run.changes_values:
        raise UserError(
            f"{run.changes_values[0]}; add --dry-run for a throw-away run, or leave it out"
        )
    if (refusal := settings.recording_refusal()) is not None:
        raise UserError(refusal)


def builds(conf: AsvConf, run: asv.RunArgs) -> list[str]:
    """The builds ``run``'s range names, newest first."""
    if conf.repo is None:
        raise UserError(f"{conf.path}: repo must be the timeline's folder, not a URL")
    return newest_first(conf.repo, ranges.builds(conf.repo, conf.branches, run.range))


@dataclass(frozen=True)
class Finished:
    """A step that ran, with what its caller decides on: whether it was its build's last, whether
    the build has values recorded (the quiet gate may hold every one), and its status."""

    step: watch.Step
    build_done: bool
    recorded: bool
    status: int  # 0, or BENCHMARKS_FAILED where some benchmark failed


def status(finished: Iterable[Finished]) -> int:
    """Run every step: 0, or BENCHMARKS_FAILED where some benchmark failed."""
    return max((step.status for step in finished), default=0)


def record(
    conf: AsvConf,
    machine: str,
    run: asv.RunArgs,
    remeasure: bool = False,
    disk: watch.Disk | None = None,
    selection: Selection | None = None,
) -> Generator[Finished, None, None]:
    """Run what is missing (all, with ``remeasure``) and merge it in, yielding each step as it ends.
    ``run``: ``asv run``'s arguments, parsed once by the command (:func:`asv.run_args`).

    One asv run per build step, newest first; each value merged as soon as measured; a build that
    does not fit on the disk (``disk``: the build cache and each build's facts) is skipped. Ctrl-C
    or SIGTERM ends the run's processes, merges what was measured and raises :class:`asv.Stopped`.
    Values the quiet gate holds stay out (:mod:`mpsbench.results.held`); what is still held is said
    when the run ends, stopped or closed. The results folder's lock is held until then: close the
    generator (``contextlib.closing``) when not iterating it to its end.
    """
    check_meaning(run)  # a bad setting fails before anything runs
    accept = quiet.accept_busy()
    results = conf.results
    commits = builds(conf, run)
    chosen = selection or select(conf, run.bench)
    wanted = chosen.names
    if chosen.left_out is not None:
        log.info(chosen.left_out)
    if accept:
        log.info(
            f"quiet gate: {quiet.ACCEPT_BUSY} is on: values the machine disturbed are"
            " recorded all the same; for throw-away results only, never for history"
        )
    with files.lock(results, wait=False):
        root = scratch_root(results)
        recover(results, root)
        missing = {}
        for commit in commits:
            have = set() if remeasure else recorded_names(results, machine, commit, run.environment)
            missing[commit] = tuple(name for name in wanted if name not in have)
        planned = steps([commit for commit in commits if missing[commit]], missing)
        if not planned:
            log.info(
                f"every selected combination ({len(wanted)}) is recorded for the {len(commits)} builds: nothing to run"
            )
            return
        gpu = not any("'cpu'" in name for name in wanted)
        watching = watch.Watch(
            planned, watch.Costs(results, machine, gpu, chosen.default_size), disk
        )
        print(watching.plan())
        log.info(f"asv's own lines go to {asv_log(results)}; here, one line a combination")
        kept_out: list[held.Held] = []
        try:
            for number, step in enumerate(planned, 1):
                if not watching.begin(step):
                    continue
                code, held_now = _measure(
                    conf, machine, run, root, step.commit, step.names, remeasure, watching
                )
                if held_now:
                    retried, held_now = _again(
                        conf, machine, run, root, step.commit, held_now, remeasure, watching
                    )
                    code = code or retried
                kept_out += held_now
                began = time.monotonic()  # the caller publishes the site before resuming
                yield Finished(
                    step,
                    number == len(planned) or planned[number].commit != step.commit,
                    bool(recorded_names(results, machine, step.commit)),
                    BENCHMARKS_FAILED if code else 0,
                )
                watch.add(results, machine, watching.publish(time.monotonic() - began))
            watching.end()
        # stopped, closed or not, say what was held
        finally:
            _say_held(results, kept_out)


def _measure(
    conf: AsvConf,
    machine: str,
    run: asv.RunArgs,
    root: Path,
    commit: str,
    names: Sequence[str],
    remeasure: bool,
    watching: watch.Watch,
    again: Sequence[str] = (),
) -> tuple[int, list[held.Held]]:
    """One asv run of ``names`` on one build into a new scratch folder, each value judged and
    merged as measured; asv's status and the values held. ``again``: runs whose held values it
    retries."""
    results = conf.results
    scratch = asv.scratch(root)
    hashfile = scratch / "builds.txt"
    # --no-interleave-rounds: otherwise asv saves a half-sampled first round before the second.
    options = [*run.rest, "--no-interleave-rounds", "-b", asv.pattern(names)]
    command = asv.run_command(
        conf.scratch(scratch), machine, options, [commit], hashfile, saving=quiet.__name__
    )
    kept_out: list[held.Held] = []

    def measured(scratch: Path = scratch, final: bool = False) -> None:
        done = watching.poll(scratch)
        if done or final:
            kept_out[:] = _merge_scratch(
                results, scratch, remeasure, not final, quiet.accept_busy(), again
            )[1]
            watching.hold(entry.name for entry in kept_out)
            watch.add(results, machine, done)

    said = asv_log(results).stat().st_size if asv_log(results).is_file() else 0
    try:
        code = asv.supervise(
            command, conf.root, asv.only(hashfile), measured, output=asv_log(results)
        )
    finally:  # stopped or not
        measured(final=True)
        shutil.rmtree(scratch)
    if code:
        _say_failure(asv_log(results), said, code)
    return code, kept_out


def _again(
    conf: AsvConf,
    machine: str,
    run: asv.RunArgs,
    root: Path,
    commit: str,
    kept_out: list[held.Held],
    remeasure: bool,
    watching: watch.Watch,
) -> tuple[int, list[held.Held]]:
    """Measure a step's held values once more after the gate's wait; returns as :func:`_measure`."""
    names = tuple(dict.fromkeys(entry.name for entry in kept_out))
    watching.retry(names)  # the wait is the retry's start-up
    state = quiet.State.of(
        quiet.Gate(quiet.wait_seconds()).before(f"measuring again the {len(names)} held values")
    )
    if state is not None and quiet.problems(state):
        log.info(
            f"quiet gate: the machine is still busy; the {len(names)} held values are left for the"
            " next run"
        )
        return 0, kept_out
    log.info(f"quiet gate: measuring again the {len(names)} values held in this step")
    runs = tuple(dict.fromkeys(entry.run for entry in kept_out))
    return _measure(conf, machine, run, root, commit, names, remeasure, watching, again=runs)


def _say_held(results: Path, kept_out: list[held.Held]) -> None:
    """Say at the run's end how many values are still held, why, and how to get them."""
    recorded_now = {
        (machine, commit, name)
        for machine, commit in {(e.machine, e.commit) for e in kept_out}
        for name in recorded_names(results, machine, commit)
    }
    kinds = held.still_held(kept_out, recorded_now)
    count = len({(entry.machine, entry.commit, entry.name) for entry in kept_out} - recorded_now)
    if count:
        why = ", ".join(
            f"{kind}: {number}" for kind, number in sorted(kinds.items(), key=lambda item: -item[1])
        )
        log.info(
            f"quiet gate: {count} values held out of the record ({why}); each is in"
            f" {held.trail(results)} with its reasons and is measured again by the next run: run it"
            " when the machine is quieter"
            " (`mpsbench doctor` says what keeps it busy)"
        )
