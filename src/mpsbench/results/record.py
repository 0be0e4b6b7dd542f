"""Run asv so that recorded results only grow: measure what is missing into scratch, then merge it in.

asv replaces what it re-runs, and its ``--skip-existing-successful`` re-runs a whole benchmark when one
combination failed and skips a combination new to it. So ``mpsbench results record``, holding a lock on
the results folder, first merges what an interrupted run left in scratch; then, for every build of the
range, it runs asv for exactly the selected combinations (``-b``, or this machine's preselection) that
have no value (a failure counts as missing, n/a as recorded), builds with the same missing set together,
into ``<results>.scratch``, and merges each run in value by value as it ends (:mod:`mpsbench.results.merge`).
``--remeasure`` runs them all again; each value it replaces is kept in ``<results>-replaced.jsonl``.

RANGE is ``ALL`` (every build of the config's branches), ``HASHFILE:path``, a git range of the
timeline, or absent (each branch's newest build).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import io
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from mpsbench import command, progress
from mpsbench.builds import install_build
from mpsbench.measure import preselect
from mpsbench.regressions import factor
from mpsbench.results import asvconf, merge, recorded

# asv run options this command decides itself (what to run, where results go)
OWN_OPTIONS = ("--config", "--machine", "--skip-existing-successful", "--skip-existing-failed",
               "--skip-existing-commits", "--skip-existing", "-k")


BENCHMARKS_FAILED = 3  # asv ran, and some benchmark failed (its results say which); 2 stays a usage mistake


class RecordError(command.UserError):
    """The run cannot start as asked (nothing selected, an empty range, a run already in progress)."""


log = progress.logger(__name__)


def _asv_run(args: Sequence[str]) -> argparse.Namespace:
    """An ``asv run`` command line parsed by asv's own parser; its mistake in one line."""
    from asv.commands import make_argparser

    parser: argparse.ArgumentParser = make_argparser()[0]
    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said):
            return parser.parse_args(["run", *args])
    except SystemExit:
        reason = (said.getvalue().strip().splitlines() or ["?"])[-1]
        raise RecordError(f"asv run options {' '.join(map(shlex.quote, args))}: {reason}") from None


def parse_asv_run(args: Sequence[str]) -> tuple[list[str], str | None, list[str]]:
    """(the -b patterns, the range, the other options) of an ``asv run`` command line."""
    parsed = _asv_run(args)
    if parsed.quick and not parsed.dry_run:
        raise RecordError("--quick would record single-sample values as results; add --dry-run, or leave --quick out")
    rest: list[str] = []
    position = max((i for i, arg in enumerate(args) if arg == parsed.range), default=None)
    words = iter(enumerate(args))
    for i, arg in words:
        name = arg.split("=", 1)[0]
        if arg in ("-b", "--bench", "--config", "--machine"):
            next(words, None)  # its value
        elif i != position and not arg.startswith("-b") and name != "--bench" and name not in OWN_OPTIONS:
            rest.append(arg)
    return list(parsed.bench or []), parsed.range, rest


def _git(timeline: Path, *args: str) -> list[str]:
    done = subprocess.run(["git", *args], cwd=timeline, capture_output=True, text=True)
    if done.returncode != 0:
        raise RecordError(f"the timeline {timeline} has no {' '.join(args[2:] or args)}: {done.stderr.strip()}")
    return done.stdout.split()


def builds(config: dict[str, Any], timeline: Path, spec: str | None) -> list[str]:
    """The timeline commits a range names, in asv's order, each once."""
    listed = config.get("branches")
    branches = [str(branch) for branch in listed] if isinstance(listed, list) else ["main"]
    if spec is None or spec.startswith("HASHFILE:"):  # each branch's newest build, or the file's builds
        names = branches if spec is None else Path(spec[len("HASHFILE:"):]).read_text().split()
        found = [_git(timeline, "rev-parse", "--verify", f"{name}^{{commit}}")[0] for name in names]
    elif spec == "ALL":
        found = [commit for branch in branches for commit in _git(timeline, "rev-list", "--first-parent", branch)]
    elif spec in ("NEW", "EXISTING", "TAGS", "HEAD"):
        raise RecordError(f"range {spec} is not supported here; use ALL, HASHFILE:path or a range of the timeline")
    else:
        found = _git(timeline, "rev-list", "--first-parent", *shlex.split(spec), "--")
    if not found:
        raise RecordError(f"range {spec} names no build of the timeline (is it reversed? asv ranges are OLD..NEW)")
    return list(dict.fromkeys(found))


def selection(benchmark_dir: Path, patterns: list[str]) -> list[str]:
    """The combinations the -b patterns select (asv's re.search), or this machine's preselection."""
    found = list(preselect.combinations(preselect.discover(benchmark_dir)))
    if not patterns:
        chosen = [combination.name for combination in found if combination.reason is None]
        preselect.regex(chosen)  # raises with its one-line reason when nothing runs on this machine
        return chosen
    compiled = [re.compile(pattern) for pattern in patterns]
    chosen = [c.name for c in found if any(pattern.search(c.name) for pattern in compiled)]
    if not chosen:
        raise RecordError(f"no benchmark matches -b {' -b '.join(map(shlex.quote, patterns))};"
                          " `mpsbench preselect --list` lists every combination")
    return chosen


def environment_name(asv_options: Sequence[str]) -> str:
    """The results files' environment part that ``-E TYPE:PYTHON`` makes asv write (``virtualenv-py3.10``), or ``*``.

    A build measured under two Pythons has a results file per Python: values recorded under one do not count for the other.
    """
    for spec in _asv_run(asv_options).env_spec or []:
        if ":" in spec:
            kind, python = spec.split(":", 1)
            return f"{kind}-py{python}"
    return "*"


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


@contextlib.contextmanager
def locked(results: Path) -> Iterator[Path]:
    """Hold the results folder's lock for the whole run: two runs would merge each other's scratch."""
    import fcntl

    root = scratch_root(results)
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RecordError(f"another run is recording into {results} (it holds {root / '.lock'})") from None
        yield root


def _merge_scratch(results: Path, scratch: Path, replace: bool) -> merge.Report | None:
    found = scratch / "results"
    if not found.is_dir():
        return None
    report = merge.merge(results, [found], update_benchmarks=True, replace=replace)
    for line in report.conflicts + report.corrupt:
        log.warning(line)
    return report


def recover(results: Path, root: Path) -> None:
    """Merge what interrupted runs left in scratch (never replacing), then remove it, and the temporary files
    that a merge killed before its rename left beside the recorded files (each recorded file is intact)."""
    for leftover in [*results.glob(".*.tmp"), *results.glob("*/.*.tmp")]:
        leftover.unlink()
    for folder in sorted(path for path in root.iterdir() if path.is_dir()):
        report = _merge_scratch(results, folder, replace=False)
        if report is not None and (report.copied or report.merged):
            log.info(f"recovered an interrupted run's results from {folder}: {report.summary(results)}")
        shutil.rmtree(folder)


def record(config: Path, machine: str, asv_args: Sequence[str], remeasure: bool = False) -> int:
    """Run what is missing (everything selected, with ``remeasure``) and merge it in: 0, or BENCHMARKS_FAILED."""
    patterns, spec, rest = parse_asv_run(asv_args)
    conf = factor.read_config(config)
    base = config.resolve().parent  # asv resolves the config's folders from there, as scripts run it
    results = base / str(conf.get("results_dir", "results"))
    timeline = base / str(conf.get("repo"))
    benchmark_dir = base / str(conf.get("benchmark_dir", "benchmarks"))
    commits = builds(conf, timeline, spec)
    wanted = selection(benchmark_dir, patterns)
    with locked(results) as root:
        recover(results, root)
        groups: dict[tuple[str, ...], list[str]] = {}
        environment = environment_name(rest)
        for commit in commits:
            have = set() if remeasure else recorded_names(results, machine, commit, environment)
            missing = tuple(name for name in wanted if name not in have)
            if missing:
                groups.setdefault(missing, []).append(commit)
        if not groups:
            log.info(f"every selected combination ({len(wanted)}) is recorded for the {len(commits)} builds: nothing to run")
            return 0
        status = 0
        for missing, todo in groups.items():
            stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%S")
            scratch = root / f"{stamp}-{os.getpid()}"
            scratch_config = asvconf.scratch(config, scratch)
            hashfile = scratch / "builds.txt"
            hashfile.write_text("".join(f"{commit}\n" for commit in todo))
            log.info(f"{len(todo)} builds, {len(missing)} combinations each to measure"
                f" ({'re-measuring' if remeasure else 'none of them recorded yet'})")
            done = subprocess.run([sys.executable, "-m", "asv", "run", "--config", str(scratch_config),
                                   "--machine", machine, *rest, "-b", preselect.regex(list(missing)),
                                   f"HASHFILE:{hashfile}"], cwd=base,
                                  env={**os.environ, install_build.RUN_BUILDS_ENV: str(hashfile)})  # only these builds
            status = BENCHMARKS_FAILED if done.returncode else status
            report = _merge_scratch(results, scratch, replace=remeasure)
            if report is not None:
                log.info(report.summary(results))
            shutil.rmtree(scratch)
        return status


def cmd_record(args: argparse.Namespace) -> int:
    asv_args = args.asv_args[1:] if args.asv_args[:1] == ["--"] else args.asv_args
    return record(args.config, args.machine, asv_args, args.remeasure)


def add_subcommand(actions: Any) -> None:
    """Register ``mpsbench results record`` on ``mpsbench results``'s subparsers."""
    parser = actions.add_parser(
        "record", help="run asv for what is missing into scratch and merge it in, never replacing a value",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--config", type=Path, default=factor.CONFIG, help="asv.conf.json (default: ./asv.conf.json)")
    parser.add_argument("--machine", required=True, help="asv's machine name (mpsbench machine --quiet)")
    parser.add_argument("--remeasure", action="store_true",
                        help="run every selected combination again; replaced values go to the audit trail")
    parser.add_argument("asv_args", nargs=argparse.REMAINDER, help="asv run options and range, after --")
    parser.set_defaults(func=cmd_record)
