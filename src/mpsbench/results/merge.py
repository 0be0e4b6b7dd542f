"""Merges asv results folders value by value, never replacing a recorded value unasked
(docs/explanation/integrity.md). Exit status: 0 clean, 1 a conflict, refusal or corrupt file."""

from __future__ import annotations

import contextlib
import datetime
import errno
import functools
import itertools
import json
import math
import os
import re
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeGuard

from mpsbench.core import asv, files, git, progress
from mpsbench.core.errors import UserError
from mpsbench.results import recorded

MACHINE = "machine.json"
STATISTICS, COUNTS = ("ci_99_a", "ci_99_b", "q_25", "q_75"), ("number", "repeat")
PER_COMBINATION = ("result", *(f"stats_{name}" for name in STATISTICS + COUNTS), "samples")
Json = dict[str, Any]
Row = Json
Combination = tuple[str, ...]

log = progress.logger(__name__)


# a Report's list, its label, its summary words
SAID = (
    ("copied", "copied", "copied"),
    ("identical", None, "already there"),
    ("merged", "merged", "with values added"),
    ("replaced", "replaced", "values replaced on purpose"),
    ("conflicts", "conflict", "in conflict (recorded kept)"),
    ("refused", "refused", "values refused (not merged)"),
    ("refused_files", "refused", "files refused (nothing merged from them)"),
    ("corrupt", "corrupt", "corrupt (skipped)"),
)


@dataclass
class Report:
    copied: list[str] = field(default_factory=list)
    identical: list[str] = field(default_factory=list)
    merged: list[str] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    refused_files: list[str] = field(default_factory=list)
    corrupt: list[str] = field(default_factory=list)
    benchmarks: list[str] = field(default_factory=list)  # changes to benchmarks.json

    @property
    def changed(self) -> bool:
        return bool(self.copied or self.merged or self.replaced)

    @property
    def clean(self) -> bool:
        return not (self.conflicts or self.refused or self.refused_files or self.corrupt)

    def summary(self, dest: Path) -> str:
        counts = ", ".join(f"{len(getattr(self, name))} {words}" for name, _, words in SAID)
        return f"merged into {dest}: {counts}"

    def show(self, dest: Path) -> int:
        """Prints what was done; the exit status."""
        for name, label, _ in SAID:
            for text in getattr(self, name) if label else []:
                print(f"{label:10}{text}")
        for text in self.benchmarks:
            print(f"benchmarks.json: {text}")
        print(self.summary(dest))
        return 0 if self.clean else 1


def measured(value: Any) -> bool:
    """Not null (a failure) nor NaN (a skip)."""
    return value is not None and value == value


def problem(value: Any, unit: str) -> str | None:
    """Why ``value`` is no value of ``unit``; None for null and NaN."""
    if not measured(value):
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"{value!r} is not a number"
    if not math.isfinite(value):
        return f"{value!r} is not a finite number"
    found = recorded.unit(unit)
    if found.least <= value <= found.most:
        return None
    most = f" and at most {found.most:g}" if found.most < math.inf else ""
    return f"{value!r} is no value of {unit!r} (valid: a number at least {found.least:g}{most})"


def check_file(path: Path, formed: Json | None = None) -> Json:
    """Its data where asv reads it and it is in asv's form.

    ``formed``: the file's JSON, already parsed and found in asv's form; neither is redone.
    """
    try:
        if path.name == MACHINE:
            recorded.machine_named(path)
        else:
            recorded.read(path, path.parent.name)
        data = recorded.raw(path) if formed is None else formed
    except recorded.RecordedError as exc:
        raise UserError(f"{path}: {exc}") from None
    if formed is None and path.name != MACHINE and (reason := malformed(data)):
        raise UserError(f"{path}: {reason}")
    return data


# what a corrupt file's report line says is done with it
SKIPPED = "skipped"  # a source's
UNTOUCHED = "left untouched, not merged into"  # the destination's


def _readable(read: Callable[[Path], Json], path: Path, report: Report, done: str) -> Json | None:
    """``read(path)``, or None with ``path`` reported corrupt and ``done`` with it."""
    try:
        return read(path)
    except UserError as exc:
        report.corrupt.append(f"{exc}; {done}")
        return None


def _text(value: Any) -> str:
    return json.dumps(value, sort_keys=True)  # NaN equals NaN here


def _row(data: Json, name: str) -> Row:
    """The file's own lists: a change to one changes ``data``."""
    return dict(zip(data["result_columns"], data["results"][name], strict=False))


def _combinations(row: Row) -> list[Combination]:
    return list(itertools.product(*(row.get("params") or [])))


def _by_combination(row: Row) -> dict[Combination, Json]:
    return {
        combo: {key: row[key][j] if row.get(key) else None for key in PER_COMBINATION}
        for j, combo in enumerate(_combinations(row))
    }


def values(data: Json) -> dict[tuple[str, Combination], Json]:
    return {
        (name, combo): columns
        for name in data["results"]
        for combo, columns in _by_combination(_row(data, name)).items()
        if measured(columns["result"])
    }


def unset(data: Json, name: str, combo: Combination) -> None:
    row = _row(data, name)
    j = _combinations(row).index(combo)
    for key in PER_COMBINATION:
        if isinstance(row.get(key), list):
            row[key][j] = math.nan if key == "result" else None


def _number(cell: Any) -> bool:
    return cell is None or (
        isinstance(cell, (int, float)) and not isinstance(cell, bool) and not math.isinf(cell)
    )


CELLS: dict[str, tuple[Callable[[Any], bool], str]] = {
    **{f"stats_{name}": (_number, "is not a number") for name in STATISTICS},
    **{
        f"stats_{name}": (
            lambda cell: _number(cell) and (cell is None or not cell < 0),
            "is not a count",
        )
        for name in COUNTS
    },
    "samples": (
        lambda cell: cell is None or (isinstance(cell, list) and all(map(_number, cell))),
        "is not a list of numbers",
    ),
}


def _strings(value: Any) -> TypeGuard[list[str]]:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def malformed(data: Json) -> str | None:
    """The first cell asv's loader lets through but not in asv's form."""
    columns, results = data.get("result_columns"), data.get("results")
    if not _strings(columns):
        return f"result_columns {columns!r:.80} is not a list of column names"
    if not isinstance(results, dict):
        return f"results {results!r:.80} is not an object of rows"
    for name, cells in results.items():
        if not isinstance(cells, list) or len(cells) > len(columns):
            return f"{name}: its row {cells!r:.80} is not a list of at most {len(columns)} columns"
        row = dict(zip(columns, cells))
        params = row.get("params")
        if params is not None and not (isinstance(params, list) and all(map(_strings, params))):
            return f"{name}: params {params!r:.80} is not a list of lists of parameter reprs"
        combos = math.prod(len(values) for values in params or [])
        for key in PER_COMBINATION:
            column = row.get(key)
            if column is not None and not (isinstance(column, list) and len(column) == combos):
                return (
                    f"{name}: {key} must be a list of {combos} entries (one per combination),"
                    f" got {column!r:.80}"
                )
            check, reason = CELLS.get(key, (lambda cell: True, ""))
            for j, cell in enumerate(column or []):
                if not check(cell):
                    return f"{name}: {key}[{j}] = {cell!r:.40} {reason}"
    return None


def identity(path: Path, data: Json, builds: Collection[str] | None) -> str | None:
    """Why ``data``'s build and machine are not what ``path`` says, or none of ``builds``."""
    commit, params, environment = data.get("commit_hash"), data.get("params"), data.get("env_name")
    machine = params.get("machine") if isinstance(params, dict) else None
    if not isinstance(commit, str) or not re.fullmatch(r"[0-9a-f]{40}", commit):
        return f"commit_hash {commit!r:.50} is no build's hash (40 hexadecimal digits)"
    if machine != path.parent.name:
        return (
            f"its folder names machine {path.parent.name!r} but params.machine is {machine!r:.50}"
        )
    if (
        not isinstance(environment, str)
        or recorded.filename(machine, commit, environment) != f"{machine}/{path.name}"
    ):
        return (
            f"its name says build {path.name.split('-', 1)[0]} but its commit_hash is {commit}"
            f" (environment {environment!r:.50})"
        )
    if builds is not None and commit not in builds:
        return f"commit_hash {commit} is no build of the timeline"
    return None


def timeline_builds(timeline: Path) -> set[str]:
    if not (timeline / ".git").exists() and not (timeline / "HEAD").is_file():
        raise UserError(
            f"--timeline {timeline} is no timeline repository (mpsbench timeline generate writes one)"
        )
    return set(git.text(timeline, "rev-list", "--all").split())


def _rank(columns: Json | None) -> int:
    """Absent 0, not run 1, failed 2, measured 3: a higher fills a lower's place."""
    if columns is None:
        return 0
    value = columns["result"]
    return 3 if measured(value) else 2 if value is None else 1


@dataclass
class FileMerge:
    data: Json
    replace: bool
    conflicts: list[str] = field(default_factory=list)
    replaced: list[Json] = field(default_factory=list)

    def differ(self, what: str, kept: Any, incoming: Any, conflict: str) -> bool:
        if self.replace:
            self.replaced.append({"benchmark": what, "recorded": kept, "by": incoming})
        else:
            self.conflicts.append(f"{what}: {conflict}; recorded kept")
        return self.replace


def _merge_row(name: str, mine: Row, theirs: Row, merged: FileMerge) -> Row:
    ours, new = mine.get("params") or [], theirs.get("params") or []
    if mine.get("version") != theirs.get("version") or len(ours) != len(new):
        conflict = f"recorded with version {mine.get('version')}, incoming {theirs.get('version')}"
        return theirs if merged.differ(name, mine, theirs, conflict) else mine
    params = [
        list(have) + [value for value in added if value not in have]
        for have, added in zip(ours, new, strict=True)
    ]
    old, incoming = _by_combination(mine), _by_combination(theirs)
    chosen = []
    for combo in itertools.product(*params):
        kept, offered = old.get(combo), incoming.get(combo)
        pick = offered if _rank(offered) > _rank(kept) else kept
        if (
            kept
            and offered
            and _rank(kept) == _rank(offered) == 3
            and _text(kept["result"]) != _text(offered["result"])
        ):
            conflict = f"recorded {kept['result']}, incoming {offered['result']}"
            if merged.differ(asv.combination(name, combo), kept, offered, conflict):
                pick = offered
        chosen.append((pick, kept))
    out: Row = dict(mine, params=params)
    for key in PER_COMBINATION:  # a column of nulls is null, as asv writes it
        column = [pick[key] if pick else None for pick, _ in chosen]
        out[key] = None if all(value is None for value in column) else column
    if any(pick is not kept for pick, kept in chosen):
        out.update(
            started_at=theirs.get("started_at"),
            duration=theirs.get("duration"),
            profile=mine.get("profile") or theirs.get("profile"),
        )
    return out


def merge_data(mine: Json, theirs: Json, replace: bool = False) -> FileMerge:
    merged = FileMerge(dict(mine), replace)
    rows = {name: _row(mine, name) for name in mine["results"]}
    for name in theirs["results"]:
        incoming = _row(theirs, name)
        rows[name] = _merge_row(name, rows[name], incoming, merged) if name in rows else incoming
    columns = list(dict.fromkeys([*mine["result_columns"], *theirs["result_columns"]]))
    results = {}
    for name, row in rows.items():
        cells = [row.get(key) for key in columns]
        while cells and cells[-1] is None:
            cells.pop()
        results[name] = cells
    merged.data.update(
        result_columns=columns,
        results=results,
        durations={**(theirs.get("durations") or {}), **(mine.get("durations") or {})},
    )
    return merged


def append(trail: Path, records: Iterable[Json]) -> None:
    """Appends JSON lines, on disk on return; a full disk leaves no half line."""
    lines = "".join(json.dumps(record, sort_keys=True) + "\n" for record in records).encode()
    if not lines:
        return
    with open(trail, "a+b", buffering=0) as out:
        if (start := out.tell()) and os.pread(out.fileno(), 1, start - 1) != b"\n":
            lines = b"\n" + lines
        try:
            if out.write(lines) != len(lines):  # a short write: the disk is full
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            os.fsync(out.fileno())
        except OSError as exc:
            out.truncate(start)
            if not start:
                trail.unlink()
            raise OSError(exc.errno, exc.strerror, str(trail)) from None


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def read_lines(trail: Path) -> Iterator[Json]:
    """Each line's JSON object but one a kill cut."""
    with contextlib.suppress(OSError):
        for text in trail.read_text().splitlines():
            with contextlib.suppress(ValueError):
                if isinstance(line := json.loads(text), dict):
                    yield line


def reconcile(dest: Path, sources: Sequence[Path], update: bool, report: Report) -> Json | None:
    """The benchmarks.json of them all (None: unchanged); UserError where versions differ."""
    target = dest / asv.BENCHMARKS
    found = _readable(recorded.raw, target, report, UNTOUCHED) if target.exists() else {}
    merged, corrupt = found or {}, found is None
    first_source: dict[str, Path] = {}
    changes: list[str] = []
    for path in (source / asv.BENCHMARKS for source in sources):
        entries = _readable(recorded.raw, path, report, SKIPPED) if path.exists() else {}
        if entries is None:
            continue
        for name, entry in entries.items():
            if not isinstance(entry, dict):  # the file's "version"
                merged.setdefault(name, entry)
                continue
            old, new = merged.get(name, {}).get("version"), entry.get("version")
            earlier = first_source.setdefault(name, path) != path
            if name in merged and old != new and (earlier or not update):
                raise UserError(
                    f"benchmark {name} has version {old} in {first_source[name] if earlier else target}"
                    f" but {new} in {path}: those machines ran different suites"
                    + (
                        ""
                        if earlier
                        else "; run them on one checkout, or pass --update-benchmarks when the"
                        " sources ran the newer suite"
                    )
                )
            if name not in merged or old != new:
                changes.append(
                    f"replaced {name} (version {old} -> {new})"
                    if name in merged
                    else f"added {name}"
                )
                merged[name] = entry
    if corrupt or not changes:
        return None
    report.benchmarks.extend(changes)
    return merged


def beside(results: Path, suffix: str) -> Path:
    """A side file of ``results``, kept outside it: asv reads every file inside."""
    return results.parent / f"{results.name}{suffix}"


def audit_trail(dest: Path) -> Path:
    return beside(dest, "-replaced.jsonl")


def check_machines(sources: Sequence[Path], machines: Collection[str] = ()) -> None:
    for source in sources:
        if not source.is_dir():
            raise UserError(f"results directory {source} does not exist")
    if not machines:
        return  # nothing to look for: no need to list every file
    held = sorted({p.parent.name for source in sources for p in source.glob("*/*.json")})
    for name in machines:
        if name not in held:
            raise UserError(
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
    check_machines(sources)
    waiting = f"waiting for the other process writing {dest} (a merge or a record run) to finish"
    with files.lock(dest, wait=lambda: log.info(waiting)):
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
            files.write(
                dest / asv.BENCHMARKS, json.dumps(benchmarks, indent=4, sort_keys=True) + "\n"
            )
        return report


def _refusal(path: Path, incoming: Json, builds: Collection[str] | None) -> str | None:
    if path.is_symlink() or path.parent.is_symlink():
        return "a symbolic link: a merge reads only the files a results folder holds"
    if path.name != MACHINE:
        return identity(path, incoming, builds) or malformed(incoming)
    if (named := incoming.get("machine")) != path.parent.name:
        return f"its folder names machine {path.parent.name!r} but it names {named!r:.50}"
    return None


def _merge_one(
    path: Path,
    dest: Path,
    units: dict[str, str],
    replace: bool,
    report: Report,
    builds: Collection[str] | None,
) -> None:
    target = dest / path.parent.name / path.name
    parsed = None  # read once: in asv's form where _refusal passes it
    with contextlib.suppress(recorded.RecordedError):  # check_file says it
        if (reason := _refusal(path, parsed := recorded.raw(path), builds)) is not None:
            report.refused_files.append(f"{path}: {reason}; nothing merged from this file")
            return
    if (
        incoming := _readable(functools.partial(check_file, formed=parsed), path, report, SKIPPED)
    ) is None:
        return
    refused = []
    for (name, combo), columns in values(incoming).items() if path.name != MACHINE else ():
        if (reason := problem(columns["result"], units.get(name, ""))) is not None:
            refused.append(f"{path}: {asv.combination(name, combo)}: {reason}; not merged")
            unset(incoming, name, combo)
    report.refused += refused
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
    if (before := _readable(check_file, target, report, UNTOUCHED)) is None:
        return
    merged = merge_data(before, incoming, replace)
    report.conflicts.extend(f"{path}: {text}" for text in merged.conflicts)
    if merged.replaced:
        # the audit line is on disk before the replacement is
        records = ({"replaced_at": now(), "file": str(target), **r} for r in merged.replaced)
        append(audit_trail(dest), records)
        report.replaced.extend(f"{target}: {record['benchmark']}" for record in merged.replaced)
    if _text(merged.data) == _text(before):
        report.identical.append(str(target))
    else:
        files.write(target, json.dumps(merged.data))  # compact, as asv writes
        report.merged.append(str(target))
