"""The ``mpsbench`` command: argv in, a library call with a Suite and typed options out.

Options are declared beside the command that reads them (those several commands take, once, in
SHARED) and filled by name into the frozen dataclasses the library takes. A user's mistake is one
line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import functools
import inspect
import os
import sys
import time
from argparse import ArgumentParser, Namespace
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
MACHINE_NAME = text.checked(machine.check_name)
BUILD_NAMES = "CHANNEL@ID, a timeline hash (prefix) or a tag"
T = TypeVar("T")


class OneLineParser(ArgumentParser):
    """argparse that says a user's mistake in one line, exit status 2; subcommands inherit it."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog.split()[0]}: error: {message} (see {self.prog} --help)\n")


def _date(value: str) -> str:
    """A build date as the manifest keeps it, UTC: YYYY-MM-DDTHH:MM:SSZ."""
    try:
        date = mf.format_date(datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ"))
        mf.refuse_future(date, "--date")
    except mf.ManifestError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--date takes a UTC date and time YYYY-MM-DDTHH:MM:SSZ, e.g."
            f" 2026-11-20T00:00:00Z, got {value!r}"
        ) from None
    return date


def _new_file(value: str) -> Path:
    """A file to write, in a folder that exists."""
    path = Path(value)
    if not value or not path.parent.is_dir() or path.is_dir():
        raise argparse.ArgumentTypeError(
            f"{value!r} is no file in an existing folder: create the folder first, or"
            " name a file in one"
        )
    return path


def _suite(args: Namespace, config: Path = asvconf.CONFIG) -> Suite:
    """The suite of the command's --config, --manifest and --timeline, where it has them."""
    return Suite(
        getattr(args, "config", None) or config,
        getattr(args, "manifest", None) or history.MANIFEST,
        getattr(args, "timeline", None) or history.TIMELINE,
    )


# Options several commands take, each declared once; a command may change its help or default.
SHARED: dict[str, tuple[tuple[str, ...], dict[str, Any]]] = {
    "config": (
        ("--config",),
        {"type": Path, "help": f"asv configuration (default {asvconf.CONFIG})"},
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
    "log": (("--log",), {"type": Path, "help": "append asv's and the processes' own output here"}),
    "threads": (
        ("--threads",),
        {
            "type": text.number(int, 1, "--threads"),
            "metavar": "N",
            "help": "torch's cpu threads per process (OMP_NUM_THREADS; default: torch's own, as"
            " recorded); on a busy machine a cpu row needs --threads 1"
            " (docs/explanation/the-rule.md)",
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
        {"help": "transformers version, or none (default: by torch)"},
    ),
    "transformers_index": (
        ("--transformers-index",),
        {"default": resolve.PYPI, "help": "index of the other wheels (default PyPI)"},
    ),
    "parent": (("--parent",), {"help": "a new channel's CHANNEL@ID to fork from"}),
    "id": (("--id",), {"help": "build id (default: from the torch version)"}),
    "note": (("--note",), {"default": "", "help": "a line for the commit message"}),
    "summary": (
        ("--summary",),
        {"type": _new_file, "help": "also write the alerts as Markdown here"},
    ),
    "asv_args": (("asv_args",), {"nargs": argparse.REMAINDER}),
}


def _option(parser: ArgumentParser, name: str, **changes: Any) -> ArgumentParser:
    """Add SHARED option ``name`` to ``parser``, with the command's own ``changes``."""
    flags, spec = SHARED[name]
    parser.add_argument(*flags, **{**spec, **changes})
    return parser


def _flag(parser: ArgumentParser, flag: str, help_text: str) -> None:
    parser.add_argument(flag, action="store_true", help=help_text)


def _called(func: Callable[..., T], args: Namespace, *given_args: Any, **given: Any) -> T:
    """``func`` (an options dataclass, or a library call) with each parameter the ``given`` leave
    from the option of its name; a repeated option's list becomes a tuple."""
    names = list(inspect.signature(func).parameters)[len(given_args) :]
    found = {name: getattr(args, name) for name in names if hasattr(args, name)}
    tuples = {
        name: tuple(value) if isinstance(value, list) else value for name, value in found.items()
    }
    return func(*given_args, **{**tuples, **given})


def _command(
    commands: Any,
    name: str,
    help_text: str,
    func: Callable[[Namespace], int | None],
    *shared: str,
    **more: Any,
) -> ArgumentParser:
    """A subcommand running ``func`` (None: exit status 0), with the SHARED options it names."""
    parser: ArgumentParser = commands.add_parser(name, help=help_text, **more)
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


DECLARED: list[Callable[[Any], None]] = []  # in --help order


def declares(declare: Callable[[Any], None]) -> Callable[[Any], None]:
    """Register a function that adds its command(s) to ``mpsbench``'s subcommands."""
    DECLARED.append(declare)
    return declare


# measuring here
def cmd_models(args: Namespace) -> None:
    rows = [["model", "seed batch", "batch sizes", "needs", "description"]]
    for spec in models.REGISTRY.values():
        sizes, needs = ",".join(map(str, spec.batch_sizes)), ",".join(spec.requires) or "-"
        rows.append([spec.name, str(spec.seed_batch_size), sizes, needs, spec.description])
    print(text.table(rows))


def _usable() -> list[str]:
    return [name for name in devices.NAMES if devices.get(name).usable]


def cmd_devices(args: Namespace) -> None:
    found = bench.check_setup()
    print(",".join(_usable()) if args.usable else found)


def cmd_run(args: Namespace) -> None:
    bench.require_torch()
    from mpsbench.measure import timing, workloads  # imports torch

    spec, device = models.get(args.model), devices.get(args.device)
    batch = spec.seed_batch_size if args.batch_size is None else args.batch_size
    models.check_batch_size(spec, batch)
    found = device.availability()
    if not found.usable:
        usable = _usable()
        hint = f"; usable here: {', '.join(usable)}: try --device {usable[0]}" if usable else ""
        raise UserError(
            f"device {device} is not usable here: {found.reason}{hint}"
            + (" (mps needs a Mac with Apple silicon)" if device == "mps" else "")
        )
    kinds = (  # "both": the kinds the model has
        [k for k in workloads.KINDS if (spec.trains if k == "training" else spec.trainable is None)]
        if args.kind == "both"
        else [args.kind]
    )
    rows = [["workload", "model", "device", "batch", "ms/step", "samples/s", "calls"]]
    for kind in kinds:
        try:
            workload = workloads.build(kind, device, spec.name, batch)
        except workloads.WorkloadError as exc:
            raise UserError(str(exc)) from None
        except Exception as exc:
            if devices.is_out_of_memory(exc):
                raise UserError(
                    f"{spec.name} at batch {batch} does not fit in {device} memory"
                ) from None
            raise
        workload.warm_up()
        took = timing.time_steps(workload, min_seconds=args.seconds)
        rows.append(
            [
                kind,
                spec.name,
                device,
                str(batch),
                f"{took.seconds_per_step * 1e3:.3f}",
                f"{took.samples_per_second:.1f}",
                f"{took.calls}x{took.steps_per_call}",
            ]
        )
        workloads.forget()
    print(text.table(rows))
    if device == "cpu":
        print(f"cpu threads: {devices.cpu_threads()}")


@declares
def _measuring(commands: Any) -> None:
    _command(commands, "models", "list the registered models", cmd_models)
    listing = _command(
        commands, "devices", "list devices and whether they are usable here", cmd_devices
    )
    _flag(listing, "--usable", "print only the usable ones, comma-separated (for MPSBENCH_DEVICES)")
    run = _command(commands, "run", "time one model outside asv for a quick look", cmd_run)
    run.add_argument("model", help=f"one of: {', '.join(models.REGISTRY)}")
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
    checking = _command(
        commands,
        "doctor",
        "check this machine before a run: devices, memory, power, heat, load",
        lambda args: doctor.run(args.strict),
        **_doc(doctor),
    )
    _flag(checking, "--strict", "exit 1 when any check warns")


# builds and the timeline
def cmd_add(args: Namespace) -> None:
    suite = _suite(args)
    # before pip resolves a release, which takes minutes
    suite.manifest.check_new(
        args.channel, getattr(args, "version", None) or getattr(args, "id", None), args.parent
    )
    history.append(
        suite.manifest_path,
        suite.timeline_path,
        args.channel,
        args.resolver(args, suite),
        args.parent,
    )


def _release(args: Namespace, suite: Suite) -> mf.Build:
    pythons = tuple(args.python) if args.python else defaults.pin_pythons(suite.manifest)
    return _called(resolve.release, args, pythons=pythons)


def _existing(args: Namespace, suite: Suite) -> mf.Build:
    env = {}
    for pair in args.env:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise UserError(f"--env takes NAME=VALUE, got {pair!r}")
        env[name] = value
    return _called(resolve.existing, args, build_id=args.id, env=env)


def _wheel(args: Namespace) -> dict[str, Any]:
    """A wheel resolver's parameters named otherwise than their options."""
    return {"index": args.transformers_index, "build_id": args.id}


def cmd_add_nightly(args: Namespace) -> None:
    suite = _suite(args)
    files = (suite.manifest_path, suite.timeline_path)
    _called(history.add_nightly, args, *files, pythons=tuple(args.python))


def cmd_list(args: Namespace) -> None:
    suite = _suite(args)
    for channel in suite.manifest.channels:
        print(
            f"channel {channel.name}"
            + (f" (forks from {channel.parent})" if channel.parent else "")
        )
        for build in channel.builds:
            ref = f"{channel.name}@{build.id}"
            tag = f", tag {build.tag}" if build.tag else ""
            print(
                f"  {suite.timeline.commits[ref][:12]}  {ref:<22} torch {build.torch_version:<22}"
                f" git {build.git_version[:12]}  {build.date}  {build.kind} build{tag}"
            )


@declares
def _build(commands: Any) -> None:
    build = commands.add_parser(
        "build", help="add PyTorch builds to the manifest (and the timeline)"
    )
    actions = build.add_subparsers(dest="build_command", metavar="ACTION", required=True)

    def adding(
        name: str, help_text: str, channel: str, *options: str, **defaults: Any
    ) -> ArgumentParser:
        """An add-* command: cmd_add appends what ``resolver`` makes, unless ``func`` says otherwise."""
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
        "--torchvision", help="torchvision version (default: the one for this torch)"
    )
    release.add_argument(
        "--python",
        nargs="+",
        help="python tags to pin on every platform (default: per platform, the manifest's"
        " defaults' Pythons, else cp310-cp313)",
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
    local = ("local", "id", "note")
    wheel = adding(
        "add-wheel",
        "a torch wheel file, e.g. one built from source",
        *local,
        "transformers_index",
        resolver=lambda args, suite: _called(resolve.wheel_file, args, **_wheel(args)),
    )
    wheel.add_argument("path", type=Path)
    wheel.add_argument("--torchvision", type=Path, help="a torchvision wheel file to pin beside it")
    wheel.add_argument("--sha256", help="refuse the file unless it has this sha256")
    url = adding(
        "add-url",
        "a torch wheel at a URL (fetched once, checksum checked)",
        *local,
        "transformers_index",
        resolver=lambda args, suite: _called(resolve.wheel_url, args, **_wheel(args)),
    )
    url.add_argument("url")
    url.add_argument("--sha256", help="the wheel's sha256 (or end the URL with #sha256=...)")
    here = adding(
        "add-existing", "a torch already installed here, used in place", *local, resolver=_existing
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


def cmd_generate(args: Namespace) -> None:
    suite = _suite(args)
    print(timeline.summary(suite.manifest, suite.generate(force=args.force), suite.timeline_path))


def cmd_default(args: Namespace) -> None:
    suite = _suite(args)
    if args.platform:
        platform = defaults.rule_for(suite.manifest, [args.platform])[0]
        planned, skipped = defaults.schedule(suite.manifest, platform), list[str]()
    else:  # what this machine cannot run is left out
        platform, planned, skipped = defaults.this_machine(suite.manifest)
    pythons = defaults.pythons(planned)
    if args.pythons:
        print("\n".join(pythons))
    elif args.hashes:  # for asv run HASHFILE:
        if args.python is None:
            raise UserError("--hashes needs --python VERSION: each Python runs its own builds")
        if args.python not in pythons:
            raise UserError(
                f"--python {args.python} runs no build of {platform}'s default; its Pythons:"
                f" {', '.join(pythons) or 'none'}"
            )
        print(
            "\n".join(
                suite.timeline.commits[item.ref] for item in planned if args.python in item.pythons
            )
        )
    else:
        print(defaults.listing(platform, planned, suite.timeline, here=not args.platform))
        for line in skipped:
            print(f"mpsbench: {line}", file=sys.stderr)


def _asv_args(args: Namespace) -> list[str]:
    """The arguments for ``asv run``, less a leading ``--``."""
    passed: list[str] = args.asv_args
    return passed[1:] if passed[:1] == ["--"] else passed


@declares
def _timeline(commands: Any) -> None:
    line = commands.add_parser("timeline", help="the timeline repository asv walks")
    action = functools.partial(
        _command, line.add_subparsers(dest="timeline_command", metavar="ACTION", required=True)
    )
    files = ("manifest", "timeline")
    generating = action(
        "generate", "(re)generate the timeline from the manifest", cmd_generate, *files
    )
    _flag(generating, "--force", "accept a rewritten channel history")
    span = action(
        "range",
        "the PyTorch commit range between two builds",
        lambda args: print(_suite(args).upstream_range(args.old, args.new)),
        *files,
    )
    span.add_argument("old", help=BUILD_NAMES)
    span.add_argument("new", help=BUILD_NAMES)
    default = action(
        "default",
        "this platform's default timeline (builds/manifest.json 'defaults'): builds and Pythons",
        cmd_default,
        *files,
    )
    default.add_argument(
        "--platform", choices=wheels.PLATFORMS, help="a manifest platform (default: this machine's)"
    )
    _flag(default, "--pythons", "print only the Pythons to run, one a line")
    _flag(default, "--hashes", "print only the timeline commits --python runs")
    default.add_argument("--python", help="with --hashes: the Python, e.g. 3.10")
    checking = action(
        "check-range",
        "refuse, in one line, an asv run range that names no timeline commit",
        lambda args: bench.check_range(_suite(args), _asv_args(args)),
        "timeline",
    )
    _option(checking, "asv_args", help="the arguments given to asv run")


def cmd_machine(args: Namespace) -> None:
    name, fields = machine.write(args.name)
    if args.quiet:
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
    _flag(host, "--quiet", "print only the machine's name")


# running and recording
@declares
def _bench(commands: Any) -> None:
    benching = _command(
        commands,
        "bench",
        "check the set-up, record every build's missing values, publish the site (scripts/bench)",
        lambda args: bench.bench(_suite(args), _called(bench.Options, args)),
        allow_abbrev=False,
        **_doc(bench),
    )
    _flag(
        benching,
        "--remeasure",
        "run the selection again; replaced values go to .asv/results-replaced.jsonl",
    )
    benching.set_defaults(passes_through=True)  # every other argument goes to asv run


def cmd_merge(args: Namespace) -> int:
    merge.check_machines(args.sources, args.machines)
    builds = merge.timeline_builds(args.timeline) if args.timeline else None
    merged = _called(merge.merge, args, machines=args.machines or None, builds=builds)
    return merged.show(args.dest)


def cmd_record(args: Namespace) -> int:
    machine.require(args.machine)
    suite, run = _suite(args), asv.run_args(_asv_args(args))
    record.check_meaning(run)
    facts = bench.disk_facts(suite, run)
    return record.status(record.record(suite.conf, args.machine, run, args.remeasure, facts))


@declares
def _results(commands: Any) -> None:
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
    _flag(
        merging, "--update-benchmarks", "the sources ran a newer suite: their benchmarks.json wins"
    )
    _option(
        merging,
        "timeline",
        default=None,
        help="the timeline repository: a file of a build not among its commits is refused",
    )
    _flag(
        merging,
        "--replace",
        "re-measured on purpose: incoming values replace recorded ones, kept in DEST-replaced.jsonl",
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
    _flag(
        recording, "--remeasure", "run the selection again; replaced values go to the audit trail"
    )
    _option(recording, "asv_args", help="asv run options and range, after --")


def cmd_preselect(args: Namespace) -> None:
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
        help="the suite's benchmarks (default: benchmarks)",
    )
    _flag(
        selecting,
        "--list",
        "print every combination, a tab, and why this run leaves it out, or 'runs'",
    )


# judging and publishing
@declares
def _alert(commands: Any) -> None:
    alert = _command(
        commands,
        "alert",
        "exit 1 if a machine's newest build is slower (docs/explanation/site.md)",
        lambda args: alerts.check(_suite(args), _called(alerts.Options, args))[0],
        "config",
        "manifest",
        "timeline",
    )
    alert.add_argument(
        "--results", type=Path, help="asv results directory (default: results_dir of --config)"
    )
    _option(alert, "machines")
    alert.add_argument(
        "--build", help="only machines whose newest build is this (CHANNEL@ID or hash)"
    )
    _option(alert, "summary")
    _flag(
        alert,
        "--confirm",
        "alert only if a fresh `mpsbench compare` of the two builds on this machine agrees",
    )


@declares
def _ops_rank(commands: Any) -> None:
    ranking = _command(
        commands,
        "ops-rank",
        "rank the op benchmarks by slowdown between two builds",
        lambda args: rank_ops.run(
            _suite(args), _called(rank_ops.Options, args, top=args.top or None)
        ),
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
        help="asv's results, for commits (default: results_dir of --config)",
    )
    _option(ranking, "machine", help="asv machine name, for commits (default: the only one)")
    ranking.add_argument(
        "--top", type=text.number(int, 0, "--top"), help="the N largest ratios only (0: all)"
    )


@declares
def _factor(commands: Any) -> None:
    factor = _command(
        commands,
        "factor",
        "print the regression factor a row is judged by (for asv continuous --factor)",
        lambda args: print(f"{rule.factor(_suite(args).conf.thresholds, args.bench):g}"),
        "config",
    )
    _option(
        factor,
        "bench",
        required=False,
        default="",
        help="the row's name, not a regex (default: any row), matched against the config's"
        " regressions_thresholds, else asv's default, as asv continuous does",
    )


def fresh_options(args: Namespace, **given: Any) -> fresh.Options:
    """compare's and bisect's options (fresh_arguments), typed; ``given`` overrides them."""
    return _called(fresh.Options, args, **given)


def fresh_arguments(parser: ArgumentParser, files: bool = True, bisecting: bool = True) -> None:
    """The options compare and bisect share, and bisect's --nightlies; without ``files`` the
    caller sets the manifest and timeline."""
    _option(parser, "bench")
    rounds = text.number(int, verdict.FEWEST, "rounds", compare.MOST_ROUNDS)
    parser.add_argument(
        "--min-rounds",
        type=rounds,
        default=verdict.MIN_ROUNDS,
        help="processes per build before the first planned look (early looks at 2 .. N-1 if N <= 5)",
    )
    parser.add_argument(
        "--max-rounds",
        type=rounds,
        default=verdict.MAX_ROUNDS,
        help="the rounds planned; with time left, an undecided pair goes on, up to 3x this",
    )
    parser.add_argument(
        "--time-budget",
        type=text.number(float, 1, "--time-budget", 24 * 60),
        dest="minutes",
        metavar="MINUTES",
        default=fresh.TIME_BUDGET_MINUTES,
        help="the command's wall-clock budget: no look starts that cannot end in time, and what"
        " is left undecided says so, exit 3"
        f" (default {fresh.TIME_BUDGET_MINUTES:g})",
    )
    for option in ("machine", *(("manifest", "timeline", "suite_root") if files else ()), "log"):
        _option(parser, option)
    _option(parser, "threads")
    if not bisecting:
        return
    parser.add_argument(
        "--nightlies",
        nargs="?",
        type=text.number(int, 1, "--nightlies"),
        const=nightlies.DEFAULT,
        metavar="N",
        help=f"add at most N (default {nightlies.DEFAULT}) PyTorch nightlies between two adjacent"
        " builds, spread by date, on a bisection channel, and search on",
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
    commands: Any, module: Any, name: str, help_text: str, func: Callable[[Namespace], int]
) -> ArgumentParser:
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


@declares
def _compare(commands: Any) -> None:
    comparing = _fresh_command(
        commands,
        compare,
        "compare",
        "is build B slower than build A? fresh, interleaved processes; never the recorded results",
        lambda args: compare.compare(args.a, args.b, fresh_options(args)),
    )
    comparing.add_argument("a", help=f"the reference build: {BUILD_NAMES}")
    comparing.add_argument("b", help="the build under suspicion, named the same ways")
    fresh_arguments(comparing, bisecting=False)


def cmd_bisect(args: Namespace) -> int:
    started = time.monotonic()
    found = bisection.bisect(
        args.good, args.bad, fresh_options(args), _called(nightlies.Options, args)
    )
    status = bisection.outcome(found)  # printed before explain's table
    if isinstance(found, bisection.Found) and not args.no_explain:
        took = time.monotonic() - started
        explain.after_bisect(found.before, found.first, _called(explain.Options, args), took)
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
    bisecting.add_argument("good", help=f"the last known good build: {BUILD_NAMES}")
    bisecting.add_argument("bad", help="a later build on the same line of builds that is slower")
    fresh_arguments(bisecting)
    _flag(
        bisecting,
        "--no-explain",
        "end without the table of the ops that changed (mpsbench explain)",
    )


@declares
def _explain(commands: Any) -> None:
    explaining = _fresh_command(
        commands,
        explain,
        "explain",
        "which ops in one combination's step changed from build A to B: torch.profiler in fresh,"
        " interleaved processes",
        lambda args: explain.run(args.a, args.b, _called(explain.Options, args)),
    )
    explaining.add_argument("a", help=f"the reference build: {BUILD_NAMES}")
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
    _flag(
        explaining,
        "--keep",
        "also keep the table beside the results (explain/) for the site, as bisect does",
    )
    for option in ("machine", "manifest", "timeline", "suite_root", "log", "threads"):
        _option(explaining, option)


def cmd_report(args: Namespace) -> None:
    config = args.config or (asvconf.CONFIG if asvconf.CONFIG.is_file() else None)
    report.build(
        args.results_dir, args.out_dir, asvconf.load(config) if config else None, args.site
    )


def cmd_publish(args: Namespace) -> None:
    configured = settings.text(settings.CONFIG)
    suite = _suite(args, Path(configured or asvconf.CONFIG))
    if configured and not args.config:
        try:
            _ = suite.conf  # checked here, to name the setting
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
        help="for the thresholds and the timeline (default: ./asv.conf.json if present)",
    )
    reporting.add_argument(
        "--site", type=Path, help="the published html_dir, to list the regressions asv detected"
    )


@declares
def _publish(commands: Any) -> None:
    default = f"${settings.CONFIG}, else {asvconf.CONFIG}"
    publishing = _command(
        commands,
        "publish",
        "publish the site: asv publish, the regressions re-judged, PyTorch links, the figures,"
        f" offline libraries (scripts/publish; --config defaults to {default})",
        cmd_publish,
    )
    _option(publishing, "config", help=f"the asv configuration (default {default})")
    _option(publishing, "asv_args", help="options for asv publish")


# the fleet's nightly job
def _nightly_bisect(fleet: nightly.Fleet, args: Namespace) -> int:
    suite = nightly.prepare(fleet)
    measuring = fresh_options(  # on the fleet's builds
        args,
        manifest=suite.manifest_path,
        timeline=suite.timeline_path,
        machine=nightly.machine_name(args.machine),
        suite_root=fleet.suite,
    )
    adding = _called(nightlies.Options, args)
    return nightly.bisect(fleet, suite, measuring, adding, args.good, args.bad)


NIGHTLY_STEPS: dict[str, Callable[[nightly.Fleet, Namespace], int]] = {
    "fetch": lambda fleet, args: nightly.fetch(fleet, args.remote, args.branch),
    "push": lambda fleet, args: nightly.push(fleet, args.message, args.remote, args.branch),
    "resolve": lambda fleet, args: nightly.resolve_nightly(fleet, _called(nightly.Resolving, args)),
    "bench": lambda fleet, args: nightly.bench(fleet, _called(nightly.Benching, args)),
    "collect": lambda fleet, args: nightly.collect(fleet, args.sources, args.update_benchmarks),
    "publish": lambda fleet, args: nightly.publish(fleet),
    "alert": lambda fleet, args: nightly.alert(fleet, args.machines, args.summary),
    "bisect": _nightly_bisect,
}


def _run_step(args: Namespace) -> int:
    fleet = nightly.Fleet(args.suite, args.workdir, args.fleet, args.channel)
    return NIGHTLY_STEPS[args.step](fleet, args)


@declares
def _nightly(commands: Any) -> None:
    where = OneLineParser(add_help=False)
    where.add_argument(
        "--suite",
        type=Path,
        default=asvconf.ROOT,
        help="asv.conf.json, benchmarks/ and builds/manifest.json (default: this checkout)",
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

    def step(name: str, help_text: str, *parents: ArgumentParser) -> ArgumentParser:
        return _command(
            steps, name, help_text, _run_step, description=help_text, parents=[where, *parents]
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
    _flag(resolving, "--dry-run", "say what would be added; change nothing")
    benching = step("bench", "benchmark every build this machine has no results for, then alert")
    _option(
        benching,
        "machine",
        help=f"machine name (default: ${settings.MACHINE}, else from chip and core count)",
    )
    benching.add_argument(
        "--device",
        dest="devices",
        metavar="DEVICE",
        action="append",
        default=[],
        help="only these devices (repeatable or comma-separated), each usable here",
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
    _flag(
        benching,
        "--dry-run",
        "run each selected benchmark once (asv --quick --dry-run); record nothing",
    )
    _flag(benching, "--confirm", "alert only if a fresh `mpsbench compare` on this machine agrees")
    collecting = step(
        "collect", "merge results directories (the machines' artifacts) into the fleet's"
    )
    collecting.add_argument("sources", type=Path, nargs="+", help="asv results directories")
    _flag(
        collecting,
        "--update-benchmarks",
        "the sources ran a newer suite: their benchmarks.json wins",
    )
    step("publish", "publish the site of the fleet's results into WORKDIR/html (mpsbench publish)")
    alerting = step("alert", "exit 1 if a machine's newest build is slower than the one before")
    _option(alerting, "machines")
    _option(alerting, "summary")
    bisecting = step(
        "bisect",
        "mpsbench bisect over a range of the fleet's builds (fresh processes, nothing recorded)",
    )
    bisecting.add_argument(
        "--good", required=True, help="the last fast build: CHANNEL@ID or timeline hash"
    )
    bisecting.add_argument("--bad", required=True, help="a slow build: CHANNEL@ID or timeline hash")
    fresh_arguments(bisecting, files=False)  # the fleet's manifest and timeline


# the parser
def build_parser() -> ArgumentParser:
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
    try:  # argparse's refusal and --help exit
        args, extras = parser.parse_known_args(argv)
        if getattr(args, "passes_through", False):
            args.asv_args = extras
        elif extras:
            parser.error(f"unrecognized arguments: {' '.join(extras)}")
    except SystemExit as exc:
        return int(exc.code or 0)
    try:
        return int(args.func(args) or 0)
    except asv.Stopped as exc:  # Ctrl-C, SIGTERM, `timeout`
        print(
            f"mpsbench: {exc}: every process of the run has ended; each value measured before the"
            " stop is recorded, and the next run goes on from the next combination",
            file=sys.stderr,
        )
        return exc.status
    except BrokenPipeError:  # stdout piped into `head`: Python's documented remedy
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except (UserError, OSError) as exc:
        shown = errors.os_error(exc) if isinstance(exc, OSError) else str(exc)
        shown = shown.replace("\r", "\\r").replace("\n", "\\n")
        prog = "mpsbench nightly" if args.command == "nightly" else "mpsbench"
        print(f"{prog}: error: {shown}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
