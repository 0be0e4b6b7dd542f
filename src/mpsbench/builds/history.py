"""``mpsbench build``, ``mpsbench timeline`` and ``mpsbench machine``: the history of PyTorch builds.

Adding a build validates it, appends it to builds/manifest.json (atomically;
a refusal changes nothing) and regenerates the timeline repository asv walks.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from mpsbench import command
from mpsbench.builds import defaults, install_build, machine, resolve, timeline, wheels
from mpsbench.builds import manifest as mf
from mpsbench.regressions import factor
from mpsbench.results import asvconf
from mpsbench.site import timeline_reader

MANIFEST = Path("builds/manifest.json")
TIMELINE = Path(".asv/timeline")


class HistoryError(command.UserError):
    """A user mistake in a history command: one line, exit status 2."""


def append(manifest_path: Path, timeline_repo: Path, channel: str, build: mf.Build, parent: str | None = None) -> str:
    """Add ``build`` to ``channel`` of the manifest file, regenerate the timeline; its timeline commit."""
    updated = mf.append(mf.load(manifest_path), channel, build, parent=parent)
    timeline.compute(updated, timeline_repo)  # proves the timeline can be written before saving
    mf.save(updated, manifest_path)
    generated = timeline.generate(updated, timeline_repo)
    _sync_branches(generated, timeline_repo)
    commit = generated.commits[f"{channel}@{build.id}"]
    print(
        f"added {channel}@{build.id}: torch {build.torch_version}, git {build.git_version[:12]},"
        f" {build.date}, platforms {', '.join(sorted(build.pins))}; timeline commit {commit[:12]}"
    )
    return commit


def _release(args: argparse.Namespace) -> mf.Build:
    # The manifest's defaults say which interpreters each platform pins, unless --python names them.
    pythons = tuple(args.python) if args.python else defaults.pin_pythons(mf.load(args.manifest))
    return resolve.release(args.version, index=args.index, pythons=pythons, torchvision=args.torchvision,
                           transformers=args.transformers, date=args.date)


def cmd_add(args: argparse.Namespace) -> int:
    append(args.manifest, args.timeline, args.channel, args.resolver(args), args.parent)
    return 0


def cmd_add_nightly(args: argparse.Namespace) -> int:
    add_nightly(args.manifest, args.timeline, args.channel, args.date, indexes=tuple(args.index or ()),
                pythons=tuple(args.python), transformers=args.transformers,
                transformers_index=args.transformers_index, parent=args.parent)
    return 0


def add_nightly(manifest_path: Path, timeline_repo: Path, channel: str, date: str, *, indexes: tuple[str, ...] = (),
                pythons: tuple[str, ...] = resolve.PYTHONS, transformers: str | None = None,
                transformers_index: str = resolve.PYPI, parent: str | None = None) -> str | None:
    """The nightly of ``date`` ("latest": the newest) added to ``channel``; its timeline commit, None if already there.

    One place for the scheduled nightly (scripts/nightly resolve), ``bisect --nightlies`` and the command line.
    """
    indexes = indexes or tuple(resolve.NIGHTLY_INDEXES)
    if date == "latest":
        dates = resolve.nightly_dates(indexes)
        if not dates:
            raise HistoryError(f"no torch nightly on {', '.join(indexes)}")
        date = dates[-1]
        existing = mf.load(manifest_path).channel(channel)
        if existing is not None and any(build.id == date for build in existing.builds):
            print(f"{channel}@{date} is already the newest nightly; nothing to add")
            return None
    build = resolve.nightly(date, indexes=indexes, pythons=pythons, transformers=transformers,
                            transformers_index=transformers_index)
    return append(manifest_path, timeline_repo, channel, build, parent)


def _wheel_file(args: argparse.Namespace) -> mf.Build:
    return resolve.wheel_file(args.path, torchvision=args.torchvision, transformers=args.transformers,
                              index=args.transformers_index, sha256=args.sha256, build_id=args.id, note=args.note)


def _wheel_url(args: argparse.Namespace) -> mf.Build:
    return resolve.wheel_url(args.url, sha256=args.sha256, transformers=args.transformers,
                             index=args.transformers_index, build_id=args.id, note=args.note)


def _existing(args: argparse.Namespace) -> mf.Build:
    env = {}
    for pair in args.env:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise HistoryError(f"--env takes NAME=VALUE, got {pair!r}")
        env[name] = value
    return resolve.existing(args.site_packages, build_id=args.id, date=args.date, env=env, note=args.note)


def cmd_list(args: argparse.Namespace) -> int:
    manifest = mf.load(args.manifest)
    generated = timeline.compute(manifest, args.timeline)
    for channel in manifest.channels:
        fork = f" (forks from {channel.parent})" if channel.parent else ""
        print(f"{channel.name}{fork}")
        for build in channel.builds:
            commit = generated.commits[f"{channel.name}@{build.id}"]
            tag = f" [{build.tag}]" if build.tag else ""
            print(
                f"  {commit[:12]}  {build.id:<14} torch {build.torch_version:<22} git {build.git_version[:12]}"
                f"  {build.date}  {build.kind}{tag}"
            )
    return 0


def cmd_generate(args: argparse.Namespace) -> int:
    manifest = mf.load(args.manifest)
    generated = timeline.generate(manifest, args.timeline, force=args.force)
    for channel, tip in generated.branches.items():
        count = len(manifest.channel(channel).builds)  # type: ignore[union-attr]
        print(f"{channel}: {count} builds, tip {tip[:12]}")
    print(f"timeline written to {args.timeline}")
    _sync_branches(generated, args.timeline)
    return 0


def _sync_branches(generated: timeline.Generated, repo: Path) -> None:
    """asv.conf.json's branches follow the manifest's channels (asvconf.sync_branches)."""
    try:
        changed = asvconf.sync_branches(list(generated.branches), repo)
    except factor.FactorError as exc:
        raise HistoryError(str(exc)) from None
    if changed:
        print(f"{factor.CONFIG}: branches set to the channels {', '.join(generated.branches)}")


def _resolve_ref(manifest: mf.Manifest, generated: timeline.Generated, ref: str) -> tuple[str, mf.Build]:
    if "@" in ref:
        return ref, manifest.find(ref)
    matches = [name for name, commit in generated.commits.items() if commit.startswith(ref.lower())]
    if len(matches) != 1:
        raise HistoryError(f"{ref!r} names {len(matches)} timeline commits; give CHANNEL@ID or a longer hash")
    return matches[0], manifest.find(matches[0])


def upstream_range(manifest: mf.Manifest, generated: timeline.Generated, old: str, new: str) -> str:
    """The PyTorch commit range between two builds, as a line with a compare link."""
    old_name, old_build = _resolve_ref(manifest, generated, old)
    new_name, new_build = _resolve_ref(manifest, generated, new)
    link = timeline_reader.pytorch_url(old_build.git_version, new_build.git_version)
    return (
        f"{old_name} (torch {old_build.torch_version}, git {old_build.git_version[:12]}) -> "
        f"{new_name} (torch {new_build.torch_version}, git {new_build.git_version[:12]}): {link}"
    )


def cmd_range(args: argparse.Namespace) -> int:
    manifest = mf.load(args.manifest)
    print(upstream_range(manifest, timeline.compute(manifest, args.timeline), args.old, args.new))
    return 0


def cmd_default(args: argparse.Namespace) -> int:
    manifest = mf.load(args.manifest)
    platform, _ = defaults.rule_for(manifest, [args.platform] if args.platform else install_build.platform_candidates())
    planned = defaults.schedule(manifest, platform)
    if not args.platform:  # this machine's own runs: what it cannot run is skipped here, before asv downloads a byte
        planned, skipped = defaults.runnable_here(planned, platform)
        for line in skipped if not (args.pythons or args.hashes) else ():  # said once, with the listing
            print(f"mpsbench: {line}", file=sys.stderr)
    if args.pythons:  # for scripts: one asv run per Python
        print("\n".join(dict.fromkeys(python for item in planned for python in item.pythons)))
        return 0
    generated = timeline.compute(manifest, args.timeline)
    if args.hashes:  # for asv run HASHFILE:
        if args.python is None:
            raise HistoryError("--hashes needs --python VERSION: each Python runs its own builds")
        print("\n".join(generated.commits[item.ref] for item in planned if args.python in item.pythons))
        return 0
    print(f"default timeline of {platform}: {len(planned)} builds")
    for item in planned:
        commit = generated.commits[item.ref]
        print(f"  {commit[:12]}  {item.ref:<16} torch {item.build.torch_version:<10} {item.build.date[:10]}"
              f"  python {', '.join(item.pythons)}")
    return 0


def cmd_check_range(args: argparse.Namespace) -> int:
    reason = timeline.bad_range(args.timeline, [arg for arg in args.asv_args if arg != "--"])
    if reason is not None:
        raise HistoryError(reason)
    return 0


def cmd_machine(args: argparse.Namespace) -> int:
    name, fields = machine.write(args.name)
    if args.quiet:  # for scripts: NAME=$(mpsbench machine --quiet)
        print(name)
        return 0
    print(f"machine {name} written to {machine.machine_file()}:")
    for key, value in sorted(fields.items()):
        print(f"  {key}: {value}")
    return 0


def add_subcommands(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    options: dict[str, dict[str, Any]] = {  # the options several commands share
        "--manifest": {"type": Path, "default": MANIFEST, "help": f"default {MANIFEST}"},
        "--timeline": {"type": Path, "default": TIMELINE, "help": f"default {TIMELINE}"},
        "--parent": {"help": "for a new channel: the CHANNEL@ID build it forks from"},
        "--transformers": {"help": "transformers version to pin, or none (default: by torch)"},
        "--id": {"help": "build id (default: from the torch version)"},
        "--note": {"default": "", "help": "a line for the commit message"},
        "--transformers-index": {"default": resolve.PYPI, "help": "PEP 503 index of the other wheels (default PyPI)"},
    }
    paths = ("--manifest", "--timeline")

    def subcommand(group: argparse._SubParsersAction, name: str, help: str, *shared: str,  # type: ignore[type-arg]
                **defaults: Any) -> argparse.ArgumentParser:
        """A subcommand with the ``shared`` options; ``defaults`` name its ``func``."""
        parser: argparse.ArgumentParser = group.add_parser(name, help=help)
        parser.set_defaults(**defaults)
        for option in shared:
            parser.add_argument(option, **options[option])
        return parser

    def adding(name: str, help: str, channel: str, *shared: str, **defaults: Any) -> argparse.ArgumentParser:
        """An add-* command: unless ``defaults`` say otherwise, cmd_add appends what its ``resolver`` makes."""
        parser = subcommand(build_commands, name, help, *paths, **{"func": cmd_add, **defaults})
        parser.add_argument("--channel", default=channel, help=f"channel (branch) to append to (default {channel})")
        for option in ("--parent", "--transformers", *shared):
            parser.add_argument(option, **options[option])
        return parser

    build = commands.add_parser("build", help="add PyTorch builds to the manifest (and the timeline)")
    build_commands = build.add_subparsers(dest="build_command", metavar="ACTION", required=True)

    release = adding("add-release", "a release from PyPI, e.g. 2.14.1", "release", resolver=_release)
    release.add_argument("version")
    release.add_argument("--index", default=resolve.PYPI, help="PEP 503 index (default PyPI)")
    release.add_argument("--torchvision", help="torchvision version (default: the one made for this torch)")
    release.add_argument("--python", nargs="+", help="python tags to pin on every platform"
                         " (default: per platform, the manifest's defaults' Pythons, else cp310-cp313)")
    release.add_argument("--date", help="override the build date (YYYY-MM-DDTHH:MM:SSZ)")

    nightly = adding("add-nightly", "a nightly by date (YYYY-MM-DD) or 'latest'", "nightly", "--transformers-index",
                     func=cmd_add_nightly)
    nightly.add_argument("date")
    nightly.add_argument("--index", action="append", help="nightly PEP 503 index (repeatable; default PyTorch's)")
    nightly.add_argument("--python", nargs="+", default=list(resolve.PYTHONS), help="python tags to pin")

    wheel = adding("add-wheel", "a torch wheel file, e.g. one built from source", "local",
                   "--id", "--note", "--transformers-index", resolver=_wheel_file)
    wheel.add_argument("path", type=Path)
    wheel.add_argument("--torchvision", type=Path, help="a torchvision wheel file to pin beside it")
    wheel.add_argument("--sha256", help="refuse the file unless it has this sha256")

    url = adding("add-url", "a torch wheel at a URL (fetched once, checksum checked)", "local",
                 "--id", "--note", "--transformers-index", resolver=_wheel_url)
    url.add_argument("url")
    url.add_argument("--sha256", help="the wheel's sha256 (or end the URL with #sha256=...)")

    here = adding("add-existing", "a torch already installed here, used in place", "local", "--id", "--note",
                  resolver=_existing)
    here.add_argument("site_packages", type=Path, help="the site-packages folder that holds torch")
    here.add_argument("--date", help="build date (default: when torch/version.py was written)")
    here.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                      help="set in every process of this build's environment (repeatable)")

    subcommand(build_commands, "list", "the builds and their timeline commits", *paths, func=cmd_list)

    line = commands.add_parser("timeline", help="the timeline repository asv walks")
    line_commands = line.add_subparsers(dest="timeline_command", metavar="ACTION", required=True)
    generate = subcommand(line_commands, "generate", "(re)generate the timeline from the manifest", *paths, func=cmd_generate)
    generate.add_argument("--force", action="store_true", help="accept a rewritten channel history")
    span = subcommand(line_commands, "range", "the PyTorch commit range between two builds", *paths, func=cmd_range)
    span.add_argument("old", help="CHANNEL@ID or timeline commit hash (prefix)")
    span.add_argument("new", help="CHANNEL@ID or timeline commit hash (prefix)")
    default = subcommand(line_commands, "default", "this platform's default timeline (builds/manifest.json 'defaults'):"
                      " builds and Pythons", *paths, func=cmd_default)
    default.add_argument("--platform", choices=wheels.PLATFORMS, help="a manifest platform (default: this machine's)")
    default.add_argument("--pythons", action="store_true", help="print only the Pythons to run, one a line")
    default.add_argument("--hashes", action="store_true", help="print only the timeline commits --python runs")
    default.add_argument("--python", help="with --hashes: the Python, e.g. 3.10")
    check = subcommand(line_commands, "check-range", "refuse, in one line, an asv run range that names no timeline commit",
                    "--timeline", func=cmd_check_range)
    check.add_argument("asv_args", nargs=argparse.REMAINDER, help="the arguments given to asv run")

    host = subcommand(commands, "machine", "write a stable asv machine entry for this machine", func=cmd_machine)
    host.add_argument("--name", help="machine name (default: from chip and core count)")
    host.add_argument("--quiet", action="store_true", help="print only the machine's name")
