"""Merge asv results directories into one, value by value, never replacing a recorded value.

A file DEST lacks is copied; one it holds is merged value by value: a recorded value stays, a
differing incoming one is a conflict (or, with --replace, replaces it, kept first in
DEST-replaced.jsonl). An incoming value that is no number of its unit is refused; a file filed
under another build or machine, a link, or a malformed one is refused whole; a file asv cannot
read is skipped. docs/explanation/integrity.md says why each. Every merge holds the results
folder's lock. Exit status: 0 clean, 1 a conflict, refusal or corrupt file, 2 a bad command.
"""

from __future__ import annotations

import contextlib
import datetime
import errno
import itertools
import json
import math
import os
import re
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mpsbench.core import asv, files, git, progress
from mpsbench.core.errors import UserError
from mpsbench.results import recorded

BENCHMARKS = asv.BENCHMARKS
MACHINE = "machine.json"
# asv's result_columns with one entry per parameter combination
PER_COMBINATION = (
    "result",
    "stats_ci_99_a",
    "stats_ci_99_b",
    "stats_q_25",
    "stats_q_75",
    "stats_number",
    "stats_repeat",
    "samples",
)
Row = dict[str, Any]  # one benchmark's row of a results file, by column name
Combination = tuple[str, ...]

log = progress.logger(__name__)


class MergeError(UserError):
    """A file or folder the merge refuses."""


@dataclass
class Report:
    copied: list[str] = field(default_factory=list)
    merged: list[str] = field(default_factory=list)  # files DEST had, to which values were added
    identical: list[str] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)  # --replace, audited
    conflicts: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)  # values, not merged
    refused_files: list[str] = field(default_factory=list)  # nothing merged from them
    corrupt: list[str] = field(default_factory=list)
    benchmarks: list[str] = field(default_factory=list)  # changes to DEST's benchmarks.json

    @property
    def clean(self) -> bool:
        return not (self.conflicts or self.refused or self.refused_files or self.corrupt)

    def summary(self, dest: Path) -> str:
        return (
            f"merged into {dest}: {len(self.copied)} copied, {len(self.identical)} already there,"
            f" {len(self.merged)} with values added, {len(self.replaced)} values replaced on purpose,"
            f" {len(self.conflicts)} in conflict (recorded kept), {len(self.refused)} values refused (not merged),"
            f" {len(self.refused_files)} files refused (nothing merged from them), {len(self.corrupt)} corrupt"
            " (skipped)"
        )

    def show(self, dest: Path) -> int:
        """Print what was done and the summary; the exit status."""
        for label, texts in (
            ("copied    ", self.copied),
            ("merged    ", self.merged),
            ("replaced  ", self.replaced),
            ("conflict  ", self.conflicts),
            ("refused   ", self.refused),
            ("refused   ", self.refused_files),
            ("corrupt   ", self.corrupt),
            ("benchmarks.json: ", self.benchmarks),
        ):
            for text in texts:
                print(label + text)
        print(self.summary(dest))
        return 0 if self.clean else 1


def problem(value: Any, unit: str) -> str | None:
    """Why ``value`` cannot be recorded in ``unit`` (asv's loader takes any JSON): no finite
    number, or outside recorded.UNITS' bounds; None when it can (null and NaN can)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"{value!r} is not a number"
    if not math.isfinite(value):
        return f"{value!r} is not a finite number"
    found = recorded.unit(unit)
    if (
        value > found.most
        or value < found.least
        or (value == found.least and not found.least_allowed)
    ):
        shown = f"{'at least' if found.least_allowed else 'above'} {found.least:g}" + (
            f" and at most {found.most:g}" if found.most < math.inf else ""
        )
        return f"{value!r} is no value of {unit!r} (valid: a number {shown})"
    return None


def _load_object(path: Path) -> dict[str, Any]:
    try:
        return recorded.raw(path)
    except recorded.RecordedError as exc:
        raise MergeError(str(exc)) from None


def check_file(path: Path, machine: str) -> None:
    """MergeError unless asv can read ``path`` as a machine.json or results file."""
    try:
        if path.name != MACHINE:
            recorded.read(path, machine)
        else:
            recorded.machine_named(path)
    except recorded.RecordedError as exc:
        raise MergeError(f"{path}: {exc}") from None


def _text(value: Any) -> str:
    return json.dumps(value, sort_keys=True)  # NaN (n/a) equals NaN here, unlike with ==


def _row(data: dict[str, Any], name: str) -> Row:
    return dict(zip(data["result_columns"], data["results"][name], strict=False))


def _by_combination(row: Row) -> dict[Combination, dict[str, Any]]:
    """Each combination's own columns."""
    combos = list(itertools.product(*(row.get("params") or [])))
    columns = {key: row.get(key) or [None] * len(combos) for key in PER_COMBINATION}
    return {
        combo: {key: columns[key][j] for key in PER_COMBINATION} for j, combo in enumerate(combos)
    }


def measured(value: Any) -> bool:
    """A number: asv writes null for a failure and NaN for a skip."""
    return value is not None and value == value


HASH = re.compile(r"[0-9a-f]{40}")  # a timeline commit, as asv records it
STATISTICS = ("stats_ci_99_a", "stats_ci_99_b", "stats_q_25", "stats_q_75")
COUNTS = ("stats_number", "stats_repeat")


def _number(cell: Any) -> bool:
    """A statistic's cell: a finite number, NaN or null."""
    return cell is None or (
        not isinstance(cell, bool)
        and isinstance(cell, (int, float))
        and (math.isfinite(cell) or math.isnan(cell))
    )


def _cell_problem(key: str, cell: Any) -> str | None:
    if key in STATISTICS and not _number(cell):
        return "is not a number"
    if key in COUNTS and not (_number(cell) and (cell is None or cell != cell or cell >= 0)):
        return "is not a count"
    if key == "samples" and not (
        cell is None or (isinstance(cell, list) and all(_number(x) for x in cell))
    ):
        return "is not a list of numbers"
    return None


def malformed(data: dict[str, Any]) -> str | None:
    """The first cell of a results file that is not in asv's form (asv's loader lets them
    through), named; None where every row is."""
    columns, results = data.get("result_columns"), data.get("results")
    if not isinstance(columns, list) or not all(isinstance(column, str) for column in columns):
        return f"result_columns {columns!r:.80} is not a list of column names"
    if not isinstance(results, dict):
        return f"results {results!r:.80} is not an object of rows"
    for name, cells in results.items():
        if not isinstance(cells, list) or len(cells) > len(columns):
            return f"{name}: its row {cells!r:.80} is not a list of at most {len(columns)} columns"
        row = dict(zip(columns, cells))
        params = row.get("params")
        if params is not None and not (
            isinstance(params, list)
            and all(
                isinstance(values, list) and all(isinstance(value, str) for value in values)
                for values in params
            )
        ):
            return f"{name}: params {params!r:.80} is not a list of lists of parameter reprs"
        combos = math.prod(len(values) for values in params or [])
        for key in PER_COMBINATION:
            column = row.get(key)
            if column is not None and not (isinstance(column, list) and len(column) == combos):
                return (
                    f"{name}: {key} must be a list of {combos} entries (one per combination),"
                    f" got {column!r:.80}"
                )
            for j, cell in enumerate(column or []):
                if (reason := _cell_problem(key, cell)) is not None:
                    return f"{name}: {key}[{j}] = {cell!r:.40} {reason}"
    return None


def identity(path: Path, data: dict[str, Any], builds: Collection[str] | None) -> str | None:
    """Why ``path``'s own ``commit_hash`` and ``params.machine`` are not what its name and
    folder say, or its build none of ``builds``; None where they agree."""
    commit, params = data.get("commit_hash"), data.get("params")
    machine = params.get("machine") if isinstance(params, dict) else None
    if not isinstance(commit, str) or not HASH.fullmatch(commit):
        return f"commit_hash {commit!r:.50} is no build's hash (40 hexadecimal digits)"
    if machine != path.parent.name:
        return (
            f"its folder names machine {path.parent.name!r} but params.machine is {machine!r:.50}"
        )
    named = path.name.split("-", 1)[0]
    if (
        not isinstance(data.get("env_name"), str)
        or recorded.filename(machine, commit, data["env_name"]) != f"{path.parent.name}/{path.name}"
    ):
        return (
            f"its name says build {named} but its commit_hash is {commit}"
            f" (environment {data.get('env_name')!r:.50})"
        )
    if builds is not None and commit not in builds:
        return f"commit_hash {commit} is no build of the timeline"
    return None


def timeline_builds(timeline: Path) -> set[str]:
    """Every commit of the timeline: the builds a value may be filed under."""
    if not (timeline / ".git").exists() and not (timeline / "HEAD").is_file():
        raise MergeError(
            f"--timeline {timeline} is no timeline repository (mpsbench timeline generate writes one)"
        )
    return set(git.text(timeline, "rev-list", "--all").split())


def screen(data: dict[str, Any], units: dict[str, str]) -> list[str]:
    """Set each value of ``data`` that is no number of its unit to not run; why each was refused."""
    refused = []
    for name in data["results"]:
        row = _row(data, name)
        combos = list(itertools.product(*(row.get("params") or [])))
        for j, value in enumerate(row.get("result") or []):
            if (reason := problem(value, units.get(name, ""))) is not None:
                refused.append(f"{asv.combination(name, combos[j])}: {reason}; not merged")
                for key in PER_COMBINATION:
                    if row.get(key) is not None:
                        row[key][j] = math.nan if key == "result" else None
    return refused


def values(data: dict[str, Any]) -> dict[tuple[str, Combination], dict[str, Any]]:
    """Every measured combination's columns, by benchmark and combination."""
    return {
        (name, combo): columns
        for name in data["results"]
        for combo, columns in _by_combination(_row(data, name)).items()
        if measured(columns["result"])
    }


def _takes(kept: dict[str, Any] | None, incoming: dict[str, Any] | None) -> bool:
    """Whether an incoming combination fills the kept one's place (never a measured one's)."""
    if incoming is None or (kept is not None and measured(kept["result"])):
        return False
    if measured(incoming["result"]):
        return True
    if incoming["result"] is None:  # a failure fills an absent or not-run place
        return kept is None or kept["result"] is not None
    return kept is None  # NaN (not run) only fills an absent place


@dataclass
class FileMerge:
    data: dict[str, Any]
    conflicts: list[str] = field(default_factory=list)
    replaced: list[dict[str, Any]] = field(default_factory=list)  # audit records

    def differ(self, what: str, kept: Any, incoming: Any, replace: bool, conflict: str) -> bool:
        """Whether ``incoming`` replaces ``kept`` (--replace, audited); else a conflict."""
        if replace:
            self.replaced.append({"benchmark": what, "recorded": kept, "by": incoming})
        else:
            self.conflicts.append(f"{what}: {conflict}; recorded kept")
        return replace


def _merge_row(name: str, mine: Row, theirs: Row, replace: bool, merged: FileMerge) -> Row:
    """One benchmark's row: recorded values kept (or replaced), the incoming rest added."""
    if mine.get("version") != theirs.get("version") or len(mine.get("params") or []) != len(
        theirs.get("params") or []
    ):
        conflict = f"recorded with version {mine.get('version')}, incoming {theirs.get('version')}"
        return theirs if merged.differ(name, mine, theirs, replace, conflict) else mine
    params = [
        list(ours) + [value for value in new if value not in ours]
        for ours, new in zip(mine.get("params") or [], theirs.get("params") or [], strict=True)
    ]
    old, new = _by_combination(mine), _by_combination(theirs)
    columns: dict[str, list[Any]] = {key: [] for key in PER_COMBINATION}
    took = False
    for combo in itertools.product(*params):
        chosen = kept = old.get(combo)
        incoming = new.get(combo)
        if (
            incoming is not None
            and kept is not None
            and measured(incoming["result"])
            and measured(kept["result"])
            and _text(incoming["result"]) != _text(kept["result"])
        ):
            conflict = f"recorded {kept['result']}, incoming {incoming['result']}"
            if merged.differ(asv.combination(name, combo), kept, incoming, replace, conflict):
                chosen = incoming
        elif _takes(kept, incoming):
            chosen = incoming
        took = took or chosen is not kept
        for key in PER_COMBINATION:
            columns[key].append(chosen[key] if chosen is not None else None)
    out: Row = dict(mine, params=params)
    for key in PER_COMBINATION:  # asv writes a column of nulls as null
        out[key] = None if all(value is None for value in columns[key]) else columns[key]
    if took:
        out.update(
            started_at=theirs.get("started_at"),
            duration=theirs.get("duration"),
            profile=mine.get("profile") or theirs.get("profile"),
        )
    return out


def merge_data(mine: dict[str, Any], theirs: dict[str, Any], replace: bool = False) -> FileMerge:
    """``theirs`` merged into ``mine``: two results files of one machine and build."""
    merged = FileMerge(dict(mine))
    rows: dict[str, Row] = {name: _row(mine, name) for name in mine["results"]}
    for name in theirs["results"]:
        incoming = _row(theirs, name)
        rows[name] = (
            _merge_row(name, rows[name], incoming, replace, merged) if name in rows else incoming
        )
    columns = list(mine["result_columns"]) + [
        key for key in theirs["result_columns"] if key not in mine["result_columns"]
    ]
    results = {}
    for name, row in rows.items():
        cells = [row.get(key) for key in columns]
        while cells and cells[-1] is None:  # as asv's save trims them
            cells.pop()
        results[name] = cells
    merged.data.update(
        result_columns=columns,
        results=results,
        durations={**(theirs.get("durations") or {}), **(mine.get("durations") or {})},
    )
    return merged


def audit(trail: Path, target: Path, records: list[dict[str, Any]]) -> None:
    """Append the replaced values to the audit trail, on disk before their replacement is."""
    stamp = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    lines = "".join(
        json.dumps({"replaced_at": stamp, "file": str(target), **record}, sort_keys=True) + "\n"
        for record in records
    ).encode()
    with open(trail, "ab", buffering=0) as out:
        start = out.tell()
        try:
            if out.write(lines) != len(lines):  # a short write: the disk is full
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            os.fsync(out.fileno())
        except OSError as exc:  # no half line, no empty trail left
            out.truncate(start)
            if not start:
                trail.unlink()
            raise OSError(exc.errno, exc.strerror, str(trail)) from None


def reconcile(
    dest: Path, sources: Sequence[Path], update: bool, report: Report
) -> dict[str, Any] | None:
    """The union of DEST's and the sources' benchmarks.json, None if unchanged; MergeError where a
    benchmark's version differs between sources, or a source and DEST (unless ``update``)."""
    target = dest / BENCHMARKS
    merged: dict[str, Any] = {}
    corrupt = False
    if target.exists():
        try:
            merged = _load_object(target)
        except MergeError as exc:  # the sources must still agree
            report.corrupt.append(f"{exc}; left untouched, not merged into")
            corrupt = True
    first_source: dict[str, Path] = {}
    changes: list[str] = []
    for path in (source / BENCHMARKS for source in sources if (source / BENCHMARKS).exists()):
        try:
            entries = _load_object(path)
        except MergeError as exc:
            report.corrupt.append(f"{exc}; skipped")
            continue
        for name, entry in entries.items():
            if not isinstance(entry, dict):  # the file's format "version"
                merged.setdefault(name, entry)
                continue
            old, new = merged.get(name, {}).get("version"), entry.get("version")
            if name not in merged:
                merged[name] = entry
                changes.append(f"added {name}")
            elif old != new:
                if name in first_source:
                    raise MergeError(
                        f"benchmark {name} has version {old} in {first_source[name]} but {new} in {path}:"
                        " those machines ran different versions of the suite"
                    )
                if not update:
                    raise MergeError(
                        f"benchmark {name} has version {old} in {target} but {new} in {path}: the machines"
                        " ran different versions of the suite; run them on one checkout, or pass"
                        " --update-benchmarks when the sources ran the newer suite"
                    )
                merged[name] = entry
                changes.append(f"replaced {name} (version {old} -> {new})")
            first_source.setdefault(name, path)
    if corrupt or not changes:
        return None
    report.benchmarks.extend(changes)
    return merged


def audit_trail(dest: Path) -> Path:
    """Where replaced values are kept: beside DEST (asv reads every file inside it)."""
    return dest.parent / f"{dest.name}-replaced.jsonl"


def _check_sources(sources: Sequence[Path]) -> None:
    for source in sources:
        if not source.is_dir():
            raise MergeError(f"results directory {source} does not exist")


def check_machines(sources: Sequence[Path], machines: Iterable[str]) -> None:
    """MergeError naming a machine no source holds (the command would merge nothing)."""
    _check_sources(sources)
    held = sorted({path.parent.name for source in sources for path in source.glob("*/*.json")})
    for name in machines:
        if name not in held:
            raise MergeError(
                f"no machine {name!r} in {', '.join(map(str, sources))};"
                f" machines there: {', '.join(held) or 'none'}"
            )


def merge(
    dest: Path,
    sources: Sequence[Path],
    machines: Iterable[str] | None = None,
    update_benchmarks: bool = False,
    replace: bool = False,
    builds: Collection[str] | None = None,
) -> Report:
    """Merge each source into ``dest`` under its lock; ``builds``: the timeline's, where known."""
    _check_sources(sources)
    with files.lock(
        dest,
        waiting=lambda: log.info(
            f"waiting for the other process writing {dest} (a merge or a record run) to finish"
        ),
    ):
        sources = [source for source in sources if source.resolve() != dest.resolve()]
        report = Report()
        for leftover in files.clean_orphans(dest):
            log.info(f"deleted {leftover}, left by a merge or record run that was stopped")
        benchmarks = reconcile(dest, sources, update_benchmarks, report)  # before any write
        dest.mkdir(parents=True, exist_ok=True)
        for source in sources:
            units = {**recorded.benchmark_units(dest), **recorded.benchmark_units(source)}
            for path in sorted(source.glob("*/*.json")):
                if path.is_file() and (machines is None or path.parent.name in machines):
                    _merge_one(path, dest, units, replace, report, builds)
        if benchmarks is not None:
            files.write(dest / BENCHMARKS, json.dumps(benchmarks, indent=4, sort_keys=True) + "\n")
        return report


def _refusal(path: Path, incoming: dict[str, Any], builds: Collection[str] | None) -> str | None:
    """Why nothing of ``path`` may be merged."""
    if path.is_symlink() or path.parent.is_symlink():
        return "a symbolic link: a merge reads only the files a results folder holds"
    if path.name == MACHINE:
        named = incoming.get("machine")
        return (
            None
            if named == path.parent.name
            else f"its folder names machine {path.parent.name!r} but it names {named!r:.50}"
        )
    return identity(path, incoming, builds) or malformed(incoming)


def _merge_one(
    path: Path,
    dest: Path,
    units: dict[str, str],
    replace: bool,
    report: Report,
    builds: Collection[str] | None = None,
) -> None:
    """One source file into DEST: checked, screened, then copied or merged."""
    target = dest / path.parent.name / path.name
    with contextlib.suppress(MergeError):  # asv's loader names what is wrong with no JSON object
        if (reason := _refusal(path, _load_object(path), builds)) is not None:
            report.refused_files.append(f"{path}: {reason}; nothing merged from this file")
            return
    try:
        check_file(path, path.parent.name)
        incoming = _load_object(path)
    except MergeError as exc:
        report.corrupt.append(f"{exc}; skipped")
        return
    refused = [] if path.name == MACHINE else screen(incoming, units)
    report.refused.extend(f"{path}: {text}" for text in refused)
    if not target.exists():
        if files.create(target, json.dumps(incoming).encode() if refused else path.read_bytes()):
            report.copied.append(str(target))
        else:
            report.conflicts.append(f"{target} appeared while merging {path}; left untouched")
        return
    if recorded.same(path, target):
        report.identical.append(str(target))
        return
    if path.name == MACHINE:
        report.conflicts.append(f"{path} differs from {target}; both left untouched")
        return
    try:
        check_file(target, target.parent.name)
    except MergeError as exc:
        report.corrupt.append(f"{exc}; left untouched, not merged into")
        return
    before = _load_object(target)
    if (reason := malformed(before)) is not None:
        report.corrupt.append(f"{target}: {reason}; left untouched, not merged into")
        return
    merged = merge_data(before, incoming, replace)
    report.conflicts.extend(f"{path}: {text}" for text in merged.conflicts)
    if merged.replaced:
        audit(audit_trail(dest), target, merged.replaced)
        report.replaced.extend(f"{target}: {record['benchmark']}" for record in merged.replaced)
    if _text(merged.data) == _text(before):
        report.identical.append(str(target))
    else:
        files.write(target, json.dumps(merged.data))  # compact, as asv writes
        report.merged.append(str(target))
