"""Runs asv so that results only grow: each value measured in scratch (asv replaces what it
re-runs), merged at once."""

from __future__ import annotations

import collections
import contextlib
import shlex
import shutil
import time
from collections.abc import Callable, Generator, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from mpsbench.core import asv, asv_saving, files, git, progress, ranges, settings
from mpsbench.core.asvconf import AsvConf
from mpsbench.core.errors import UserError
from mpsbench.measure import preselect, quiet
from mpsbench.results import held, merge, recorded, watch

BENCHMARKS_FAILED = 3  # 2 is a usage mistake
FIRST_TIER = r"^benchmark_models\.(?:Training|Inference)\.time_step\("  # the newest build's first
GATE = b"mpsbench quiet: "

log = progress.logger(__name__)


def recorded_names(results: Path, machine: str, commit: str, environment: str = "*") -> set[str]:
    """The build's combinations with a value or seen to skip; a failure runs again."""
    names = set(watch.skipped(results, machine, commit))
    for path in sorted((results / machine).glob(f"{commit[:8]}-{environment}.json")):
        if (result := recorded.result_file(path, machine)).commit_hash == commit:
            names.update(row.entry for row in recorded.rows(result))
    return names


def asv_log(results: Path) -> Path:
    return merge.beside(results, "-asv.log")


def _gate_lines(path: Path, at: int) -> Callable[[], bool]:
    """Relays the quiet gate's lines from asv's log; says whether the gate waits."""

    def relay() -> bool:
        nonlocal at
        text, at = files.tail(path, at)
        said = [
            line.partition(GATE)[2].decode("utf-8", "replace")
            for line in text.splitlines()
            if GATE in line
        ]
        for line in said:
            log.info(line)
        return any(quiet.WAITING in line for line in said)

    return relay


def scratch_root(results: Path) -> Path:
    return merge.beside(results, ".scratch")


def _merge_scratch(
    results: Path, scratch: Path, replace: bool, summary_heading: str | None, again: str = ""
) -> list[held.Held]:
    """Merges ``scratch``'s values but the disturbed, which it returns."""
    if not (scratch / "results").is_dir():
        return []
    judged, kept_out = held.judged(results, scratch, quiet.accept_busy(), again)
    report = merge.merge(results, [judged], update_benchmarks=True, replace=replace)
    for line in report.conflicts + report.refused + report.corrupt:
        log.warning(line)
    if summary_heading is not None and report.changed:
        log.info(summary_heading + report.summary(results))
    return kept_out


def _end_left_behind(scratch: Path) -> None:
    import psutil

    found = []
    for event in asv_saving.read_events(scratch)[0]:
        with contextlib.suppress(ValueError, KeyError, TypeError, psutil.Error):
            if event.get("event") == "forkserver":
                process = psutil.Process(int(event["pid"]))
                if abs(process.create_time() - float(event["created"])) < 1e-3:
                    found.append(process)
    if found:
        pids = ", ".join(str(p.pid) for p in found)
        log.info(f"ending the asv forkserver a stopped run left running (pid {pids})")
        asv.end(found)


def recover(results: Path) -> None:
    """Merges what stopped runs left in scratch, never replacing, then removes it."""
    files.clean_orphans(results)
    root = scratch_root(results)
    for folder in sorted(path for path in root.iterdir() if path.is_dir()) if root.is_dir() else []:
        _end_left_behind(folder)
        _merge_scratch(
            results, folder, False, f"recovered an interrupted run's results from {folder}: "
        )
        shutil.rmtree(folder)


def newest_first(timeline: Path, commits: Sequence[str]) -> list[str]:
    dates = git.text(timeline, "show", "-s", "--format=%ct", *commits).split() if commits else []
    date = dict(zip(commits, map(int, dates), strict=True))
    return sorted(commits, key=lambda commit: -date[commit])


def steps(missing: dict[str, tuple[str, ...]]) -> list[watch.Step]:
    """The newest build's first tier, then the rest; each older build's whole."""
    planned: list[watch.Step] = []
    for commit, names in missing.items():
        first = () if planned else tuple(asv.matching(names, [FIRST_TIER]))
        rest = tuple(name for name in names if name not in first)
        if first and rest:
            planned += [
                watch.Step(commit, first, "first tier"),
                watch.Step(commit, rest, "the rest"),
            ]
        elif names:
            planned.append(watch.Step(commit, names, "every combination"))
    return planned


def select(conf: AsvConf, bench: Sequence[str]) -> tuple[str, ...]:
    """The combinations to run; says which of -b's only skip here."""
    found = preselect.combinations(preselect.discover(conf.benchmarks))
    if not bench:
        return tuple(preselect.selected(found))
    shown = " -b ".join(map(shlex.quote, bench))
    asked = set(asv.matching([c.name for c in found], bench))
    if not asked:
        raise UserError(
            f"no benchmark matches -b {shown}; `mpsbench preselect --list` lists every combination"
        )
    chosen = [c for c in found if c.name in asked]
    runs = tuple(c.name for c in chosen if c.reason is None)
    left = collections.Counter(c.reason for c in chosen if c.reason is not None)
    reasons = "; ".join(f"{reason} ({count})" for reason, count in left.most_common(3))
    reasons += "; ..." if len(left) > 3 else ""
    if not runs:
        raise UserError(
            f"none of the {len(asked)} combinations -b {shown} finds runs on this machine: {reasons}"
        )
    if left:
        log.info(
            f"-b: {len(runs)} of the {len(asked)} combinations it finds run here, the rest would"
            f" only skip (`mpsbench preselect --list` says why): {reasons}"
        )
    return runs


def check_meaning(run: asv.RunArgs) -> None:
    """UserError where a setting is bad or changes what values mean (unless --dry-run)."""
    quiet.wait_seconds()
    quiet.accept_busy()
    if run.dry_run:
        return
    if run.changes_values:
        raise UserError(
            f"{run.changes_values}; add --dry-run for a throw-away run, or leave it out"
        )
    if (refusal := settings.recording_refusal()) is not None:
        raise UserError(refusal)


def builds(conf: AsvConf, run: asv.RunArgs) -> list[str]:
    if conf.repo is None:
        raise UserError(f"{conf.path}: repo must be the timeline's folder, not a URL")
    return newest_first(conf.repo, ranges.builds(conf.repo, conf.branches, run.range))


@dataclass(frozen=True)
class Finished:
    step: watch.Step
    build_done: bool  # its build's last step
    recorded: bool  # the build has values, not all held
    status: int
    skipped: bool = False


def status(finished: Iterable[Finished], skipped: int = 0) -> int:
    """Runs every step; a build skipped as uninstallable or too big (Watch.end says why) gives
    ``skipped``."""
    return max((skipped if s.skipped else s.status for s in finished), default=0)


def record(
    conf: AsvConf,
    machine: str,
    run: asv.RunArgs,
    disk: watch.Disk,
    remeasure: bool = False,
    selection: tuple[str, ...] | None = None,
) -> Generator[Finished, None, None]:
    """Runs what is missing of ``disk``'s builds, ``run`` checked (check_meaning), yielding each
    step as it ends (the caller's pause is a publish's cost); close it to stop early."""
    results, commits = conf.results, list(disk.builds)
    chosen = selection or select(conf, run.bench)
    if quiet.accept_busy():
        log.info(
            f"quiet gate: {quiet.ACCEPT_BUSY} is on: disturbed values are recorded all the same;"
            " for throw-away results only"
        )
    with files.lock(results, wait=False):
        recover(results)
        missing = {}
        for commit in commits:
            have = set() if remeasure else recorded_names(results, machine, commit, run.environment)
            missing[commit] = tuple(name for name in chosen if name not in have)
        planned = steps(missing)
        if not planned:
            log.info(
                f"every selected combination ({len(chosen)}) is recorded for the"
                f" {len(commits)} builds: nothing to run"
            )
            return
        watching = watch.Watch(planned, watch.Costs(results, machine), disk)
        print(watching.plan())
        if busy := quiet.named(quiet.read()):
            log.info(
                f"the machine is busy now ({busy}): the times above are a quiet machine's; the"
                " estimate learns this one's pace as it runs"
            )
        log.info(f"asv's own lines go to {asv_log(results)}; here, one line per combination")
        runs = _Runs(conf, machine, run, remeasure, watching)
        kept_out: list[held.Held] = []
        try:
            for number, step in enumerate(planned, 1):
                last = number == len(planned) or planned[number].commit != step.commit
                if not watching.begin(step):
                    yield Finished(step, last, False, 0, skipped=True)
                    continue
                code, held_now = runs.measure(step.commit, step.names)
                if held_now:
                    retried, held_now = runs.again(step.commit, held_now)
                    code = code or retried
                kept_out += held_now
                began = time.monotonic()
                yield Finished(
                    step,
                    last,
                    bool(recorded_names(results, machine, step.commit)),
                    BENCHMARKS_FAILED if code else 0,
                )
                watch.add(results, machine, watching.publish(time.monotonic() - began))
            watching.end()
        finally:
            _say_held(results, kept_out)


@dataclass(frozen=True)
class _Runs:
    conf: AsvConf
    machine: str
    run: asv.RunArgs
    remeasure: bool
    watching: watch.Watch

    def measure(
        self, commit: str, names: Sequence[str], again: str = ""
    ) -> tuple[int, list[held.Held]]:
        results, watching = self.conf.results, self.watching
        scratch = asv.scratch(scratch_root(results))
        hashfile = scratch / "builds.txt"
        command = asv.run_command(
            self.conf.scratch(scratch),
            self.machine,
            # else asv saves a half-sampled first round before the second
            [*self.run.rest, "--no-interleave-rounds", "-b", asv.pattern(names)],
            [commit],
            hashfile,
            saving=quiet.__name__,
        )
        kept_out: list[held.Held] = []
        output = asv_log(results)
        said = output.stat().st_size if output.is_file() else 0
        gate_lines = _gate_lines(output, said)

        def measured(final: bool = False) -> None:
            if gate_lines():
                watching.gate_waits()
            done = watching.poll(scratch)
            if done or final:
                heading = "" if final else None
                kept_out[:] = _merge_scratch(results, scratch, self.remeasure, heading, again)
                watching.hold(entry.name for entry in kept_out)
                watch.add(results, self.machine, done)

        try:
            code = asv.supervise(
                command, self.conf.root, asv.only(hashfile), measured, output=output
            )
        finally:
            measured(final=True)
            shutil.rmtree(scratch)
        if code:
            tail = files.tail(output, said)[0].decode("utf-8", "replace").strip().splitlines()[-12:]
            log.warning(
                f"asv exited with status {code}; its last lines (all of them in {output}):\n  "
                + "\n  ".join(tail)
            )
        return code, kept_out

    def again(self, commit: str, kept_out: list[held.Held]) -> tuple[int, list[held.Held]]:
        names = tuple(dict.fromkeys(entry.name for entry in kept_out))
        self.watching.retry(names)
        fields = quiet.Gate(quiet.wait_seconds()).before(
            f"measuring again the {len(names)} held values"
        )
        busy = bool(watch.said_busy(fields))
        self.watching.retry_waited(float(fields.get("waited", 0.0)), busy)
        if busy:
            log.info(
                f"quiet gate: the machine is still busy; the {len(names)} held values are left"
                " for the next run"
            )
            return 0, kept_out
        log.info(f"quiet gate: measuring again the {len(names)} values held in this step")
        return self.measure(commit, names, kept_out[0].run)  # one run held them all


def _say_held(results: Path, kept_out: list[held.Held]) -> None:
    recorded_now = {
        (machine, commit, name)
        for machine, commit in {(e.machine, e.commit) for e in kept_out}
        for name in recorded_names(results, machine, commit)
    }
    count, kinds = held.still_held(kept_out, recorded_now)
    if count:
        why = ", ".join(f"{kind}: {n}" for kind, n in kinds.most_common())
        log.info(
            f"quiet gate: {count} values held out of the record ({why}), with their reasons in"
            f" {held.trail(results)}; the next run measures them again: run it when the machine is"
            " quieter (`mpsbench doctor` says what keeps it busy)"
        )
