"""The nightly job of a fleet of machines, step by step: scripts/nightly STEP (docs/how-to/fleet.md).

Each step is what one job of .github/workflows/nightly.yml runs; it works the same on a laptop, in
a work folder (default .asv/nightly) that holds everything, the fleet's files included.

Exit status: 0 done, 1 a regression (or merge conflicts), 2 a mistake in the
command or the fleet's files (one line), 3 benchmarks that failed (asv).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from mpsbench.builds import history, machine, resolve, timeline
from mpsbench.builds import manifest as mf
from mpsbench.context import Suite
from mpsbench.core import asv, asvconf, files, progress, ranges, settings
from mpsbench.core.errors import UserError
from mpsbench.fleet import results_branch
from mpsbench.measure import preselect
from mpsbench.regressions import alerts, bisection, fresh, nightlies
from mpsbench.results import merge, record, recorded
from mpsbench.site import publish as site

WORKDIR = Path(".asv/nightly")
CHANNEL = "nightly"
log = progress.logger(__name__)


@dataclass(frozen=True)
class Fleet:
    """Where every step reads and writes."""

    suite: Path = asvconf.ROOT
    workdir: Path = WORKDIR  # relative to the suite
    folder: Path | None = None  # the fleet's files (default: WORKDIR/fleet)
    channel: str = CHANNEL

    @cached_property
    def work(self) -> Path:
        return (self.suite.resolve() / self.workdir).resolve()

    @cached_property
    def files(self) -> Path:
        return (self.folder or self.work / "fleet").resolve()

    @property
    def manifest(self) -> Path:
        return self.files / history.MANIFEST

    @property
    def results(self) -> Path:
        return self.files / "results"


def sync(repository: mf.Manifest, fleet_manifest: mf.Manifest) -> mf.Manifest:
    """The fleet's manifest brought up to date with the repository's: per channel, the history
    that continues the other; two that diverge are an error."""
    names = dict.fromkeys(c.name for c in (*repository.channels, *fleet_manifest.channels))
    channels = []
    for name in names:
        ours, theirs = repository.channel(name), fleet_manifest.channel(name)
        if ours is None or theirs is None:
            channels.append(ours or theirs)
            continue
        shorter, longer = sorted((ours, theirs), key=lambda channel: len(channel.builds))
        if longer.builds[: len(shorter.builds)] != shorter.builds or ours.parent != theirs.parent:
            raise UserError(
                f"channel {name} has different builds in the repository's manifest and the fleet's:"
                " one must continue the other (fix the manifest on one side)"
            )
        channels.append(longer)
    synced = mf.Manifest(tuple(c for c in channels if c is not None), repository.defaults)
    mf.validate(synced)
    return synced


def prepare(fleet: Fleet) -> Suite:
    """The work folder's suite: the fleet's manifest and timeline, and an asv.conf.json walking
    the suite's branches the fleet has and the nightly channel."""
    work = Suite(fleet.work / asvconf.CONFIG, fleet.manifest, fleet.work / "timeline")
    if not fleet.manifest.is_file() or not work.manifest.channels:
        raise UserError(
            f"{fleet.manifest} holds no builds: run scripts/nightly fetch and resolve first"
        )
    base = asvconf.load(fleet.suite / asvconf.CONFIG)
    wanted = dict.fromkeys([*base.branches, fleet.channel])
    base.derive(fleet.work, work.timeline_path, [b for b in wanted if work.manifest.channel(b)])
    work.generate(sync=False)
    return work


def fetch(fleet: Fleet, remote: str, branch: str) -> int:
    commit = results_branch.fetch(fleet.suite, fleet.files, remote, branch)
    log.info(
        f"{remote} has no branch {branch} yet: {fleet.files} starts empty (push creates it)"
        if commit is None
        else f"{remote}/{branch} at {commit[:12]} copied into {fleet.files}"
    )
    return 0


def push(fleet: Fleet, message: str, remote: str, branch: str) -> int:
    commit = results_branch.push(fleet.suite, fleet.files, message, remote, branch)
    log.info(
        f"pushed {commit[:12]} to {remote}/{branch}"
        if commit
        else "nothing changed: nothing pushed"
    )
    return 0


@dataclass(frozen=True)
class Resolving:
    indexes: tuple[str, ...] = ()
    transformers_index: str = resolve.PYPI
    transformers: str | None = None
    dry_run: bool = False


def resolve_nightly(fleet: Fleet, options: Resolving) -> int:
    # before the first resolve the fleet's manifest is the repository's
    synced = sync(mf.load(fleet.suite / history.MANIFEST), mf.load(fleet.manifest, missing_ok=True))
    # a dry run's copy and timeline of its own: the work folder's must not get ahead
    scratch = fleet.work / "dry-run" if options.dry_run else fleet.work
    scratch.mkdir(parents=True, exist_ok=True)
    working = scratch / "manifest.json"
    mf.save(synced, working)
    history.add_nightly(
        working,
        scratch / "timeline",
        fleet.channel,
        "latest",
        indexes=options.indexes,
        transformers=options.transformers,
        transformers_index=options.transformers_index,
    )
    if options.dry_run:
        log.info(f"dry run: {fleet.manifest} left as it was")
        return 0
    with files.lock(fleet.manifest):
        mf.save(mf.load(working), fleet.manifest)
    log.info(f"the fleet's manifest is {fleet.manifest}")
    return 0


def _select_devices(requested: Sequence[str]) -> None:
    """Refuse a --device not usable here; name the rest in MPSBENCH_DEVICES for asv."""
    names = [name for item in requested for name in item.split(",") if name]
    if not names:
        return
    from mpsbench.measure import devices  # imports torch

    for name in names:
        found = devices.get(name).availability()
        if not found.usable:
            raise UserError(f"device {name} is not usable on this machine: {found.reason}")
    os.environ[settings.DEVICES] = ",".join(names)


def machine_name(requested: str | None) -> str:
    """This runner's machine entry, written; its name from --machine, else MPSBENCH_MACHINE."""
    return machine.write(requested or settings.text(settings.MACHINE))[0]


def missing_builds(suite: Suite, name: str, limit: int) -> list[str]:
    """The timeline commits machine ``name`` has no results for, oldest first, the newest
    ``limit`` (0: all)."""
    have = recorded.commits(suite.conf.results, name)
    branches = suite.conf.branches  # none yet: nothing to run
    commits = ranges.builds(suite.timeline_path, branches, "ALL") if branches else []
    refs = {commit: ref for ref, commit in suite.timeline.commits.items()}
    dated = sorted(
        (c for c in reversed(commits) if c not in have),
        key=lambda c: suite.manifest.find(refs[c]).when(),
    )
    return dated[-limit:] if limit else dated


def _to_github(variable: str, text: str) -> None:
    """Append to GitHub Actions' file ``variable`` names, when run by it."""
    if target := os.environ.get(variable):
        with open(target, "a", encoding="utf-8") as out:
            out.write(text + "\n")


def _alert(fleet: Fleet, suite: Suite, options: alerts.Options) -> int:
    """``mpsbench alert`` on the work folder's results, for the channel's newest build."""
    channel = suite.manifest.channel(fleet.channel)
    newest = f"{channel.name}@{channel.builds[-1].id}" if channel and channel.builds else None
    status, text = alerts.check(suite, dataclasses.replace(options, build=newest))
    _to_github("GITHUB_STEP_SUMMARY", text)
    return status


def _restore(fleet: Fleet, suite: Suite, machines: list[str] | None = None) -> None:
    """The fleet's results (of ``machines``, if given) merged into the work folder's."""
    if not fleet.results.is_dir():
        return
    restored = merge.merge(suite.conf.results, [fleet.results], machines)
    log.info(f"results restored from the fleet: {restored.summary(suite.conf.results)}")
    for line in restored.conflicts + restored.corrupt:
        log.warning(line)


@dataclass(frozen=True)
class Benching:
    machine: str | None = None
    devices: tuple[str, ...] = ()
    bench: tuple[str, ...] = ()  # asv -b regexes
    limit: int = 0  # the newest N missing builds (0: all)
    dry_run: bool = False
    confirm: bool = False


def bench(fleet: Fleet, options: Benching) -> int:
    _select_devices(options.devices)
    name = machine_name(options.machine)  # checked before anything is written
    suite = prepare(fleet)
    _to_github("GITHUB_OUTPUT", f"machine={name}")
    _restore(fleet, suite, [name])
    status = 0
    if not (todo := missing_builds(suite, name, options.limit)):
        log.info(f"machine {name} has results for every build: nothing to benchmark")
    else:
        refs = {commit: ref for ref, commit in suite.timeline.commits.items()}
        count = f"{len(todo)} build{'' if len(todo) == 1 else 's'}"
        log.info(f"machine {name}: benchmarking {count}: {', '.join(refs[c] for c in todo)}")
        hashfile = fleet.work / f"builds-{name}.txt"
        hashfile.write_text("".join(f"{commit}\n" for commit in todo))
        quick = ["--quick", "--dry-run"] if options.dry_run else []
        # the exact combinations: each of the rest would cost a process importing torch
        found = preselect.combinations(preselect.discover(suite.conf.benchmarks))
        chosen = preselect.selected(found, options.bench)
        log.info(
            f"asv will run {len(chosen)} of the suite's {len(found)} combinations (mpsbench preselect)"
        )
        run = asv.run_args([*quick, "-b", asv.pattern(chosen), f"HASHFILE:{hashfile}"])
        status = record.status(record.record(suite.conf, name, run))
    failed = record.BENCHMARKS_FAILED if status else 0
    if options.dry_run:
        log.info("dry run: nothing was recorded")
        return failed
    summary = fleet.work / f"alert-{name}.md"
    regressed = _alert(
        fleet, suite, alerts.Options((name,), summary=summary, confirm=options.confirm)
    )
    if status:
        log.info(
            f"asv run exited with status {status}: some benchmarks failed (see above); their results say which"
        )
    return 1 if regressed else failed


def collect(fleet: Fleet, sources: Sequence[Path], update_benchmarks: bool) -> int:
    """Each machine's artifact merged into the fleet's results; each refused file named in one
    line, the rest merged all the same."""
    builds = None
    if fleet.manifest.is_file():
        builds = set(prepare(fleet).timeline.commits.values())
    else:
        log.info(
            f"{fleet.manifest} does not exist: builds are checked against their files' names only"
        )
    merged = merge.merge(fleet.results, sources, update_benchmarks=update_benchmarks, builds=builds)
    return merged.show(fleet.results)


def _restored(fleet: Fleet) -> Suite:
    suite = prepare(fleet)
    _restore(fleet, suite)
    return suite


def publish(fleet: Fleet) -> int:
    site.publish(_restored(fleet))
    return 0


def alert(fleet: Fleet, machines: Sequence[str], summary: Path | None) -> int:
    options = alerts.Options(tuple(machines), summary=summary)
    return _alert(fleet, _restored(fleet), options)


def bisect(
    fleet: Fleet,
    suite: Suite,
    measuring: fresh.Options,
    adding: nightlies.Options,
    good: str,
    bad: str,
) -> int:
    """``mpsbench bisect`` on the fleet's builds, its finding also in the job's summary."""
    said = f"{measuring.bench} on {measuring.machine}"
    log.info(f"bisecting {good}..{bad} for {said} (mpsbench bisect)")
    found = bisection.bisect(good, bad, measuring, adding)
    if not isinstance(found, bisection.Found):
        raise UserError(f"mpsbench bisect named no build: {found.reason}")
    # computed again: --nightlies adds builds
    commit = timeline.compute(mf.load(fleet.manifest), suite.timeline_path).commits[found.first]
    lines = [f"first slow build: {found.first} (timeline commit {commit[:12]})", found.upstream]
    for line in lines:
        log.info(line)
    _to_github("GITHUB_STEP_SUMMARY", "\n\n".join([f"## mpsbench bisect: {said}", *lines]))
    return 0
