"""The nightly job of a fleet of machines, step by step: ``scripts/nightly STEP`` (docs/fleet.md).

Each step is what one job of .github/workflows/nightly.yml runs, and works the same on a laptop,
in a work folder (default ``.asv/nightly``) that holds everything, the fleet's files included.

Exit status: 0 done, 1 a regression (or merge conflicts), 2 a mistake in the
command or the fleet's files (one line), 3 benchmarks that failed (asv).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from mpsbench import command, progress
from mpsbench.builds import history, machine, resolve, timeline
from mpsbench.builds import manifest as mf
from mpsbench.fleet import results_branch
from mpsbench.measure import preselect, selection
from mpsbench.regressions import alerts, bisection, compare, factor, nightlies
from mpsbench.results import asvconf, merge, record

WORKDIR = Path(".asv/nightly")
CHANNEL = "nightly"
MACHINE_ENV = "MPSBENCH_MACHINE"  # a runner's machine name, e.g. set in the runner's .env file


class NightlyError(command.UserError):
    """A nightly step cannot run as asked: the message says why, in one line."""


log = progress.logger(__name__)


class Paths:
    """Where a step reads and writes, from its --suite, --workdir and --fleet."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.suite: Path = args.suite.resolve()  # asv.conf.json, benchmarks/, builds/manifest.json
        self.work: Path = (args.workdir if args.workdir.is_absolute() else self.suite / args.workdir).resolve()
        self.fleet: Path = (args.fleet or self.work / "fleet").resolve()
        self.fleet_manifest = self.fleet / "builds" / "manifest.json"
        self.fleet_results = self.fleet / "results"
        self.timeline = self.work / "timeline"
        self.results = self.work / "results"  # asvconf.derived puts results_dir here


def sync(repository: mf.Manifest, fleet_manifest: mf.Manifest) -> mf.Manifest:
    """The fleet's manifest brought up to date with the repository's: per channel, the history that continues
    the other is kept (channels only grow); two that diverge are an error."""
    names = [c.name for c in repository.channels]
    names += [c.name for c in fleet_manifest.channels if c.name not in names]
    channels = []
    for name in names:
        ours, theirs = repository.channel(name), fleet_manifest.channel(name)
        if ours is None or theirs is None:
            channels.append(ours or theirs)
            continue
        shorter, longer = sorted((ours, theirs), key=lambda channel: len(channel.builds))
        if longer.builds[: len(shorter.builds)] != shorter.builds or ours.parent != theirs.parent:
            raise NightlyError(
                f"channel {name} has different builds in the repository's manifest and the fleet's:"
                " one must continue the other (fix the manifest on one side)"
            )
        channels.append(longer)
    synced = mf.Manifest(tuple(channel for channel in channels if channel is not None), repository.defaults)
    mf.validate(synced)
    return synced


@dataclass(frozen=True)
class Prepared:
    manifest: mf.Manifest
    generated: timeline.Generated
    config: Path
    branches: list[str]  # the timeline branches asv walks

    def name_of(self, commit: str) -> str:
        return next((name for name, full in self.generated.commits.items() if full.startswith(commit)), commit[:12])

    def tip(self, channel: str) -> str | None:
        found = self.manifest.channel(channel)
        return f"{channel}@{found.builds[-1].id}" if found and found.builds else None


def prepare(paths: Paths, channel: str) -> Prepared:
    """The timeline of the fleet's manifest and an asv.conf.json for it, in the work folder."""
    manifest = mf.load(paths.fleet_manifest)
    if not manifest.channels:
        raise NightlyError(f"{paths.fleet_manifest} holds no builds: run scripts/nightly fetch and resolve first")
    generated = timeline.generate(manifest, paths.timeline)
    base = factor.read_config(paths.suite / "asv.conf.json").get("branches", [])
    wanted = [*base, channel] if isinstance(base, list) else [channel]
    branches = [str(name) for name in dict.fromkeys(wanted) if manifest.channel(str(name)) is not None]
    config = asvconf.derived(paths.work, paths.timeline, branches, root=paths.suite)
    return Prepared(manifest, generated, config, branches)


def cmd_fetch(args: argparse.Namespace) -> int:
    paths = Paths(args)
    commit = results_branch.fetch(paths.suite, paths.fleet, args.remote, args.branch)
    log.info(f"{args.remote} has no branch {args.branch} yet: {paths.fleet} starts empty (push creates it)" if commit is None
             else f"{args.remote}/{args.branch} at {commit[:12]} copied into {paths.fleet}")
    return 0


def cmd_push(args: argparse.Namespace) -> int:
    paths = Paths(args)
    commit = results_branch.push(paths.suite, paths.fleet, args.message, args.remote, args.branch)
    log.info(f"pushed {commit[:12]} to {args.remote}/{args.branch}" if commit else "nothing changed: nothing pushed")
    return 0


def cmd_resolve(args: argparse.Namespace) -> int:
    paths = Paths(args)
    synced = sync(mf.load(paths.suite / history.MANIFEST), mf.load(paths.fleet_manifest))
    # A dry run works on a scratch copy, and a timeline of its own: the work
    # folder's timeline must never get ahead of the fleet's manifest.
    scratch = paths.work / "dry-run" if args.dry_run else paths.work
    scratch.mkdir(parents=True, exist_ok=True)
    working = scratch / "manifest.json"
    mf.save(synced, working)
    history.add_nightly(working, scratch / "timeline", args.channel, "latest", indexes=tuple(args.index or ()),
                        transformers=args.transformers, transformers_index=args.transformers_index)
    if args.dry_run:
        log.info(f"dry run: {paths.fleet_manifest} left as it was")
        return 0
    mf.save(mf.load(working), paths.fleet_manifest)
    log.info(f"the fleet's manifest is {paths.fleet_manifest}")
    return 0


def _select_devices(requested: list[str]) -> None:
    """Refuse a --device not usable here; name the rest in MPSBENCH_DEVICES, which asv passes on to every setup."""
    names = [name for item in requested for name in item.split(",") if name]
    if not names:
        return
    from mpsbench.measure import devices  # imports torch: only on machines that benchmark

    for name in names:
        try:
            found = devices.get(name).availability()
        except devices.DeviceError as exc:
            raise NightlyError(str(exc)) from None
        if not found.usable:
            raise NightlyError(f"device {name} is not usable on this machine: {found.reason}")
    os.environ[selection.DEVICES_ENV] = ",".join(names)


def _machine(args: argparse.Namespace) -> str:
    return machine.write(args.machine or os.environ.get(MACHINE_ENV) or None)[0]


def missing_builds(prepared: Prepared, paths: Paths, name: str, limit: int) -> list[str]:
    """The timeline commits of the config's branches that this machine has no results for, oldest first."""
    from asv import results as asv_results

    have = set()
    if (paths.results / name).is_dir():
        have = {result.commit_hash for result in asv_results.iter_results_for_machine(str(paths.results), name)}
    # no branch (no channel of asv.conf.json's in the fleet's manifest yet): nothing to benchmark, not an error
    commits = record.builds({"branches": prepared.branches}, paths.timeline, "ALL") if prepared.branches else []
    dated = sorted((c for c in reversed(commits) if c not in have),
                   key=lambda c: prepared.manifest.find(prepared.name_of(c)).when())
    return dated[-limit:] if limit else dated


def _to_github(variable: str, text: str) -> None:
    """Append a line to GitHub Actions' GITHUB_STEP_SUMMARY or GITHUB_OUTPUT file, when run by it."""
    target = os.environ.get(variable)
    if target:
        with open(target, "a", encoding="utf-8") as out:
            out.write(text + "\n")


def _alert(paths: Paths, prepared: Prepared, channel: str, machines: list[str] | None, summary: Path | None,
           confirm: bool = False) -> int:
    """``mpsbench alert`` (``--confirm`` with ``confirm``) on the work folder's results, for the channel's newest build."""
    compare = alerts.compare_command(paths.fleet_manifest, paths.timeline, machines[0]) if confirm and machines else None
    status, text = alerts.check(paths.results, factor.thresholds(prepared.config), prepared.manifest, paths.timeline, machines,
                                prepared.tip(channel), summary, compare)
    _to_github("GITHUB_STEP_SUMMARY", text)
    return status


def _restore(paths: Paths, machines: list[str] | None = None) -> None:
    """The fleet's results (of ``machines`` only, if given) merged into the work folder's, which asv reads."""
    if not paths.fleet_results.is_dir():
        return
    restored = merge.merge(paths.results, [paths.fleet_results], machines)
    log.info(f"results restored from the fleet: {restored.summary(paths.results)}")
    for line in restored.conflicts + restored.corrupt:
        log.warning(line)


def cmd_bench(args: argparse.Namespace) -> int:
    paths = Paths(args)
    _select_devices(args.device)
    prepared = prepare(paths, args.channel)
    name = _machine(args)
    _to_github("GITHUB_OUTPUT", f"machine={name}")
    _restore(paths, [name])
    todo = missing_builds(prepared, paths, name, args.limit)
    if not todo:
        log.info(f"machine {name} has results for every build: nothing to benchmark")
        status = 0
    else:
        log.info(f"machine {name}: benchmarking {len(todo)} builds: {', '.join(prepared.name_of(c) for c in todo)}")
        hashfile = paths.work / f"builds-{name}.txt"
        hashfile.write_text("".join(f"{commit}\n" for commit in todo))
        quick = ["--quick", "--dry-run"] if args.dry_run else []
        # -b names the exact combinations that run: it spares a process for each of the rest (under spawn,
        # each imports torch again)
        pattern, count, total = preselect.pattern(paths.suite / "benchmarks", args.bench)
        log.info(f"asv will run {count} of the suite's {total} combinations (mpsbench preselect)")
        # measured into scratch and merged value by value: nothing recorded is replaced (mpsbench.results.record)
        status = record.record(prepared.config, name, [*quick, "-b", pattern, f"HASHFILE:{hashfile}"])
    if args.dry_run:
        log.info("dry run: nothing was recorded")
        return record.BENCHMARKS_FAILED if status else 0
    regressed = _alert(paths, prepared, args.channel, [name], paths.work / f"alert-{name}.md", args.confirm)
    if status:
        log.info(f"asv run exited with status {status}: some benchmarks failed (see above); their results say which")
    return 1 if regressed else (record.BENCHMARKS_FAILED if status else 0)


def cmd_collect(args: argparse.Namespace) -> int:
    paths = Paths(args)
    return merge.merge(paths.fleet_results, args.sources, update_benchmarks=args.update_benchmarks).show(paths.fleet_results)


def cmd_publish(args: argparse.Namespace) -> int:
    paths = Paths(args)
    prepared = prepare(paths, args.channel)
    _restore(paths)
    script = asvconf.ROOT / "scripts" / "publish"
    done = subprocess.run([str(script)], env=dict(os.environ, MPSBENCH_CONFIG=str(prepared.config)), check=False)
    if done.returncode != 0:
        raise NightlyError(f"scripts/publish exited with status {done.returncode}")
    log.info(f"site written to {paths.work / 'html'}")
    return 0


def cmd_alert(args: argparse.Namespace) -> int:
    paths = Paths(args)
    prepared = prepare(paths, args.channel)
    _restore(paths)
    return _alert(paths, prepared, args.channel, args.machine or None, args.summary)


def cmd_bisect(args: argparse.Namespace) -> int:
    """``mpsbench bisect`` in this process, on the fleet's manifest and timeline: its passes print into the job's log."""
    paths = Paths(args)
    prepare(paths, args.channel)  # the timeline of the fleet's manifest
    args.machine = _machine(args)
    args.manifest, args.timeline, args.suite_root = paths.fleet_manifest, paths.timeline, paths.suite
    log.info(f"bisecting {args.good}..{args.bad} for {args.bench} on {args.machine} (mpsbench bisect)")
    found = bisection.bisect(args)
    if found is None:
        raise NightlyError("mpsbench bisect named no build: a candidate stayed undecided (see above)")
    commit = timeline.compute(mf.load(paths.fleet_manifest), paths.timeline).commits[found.first]  # --nightlies adds builds
    lines = [f"first slow build: {found.first} (timeline commit {commit[:12]})", found.upstream]
    for text in lines:
        log.info(text)
    _to_github("GITHUB_STEP_SUMMARY", "\n\n".join([f"## mpsbench bisect: {args.bench} on {args.machine}", *lines]))
    return 0


def build_parser() -> argparse.ArgumentParser:
    where = command.OneLineParser(add_help=False)  # every step's options
    where.add_argument("--suite", type=Path, default=asvconf.ROOT,
                       help="the suite: asv.conf.json, benchmarks/ and builds/manifest.json (default: this checkout)")
    where.add_argument("--workdir", type=Path, default=WORKDIR, help=f"work folder, relative to the suite (default {WORKDIR})")
    where.add_argument("--fleet", type=Path, default=None, help="the fleet's files (default: WORKDIR/fleet)")
    where.add_argument("--channel", default=CHANNEL, help=f"the nightly channel (default {CHANNEL})")
    remote = command.OneLineParser(add_help=False)
    remote.add_argument("--remote", default="origin", help="git remote (default origin)")
    remote.add_argument("--branch", default="results", help="the results branch (default results)")
    identity = command.OneLineParser(add_help=False)
    identity.add_argument("--machine", default=None,
                          help=f"machine name (default: ${MACHINE_ENV}, else from the chip and core count)")
    parser = command.OneLineParser(prog="scripts/nightly", description=__doc__.split("\n", 1)[0],
                                   epilog="docs/fleet.md says how the workflows use each step.")
    steps = parser.add_subparsers(dest="step", metavar="STEP", required=True)

    def step(name: str, help_text: str, func: object, *parents: command.OneLineParser) -> argparse.ArgumentParser:
        sub = steps.add_parser(name, help=help_text, description=help_text, parents=[where, *parents])
        sub.set_defaults(func=func)
        return sub

    step("fetch", "copy the results branch into the fleet folder", cmd_fetch, remote)
    push = step("push", "commit the fleet folder on the results branch and push it (fast-forward only)", cmd_push, remote)
    push.add_argument("--message", default="mpsbench nightly", help="the commit message")

    resolving = step("resolve", "append the newest nightly to the fleet's manifest", cmd_resolve)
    resolving.add_argument("--index", action="append", help="nightly PEP 503 index (repeatable; default PyTorch's)")
    resolving.add_argument("--transformers-index", default=resolve.PYPI, help="where transformers is pinned from")
    resolving.add_argument("--transformers", help="transformers version to pin, or none (default: by torch)")
    resolving.add_argument("--dry-run", action="store_true", help="say what would be added; change nothing")

    bench = step("bench", "benchmark every build this machine has no results for, then alert", cmd_bench, identity)
    bench.add_argument("--device", action="append", default=[],
                       help="only these devices (repeatable or comma-separated; refused if not usable here)")
    bench.add_argument("--bench", action="append", default=[], help="only benchmarks matching this regex (asv -b)")
    bench.add_argument("--limit", type=int, default=0, help="at most the newest N missing builds (default: all)")
    bench.add_argument("--dry-run", action="store_true",
                       help="run each selected benchmark once (asv --quick --dry-run); record nothing")
    bench.add_argument("--confirm", action="store_true",
                       help="raise an alert only if a fresh `mpsbench compare` on this machine agrees")

    collecting = step("collect", "merge results directories (the machines' artifacts) into the fleet's", cmd_collect)
    collecting.add_argument("sources", type=Path, nargs="+", help="asv results directories")
    collecting.add_argument("--update-benchmarks", action="store_true",
                            help="the sources ran a newer suite: their benchmarks.json entries win")

    step("publish", "publish the site of the fleet's results into WORKDIR/html (scripts/publish)", cmd_publish)

    alerting = step("alert", "exit 1 if a machine's newest build is slower than the one before", cmd_alert)
    alerting.add_argument("--machine", action="append", default=[], help="only this machine (repeatable)")
    alerting.add_argument("--summary", type=Path, help="also write the alerts as Markdown to this file")

    # mpsbench bisect's own options, but for the manifest and timeline: the fleet's (a channel --nightlies adds
    # goes into the fleet folder's manifest)
    bisecting = step("bisect", "mpsbench bisect over a range of the fleet's builds (fresh processes, nothing recorded)",
                     cmd_bisect)
    bisecting.add_argument("--good", required=True, help="the last fast build: CHANNEL@ID or timeline hash")
    bisecting.add_argument("--bad", required=True, help="a slow build: CHANNEL@ID or timeline hash")
    compare.options(bisecting, files=False)
    nightlies.add_options(bisecting)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    return command.run(build_parser(), argv, "mpsbench nightly")


if __name__ == "__main__":
    sys.exit(main())
