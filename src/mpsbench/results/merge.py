"""Merge asv results directories into one, value by value, never replacing a recorded value.

``mpsbench results merge DEST SRC...`` merges every machine's files from each SRC into DEST, so that
DEST only ever grows: a file DEST lacks is copied; one it holds is merged value by value (a recorded
value stays, an incoming one that differs is a conflict reported by name, or with ``--replace`` replaces
it, kept first in ``<DEST>-replaced.jsonl``); a file asv cannot read is skipped; ``benchmarks.json``
becomes the union of every side's (a version that differs is an error, unless ``--update-benchmarks``).
docs/fleet.md, "Results that merge safely", says each rule.

Every merge holds the results folder's lock (``core.files.lock``, the one every writer of it takes): two merges
at once, or a merge during a record run, wait for each other and both land.

Exit status: 0 merged cleanly, 1 some value in conflict or some file corrupt (the rest merged all the
same), 2 a mistake in the command (one line, nothing written).
"""

from __future__ import annotations

import datetime
import itertools
import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mpsbench.core import asv, files
from mpsbench.core.errors import UserError
from mpsbench.results import recorded

BENCHMARKS = asv.BENCHMARKS
MACHINE = "machine.json"


class MergeError(UserError):
    """The merge cannot be done as asked (a missing folder, benchmark versions that disagree): nothing was written."""


@dataclass
class Report:
    """What a merge did, file by file."""

    copied: list[str] = field(default_factory=list)
    merged: list[str] = field(default_factory=list)  # files DEST had, to which values were added
    identical: list[str] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)  # values replaced on purpose (--replace), audited
    conflicts: list[str] = field(default_factory=list)
    corrupt: list[str] = field(default_factory=list)
    benchmarks: list[str] = field(default_factory=list)  # changes to DEST's benchmarks.json

    @property
    def clean(self) -> bool:
        return not self.conflicts and not self.corrupt

    def summary(self, dest: Path) -> str:
        return (
            f"merged into {dest}: {len(self.copied)} copied, {len(self.identical)} already there,"
            f" {len(self.merged)} with values added, {len(self.replaced)} values replaced on purpose,"
            f" {len(self.conflicts)} in conflict (recorded kept), {len(self.corrupt)} corrupt (skipped)"
        )

    def show(self, dest: Path) -> int:
        """Print what was done, line by line, and the summary; the exit status: 0 clean, 1 with conflicts or corrupt files."""
        labelled = [("copied    ", self.copied), ("merged    ", self.merged), ("replaced  ", self.replaced),
                    ("conflict  ", self.conflicts), ("corrupt   ", self.corrupt), ("benchmarks.json: ", self.benchmarks)]
        for label, texts in labelled:
            for text in texts:
                print(label + text)
        print(self.summary(dest))
        return 0 if self.clean else 1


def _load_object(path: Path) -> dict[str, Any]:
    """The file's JSON object, or a one-line reason it is not one."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise MergeError(f"{path}: {exc}") from None
    if not isinstance(data, dict):
        raise MergeError(f"{path}: not a JSON object")
    return data


def check_file(path: Path, machine: str) -> None:
    """Raise MergeError unless asv can read ``path`` as the machine's machine.json or results file."""
    from asv import util
    from asv.machine import Machine

    try:
        if path.name != MACHINE:
            recorded.read(path, machine)
        elif not isinstance(util.load_json(str(path), api_version=Machine.api_version).get("machine"), str):
            raise util.UserError(f"{path} names no machine")
    except (recorded.RecordedError, util.UserError, OSError, ValueError, TypeError, AttributeError) as exc:
        raise MergeError(f"{path}: {exc}") from None


def _same(one: Path, other: Path) -> bool:
    """Byte-identical, or the same JSON written differently."""
    first, second = one.read_bytes(), other.read_bytes()
    if first == second:
        return True
    try:
        return bool(json.loads(first) == json.loads(second))
    except ValueError:
        return False


# asv's result_columns that hold one entry per parameter combination; the others
# (params, version, started_at, duration, profile) describe the benchmark as a whole.
PER_COMBINATION = ("result", "stats_ci_99_a", "stats_ci_99_b", "stats_q_25", "stats_q_75", "stats_number",
                   "stats_repeat", "samples")

Row = dict[str, Any]  # one benchmark's row of a results file, by column name
Combination = tuple[str, ...]


def _row(data: dict[str, Any], name: str) -> Row:
    return dict(zip(data["result_columns"], data["results"][name], strict=False))


def _by_combination(row: Row) -> dict[Combination, dict[str, Any]]:
    """Every combination's own columns (its value, statistics and samples)."""
    params = row.get("params") or []
    combos = list(itertools.product(*params))
    columns = {key: row.get(key) or [None] * len(combos) for key in PER_COMBINATION}
    return {combo: {key: columns[key][j] for key in PER_COMBINATION} for j, combo in enumerate(combos)}


def measured(value: Any) -> bool:
    """A number: asv writes null for a failure and NaN for a combination skipped or not selected."""
    return value is not None and value == value


def values(data: dict[str, Any]) -> dict[tuple[str, Combination], dict[str, Any]]:
    """Every measured value of a results file with its statistics and samples, by benchmark and combination."""
    return {(name, combo): columns for name in data["results"]
            for combo, columns in _by_combination(_row(data, name)).items() if measured(columns["result"])}


def _takes(kept: dict[str, Any] | None, incoming: dict[str, Any] | None) -> bool:
    """Whether an incoming combination fills the place of the kept one (never a measured value's)."""
    if incoming is None or (kept is not None and measured(kept["result"])):
        return False
    if measured(incoming["result"]):
        return True
    if incoming["result"] is None:  # a failure is recorded where nothing was: absent, or not run (NaN)
        return kept is None or kept["result"] is not None
    return kept is None  # NaN (not run) only fills an absent place


def _text(value: Any) -> str:
    return json.dumps(value, sort_keys=True)  # NaN (n/a) equals NaN here, unlike with ==


@dataclass
class FileMerge:
    """One file's merge: the merged JSON and what happened to its values."""

    data: dict[str, Any]
    conflicts: list[str] = field(default_factory=list)
    replaced: list[dict[str, Any]] = field(default_factory=list)  # audit records of replaced values


def _merge_row(name: str, mine: Row, theirs: Row, replace: bool, merged: FileMerge) -> Row:
    """One benchmark's row: recorded values kept (or replaced and audited), the incoming rest added."""
    if mine.get("version") != theirs.get("version") or len(mine.get("params") or []) != len(theirs.get("params") or []):
        if replace:
            merged.replaced.append({"benchmark": name, "recorded": mine, "by": theirs})
            return theirs
        merged.conflicts.append(f"{name}: recorded with version {mine.get('version')}, incoming"
                                f" {theirs.get('version')}; recorded kept")
        return mine
    params = [list(ours) + [value for value in new if value not in ours]
              for ours, new in zip(mine.get("params") or [], theirs.get("params") or [], strict=True)]
    old, new = _by_combination(mine), _by_combination(theirs)
    out: Row = dict(mine, params=params)
    columns: dict[str, list[Any]] = {key: [] for key in PER_COMBINATION}
    took = False
    for combo in itertools.product(*params):
        kept, incoming = old.get(combo), new.get(combo)
        chosen = kept
        if incoming is not None and kept is not None and measured(incoming["result"]) and measured(kept["result"]) \
                and _text(incoming["result"]) != _text(kept["result"]):
            shown = asv.combination(name, combo)
            if replace:
                merged.replaced.append({"benchmark": shown, "recorded": kept, "by": incoming})
                chosen = incoming
            else:
                merged.conflicts.append(f"{shown}: recorded {kept['result']}, incoming {incoming['result']};"
                                        " recorded kept")
        elif _takes(kept, incoming):
            chosen = incoming  # a value, or a failure where nothing was recorded
        took = took or chosen is not kept
        for key in PER_COMBINATION:
            columns[key].append(chosen[key] if chosen is not None else None)
    for key in PER_COMBINATION:  # asv writes a column of nothing but nulls as null
        out[key] = None if all(value is None for value in columns[key]) else columns[key]
    if took:
        out.update(started_at=theirs.get("started_at"), duration=theirs.get("duration"))
        out["profile"] = mine.get("profile") or theirs.get("profile")
    return out


def merge_data(mine: dict[str, Any], theirs: dict[str, Any], replace: bool = False) -> FileMerge:
    """``theirs`` merged into ``mine`` (two results files of one machine and build), asv's format kept."""
    merged = FileMerge(dict(mine))
    rows: dict[str, Row] = {name: _row(mine, name) for name in mine["results"]}
    for name in theirs["results"]:
        incoming = _row(theirs, name)
        rows[name] = _merge_row(name, rows[name], incoming, replace, merged) if name in rows else incoming
    columns = list(mine["result_columns"]) + [key for key in theirs["result_columns"] if key not in mine["result_columns"]]
    results = {}
    for name, row in rows.items():
        values = [row.get(key) for key in columns]
        while values and values[-1] is None:  # as asv's save trims them
            values.pop()
        results[name] = values
    merged.data.update(result_columns=columns, results=results,
                       durations={**(theirs.get("durations") or {}), **(mine.get("durations") or {})})
    return merged


def audit(trail: Path, target: Path, records: list[dict[str, Any]]) -> None:
    """Append the replaced values to the audit trail, flushed to disk before the file that replaces them is."""
    stamp = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    with open(trail, "a", encoding="utf-8") as out:
        for record in records:
            out.write(json.dumps({"replaced_at": stamp, "file": str(target), **record}, sort_keys=True) + "\n")
        out.flush()
        os.fsync(out.fileno())


def _merge_file(path: Path, target: Path, replace: bool, report: Report, trail: Path) -> None:
    """Merge one results file into DEST's file of the same name, value by value."""
    try:
        check_file(target, target.parent.name)
    except MergeError as exc:
        report.corrupt.append(f"{exc}; left untouched, not merged into")
        return
    before = _load_object(target)
    merged = merge_data(before, _load_object(path), replace)
    report.conflicts.extend(f"{path}: {text}" for text in merged.conflicts)
    if merged.replaced:
        audit(trail, target, merged.replaced)
        report.replaced.extend(f"{target}: {record['benchmark']}" for record in merged.replaced)
    if _text(merged.data) == _text(before):
        report.identical.append(str(target))
        return
    files.write(target, json.dumps(merged.data))  # compact, as asv writes
    report.merged.append(str(target))


def reconcile(dest: Path, sources: Sequence[Path], update: bool, report: Report) -> dict[str, Any] | None:
    """The union of DEST's and the sources' benchmarks.json, or None when nothing changes.

    Raises MergeError naming the first benchmark whose version differs between two sources,
    or between a source and DEST (unless ``update``: then the sources' definition replaces DEST's).
    """
    target = dest / BENCHMARKS
    merged: dict[str, Any] = {}
    corrupt = False
    if target.exists():
        try:
            merged = _load_object(target)
        except MergeError as exc:  # the sources must still agree among themselves
            report.corrupt.append(f"{exc}; left untouched, not merged into")
            corrupt = True
    first_source: dict[str, Path] = {}  # the source that first defined each benchmark
    changes: list[str] = []
    for path in (source / BENCHMARKS for source in sources):
        if not path.exists():
            continue
        try:
            entries = _load_object(path)
        except MergeError as exc:
            report.corrupt.append(f"{exc}; skipped")
            continue
        for name, entry in entries.items():
            if not isinstance(entry, dict):  # the file's own "version" (its format), not a benchmark
                merged.setdefault(name, entry)
                continue
            old, new = merged.get(name, {}).get("version"), entry.get("version")
            if name not in merged:
                merged[name] = entry
                changes.append(f"added {name}")
            elif old != new:
                if name in first_source:
                    raise MergeError(f"benchmark {name} has version {old} in {first_source[name]} but {new} in {path}:"
                                     " those machines ran different versions of the suite")
                if not update:
                    raise MergeError(
                        f"benchmark {name} has version {old} in {target} but {new} in {path}: the machines ran"
                        " different versions of the suite; run them on one checkout, or pass --update-benchmarks"
                        " when the sources ran the newer suite"
                    )
                merged[name] = entry
                changes.append(f"replaced {name} (version {old} -> {new})")
            first_source.setdefault(name, path)
    if corrupt or not changes:
        return None
    report.benchmarks.extend(changes)
    return merged


def audit_trail(dest: Path) -> Path:
    """Where replaced values are kept: beside DEST, outside it (asv reads every file inside)."""
    return dest.parent / f"{dest.name}-replaced.jsonl"


def merge(
    dest: Path, sources: Sequence[Path], machines: Iterable[str] | None = None, update_benchmarks: bool = False,
    replace: bool = False,
) -> Report:
    """Merge every machine's files of each source into ``dest`` (see the module's docstring), holding its lock."""
    for source in sources:
        if not source.is_dir():
            raise MergeError(f"results directory {source} does not exist")
    with files.lock(dest):
        return _merge(dest, [source for source in sources if source.resolve() != dest.resolve()], machines,
                      update_benchmarks, replace)


def _merge(dest: Path, sources: Sequence[Path], machines: Iterable[str] | None, update_benchmarks: bool,
           replace: bool) -> Report:
    report = Report()
    benchmarks = reconcile(dest, sources, update_benchmarks, report)  # raises before anything is written
    only = set(machines) if machines is not None else None
    dest.mkdir(parents=True, exist_ok=True)
    for source in sources:
        for path in sorted(source.glob("*/*.json")):  # each machine's folder
            machine, target = path.parent.name, dest / path.parent.name / path.name
            if not path.is_file() or (only is not None and machine not in only):
                continue
            try:
                check_file(path, machine)
            except MergeError as exc:
                report.corrupt.append(f"{exc}; skipped")
                continue
            if target.exists():
                if _same(path, target):
                    report.identical.append(str(target))
                elif path.name == MACHINE:
                    report.conflicts.append(f"{path} differs from {target}; both left untouched")
                else:
                    _merge_file(path, target, replace, report, audit_trail(dest))
            elif files.create(target, path.read_bytes()):
                report.copied.append(str(target))
            else:
                report.conflicts.append(f"{target} appeared while merging {path}; left untouched")
    if benchmarks is not None:
        files.write(dest / BENCHMARKS, json.dumps(benchmarks, indent=4, sort_keys=True) + "\n")
    return report
