"""The fleet's nightly job, one step at a time (scripts/nightly STEP; docs/how-to/fleet.md)."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from mpsbench.builds import history, machine
from mpsbench.builds import manifest as mf
from mpsbench.context import Suite
from mpsbench.core import asv, asvconf, files, progress, ranges, settings
from mpsbench.core.errors import UserError
from mpsbench.fleet import results_branch
from mpsbench.measure.devices import require_usable
from mpsbench.regressions import alerts, bisection, fresh, nightlies
from mpsbench.results import merge, record, recorded
from mpsbench.site import publish as site

WORKDIR = Path(".asv/nightly")
CHANNEL = "nightly"
log = progress.logger(__name__)


@dataclass(frozen=True)
class Fleet:
    suite: Path = asvconf.ROOT
    workdir: Path = WORKDIR
    folder: Path | None = None
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
    """Per channel, whichever of the two continues the other; diverging ones are an error."""
    channels = []
    for name in dict.fromkeys(c.name for c in (*repository.channels, *fleet_manifest.channels)):
        found = [c for c in (repository.channel(name), fleet_manifest.channel(name)) if c]
        ordered = sorted(found, key=lambda channel: len(channel.builds))
        shorter, longer = ordered[0], ordered[-1]
        if (
            longer.builds[: len(shorter.builds)] != shorter.builds
            or shorter.parent != longer.parent
        ):
            raise UserError(
                f"channel {name} has different builds in the repository's manifest and the fleet's:"
                " fix one so that it continues the other"
            )
        channels.append(longer)
    synced = mf.Manifest(tuple(channels), repository.defaults)
    mf.validate(synced)
    return synced


def prepare(fleet: Fleet) -> Suite:
    """The work folder's suite on the fleet's manifest, walking its nightly channel."""
    work = Suite(fleet.work / asvconf.CONFIG, fleet.manifest, fleet.work / "timeline")
    if not fleet.manifest.is_file() or not work.manifest.channels:
        raise UserError(f"{fleet.manifest} holds no builds: run scripts/nightly fetch and resolve")
    base = asvconf.load(fleet.suite / asvconf.CONFIG)
    wanted = dict.fromkeys([*base.branches, fleet.channel])
    base.derive(fleet.work, work.timeline_path, [b for b in wanted if work.manifest.channel(b)])
    work.generate(sync=False)
    return work


def fetch(fleet: Fleet, remote: str, branch: str) -> None:
    if commit := results_branch.fetch(fleet.suite, fleet.files, remote, branch):
        log.info(f"{remote}/{branch} at {commit[:12]} copied into {fleet.files}")
    else:
        log.info(f"{remote} has no branch {branch} yet: {fleet.files} starts empty")


def push(fleet: Fleet, message: str, remote: str, branch: str) -> None:
    commit = results_branch.push(fleet.suite, fleet.files, message, remote, branch)
    log.info(f"pushed {commit[:12]} to {remote}/{branch}" if commit else "nothing to push")


def resolve_nightly(
    fleet: Fleet,
    indexes: tuple[str, ...],
    transformers_index: str,
    transformers: str | None,
    dry_run: bool,
) -> None:
    synced = sync(mf.load(fleet.suite / history.MANIFEST), mf.load(fleet.manifest, missing_ok=True))
    # a dry run's own copy and timeline: the work folder's must not get ahead
    scratch = fleet.work / "dry-run" if dry_run else fleet.work
    scratch.mkdir(parents=True, exist_ok=True)
    working = scratch / "manifest.json"
    mf.save(synced, working)
    history.add_nightly(
        working,
        scratch / "timeline",
        fleet.channel,
        "latest",
        indexes=indexes,
        transformers=transformers,
        transformers_index=transformers_index,
    )
    if dry_run:
        log.info(f"dry run: {fleet.manifest} left as it was")
        return
    with files.lock(fleet.manifest):
        mf.save(mf.load(working), fleet.manifest)
    log.info(f"the fleet's manifest is {fleet.manifest}")


def machine_name(requested: str | None) -> str:
    """Writes this runner's machine entry: --machine, else MPSBENCH_MACHINE, else by chip."""
    return machine.write(requested or settings.text(settings.MACHINE))[0]


def _to_github(variable: str, text: str) -> None:
    if target := os.environ.get(variable):
        with open(target, "a", encoding="utf-8") as out:
            out.write(text + "\n")


def _alert(fleet: Fleet, suite: Suite, options: alerts.Options) -> int:
    channel = suite.manifest.channel(fleet.channel)
    newest = f"{channel.name}@{channel.builds[-1].id}" if channel and channel.builds else None
    status, text = alerts.check(suite, dataclasses.replace(options, build=newest))
    _to_github("GITHUB_STEP_SUMMARY", text)
    return status


def _restore(fleet: Fleet, machines: list[str] | None = None) -> Suite:
    suite = prepare(fleet)
    if fleet.results.is_dir():
        restored = merge.merge(suite.conf.results, [fleet.results], machines)
        log.info(f"results restored from the fleet: {restored.summary(suite.conf.results)}")
        for line in restored.conflicts + restored.corrupt:
            log.warning(line)
    return suite


def bench(
    fleet: Fleet,
    machine: str | None,
    devices: tuple[str, ...],
    bench: tuple[str, ...],
    limit: int,
    dry_run: bool,
    confirm: bool,
) -> int:
    """``mpsbench record`` of the newest builds this machine lacks, then alert."""
    if names := [name for item in devices for name in item.split(",") if name]:
        require_usable(names)
        os.environ[settings.DEVICES] = ",".join(names)
    name = machine_name(machine)  # checked before anything is written
    suite = _restore(fleet, [name])
    _to_github("GITHUB_OUTPUT", f"machine={name}")
    have = recorded.commits(suite.conf.results, name)
    every = (
        ranges.builds(suite.timeline_path, suite.conf.branches, "ALL")
        if suite.conf.branches
        else []
    )
    missing = [c for c in record.newest_first(suite.timeline_path, every) if c not in have]
    status = 0
    if todo := missing[: limit or None]:
        refs = {commit: ref for ref, commit in suite.timeline.commits.items()}
        count = f"{len(todo)} build{'' if len(todo) == 1 else 's'}"
        log.info(f"machine {name}: benchmarking {count}: {', '.join(refs[c] for c in todo[::-1])}")
        quick = ["--quick", "--dry-run"] if dry_run else []
        hashes = asv.write_hashfile(fleet.work / f"builds-{name}.txt", todo)
        run = asv.run_args([*quick, *(f"--bench={regex}" for regex in bench), hashes])
        record.check_meaning(run)
        steps = record.record(suite.conf, name, run, suite.disk(run))
        # unattended: a night that skipped a build fails, as asv's failed install did
        status = record.status(steps, skipped=record.BENCHMARKS_FAILED)
    else:
        log.info(f"machine {name} has results for every build: nothing to benchmark")
    if dry_run:
        log.info("dry run: nothing was recorded")
        return status
    if status:
        log.info("some builds were skipped or benchmarks failed (see above)")
    asked = alerts.Options((name,), summary=fleet.work / f"alert-{name}.md", confirm=confirm)
    return 1 if _alert(fleet, suite, asked) else status


def collect(fleet: Fleet, sources: Sequence[Path], update_benchmarks: bool) -> int:
    builds: set[str] | None = None
    if fleet.manifest.is_file():
        builds = set(prepare(fleet).timeline.commits.values())
    else:
        log.info(f"{fleet.manifest} does not exist: builds are checked by their files' names only")
    merged = merge.merge(fleet.results, sources, update_benchmarks=update_benchmarks, builds=builds)
    return merged.show(fleet.results)


def publish(fleet: Fleet) -> None:
    site.publish(_restore(fleet))


def alert(fleet: Fleet, options: alerts.Options) -> int:
    return _alert(fleet, _restore(fleet), options)


def bisect(
    measuring: fresh.Options,
    adding: nightlies.Options,
    good: str,
    bad: str,
) -> None:
    """``mpsbench bisect`` on the fleet's builds, its finding also in the job's summary."""
    said = f"{measuring.bench} on {measuring.machine}"
    log.info(f"bisecting {good}..{bad} for {said} (mpsbench bisect)")
    found = bisection.bisect(good, bad, measuring, adding)
    if not isinstance(found, bisection.Found):
        raise UserError(f"mpsbench bisect named no build: {found.reason}")
    lines = [
        f"first slow build: {found.first} (timeline commit {found.commit[:12]})",
        found.upstream,
    ]
    for line in lines:
        log.info(line)
    _to_github("GITHUB_STEP_SUMMARY", "\n\n".join([f"## mpsbench bisect: {said}", *lines]))
