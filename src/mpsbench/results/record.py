"""Run asv so that recorded results only grow: measure what is missing into scratch, then merge it in.

asv replaces what it re-runs, and its ``--skip-existing-successful`` re-runs a whole benchmark when one
combination failed and skips a combination new to it. So ``mpsbench results record``, holding the results
folder's lock (the one every writer of it takes), first merges what an interrupted run left in scratch; then,
for every build of the range, it runs asv for exactly the selected combinations (``-b``, or this machine's preselection) that
have no value (a failure counts as missing, n/a as recorded), builds with the same missing set together,
into ``<results>.scratch``, and merges each run in value by value as it ends (:mod:`mpsbench.results.merge`).
``--remeasure`` runs them all again; each value it replaces is kept in ``<results>-replaced.jsonl``.

RANGE is ``ALL`` (every build of the config's branches), ``HASHFILE:path``, a git range of the
timeline, or absent (each branch's newest build).
"""

from __future__ import annotations

import shlex
import shutil
from collections.abc import Sequence
from pathlib import Path

from mpsbench.core import asv, files, git, progress
from mpsbench.core.asvconf import AsvConf
from mpsbench.core.errors import UserError
from mpsbench.measure import preselect
from mpsbench.results import merge, recorded

BENCHMARKS_FAILED = 3  # asv ran, and some benchmark failed (its results say which); 2 stays a usage mistake


class RecordError(UserError):
    """The run cannot start as asked (nothing selected, an empty range)."""


log = progress.logger(__name__)


def _commits(timeline: Path, *args: str) -> list[str]:
    done = git.run(timeline, *args, check=False)
    if done.returncode != 0:
        raise RecordError(f"the timeline {timeline} has no {' '.join(args[2:] or args)}: {git.said(done)}")
    return done.stdout.decode().split()


def builds(timeline: Path, branches: Sequence[str], spec: str | None) -> list[str]:
    """The timeline commits a range names, in asv's order, each once."""
    if spec is None or spec.startswith("HASHFILE:"):  # each branch's newest build, or the file's builds
        names = branches if spec is None else Path(spec[len("HASHFILE:"):]).read_text().split()
        found = [_commits(timeline, "rev-parse", "--verify", f"{name}^{{commit}}")[0] for name in names]
    elif spec == "ALL":
        found = [commit for branch in branches for commit in _commits(timeline, "rev-list", "--first-parent", branch)]
    elif spec in ("NEW", "EXISTING", "TAGS", "HEAD"):
        raise RecordError(f"range {spec} is not supported here; use ALL, HASHFILE:path or a range of the timeline")
    else:
        found = _commits(timeline, "rev-list", "--first-parent", *shlex.split(spec), "--")
    if not found:
        raise RecordError(f"range {spec} names no build of the timeline (is it reversed? asv ranges are OLD..NEW)")
    return list(dict.fromkeys(found))


def selection(benchmark_dir: Path, patterns: list[str]) -> list[str]:
    """The combinations the -b patterns select (asv's re.search), or this machine's preselection."""
    found = preselect.combinations(preselect.discover(benchmark_dir))
    if not patterns:
        return preselect.selected(found)
    chosen = asv.matching([combination.name for combination in found], patterns)
    if not chosen:
        raise RecordError(f"no benchmark matches -b {' -b '.join(map(shlex.quote, patterns))};"
                          " `mpsbench preselect --list` lists every combination")
    return chosen


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
    for folder in sorted(path for path in root.iterdir() if path.is_dir()) if root.is_dir() else []:
        report = _merge_scratch(results, folder, replace=False)
        if report is not None and (report.copied or report.merged):
            log.info(f"recovered an interrupted run's results from {folder}: {report.summary(results)}")
        shutil.rmtree(folder)


def record(conf: AsvConf, machine: str, asv_args: Sequence[str], remeasure: bool = False) -> int:
    """Run what is missing (everything selected, with ``remeasure``) and merge it in: 0, or BENCHMARKS_FAILED."""
    run = asv.run_args(asv_args)
    if run.quick and not run.dry_run:
        raise RecordError("--quick would record single-sample values as results; add --dry-run, or leave --quick out")
    results = conf.results
    if conf.repo is None:
        raise RecordError(f"{conf.path}: repo must be the timeline's folder, not a URL")
    commits = builds(conf.repo, conf.branches, run.range)
    wanted = selection(conf.benchmarks, run.bench)
    with files.lock(results, wait=False):
        root = scratch_root(results)
        recover(results, root)
        groups: dict[tuple[str, ...], list[str]] = {}
        for commit in commits:
            have = set() if remeasure else recorded_names(results, machine, commit, run.environment)
            missing = tuple(name for name in wanted if name not in have)
            if missing:
                groups.setdefault(missing, []).append(commit)
        if not groups:
            log.info(f"every selected combination ({len(wanted)}) is recorded for the {len(commits)} builds: nothing to run")
            return 0
        status = 0
        for missing, todo in groups.items():
            scratch = asv.scratch(root)
            log.info(f"{len(todo)} builds, {len(missing)} combinations each to measure"
                     f" ({'re-measuring' if remeasure else 'none of them recorded yet'})")
            hashfile = scratch / "builds.txt"
            command = asv.run_command(conf.scratch(scratch), machine, [*run.rest, "-b", asv.pattern(missing)], todo, hashfile)
            status = BENCHMARKS_FAILED if asv.run(command, conf.root, asv.only(hashfile)) else status
            report = _merge_scratch(results, scratch, replace=remeasure)
            if report is not None:
                log.info(report.summary(results))
            shutil.rmtree(scratch)
        return status
