"""The ``mpsbench`` command line: commands declared with their options, functions filled by name."""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import math
import os
import sys
import time
import typing
from argparse import ArgumentParser, Namespace
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn, TypeVar

from mpsbench import bench
from mpsbench.builds import defaults, history, install_build, machine, resolve, timeline, wheels
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
F = TypeVar("F", bound=Callable[..., Any])
Option = tuple[tuple[str, ...], dict[str, Any]]


class OneLineParser(ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(2, f"mpsbench: error: {message} (see {self.prog} --help)\n")


def _date(value: str) -> str:
    try:
        date = mf.format_date(mf.parse_date(value))
    except ValueError:
        raise UserError(
            f"--date takes YYYY-MM-DDTHH:MM:SSZ (UTC), e.g. 2026-11-20T00:00:00Z, got {value!r}"
        ) from None
    mf.refuse_future(date, "--date")
    return date


def _new_file(value: str) -> Path:
    path = Path(value)
    if not value or not path.parent.is_dir() or path.is_dir():
        raise argparse.ArgumentTypeError(
            f"{value!r} is no file in an existing folder: create the folder first"
        )
    return path


def _env(value: str) -> tuple[str, str]:
    name, sep, setting = value.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"--env takes NAME=VALUE, got {value!r}")
    return name, setting


DATE = text.checked(_date)


def opt(name: str, help_text: str | None = None, **spec: Any) -> Option:
    # a set default is shown at the help's end, unless the help itself says "default"
    if spec.get("default") not in (None, False, "", []) and "default" not in (help_text or ""):
        said = "default %(default)s"
        help_text = f"{help_text} ({said})" if help_text else said
    return (name,), {"help": help_text, **spec}


def path(name: str, help_text: str | None = None, **spec: Any) -> Option:
    return opt(name, help_text, type=Path, **spec)


def flag(name: str, help_text: str, **spec: Any) -> Option:
    return opt(name, help_text, action="store_true", **spec)


def count(
    name: str, help_text: str, kind: type, least: float, most: float = math.inf, **spec: Any
) -> Option:
    return opt(name, help_text, type=text.number(kind, least, name, most), **spec)


def many(name: str, help_text: str, **spec: Any) -> Option:
    return opt(name, help_text, action="append", default=[], **spec)


def changed(option: Option, help_text: str | None = None, **changes: Any) -> Option:
    flags, spec = option
    return flags, {**spec, **changes, "help": help_text or spec["help"]}


CONFIG = path("--config", f"asv configuration (default {asvconf.CONFIG})")
MANIFEST = path("--manifest", default=history.MANIFEST)
TIMELINE = path("--timeline", default=history.TIMELINE)
FILES = (MANIFEST, TIMELINE)
MACHINE = opt("--machine", "asv machine name (default: this machine's)", type=MACHINE_NAME)
MACHINES = many(
    "--machine",
    "only this machine (repeatable)",
    dest="machines",
    metavar="MACHINE",
    type=MACHINE_NAME,
)
BENCH = ("-b", "--bench"), {"required": True, "help": "a regex naming ONE combination, as asv -b"}
INDEX = many(
    "--index",
    "nightly PEP 503 index (repeatable; default PyTorch's)",
    dest="indexes",
    metavar="INDEX",
)
TRANSFORMERS = opt("--transformers", "transformers version, or none (default: by torch)")
TRANSFORMERS_INDEX = opt(
    "--transformers-index", "index of the other wheels (default PyPI)", default=resolve.PYPI
)
SUMMARY = opt("--summary", "also write the alerts as Markdown here", type=_new_file)
CONFIRM = flag("--confirm", "alert only if a fresh `mpsbench compare` here agrees")
SOURCES = path("sources", "asv results directories", nargs="+")
UPDATE_BENCHMARKS = flag("--update-benchmarks", "the sources' newer benchmarks.json wins")
REMEASURE = flag(
    "--remeasure", "run the selection again; replaced values go to RESULTS-replaced.jsonl"
)
ASV_ARGS = opt("asv_args", nargs=argparse.REMAINDER)
REFERENCE = opt("a_ref", f"the reference build: {BUILD_NAMES}", metavar="a")


def add_options(parser: ArgumentParser, options: Sequence[Option]) -> None:
    for flags, spec in options:
        parser.add_argument(*flags, **spec)


PARSER = OneLineParser(
    prog="mpsbench",
    description="PyTorch benchmarks on mps, cuda and cpu (asv suite helpers).",
)
SUBCOMMANDS = {"": PARSER.add_subparsers(dest="command", metavar="COMMAND", required=True)}


def group(name: str, help_text: str, metavar: str = "ACTION", **more: Any) -> None:
    parser = SUBCOMMANDS[""].add_parser(name, help=help_text, **more)
    SUBCOMMANDS[name] = parser.add_subparsers(metavar=metavar, required=True)


def command(
    words: str, help_text: str, *options: Option, parser: Any = None, **preset: Any
) -> Callable[[F], F]:
    """Declare command ``words`` ("build list"); ``parser``: add_parser's keywords or a module."""
    above, _, name = words.rpartition(" ")
    if isinstance(parser, dict):
        more = parser
    elif parser:
        more = _doc(parser)
    else:
        more = {"description": help_text}
    declared = SUBCOMMANDS[above].add_parser(name, help=help_text, **more)
    add_options(declared, options)

    def declare(func: F) -> F:
        declared.set_defaults(func=func, **preset)
        return func

    return declare


def _doc(module: Any) -> dict[str, Any]:
    doc, statuses = module.__doc__ or "", getattr(module, "EXIT_STATUSES", None)
    return {
        "description": doc.splitlines()[0] if statuses else doc.split("\n\n", 1)[-1],
        "epilog": statuses,
        "formatter_class": argparse.RawDescriptionHelpFormatter,
    }


def filled(func: Callable[..., T], args: Namespace, **given: Any) -> T:
    """``func`` called with each parameter not ``given`` filled by its type, else by its option."""
    hints, values = typing.get_type_hints(func), {}
    for name in inspect.signature(func).parameters:
        kind = hints.get(name)
        if name in given:
            values[name] = given[name]
        elif kind is Namespace:
            values[name] = args
        elif kind is Suite:
            files = {
                f"{o}_path": getattr(args, o, None) for o in ("config", "manifest", "timeline")
            }
            values[name] = Suite(**{field: path for field, path in files.items() if path})
        elif dataclasses.is_dataclass(kind):
            values[name] = filled(kind, args)  # type: ignore[arg-type]
        elif hasattr(args, name):
            value = getattr(args, name)
            values[name] = tuple(value) if isinstance(value, list) else value
    return func(**values)


@command("models", "list the models")
def cmd_models() -> None:
    rows = [
        [
            spec.name,
            str(spec.seed_batch_size),
            ",".join(map(str, spec.batch_sizes)),
            ",".join(spec.requires) or "-",
            spec.description,
        ]
        for spec in models.REGISTRY.values()
    ]
    print(text.table([["model", "seed batch", "batch sizes", "needs", "description"], *rows]))


@command(
    "devices",
    "list devices and whether each is usable here",
    flag("--usable", "only the usable ones, comma-separated (for MPSBENCH_DEVICES)"),
)
def cmd_devices(usable: bool) -> None:
    found = bench.check_setup()
    print(",".join(devices.usable_names()) if usable else found)


@command(
    "run",
    "time one model outside asv",
    opt("model", f"one of: {', '.join(models.REGISTRY)}"),
    opt("--device", f"one of: {', '.join(devices.NAMES)}", default="cpu"),
    count("--batch-size", "default: the model's seed batch size", int, 1),
    opt("--kind", default="both", choices=("training", "inference", "both")),
    count("--seconds", "least seconds timing each workload", float, 1e-3, 3600, default=1.0),
)
def cmd_run(model: str, device: str, batch_size: int | None, kind: str, seconds: float) -> None:
    bench.require_torch()
    from mpsbench.measure import timing, workloads  # imports torch

    spec, on = models.get(model), devices.get(device)
    batch = batch_size or spec.seed_batch_size
    models.check_batch_size(spec, batch)
    devices.require_usable([on])
    rows = [["workload", "model", "device", "batch", "ms/step", "samples/s", "calls"]]
    for each in [kind] if kind != "both" else [k for k in workloads.KINDS if not spec.refusal(k)]:
        try:
            workload = workloads.build(each, on, spec.name, batch)
        except workloads.WorkloadError as exc:
            raise UserError(str(exc)) from None
        except Exception as exc:
            if devices.is_out_of_memory(exc):
                raise UserError(
                    f"{spec.name} at batch {batch} does not fit in {on} memory"
                ) from None
            raise
        workload.warm_up()
        took = timing.time_steps(workload, min_seconds=seconds)
        rows.append(
            [
                each,
                spec.name,
                on,
                str(batch),
                f"{took.seconds_per_step * 1e3:.3f}",
                f"{took.samples_per_second:.1f}",
                f"{took.calls}x{took.steps_per_call}",
            ]
        )
        workloads.forget()
    print(text.table(rows))
    if on == "cpu":
        print(f"cpu threads: {devices.cpu_threads()}")


command(
    "doctor",
    "check devices, memory, power, heat and load before a run",
    flag("--strict", "exit 1 when any check warns"),
    parser=doctor,
)(doctor.run)


group("build", "add PyTorch builds to the manifest and timeline")


def appending(channel: str) -> tuple[Option, ...]:
    return (
        *FILES,
        opt("--channel", "channel to append to", default=channel),
        opt("--parent", "a new channel's CHANNEL@ID to fork from"),
        TRANSFORMERS,
    )


LOCAL = (
    *appending("local"),
    opt("--id", "build id (default: from the torch version)", dest="build_id", metavar="ID"),
    opt("--note", "a line for the commit message", default=""),
)
# the wheel resolvers call the other wheels' index "index"
OTHERS = changed(TRANSFORMERS_INDEX, dest="index", metavar="TRANSFORMERS_INDEX")


def cmd_add(suite: Suite, channel: str, parent: str | None, args: Namespace) -> None:
    named = getattr(args, "version", None) or getattr(args, "build_id", None)
    suite.manifest.check_new(channel, named, parent)  # before pip resolves a release: minutes
    build = filled(args.resolver, args, suite=suite)
    history.append(suite.manifest_path, suite.timeline_path, channel, build, parent)


def _release(suite: Suite, pythons: tuple[str, ...] | None, args: Namespace) -> mf.Build:
    return filled(resolve.release, args, pythons=pythons or defaults.pin_pythons(suite.manifest))


def _existing(env: Sequence[tuple[str, str]], args: Namespace) -> mf.Build:
    return filled(resolve.existing, args, env=dict(env))


PYTHONS = opt("--python", "python tags to pin", nargs="+", dest="pythons", metavar="PYTHON")
command(
    "build add-release",
    "a release from PyPI, e.g. 2.14.1",
    *appending("release"),
    opt("version"),
    opt("--index", "PEP 503 index (default PyPI)", default=resolve.PYPI),
    opt("--torchvision", "torchvision version (default: torch's match)"),
    changed(PYTHONS, "python tags to pin (default: the manifest's defaults', else cp310-cp313)"),
    opt("--date", "the build date (YYYY-MM-DDTHH:MM:SSZ)", type=DATE),
    resolver=_release,
)(cmd_add)


@command(
    "build add-nightly",
    "a nightly by date (YYYY-MM-DD) or 'latest'",
    *appending("nightly"),
    TRANSFORMERS_INDEX,
    opt("date"),
    INDEX,
    changed(PYTHONS, default=list(resolve.PYTHONS)),
)
def cmd_add_nightly(manifest: Path, timeline: Path, args: Namespace) -> None:
    filled(history.add_nightly, args, manifest_path=manifest, timeline_repo=timeline)


command(
    "build add-wheel",
    "a torch wheel file (e.g. built from source)",
    *LOCAL,
    OTHERS,
    path("path"),
    path("--torchvision", "a torchvision wheel to pin beside it"),
    opt("--sha256", "the file's expected sha256"),
    resolver=resolve.wheel_file,
)(cmd_add)
command(
    "build add-url",
    "a torch wheel at a URL (fetched once, checksum checked)",
    *LOCAL,
    OTHERS,
    opt("url"),
    opt("--sha256", "the wheel's sha256 (or end the URL with #sha256=...)"),
    resolver=resolve.wheel_url,
)(cmd_add)
command(
    "build add-existing",
    "a torch already installed here, used in place",
    *LOCAL,
    path("site_packages", "the site-packages holding torch"),
    opt("--date", "build date (default: torch/version.py's mtime)", type=DATE),
    many(
        "--env", "set in every process of this build (repeatable)", metavar="NAME=VALUE", type=_env
    ),
    resolver=_existing,
)(cmd_add)


@command("build list", "the builds and their timeline commits", *FILES)
def cmd_list(suite: Suite) -> None:
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


group("timeline", "the timeline repository asv walks")


@command(
    "timeline generate",
    "(re)generate the timeline from the manifest",
    *FILES,
    flag("--force", "accept a rewritten channel history"),
)
def cmd_generate(suite: Suite, force: bool) -> None:
    print(timeline.summary(suite.manifest, suite.generate(force=force), suite.timeline_path))


@command(
    "timeline range",
    "the PyTorch commit range between two builds",
    *FILES,
    opt("old", BUILD_NAMES),
    opt("new", BUILD_NAMES),
)
def cmd_range(suite: Suite, old: str, new: str) -> None:
    print(suite.upstream_range(old, new))


@command(
    "timeline default",
    "this platform's default builds and Pythons (the manifest's 'defaults')",
    *FILES,
    opt("--platform", "a manifest platform (default: this machine's)", choices=wheels.PLATFORMS),
    flag("--pythons", "only the Pythons to run, one a line"),
    flag("--hashes", "only the timeline commits --python runs"),
    opt("--python", "with --hashes: the Python, e.g. 3.10"),
)
def cmd_default(
    suite: Suite, platform: str | None, pythons: bool, hashes: bool, python: str | None
) -> None:
    here = not platform
    if platform:
        platform = defaults.rule_for(suite.manifest, [platform])[0]
        planned, skipped = defaults.schedule(suite.manifest, platform), list[str]()
    else:
        platform, planned, skipped = defaults.this_machine(suite.manifest)
    runs = defaults.pythons(planned)
    if pythons:
        print("\n".join(runs))
    elif hashes:
        if python is None:
            raise UserError("--hashes needs --python VERSION: each Python runs its builds")
        if python not in runs:
            raise UserError(
                f"--python {python} runs no build of {platform}'s default; its Pythons:"
                f" {', '.join(runs) or 'none'}"
            )
        print("\n".join(suite.timeline.commits[p.ref] for p in planned if python in p.pythons))
    else:
        print(defaults.listing(platform, planned, suite.timeline, here=here))
        for line in skipped:
            print(f"mpsbench: {line}", file=sys.stderr)


@command(
    "timeline check-range",
    "refuse an asv run range naming no timeline commit",
    TIMELINE,
    changed(ASV_ARGS, "the arguments given to asv run"),
)
def cmd_check_range(suite: Suite, asv_args: Sequence[str]) -> None:
    if refused := timeline.bad_range(suite.timeline_path, list(asv_args)):
        raise UserError(refused)


@command(
    "machine",
    "write this machine's asv machine entry",
    opt("--name", "machine name (default: by chip and cores)", type=MACHINE_NAME),
    flag("--quiet", "print only the machine's name"),
)
def cmd_machine(name: str | None, quiet: bool) -> None:
    name, fields = machine.write(name)
    if quiet:
        print(name)
        return
    print(f"machine {name} written to {machine.machine_file()}:")
    for key, value in sorted(fields.items()):
        print(f"  {key}: {value}")


command(
    "bench",
    "check the set-up, record what is missing, publish the site (scripts/bench)",
    REMEASURE,
    parser={**_doc(bench), "allow_abbrev": False},
    passes_through=True,
)(bench.bench)


group("results", "merge or record asv results")


@command(
    "results merge",
    "merge results directories value by value, never replacing one",
    path("dest", "the results directory to merge into (created if absent)"),
    SOURCES,
    MACHINES,
    UPDATE_BENCHMARKS,
    changed(TIMELINE, "refuse files of builds not in this timeline", default=None),
    flag("--replace", "incoming values replace recorded ones (kept in DEST-replaced.jsonl)"),
    parser=merge,
)
def cmd_merge(dest: Path, machines: Sequence[str], timeline: Path | None, args: Namespace) -> int:
    merge.check_machines(args.sources, machines)
    builds = merge.timeline_builds(timeline) if timeline else None
    return filled(merge.merge, args, machines=machines or None, builds=builds).show(dest)


@command(
    "results record",
    "asv run what is missing, then merge it in, never replacing a value",
    CONFIG,
    changed(MACHINE, "asv's machine name (mpsbench machine --quiet)", required=True),
    REMEASURE,
    changed(ASV_ARGS, "asv run options and range, after --"),
    parser=record,
)
def cmd_record(suite: Suite, args: Namespace) -> int:
    machine.require(args.machine)
    run = asv.run_args(args.asv_args)
    record.check_meaning(run)
    steps = record.record(suite.conf, args.machine, run, suite.disk(run), args.remeasure)
    return record.status(steps)


@command(
    "preselect",
    "print the asv -b pattern of the combinations this run times",
    path("--benchmark-dir", default=Path("benchmarks")),
    flag("--list", "each combination, a tab, and why it is skipped, or 'runs'", dest="every"),
    parser=preselect,
)
def cmd_preselect(benchmark_dir: Path, every: bool) -> None:
    found = preselect.combinations(preselect.discover(benchmark_dir))
    if every:
        for combination in found:
            print(f"{combination.name}\t{combination.reason or 'runs'}")
        return
    chosen = preselect.selected(found)
    print(asv.pattern(chosen))
    log.info(f"asv will run {len(chosen)} of the suite's {len(found)} combinations")


@command(
    "alert",
    "exit 1 if a machine's newest build is slower (docs/explanation/site.md)",
    CONFIG,
    *FILES,
    path("--results", "default: results_dir of --config"),
    MACHINES,
    opt("--build", "only machines whose newest build is this"),
    SUMMARY,
    CONFIRM,
)
def cmd_alert(suite: Suite, options: alerts.Options) -> int:
    return alerts.check(suite, options)[0]


command(
    "ops-rank",
    "rank op benchmarks by slowdown between two builds",
    CONFIG,
    opt("before", "the older build: asv results .json or commit hash (prefix)"),
    opt("after", "the newer build: as BEFORE"),
    path("--results-dir", "for commits (default: results_dir of --config)"),
    changed(MACHINE, "for commits (default: the only one)"),
    opt(
        "--top",
        "the N largest ratios only (0: all)",
        type=lambda value: text.number(int, 0, "--top")(value) or None,
    ),
    parser=rank_ops,
)(rank_ops.run)


@command(
    "factor",
    "print a row's regression factor (for asv continuous --factor)",
    CONFIG,
    changed(
        BENCH,
        "the row's name, not a regex (default: any row), as asv continuous looks it up",
        required=False,
        default="",
    ),
)
def cmd_factor(suite: Suite, bench: str) -> None:
    print(f"{rule.factor(suite.conf.thresholds, bench):g}")


ROUNDS = text.number(int, verdict.FEWEST, "rounds", compare.MOST_ROUNDS)
MEASURED = (
    path("--log", "append asv's and the processes' output here"),
    count(
        "--threads",
        "torch's cpu threads per process (OMP_NUM_THREADS; default: torch's); a busy machine's cpu"
        " row needs 1 (docs/explanation/the-rule.md)",
        int,
        1,
        metavar="N",
    ),
)
FRESH: tuple[Option, ...] = (
    BENCH,
    opt(
        "--min-rounds",
        "processes per build before the first planned look (N <= 5: early looks from 2)",
        type=ROUNDS,
        default=verdict.MIN_ROUNDS,
    ),
    opt(
        "--max-rounds",
        "rounds planned; with time left, an undecided pair goes on up to 3x",
        type=ROUNDS,
        default=verdict.MAX_ROUNDS,
    ),
    count(
        "--time-budget",
        "wall-clock budget; undecided at its end: exit 3",
        float,
        1,
        24 * 60,
        dest="minutes",
        metavar="MINUTES",
        default=fresh.TIME_BUDGET_MINUTES,
    ),
    MACHINE,
)
# the suite whose src/ the fresh processes import: its asv.conf.json is the command's config
SUITE_ROOT: Option = (
    ("--suite-root",),
    {
        "help": argparse.SUPPRESS,  # by hand: opt() would add a default to the hidden help
        "dest": "config",
        "type": lambda root: Path(root) / asvconf.CONFIG,
        "default": asvconf.ROOT / asvconf.CONFIG,
    },
)
SUITE_FILES = (*FILES, SUITE_ROOT)
NIGHTLIES = (
    count(
        "--nightlies",
        f"add up to N (default {nightlies.DEFAULT}) nightlies between the adjacent builds found,"
        " and search on",
        int,
        1,
        nargs="?",
        const=nightlies.DEFAULT,
        metavar="N",
    ),
    INDEX,
    TRANSFORMERS_INDEX,
    TRANSFORMERS,
)
COMPARING = (*FRESH, *SUITE_FILES, *MEASURED)


command(
    "compare",
    "is build B slower than A? measured afresh in interleaved processes",
    REFERENCE,
    opt("b_ref", "the suspect build, named alike", metavar="b"),
    *COMPARING,
    parser=compare,
)(compare.compare)


@command(
    "bisect",
    "the first build between GOOD and BAD that made a combination slower, measured afresh",
    opt("good_ref", f"the last known good build: {BUILD_NAMES}", metavar="good"),
    opt("bad_ref", "a later, slower build on the same line", metavar="bad"),
    *COMPARING,
    *NIGHTLIES,
    flag("--no-explain", "skip the table of ops that changed (mpsbench explain)"),
    parser=bisection,
)
def cmd_bisect(no_explain: bool, args: Namespace) -> int:
    started = time.monotonic()
    found = filled(bisection.bisect, args)
    status = bisection.outcome(found)  # printed before explain's table
    if isinstance(found, bisection.Found) and not no_explain:
        took = time.monotonic() - started
        explain.after_bisect(found.before, found.first, filled(explain.Options, args), took)
    return status


command(
    "explain",
    "which ops of a combination's step changed from build A to B (torch.profiler, fresh processes)",
    REFERENCE,
    opt("b_ref", "the build to explain, named alike", metavar="b"),
    BENCH,
    count(
        "--rounds",
        "fresh processes per build",
        int,
        1,
        50,
        default=explain.ROUNDS,
    ),
    count(
        "--calls",
        "profiled calls per process",
        int,
        1,
        1000,
        default=explain.CALLS,
    ),
    count(
        "--top",
        "rows shown; all count in the sums",
        int,
        1,
        default=explain.TOP,
    ),
    opt(
        "--save",
        "also write the table to FILE, numbers to FILE.json",
        type=_new_file,
        metavar="FILE",
    ),
    flag("--keep", "also keep the table in the results' explain/ for the site"),
    MACHINE,
    *SUITE_FILES,
    *MEASURED,
    parser=explain,
)(explain.run)


@command(
    "report",
    "figures and a summary of asv results",
    path("results_dir", "asv's results_dir"),
    path("out_dir", "for the PNGs, summary.md and summary.html"),
    changed(CONFIG, "for thresholds and timeline (default: ./asv.conf.json if present)"),
    path("--site", "the published html_dir, for asv's detected regressions"),
)
def cmd_report(results_dir: Path, out_dir: Path, config: Path | None, site: Path | None) -> None:
    config = config or (asvconf.CONFIG if asvconf.CONFIG.is_file() else None)
    report.build(results_dir, out_dir, asvconf.load(config) if config else None, site)


PUBLISHED = f"${settings.CONFIG}, else {asvconf.CONFIG}"


@command(
    "publish",
    "asv publish, regressions re-judged, figures"
    f" (scripts/publish; --config defaults to {PUBLISHED})",
    changed(CONFIG, f"the asv configuration (default {PUBLISHED})"),
    changed(ASV_ARGS, "options for asv publish"),
)
def cmd_publish(config: Path | None, asv_args: Sequence[str]) -> None:
    configured = settings.text(settings.CONFIG)
    suite = Suite(config or Path(configured or asvconf.CONFIG))
    if configured and not config:
        try:
            _ = suite.conf  # checked here, to name the setting
        except UserError as exc:
            raise UserError(f"{settings.CONFIG}={configured!r}: {exc}") from None
    publish.publish(suite, asv_args)


group(
    "nightly",
    "a step of the fleet's nightly job (docs/how-to/fleet.md)",
    "STEP",
    **_doc(nightly),
)
FLEET = (
    path("--suite", "the suite's folder (default: this checkout)", default=asvconf.ROOT),
    path("--workdir", "work folder in the suite", default=nightly.WORKDIR),
    path(
        "--fleet",
        "the fleet's files (default: WORKDIR/fleet)",
        dest="folder",
        metavar="FLEET",
    ),
    opt("--channel", "the nightly channel", default=nightly.CHANNEL),
)


def step(name: str, help_text: str, *options: Option) -> Callable[[F], F]:
    return command(f"nightly {name}", help_text, *FLEET, *options)


REMOTE = (
    opt("--remote", "git remote", default="origin"),
    opt("--branch", "the results branch", default="results"),
)
step("fetch", "copy the results branch into the fleet folder", *REMOTE)(nightly.fetch)
step(
    "push",
    "commit the fleet folder to the results branch and push it (fast-forward)",
    *REMOTE,
    opt("--message", "the commit message", default="mpsbench nightly"),
)(nightly.push)
step(
    "resolve",
    "add the newest nightly to the fleet's manifest",
    INDEX,
    TRANSFORMERS_INDEX,
    TRANSFORMERS,
    flag("--dry-run", "say what would be added, change nothing"),
)(nightly.resolve_nightly)
step(
    "bench",
    "benchmark the builds this machine lacks, then alert",
    changed(MACHINE, f"machine name (default: ${settings.MACHINE}, else by chip and cores)"),
    many(
        "--device",
        "only these devices (repeatable or comma-separated)",
        dest="devices",
        metavar="DEVICE",
    ),
    many("--bench", "only benchmarks matching this regex (asv -b)"),
    count("--limit", "only the newest N missing builds (default: all)", int, 0, default=0),
    flag("--dry-run", "run each benchmark once, record nothing (asv --quick --dry-run)"),
    CONFIRM,
)(nightly.bench)
step(
    "collect",
    "merge the machines' results directories into the fleet's",
    SOURCES,
    UPDATE_BENCHMARKS,
)(nightly.collect)
step("publish", "publish the fleet's results into WORKDIR/html")(nightly.publish)
step("alert", "exit 1 if a machine's newest build is slower", MACHINES, SUMMARY)(nightly.alert)


@step(
    "bisect",
    "mpsbench bisect over the fleet's builds (nothing recorded)",
    opt("--good", "the last fast build (CHANNEL@ID or hash)", required=True),
    opt("--bad", "a slow build (CHANNEL@ID or hash)", required=True),
    *FRESH,
    *MEASURED,
    *NIGHTLIES,
)
def cmd_nightly_bisect(fleet: nightly.Fleet, args: Namespace) -> None:
    # the checkout's conf (its root's src/, benchmarks and thresholds) over the fleet's timeline
    suite = dataclasses.replace(nightly.prepare(fleet), config_path=fleet.suite / asvconf.CONFIG)
    measuring = filled(fresh.Options, args, suite=suite, machine=nightly.machine_name(args.machine))
    filled(nightly.bisect, args, measuring=measuring)


def main(argv: Sequence[str] | None = None) -> int:
    try:  # argparse's refusal and --help exit
        args, extras = PARSER.parse_known_args(argv)
        if getattr(args, "passes_through", False):
            args.asv_args = extras
        elif extras:
            PARSER.error(f"unrecognized arguments: {' '.join(extras)}")
        elif getattr(args, "asv_args", [])[:1] == ["--"]:  # REMAINDER keeps it
            del args.asv_args[0]
    except SystemExit as exc:
        return int(exc.code or 0)
    try:
        return int(filled(args.func, args) or 0)
    except asv.Stopped as exc:
        print(
            f"mpsbench: {exc}: every process ended; what was measured is kept for the next run",
            file=sys.stderr,
        )
        return exc.status
    except BrokenPipeError:  # stdout piped into `head`
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except (UserError, install_build.InstallError, OSError) as exc:
        shown = errors.os_error(exc) if isinstance(exc, OSError) else str(exc)
        shown = shown.replace("\r", "\\r").replace("\n", "\\n")
        prog = "mpsbench nightly" if args.command == "nightly" else "mpsbench"
        print(f"{prog}: error: {shown}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
