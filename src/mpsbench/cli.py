"""The ``mpsbench`` command: argv in, a library call with a Suite and typed options out (docs/reference/layout.md).

Each subcommand's options are declared beside its handler (an option several commands take, once, in SHARED) and
filled by name into the small frozen dataclasses the library takes; no library function sees an argparse
Namespace. A user's mistake is one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import os
import sys
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, NoReturn, TypeVar

from mpsbench import bench
from mpsbench.builds import defaults, history, machine, resolve, timeline, wheels
from mpsbench.builds import manifest as mf
from mpsbench.context import Suite
from mpsbench.core import asv, asvconf, errors, progress, settings, text
from mpsbench.core.errors import UserError
from mpsbench.fleet import doctor, nightly
from mpsbench.measure import devices, models, preselect
from mpsbench.regressions import (
    alerts,
    bisection,
    compare,
    explain,
    fresh,
    nightlies,
    rank_ops,
    rule,
    verdict,
)
from mpsbench.results import merge, record
from mpsbench.site import publish, report

log = progress.logger(__name__)


class OneLineParser(argparse.ArgumentParser):
    """argparse with a user's mistake said in one line (no usage block), exit status 2; subcommands inherit it."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog.split()[0]}: error: {message} (see {self.prog} --help)\n")


MACHINE_NAME = text.checked(machine.check_name)
T = TypeVar("T")


def _date(value: str) -> str:
    """A build date as the manifest keeps it, UTC: YYYY-MM-DDTHH:MM:SSZ."""
    try:
        date = mf.format_date(datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--date takes a UTC date and time YYYY-MM-DDTHH:MM:SSZ, e.g."
            f" 2026-11-20T00:00:00Z, got {value!r}"
        ) from None
    try:
        mf.refuse_future(date, "--date")
    except mf.ManifestError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return date


def _new_file(value: str) -> Path:
    """A file to write, in a folder that exists (checked before anything runs)."""
    path = Path(value)
    if not value or not path.parent.is_dir() or path.is_dir():
        raise argparse.ArgumentTypeError(
            f"{value!r} is no file in an existing folder: create the folder first, or"
            " name a file in one"
        )
    return path


def _suite(args: argparse.Namespace, config: Path = asvconf.CONFIG) -> Suite:
    """The command's suite, from its --config, --manifest and --timeline (each where the command has it)."""
    return Suite(
        getattr(args, "config", None) or config,
        getattr(args, "manifest", None) or history.MANIFEST,
        getattr(args, "timeline", None) or history.TIMELINE,
    )


# Options several commands take, each declared once: its flags, type, default and help. A command
# that reads one differently says its own help (or default) where it adds it.
SHARED: dict[str, tuple[tuple[str, ...], dict[str, Any]]] = {
    "config": (
        ("--config",),
        {"type": Path, "help": f"the asv configuration (default {asvconf.CONFIG})"},
    ),
    "manifest": (
        ("--manifest",),
        {"type": Path, "default": history.MANIFEST, "help": f"default {history.MANIFEST}"},
    ),
    "timeline": (
        ("--timeline",),
        {"type": Path, "default": history.TIMELINE, "help": f"default {history.TIMELINE}"},
    ),
    "suite_root": (("--suite-root",), {"type": Path, "default": None, "help": argparse.SUPPRESS}),
    "machine": (
        ("--machine",),
        {"type": MACHINE_NAME, "help": "asv machine name (default: mpsbench machine's)"},
    ),
    "machines": (
        ("--machine",),
        {
            "dest": "machines",
            "metavar": "MACHINE",
            "action": "append",
            "default": [],
            "type": MACHINE_NAME,
            "help": "only this machine (repeatable)",
        },
    ),
    "bench": (
        ("-b", "--bench"),
        {"required": True, "help": "a regex naming ONE benchmark combination, as asv -b"},
    ),
    "log": (("--log",), {"type": Path, "help": "append asv's own output here"}),
    "threads": (
        ("--threads",),
        {
            "type": text.number(int, 1, "--threads"),
            "metavar": "N",
            "help": "torch's cpu threads in both builds' processes (OMP_NUM_THREADS);"
            " default: torch's own",
        },
    ),
    "index": (
        ("--index",),
        {
            "dest": "indexes",
            "metavar": "INDEX",
            "action": "append",
            "default": [],
            "help": "nightly PEP 503 index (repeatable; default PyTorch's)",
        },
    ),
    "transformers": (
        ("--transformers",),
        {"help": "transformers version to pin, or none (default: by torch)"},
    ),
    "transformers_index": (
        ("--transformers-index",),
        {"default": resolve.PYPI, "help": "PEP 503 index of the other wheels (default PyPI)"},
    ),
    "parent": (("--parent",), {"help": "for a new channel: the CHANNEL@ID build it forks from"}),
    "id": (("--id",), {"help": "build id (default: from the torch version)"}),
    "note": (("--note",), {"default": "", "help": "a line for the commit message"}),
    "summary": (
        ("--summary",),
        {"type": _new_file, "help": "also write the alerts as Markdown to this file"},
    ),
    "asv_args": (("asv_args",), {"nargs": argparse.REMAINDER}),
}


def _option(parser: argparse.ArgumentParser, name: str, **changes: Any) -> argparse.ArgumentParser:
    """Add the shared option ``name`` (SHARED) to ``parser``, with the command's own ``changes``;
    returns the parser."""
    flags, spec = SHARED[name]
    parser.add_argument(*flags, **{**spec, **changes})
    return parser


def _filled(kind: Callable[..., T], args: argparse.Namespace, **given: Any) -> T:
    """A command's typed options: each field of the dataclass ``kind`` from the option of its
    name (``given`` first; a field no option has keeps its default); a repeated option's list
    becomes a tuple."""
    found = {
        field.name: getattr(args, field.name)
        for field in dataclasses.fields(kind)  # type: ignore[arg-type]
        if field.init and hasattr(args, field.name)
    }
    found = {
        name: tuple(value) if isinstance(value, list) else value for name, value in found.items()
    }
    return kind(**{**found, **given})


def _command(
    commands: Any,
    name: str,
    help_text: str,
    func: Callable[[argparse.Namespace], int | None],
    *shared: str,
    **more: Any,
) -> argparse.ArgumentParser:
    """A subcommand running ``func`` (None: exit status 0), with the ``shared`` options (SHARED)
    it takes as declared there."""
    parser: argparse.ArgumentParser = commands.add_parser(name, help=help_text, **more)
    parser.set_defaults(func=func)
    for option in shared:
        _option(parser, option)
    return parser


def _doc(module: Any) -> dict[str, Any]:
    """A command's description: its module's docstring past the first paragraph, as written."""
    return {
        "description": (module.__doc__ or "").split("\n\n", 1)[-1],
        "formatter_class": argparse.RawDescriptionHelpFormatter,
    }


# Each command's parser is declared beside its handler, in the order ``mpsbench --help`` lists them.
DECLARED: list[Callable[[Any], None]] = []


def declares(declare: Callable[[Any], None]) -> Callable[[Any], None]:
    """Register a function that adds its command(s) to ``mpsbench``'s subcommands."""
    DECLARED.append(declare)
    return declare


# --- measuring here --------------------------------------------------------------------------------------------
def cmd_models(args: argparse.Namespace) -> None:
    rows = [["model", "seed batch", "batch sizes", "needs", "description"]]
    for spec in models.REGISTRY.values():
        sizes = ",".join(str(size) for size in spec.batch_sizes)
        rows.append(
            [
                spec.name,
                str(spec.seed_batch_size),
                sizes,
                ",".join(spec.requires) or "-",
                spec.description,
            ]
        )
    print(text.table(rows))


@declares
def _models(commands: Any) -> None:
    _command(commands, "models", "list the registered models", cmd_models)


def cmd_devices(args: argparse.Namespace) -> None:
    found = bench.check_setup()  # a bad MPSBENCH_DEVICES, or no torch: one line
    # --usable, for scripts: MPSBENCH_DEVICES=$(mpsbench devices --usable)
    print(
        ",".join(name for name in devices.NAMES if devices.get(name).usable)
        if args.usable
        else found
    )


@declares
def _devices(commands: Any) -> None:
    _command(
        commands, "devices", "list devices and whether they are usable here", cmd_devices
    ).add_argument(
        "--usable",
        action="store_true",
        help="print only the usable devices, comma-separated (a value for MPSBENCH_DEVICES)",
    )


def cmd_run(args: argparse.Namespace) -> None:
    bench.require_torch()
    from mpsbench.measure import timing, workloads  # torch: imported where something is measured

    kinds = workloads.KINDS if args.kind == "both" else (args.kind,)
    spec = models.get(args.model)
    device = devices.get(args.device)
    batch_size = spec.seed_batch_size if args.batch_size is None else args.batch_size
    models.check_batch_size(spec, batch_size)
    found = device.availability()
    if not found.usable:
        usable = [name for name in devices.NAMES if devices.get(name).usable]
        hint = f"; usable here: {', '.join(usable)}: try --device {usable[0]}" if usable else ""
        raise UserError(
            f"device {device} is not usable here: {found.reason}{hint}"
            + (" (mps needs a Mac with Apple silicon)" if device == "mps" else "")
        )
    rows = [["workload", "model", "device", "batch", "ms/step", "samples/s", "calls"]]
    for kind in kinds:
        # --kind both times the kinds the model has; a kind named that it lacks is refused by workloads.build
        if args.kind == "both" and (
            (kind == "inference" and spec.trainable is not None)
            or (kind == "training" and not spec.trains)
        ):
            continue
        try:
            workload = workloads.build(kind, device, spec.name, batch_size)
        except workloads.WorkloadError as exc:
            raise UserError(str(exc)) from None
        except Exception as exc:
            if devices.is_out_of_memory(exc):
                raise UserError(
                    f"{spec.name} at batch {batch_size} does not fit in {device} memory"
                ) from None
            raise
        workload.warm_up()
        result = timing.time_steps(workload, min_seconds=args.seconds)
        rows.append(
            [
                kind,
                spec.name,
                device,
                str(batch_size),
                f"{result.seconds_per_step * 1e3:.3f}",
                f"{result.samples_per_second:.1f}",
                f"{result.calls}x{result.steps_per_call}",
            ]
        )
        workloads.forget()
    print(text.table(rows))
    if device == "cpu":
        print(f"cpu threads: {devices.cpu_threads()}")


@declares
def _run(commands: Any) -> None:
    run = _command(commands, "run", "time one model outside asv for a quick look", cmd_run)
    run.add_argument(
        "model", help=f"one of: {', '.join(models.REGISTRY)} (as `mpsbench models` lists them)"
    )
    run.add_argument(
        "--device", default="cpu", help=f"one of: {', '.join(devices.NAMES)} (default cpu)"
    )
    run.add_argument(
        "--batch-size",
        type=text.number(int, 1, "--batch-size"),
        help="default: the model's seed batch size",
    )
    run.add_argument(
        "--kind", default="both", choices=("training", "inference", "both"), help="default both"
    )
    run.add_argument(
        "--seconds",
        type=text.number(float, 1e-3, "--seconds", 3600),
        default=1.0,
        help="least time spent timing each workload",
    )


@declares
def _doctor(commands: Any) -> None:
    _command(
        commands,
        "doctor",
        "check this machine before a run: devices, memory, power, heat, load",
        lambda args: doctor.run(args.strict),
        **_doc(doctor),
    ).add_argument("--strict", action="store_true", help="exit 1 when any check warns")


# --- builds and the timeline -----------------------------------------------------------------------------------
def cmd_add(args: argparse.Namespace) -> None:
    suite = _suite(args)
    # Refused before resolving (pip's resolution of a release takes minutes): a missing or bad manifest, and a build
    # the channel has already, where the command line names its id (a release's version, --id).
    manifest = suite.manifest
    build_id = getattr(args, "version", None) or getattr(args, "id", None)
    manifest.check_new(
        args.channel, build_id, args.parent
    )  # before a download: names, a second build, the parent
    history.append(
        suite.manifest_path,
        suite.timeline_path,
        args.channel,
        args.resolver(args, suite),
        args.parent,
    )


def _release(args: argparse.Namespace, suite: Suite) -> mf.Build:
    # The manifest's defaults say which interpreters each platform pins, unless --python names them.
    pythons = tuple(args.python) if args.python else defaults.pin_pythons(suite.manifest)
    return resolve.release(
        args.version,
        index=args.index,
        pythons=pythons,
        torchvision=args.torchvision,
        transformers=args.transformers,
        date=args.date,
    )


def _existing(args: argparse.Namespace, suite: Suite) -> mf.Build:
    env = {}
    for pair in args.env:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise UserError(f"--env takes NAME=VALUE, got {pair!r}")
        env[name] = value
    return resolve.existing(
        args.site_packages, build_id=args.id, date=args.date, env=env, note=args.note
    )


def cmd_add_nightly(args: argparse.Namespace) -> None:
    suite = _suite(args)
    history.add_nightly(
        suite.manifest_path,
        suite.timeline_path,
        args.channel,
        args.date,
        indexes=tuple(args.indexes),
        pythons=tuple(args.python),
        transformers=args.transformers,
        transformers_index=args.transformers_index,
        parent=args.parent,
    )


def cmd_list(args: argparse.Namespace) -> None:
    suite = _suite(args)
    for channel in suite.manifest.channels:
        print(
            f"channel {channel.name}"
            + (f" (forks from {channel.parent})" if channel.parent else "")
        )
        for build in channel.builds:
            ref = f"{channel.name}@{build.id}"  # as asv's branches and every other command name it
            tag = (
                f", tag {build.tag}" if build.tag else ""
            )  # the build's kind is no channel: say which is which
            print(
                f"  {suite.timeline.commits[ref][:12]}  {ref:<22} torch {build.torch_version:<22}"
                f" git {build.git_version[:12]}  {build.date}  {build.kind} build{tag}"
            )


@declares
def _build(commands: Any) -> None:
    """``mpsbench build ...``: add-release, add-nightly, add-wheel, add-url, add-existing, list."""
    build = commands.add_parser(
        "build", help="add PyTorch builds to the manifest (and the timeline)"
    )
    actions = build.add_subparsers(dest="build_command", metavar="ACTION", required=True)

    def adding(
        name: str, help_text: str, channel: str, *options: str, **defaults: Any
    ) -> argparse.ArgumentParser:
        """An add-* command: unless ``defaults`` say otherwise, cmd_add appends what its ``resolver`` makes."""
        parser = _command(actions, name, help_text, cmd_add, "manifest", "timeline")
        parser.set_defaults(**defaults)
        parser.add_argument(
            "--channel", default=channel, help=f"channel (branch) to append to (default {channel})"
        )
        for option in ("parent", "transformers", *options):
            _option(parser, option)
        return parser

    release = adding(
        "add-release", "a release from PyPI, e.g. 2.14.1", "release", resolver=_release
    )
    release.add_argument("version")
    release.add_argument("--index", default=resolve.PYPI, help="PEP 503 index (default PyPI)")
    release.add_argument(
        "--torchvision", help="torchvision version (default: the one made for this torch)"
    )
    release.add_argument(
        "--python",
        nargs="+",
        help="python tags to pin on every platform"
        " (default: per platform, the manifest's defaults' Pythons, else cp310-cp313)",
    )
    release.add_argument(
        "--date", type=_date, help="override the build date (YYYY-MM-DDTHH:MM:SSZ)"
    )
    nightly_build = adding(
        "add-nightly",
        "a nightly by date (YYYY-MM-DD) or 'latest'",
        "nightly",
        "transformers_index",
        func=cmd_add_nightly,
    )
    nightly_build.add_argument("date")
    _option(nightly_build, "index")
    nightly_build.add_argument(
        "--python", nargs="+", default=list(resolve.PYTHONS), help="python tags to pin"
    )
    wheel = adding(
        "add-wheel",
        "a torch wheel file, e.g. one built from source",
        "local",
        "id",
        "note",
        "transformers_index",
        resolver=lambda args, suite: resolve.wheel_file(
            args.path,
            torchvision=args.torchvision,
            transformers=args.transformers,
            index=args.transformers_index,
            sha256=args.sha256,
            build_id=args.id,
            note=args.note,
        ),
    )
    wheel.add_argument("path", type=Path)
    wheel.add_argument("--torchvision", type=Path, help="a torchvision wheel file to pin beside it")
    wheel.add_argument("--sha256", help="refuse the file unless it has this sha256")
    url = adding(
        "add-url",
        "a torch wheel at a URL (fetched once, checksum checked)",
        "local",
        "id",
        "note",
        "transformers_index",
        resolver=lambda args, suite: resolve.wheel_url(
            args.url,
            sha256=args.sha256,
            transformers=args.transformers,
            index=args.transformers_index,
            build_id=args.id,
            note=args.note,
        ),
    )
    url.add_argument("url")
    url.add_argument("--sha256", help="the wheel's sha256 (or end the URL with #sha256=...)")
    here = adding(
        "add-existing",
        "a torch already installed here, used in place",
        "local",
        "id",
        "note",
        resolver=_existing,
    )
    here.add_argument("site_packages", type=Path, help="the site-packages folder that holds torch")
    here.add_argument(
        "--date",
        type=_date,
        help="build date, YYYY-MM-DDTHH:MM:SSZ (default: when torch/version.py was written)",
    )
    here.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="set in every process of this build's environment (repeatable)",
    )
    _command(
        actions, "list", "the builds and their timeline commits", cmd_list, "manifest", "timeline"
    )


def cmd_generate(args: argparse.Namespace) -> None:
    suite = _suite(args)
    print(timeline.summary(suite.manifest, suite.generate(force=args.force), suite.timeline_path))


def cmd_default(args: argparse.Namespace) -> None:
    suite = _suite(args)
    if args.platform:  # another platform's, as its rule names it
        platform = defaults.rule_for(suite.manifest, [args.platform])[0]
        planned, skipped = defaults.schedule(suite.manifest, platform), list[str]()
    else:  # this machine's: what it cannot run is left out, each with a line, before asv downloads a byte
        platform, planned, skipped = defaults.this_machine(suite.manifest)
    if args.pythons:  # for scripts: one asv run per Python
        print("\n".join(defaults.pythons(planned)))
    elif args.hashes:  # for asv run HASHFILE:
        if args.python is None:
            raise UserError("--hashes needs --python VERSION: each Python runs its own builds")
        if args.python not in defaults.pythons(planned):
            raise UserError(
                f"--python {args.python} runs no build of {platform}'s default; its Pythons:"
                f" {', '.join(defaults.pythons(planned)) or 'none'}"
            )
        print(
            "\n".join(
                suite.timeline.commits[item.ref] for item in planned if args.python in item.pythons
            )
        )
    else:
        print(defaults.listing(platform, planned, suite.timeline, here=not args.platform))
        for line in skipped:  # said with the listing only
            print(f"mpsbench: {line}", file=sys.stderr)


def _asv_args(args: argparse.Namespace) -> list[str]:
    """The arguments passed through to ``asv run``, less the ``--`` that may mark where they start."""
    passed: list[str] = args.asv_args
    return passed[1:] if passed[:1] == ["--"] else passed


@declares
def _timeline(commands: Any) -> None:
    """``mpsbench timeline ...``: generate, range, default, check-range."""
    line = commands.add_parser("timeline", help="the timeline repository asv walks")
    timeline_actions = line.add_subparsers(dest="timeline_command", metavar="ACTION", required=True)
    action = functools.partial(_command, timeline_actions)
    action(
        "generate",
        "(re)generate the timeline from the manifest",
        cmd_generate,
        "manifest",
        "timeline",
    ).add_argument("--force", action="store_true", help="accept a rewritten channel history")
    span = action(
        "range",
        "the PyTorch commit range between two builds",
        lambda args: print(_suite(args).upstream_range(args.old, args.new)),
        "manifest",
        "timeline",
    )
    span.add_argument("old", help="CHANNEL@ID, a tag or timeline commit hash (prefix)")
    span.add_argument("new", help="CHANNEL@ID, a tag or timeline commit hash (prefix)")
    default = action(
        "default",
        "this platform's default timeline (builds/manifest.json 'defaults'): builds and Pythons",
        cmd_default,
        "manifest",
        "timeline",
    )
    default.add_argument(
        "--platform", choices=wheels.PLATFORMS, help="a manifest platform (default: this machine's)"
    )
    default.add_argument(
        "--pythons", action="store_true", help="print only the Pythons to run, one a line"
    )
    default.add_argument(
        "--hashes", action="store_true", help="print only the timeline commits --python runs"
    )
    default.add_argument("--python", help="with --hashes: the Python, e.g. 3.10")
    _option(
        action(
            "check-range",
            "refuse, in one line, an asv run range that names no timeline commit",
            lambda args: bench.check_range(_suite(args), _asv_args(args)),
            "timeline",
        ),
        "asv_args",
        help="the arguments given to asv run",
    )


def cmd_machine(args: argparse.Namespace) -> None:
    name, fields = machine.write(args.name)
    if args.quiet:  # for scripts: NAME=$(mpsbench machine --quiet)
        print(name)
        return
    print(f"machine {name} written to {machine.machine_file()}:")
    for key, value in sorted(fields.items()):
        print(f"  {key}: {value}")


@declares
def _machine(commands: Any) -> None:
    host = _command(
        commands, "machine", "write a stable asv machine entry for this machine", cmd_machine
    )
    host.add_argument(
        "--name", type=MACHINE_NAME, help="machine name (default: from chip and core count)"
    )
    host.add_argument("--quiet", action="store_true", help="print only the machine's name")


# --- running and recording -------------------------------------------------------------------------------------
@declares
def _bench(commands: Any) -> None:
    benching = _command(
        commands,
        "bench",
        "set-up check, timeline, machine, record every build's missing values, publish (scripts/bench)",
        lambda args: bench.bench(_suite(args), _filled(bench.Options, args)),
        allow_abbrev=False,
        **_doc(bench),
    )
    benching.add_argument(
        "--remeasure",
        action="store_true",
        help="run the selection again; replaced values go to .asv/results-replaced.jsonl",
    )
    benching.set_defaults(passes_through=True)  # every other argument goes to asv run


def cmd_merge(args: argparse.Namespace) -> int:
    merge.check_machines(args.sources, args.machines)
    builds = merge.timeline_builds(args.timeline) if args.timeline else None
    return merge.merge(
        args.dest, args.sources, args.machines or None, args.update_benchmarks, args.replace, builds
    ).show(args.dest)


def cmd_record(args: argparse.Namespace) -> int:
    machine.require(args.machine)  # before anything runs
    suite, run = _suite(args), asv.run_args(_asv_args(args))  # asv's arguments, parsed once
    record.check_meaning(run)  # before the builds are read
    # what the plan says of each build's install (its disk, whether it is installed): as mpsbench bench says it
    facts = bench.disk_facts(suite, run)
    return record.status(record.record(suite.conf, args.machine, run, args.remeasure, facts))


@declares
def _results(commands: Any) -> None:
    """``mpsbench results merge`` and ``mpsbench results record``."""
    results = commands.add_parser("results", help="asv results directories from several machines")
    actions = results.add_subparsers(dest="results_command", metavar="ACTION", required=True)
    merging = _command(
        actions,
        "merge",
        "merge results directories into one, value by value, never replacing a recorded value",
        cmd_merge,
        **_doc(merge),
    )
    merging.add_argument(
        "dest", type=Path, help="the results directory to merge into (created if absent)"
    )
    merging.add_argument("sources", type=Path, nargs="+", help="results directories to merge from")
    _option(merging, "machines", help="merge only this machine's folder (repeatable)")
    merging.add_argument(
        "--update-benchmarks",
        action="store_true",
        help="the sources ran a newer suite: their benchmarks.json entries replace DEST's",
    )
    _option(
        merging,
        "timeline",
        default=None,
        help="the timeline repository: a file of a build that is none of its commits is refused",
    )
    merging.add_argument(
        "--replace",
        action="store_true",
        help="re-measured on purpose: incoming values replace"
        " recorded ones, which go to the audit trail DEST-replaced.jsonl",
    )
    recording = _command(
        actions,
        "record",
        "run asv for what is missing into scratch and merge it in, never replacing a value",
        cmd_record,
        "config",
        **_doc(record),
    )
    _option(
        recording, "machine", required=True, help="asv's machine name (mpsbench machine --quiet)"
    )
    recording.add_argument(
        "--remeasure",
        action="store_true",
        help="run every selected combination again; replaced values go to the audit trail",
    )
    _option(recording, "asv_args", help="asv run options and range, after --")


def cmd_preselect(args: argparse.Namespace) -> None:
    found = preselect.combinations(preselect.discover(args.benchmark_dir))
    if args.list:
        for combination in found:
            print(f"{combination.name}\t{combination.reason or 'runs'}")
        return
    chosen = preselect.selected(found)
    print(asv.pattern(chosen))
    log.info(f"asv will run {len(chosen)} of the suite's {len(found)} combinations")


@declares
def _preselect(commands: Any) -> None:
    selecting = _command(
        commands,
        "preselect",
        "print an asv -b pattern naming exactly the combinations this run times",
        cmd_preselect,
        **_doc(preselect),
    )
    selecting.add_argument(
        "--benchmark-dir",
        type=Path,
        default=Path("benchmarks"),
        help="the suite's benchmark package (default: benchmarks)",
    )
    selecting.add_argument(
        "--list",
        action="store_true",
        help="print every combination, a tab, and why this run leaves it out ('runs' if it does not)",
    )


# --- judging and publishing ------------------------------------------------------------------------------------
def cmd_alert(args: argparse.Namespace) -> int:
    return alerts.check(_suite(args), _filled(alerts.Options, args))[0]


@declares
def _alert(commands: Any) -> None:
    alert = _command(
        commands,
        "alert",
        "exit 1 if a machine's newest build is slower (docs/explanation/site.md)",
        cmd_alert,
        "config",
        "manifest",
        "timeline",
    )
    alert.add_argument(
        "--results", type=Path, help="asv results directory (default: results_dir of --config)"
    )
    _option(alert, "machines")
    alert.add_argument(
        "--build", help="only machines whose newest build is this one (CHANNEL@ID or hash)"
    )
    _option(alert, "summary")
    alert.add_argument(
        "--confirm",
        action="store_true",
        help="raise an alert only if a fresh `mpsbench compare` of the"
        " two builds says slower (measures on this machine: use with --machine for this machine)",
    )


def cmd_ops_rank(args: argparse.Namespace) -> int:
    return rank_ops.run(_suite(args), _filled(rank_ops.Options, args, top=args.top or None))


@declares
def _ops_rank(commands: Any) -> None:
    ranking = _command(
        commands,
        "ops-rank",
        "rank the op benchmarks by slowdown between two builds",
        cmd_ops_rank,
        "config",
        **_doc(rank_ops),
    )
    ranking.add_argument(
        "before", help="the older build: an asv results .json file, or a commit hash (prefix)"
    )
    ranking.add_argument("after", help="the newer build: as BEFORE")
    ranking.add_argument(
        "--results-dir",
        type=Path,
        help="where asv stores results, for commits (default: results_dir of --config)",
    )
    _option(ranking, "machine", help="the asv machine name, for commits (default: the only one)")
    ranking.add_argument(
        "--top",
        type=text.number(int, 0, "--top"),
        help="show the N largest ratios only (default, or 0: all)",
    )


@declares
def _factor(commands: Any) -> None:
    _option(
        _command(
            commands,
            "factor",
            "print the regression factor a row is judged by (for asv continuous --factor)",
            lambda args: print(f"{rule.factor(_suite(args).conf.thresholds, args.bench):g}"),
            "config",
        ),
        "bench",
        required=False,
        default="",
        help="the row, as asv names it (default: any row); a name, not a regex: the config's"
        " regressions_thresholds regexes are matched against it, and a name none matches gets asv's"
        " default, as asv continuous would",
    )


def fresh_options(args: argparse.Namespace, **given: Any) -> fresh.Options:
    """compare's and bisect's options (fresh_arguments), typed; the fleet's bisect step gives its
    own files and machine. Public, as fresh_arguments: tools/process_breakdown.py measures as
    compare does."""
    return _filled(fresh.Options, args, **given)


def fresh_arguments(
    parser: argparse.ArgumentParser, files: bool = True, bisecting: bool = True
) -> None:
    """What compare and bisect share, and bisect's --nightlies; the fleet's bisect step sets the files itself."""
    _option(parser, "bench")
    rounds = text.number(int, verdict.FEWEST, "rounds", compare.MOST_ROUNDS)
    parser.add_argument(
        "--min-rounds",
        type=rounds,
        default=verdict.MIN_ROUNDS,
        help="processes per build before the first planned look (early looks at 2 .. N-1 when N <= 5)",
    )
    parser.add_argument(
        "--max-rounds",
        type=rounds,
        default=verdict.MAX_ROUNDS,
        help="the rounds planned: with time budget left, an undecided pair goes on, up to 3x this",
    )
    parser.add_argument(
        "--time-budget",
        type=text.number(float, 1, "--time-budget", 24 * 60),
        dest="minutes",
        metavar="MINUTES",
        default=fresh.TIME_BUDGET_MINUTES,
        help="the whole command's wall-clock budget: a look it cannot reach in time is not started, and"
        f" what is undecided then says so, exit 3 (default {fresh.TIME_BUDGET_MINUTES:g})",
    )
    _option(parser, "machine")
    if files:
        for option in (
            "manifest",
            "timeline",
            "suite_root",
        ):  # --suite-root, for tests: a stand-in suite
            _option(parser, option)
    _option(parser, "log")
    _option(
        parser,
        "threads",
        help="torch's cpu threads in both builds' processes (OMP_NUM_THREADS); default: torch's own, as"
        " recorded. On a busy machine a cpu row's thread pool waits for a descheduled thread:"
        " --threads 1 (docs/explanation/the-rule.md)",
    )
    if bisecting:  # the nightlies a search adds between two adjacent builds (nightlies.py)
        parser.add_argument(
            "--nightlies",
            nargs="?",
            type=text.number(int, 1, "--nightlies"),
            const=nightlies.DEFAULT,
            metavar="N",
            help="where two adjacent builds leave PyTorch nightlies between them, add at"
            f" most N of them (default {nightlies.DEFAULT}), spread by date, on a bisection channel, and"
            " search on",
        )
        _option(
            parser,
            "index",
            help="nightly PEP 503 index for --nightlies (repeatable; default PyTorch's)",
        )
        _option(parser, "transformers_index", help="where --nightlies pins transformers from")
        _option(
            parser,
            "transformers",
            help="transformers version --nightlies pins, or none (default: by torch)",
        )


def _fresh_command(
    commands: Any,
    module: Any,
    name: str,
    help_text: str,
    func: Callable[[argparse.Namespace], int],
) -> argparse.ArgumentParser:
    """compare, bisect or explain: its module's first line, its options, then its exit statuses."""
    return _command(
        commands,
        name,
        help_text,
        func,
        description=module.__doc__.splitlines()[0],
        epilog=module.EXIT_STATUSES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def cmd_compare(args: argparse.Namespace) -> int:
    return compare.compare(args.a, args.b, fresh_options(args))


@declares
def _compare(commands: Any) -> None:
    comparing = _fresh_command(
        commands,
        compare,
        "compare",
        "is build B slower than build A? fresh, interleaved processes; never the recorded results",
        cmd_compare,
    )
    comparing.add_argument(
        "a", help="the reference build: CHANNEL@ID, a timeline hash (prefix) or a tag"
    )
    comparing.add_argument("b", help="the build under suspicion, named the same ways")
    fresh_arguments(comparing, bisecting=False)


def cmd_bisect(args: argparse.Namespace) -> int:
    started = time.monotonic()
    found = bisection.bisect(
        args.good, args.bad, fresh_options(args), _filled(nightlies.Options, args)
    )
    status = bisection.outcome(found)
    if isinstance(found, bisection.Found) and not args.no_explain:  # explain's own block, below
        explain.after_bisect(
            found.before, found.first, _filled(explain.Options, args), time.monotonic() - started
        )
    return status


@declares
def _bisect(commands: Any) -> None:
    bisecting = _fresh_command(
        commands,
        bisection,
        "bisect",
        "the first build between GOOD and BAD that made one combination slower, measured afresh",
        cmd_bisect,
    )
    bisecting.add_argument(
        "good", help="the last known good build: CHANNEL@ID, a timeline hash (prefix) or a tag"
    )
    bisecting.add_argument("bad", help="a later build on the same line of builds that is slower")
    fresh_arguments(bisecting)
    bisecting.add_argument(  # bisect ends with explain's table unless told not to
        "--no-explain",
        action="store_true",
        help="leave out the table of the ops that changed"
        " in the first bad build (mpsbench explain), which otherwise ends the bisection",
    )


# --- explain: the ops inside a combination's step that changed between two builds ---------------------------------
def cmd_explain(args: argparse.Namespace) -> int:
    return explain.run(args.a, args.b, _filled(explain.Options, args))


@declares
def _explain(commands: Any) -> None:
    """``mpsbench explain A B -b ROW``: its first line and exit statuses as compare's are shown."""
    explaining = _fresh_command(
        commands,
        explain,
        "explain",
        "which ops in one combination's step changed from build A to B:"
        " torch.profiler in fresh, interleaved processes",
        cmd_explain,
    )
    explaining.add_argument(
        "a", help="the reference build: CHANNEL@ID, a timeline hash (prefix) or a tag"
    )
    explaining.add_argument("b", help="the build to explain, named the same ways")
    _option(explaining, "bench")
    explaining.add_argument(
        "--rounds",
        type=text.number(int, 1, "--rounds", 50),
        default=explain.ROUNDS,
        help=f"fresh processes per build, interleaved (default {explain.ROUNDS})",
    )
    explaining.add_argument(
        "--calls",
        type=text.number(int, 1, "--calls", 1000),
        default=explain.CALLS,
        help=f"profiled calls of the timed method per process (default {explain.CALLS})",
    )
    explaining.add_argument(
        "--top",
        type=text.number(int, 1, "--top"),
        default=explain.TOP,
        help=f"rows shown (default {explain.TOP}); every row counts in the sums",
    )
    explaining.add_argument(
        "--save",
        type=_new_file,
        metavar="FILE",
        help="also write the table to FILE and its numbers to FILE.json",
    )
    explaining.add_argument(
        "--keep",
        action="store_true",
        help="also keep the table beside the results (explain/),"
        " where the published site links the regression it explains, as bisect keeps its own",
    )
    for option in ("machine", "manifest", "timeline", "suite_root"):
        _option(explaining, option)
    _option(explaining, "log", help="append asv's and the processes' own output here")
    _option(explaining, "threads")


def cmd_report(args: argparse.Namespace) -> None:
    config = args.config or (asvconf.CONFIG if asvconf.CONFIG.is_file() else None)
    report.build(
        args.results_dir, args.out_dir, asvconf.load(config) if config else None, args.site
    )


def cmd_publish(args: argparse.Namespace) -> None:
    configured = settings.text(settings.CONFIG)
    suite = _suite(args, Path(configured or asvconf.CONFIG))
    if configured and not args.config:
        try:
            _ = suite.conf  # read and checked here, to name the setting
        except asvconf.ConfigError as exc:
            raise UserError(f"{settings.CONFIG}={configured!r}: {exc}") from None
    publish.publish(suite, args.asv_args)


@declares
def _report(commands: Any) -> None:
    reporting = _command(
        commands, "report", "figures and a summary from an asv results directory", cmd_report
    )
    reporting.add_argument(
        "results_dir", type=Path, help="asv's results directory (results_dir in asv.conf.json)"
    )
    reporting.add_argument(
        "out_dir", type=Path, help="where the PNGs, summary.md and summary.html go"
    )
    _option(
        reporting,
        "config",
        help="asv.conf.json: the regression thresholds and the"
        " timeline repository (default: ./asv.conf.json if present)",
    )
    reporting.add_argument(
        "--site", type=Path, help="the published html_dir, to list the regressions asv detected"
    )


@declares
def _publish(commands: Any) -> None:
    publishing = _command(
        commands,
        "publish",
        "publish the site: asv publish, the regressions re-judged, PyTorch links, the"
        f" figures, offline libraries (scripts/publish; --config defaults to ${settings.CONFIG}, else"
        f" {asvconf.CONFIG})",
        cmd_publish,
    )
    _option(
        publishing,
        "config",
        help=f"the asv configuration (default ${settings.CONFIG}, else {asvconf.CONFIG})",
    )
    _option(publishing, "asv_args", help="options for asv publish")


# --- the fleet's nightly job -----------------------------------------------------------------------------------
def _nightly_bisect(fleet: nightly.Fleet, args: argparse.Namespace) -> int:
    def search(suite: Suite, machine_name: str) -> tuple[str, str] | str:
        # mpsbench bisect's own options, but for the manifest and timeline: the fleet's
        measuring = fresh_options(
            args,
            manifest=suite.manifest_path,
            timeline=suite.timeline_path,
            machine=machine_name,
            suite_root=fleet.suite,
        )
        found = bisection.bisect(args.good, args.bad, measuring, _filled(nightlies.Options, args))
        return (found.first, found.upstream) if isinstance(found, bisection.Found) else found.reason

    return nightly.bisect(fleet, args.bench, args.good, args.bad, args.machine, search)


NIGHTLY_STEPS: dict[str, Callable[[nightly.Fleet, argparse.Namespace], int]] = {
    "fetch": lambda fleet, args: nightly.fetch(fleet, args.remote, args.branch),
    "push": lambda fleet, args: nightly.push(fleet, args.message, args.remote, args.branch),
    "resolve": lambda fleet, args: nightly.resolve_nightly(fleet, _filled(nightly.Resolving, args)),
    "bench": lambda fleet, args: nightly.bench(fleet, _filled(nightly.Benching, args)),
    "collect": lambda fleet, args: nightly.collect(fleet, args.sources, args.update_benchmarks),
    "publish": lambda fleet, args: nightly.publish(fleet),
    "alert": lambda fleet, args: nightly.alert(fleet, args.machines, args.summary),
    "bisect": _nightly_bisect,
}


@declares
def _nightly(commands: Any) -> None:
    where = OneLineParser(add_help=False)  # every step's options
    where.add_argument(
        "--suite",
        type=Path,
        default=asvconf.ROOT,
        help="the suite: asv.conf.json, benchmarks/ and builds/manifest.json (default: this checkout)",
    )
    where.add_argument(
        "--workdir",
        type=Path,
        default=nightly.WORKDIR,
        help=f"work folder, relative to the suite (default {nightly.WORKDIR})",
    )
    where.add_argument("--fleet", type=Path, help="the fleet's files (default: WORKDIR/fleet)")
    where.add_argument(
        "--channel",
        default=nightly.CHANNEL,
        help=f"the nightly channel (default {nightly.CHANNEL})",
    )
    remote = OneLineParser(add_help=False)
    remote.add_argument("--remote", default="origin", help="git remote (default origin)")
    remote.add_argument("--branch", default="results", help="the results branch (default results)")
    group = commands.add_parser(
        "nightly",
        help="one step of the fleet's nightly job (scripts/nightly; docs/how-to/fleet.md)",
        epilog="docs/how-to/fleet.md says how the workflows use each step.",
        **_doc(nightly),
    )
    steps = group.add_subparsers(dest="step", metavar="STEP", required=True)

    def step(
        name: str, help_text: str, *parents: argparse.ArgumentParser
    ) -> argparse.ArgumentParser:
        def run(
            args: argparse.Namespace,
        ) -> int:  # every step works on the fleet its --suite ... --channel name
            return NIGHTLY_STEPS[name](
                nightly.Fleet(args.suite, args.workdir, args.fleet, args.channel), args
            )

        return _command(
            steps, name, help_text, run, description=help_text, parents=[where, *parents]
        )

    step("fetch", "copy the results branch into the fleet folder", remote)
    step(
        "push",
        "commit the fleet folder on the results branch and push it (fast-forward only)",
        remote,
    ).add_argument("--message", default="mpsbench nightly", help="the commit message")
    resolving = step("resolve", "append the newest nightly to the fleet's manifest")
    _option(resolving, "index")
    _option(resolving, "transformers_index", help="where transformers is pinned from")
    _option(resolving, "transformers")
    resolving.add_argument(
        "--dry-run", action="store_true", help="say what would be added; change nothing"
    )
    benching = step("bench", "benchmark every build this machine has no results for, then alert")
    _option(
        benching,
        "machine",
        help=f"machine name (default: ${settings.MACHINE}, else from the chip and core count)",
    )
    benching.add_argument(
        "--device",
        dest="devices",
        metavar="DEVICE",
        action="append",
        default=[],
        help="only these devices (repeatable or comma-separated; refused if not usable here)",
    )
    benching.add_argument(
        "--bench", action="append", default=[], help="only benchmarks matching this regex (asv -b)"
    )
    benching.add_argument(
        "--limit",
        type=text.number(int, 0, "--limit"),
        default=0,
        help="at most the newest N missing builds (default: all)",
    )
    benching.add_argument(
        "--dry-run",
        action="store_true",
        help="run each selected benchmark once (asv --quick --dry-run); record nothing",
    )
    benching.add_argument(
        "--confirm",
        action="store_true",
        help="raise an alert only if a fresh `mpsbench compare` on this machine agrees",
    )
    collecting = step(
        "collect", "merge results directories (the machines' artifacts) into the fleet's"
    )
    collecting.add_argument("sources", type=Path, nargs="+", help="asv results directories")
    collecting.add_argument(
        "--update-benchmarks",
        action="store_true",
        help="the sources ran a newer suite: their benchmarks.json entries win",
    )
    step("publish", "publish the site of the fleet's results into WORKDIR/html (mpsbench publish)")
    alerting = step("alert", "exit 1 if a machine's newest build is slower than the one before")
    _option(alerting, "machines")
    _option(alerting, "summary")
    # mpsbench bisect's own options, but the fleet's manifest and timeline: a channel --nightlies adds goes into the fleet's
    bisecting = step(
        "bisect",
        "mpsbench bisect over a range of the fleet's builds (fresh processes, nothing recorded)",
    )
    bisecting.add_argument(
        "--good", required=True, help="the last fast build: CHANNEL@ID or timeline hash"
    )
    bisecting.add_argument("--bad", required=True, help="a slow build: CHANNEL@ID or timeline hash")
    fresh_arguments(bisecting, files=False)


# --- the parser ------------------------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="mpsbench",
        description="PyTorch training and inference benchmarks for mps, cuda and cpu (asv suite helpers).",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for declare in DECLARED:
        declare(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:  # argparse's own refusal (one line, OneLineParser) and --help end in SystemExit: their status is ours
        args, extras = parser.parse_known_args(argv)
        if getattr(args, "passes_through", False):
            args.asv_args = extras
        elif extras:
            parser.error(f"unrecognized arguments: {' '.join(extras)}")
    except SystemExit as exc:
        return int(exc.code or 0)
    try:
        return int(args.func(args) or 0)
    except (
        asv.Stopped
    ) as exc:  # Ctrl-C, SIGTERM, `timeout`: asv and all it started are ended, what it measured kept
        print(
            f"mpsbench: {exc}: every process of the run has ended; each value measured before the stop is recorded,"
            " and the next run goes on from the next combination",
            file=sys.stderr,
        )
        return exc.status
    except (
        BrokenPipeError
    ):  # stdout piped into `head`: the rest is not wanted (Python's documented remedy)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except (
        UserError,
        OSError,
    ) as exc:  # a mistake, or a disk that is full, read-only or missing: one line
        shown = errors.os_error(exc) if isinstance(exc, OSError) else str(exc)
        shown = shown.replace("\r", "\\r").replace(
            "\n", "\\n"
        )  # a value that holds a newline shows it, in one line
        print(
            f"mpsbench{' nightly' if args.command == 'nightly' else ''}: error: {shown}",
            file=sys.stderr,
        )
        return 2


if __name__ == "__main__":
    sys.exit(main())
