"""Merge asv results directories from several machines into one, never overwriting a recorded file.

An asv results directory holds one folder per machine (``machine.json`` and
one ``<commit>-<env>.json`` per build) and a shared ``benchmarks.json`` (the
suite's benchmarks and their versions, rewritten by every ``asv run``).
``mpsbench results merge DEST SRC...`` copies every machine's files from each
SRC into DEST:

- a file DEST lacks is copied (written beside it, then linked into place, so a
  file that appears meanwhile is never replaced);
- a file DEST holds with the same content (or the same JSON) is left as it is;
- a file DEST holds with other content is a conflict: reported by name, both
  copies left untouched;
- a file that is not valid asv JSON is reported by name and skipped;
- ``benchmarks.json`` becomes the union of every side's benchmarks; a
  benchmark whose ``version`` differs between two sides is an error naming it,
  raised before anything is written (``--update-benchmarks`` lets the
  sources' definitions replace DEST's, for a suite that changed since DEST was
  written; sources that disagree with each other are still an error).

The exit status is 0 when everything merged cleanly, 1 when some file was in
conflict or corrupt (the rest is merged all the same), 2 for a mistake in the
command (one line, nothing written).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BENCHMARKS = "benchmarks.json"
MACHINE = "machine.json"


class MergeError(ValueError):
    """The merge cannot be done as asked (a missing folder, benchmark versions that disagree): nothing was written."""


@dataclass
class Report:
    """What a merge did, file by file."""

    copied: list[str] = field(default_factory=list)
    identical: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)
    corrupt: list[str] = field(default_factory=list)
    benchmarks: list[str] = field(default_factory=list)  # changes to DEST's benchmarks.json

    @property
    def clean(self) -> bool:
        return not self.conflicts and not self.corrupt

    def lines(self) -> list[str]:
        return [
            *(f"copied    {name}" for name in self.copied),
            *(f"conflict  {text}" for text in self.conflicts),
            *(f"corrupt   {text}" for text in self.corrupt),
            *(f"benchmarks.json: {text}" for text in self.benchmarks),
        ]

    def summary(self, dest: Path) -> str:
        return (
            f"merged into {dest}: {len(self.copied)} copied, {len(self.identical)} already there,"
            f" {len(self.conflicts)} in conflict (left untouched), {len(self.corrupt)} corrupt (skipped)"
        )


# --- reading what asv wrote ------------------------------------------------------


def _load_json(path: Path) -> Any:
    """The file's JSON, or a one-line reason it is not readable JSON."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise MergeError(f"{path}: {exc}") from None


def check_file(path: Path, machine: str) -> None:
    """Raise MergeError unless asv can read ``path`` as the machine's machine.json or results file."""
    from asv import results as asv_results
    from asv import util
    from asv.machine import Machine

    try:
        if path.name == MACHINE:
            data = util.load_json(str(path), api_version=Machine.api_version)
            if not isinstance(data.get("machine"), str):
                raise util.UserError(f"{path} names no machine")
        else:
            asv_results.Results.load(str(path), machine_name=machine)
    except (util.UserError, OSError, ValueError, TypeError, AttributeError) as exc:
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


def _machine_files(source: Path, machines: set[str] | None) -> Iterable[tuple[str, Path]]:
    """(machine, file) for every JSON file in the source's machine folders."""
    for folder in sorted(path for path in source.iterdir() if path.is_dir()):
        if machines is not None and folder.name not in machines:
            continue
        for path in sorted(folder.glob("*.json")):
            if path.is_file():
                yield folder.name, path


# --- benchmarks.json -------------------------------------------------------------


def _as_object(data: Any, path: Path) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise MergeError(f"{path}: not a JSON object")
    return data


def _sources_benchmarks(sources: Sequence[Path], report: Report) -> dict[str, tuple[Any, Path]]:
    """Every benchmark the sources' benchmarks.json define, and where; an error if two sources disagree."""
    seen: dict[str, tuple[Any, Path]] = {}
    for source in sources:
        path = source / BENCHMARKS
        if not path.exists():
            continue
        try:
            entries = _as_object(_load_json(path), path)
        except MergeError as exc:
            report.corrupt.append(f"{exc}; skipped")
            continue
        for name, entry in entries.items():
            if name in seen and isinstance(entry, dict) and entry.get("version") != seen[name][0].get("version"):
                raise MergeError(
                    f"benchmark {name} has version {seen[name][0].get('version')} in {seen[name][1]} but"
                    f" {entry.get('version')} in {path}: those machines ran different versions of the suite"
                )
            seen.setdefault(name, (entry, path))
    return seen


def reconcile(
    dest: Path, sources: Sequence[Path], update: bool = False, report: Report | None = None
) -> dict[str, Any] | None:
    """The union of DEST's and the sources' benchmarks.json, or None when nothing changes.

    Raises MergeError naming the first benchmark whose version differs between
    two sources, or between a source and DEST (unless ``update``: then the
    sources' definition replaces DEST's).
    """
    report = report if report is not None else Report()
    incoming = _sources_benchmarks(sources, report)
    target = dest / BENCHMARKS
    merged: dict[str, Any] = {}
    if target.exists():
        try:
            merged = dict(_as_object(_load_json(target), target))
        except MergeError as exc:
            report.corrupt.append(f"{exc}; left untouched, not merged into")
            return None
    changed = False
    for name, (entry, path) in incoming.items():
        if not isinstance(entry, dict):  # the file's own "version" (its format), not a benchmark
            merged.setdefault(name, entry)
        elif name not in merged:
            merged[name], changed = entry, True
            report.benchmarks.append(f"added {name}")
        elif merged[name].get("version") != entry.get("version"):
            old, new = merged[name].get("version"), entry.get("version")
            if not update:
                raise MergeError(
                    f"benchmark {name} has version {old} in {target} but {new} in {path}: the machines ran"
                    " different versions of the suite; run them on one checkout, or pass --update-benchmarks"
                    " when the sources ran the newer suite"
                )
            merged[name], changed = entry, True
            report.benchmarks.append(f"replaced {name} (version {old} -> {new})")
    return merged if changed else None


def _write_json(path: Path, data: Any) -> None:
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}-", suffix=".tmp")
    with os.fdopen(handle, "w", encoding="utf-8") as out:
        json.dump(data, out, indent=4, sort_keys=True)
        out.write("\n")
    os.replace(temporary, path)


def _copy_new(source: Path, target: Path) -> bool:
    """Copy ``source`` to ``target`` unless ``target`` exists (checked atomically); True if copied."""
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}-", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(source.read_bytes())
        try:
            os.link(temporary, target)  # fails if target exists: never replaces a file
        except FileExistsError:
            return False
        return True
    finally:
        os.unlink(temporary)


# --- the merge -------------------------------------------------------------------


def merge(
    dest: Path, sources: Sequence[Path], machines: Iterable[str] | None = None, update_benchmarks: bool = False
) -> Report:
    """Merge every machine's files of each source into ``dest`` (see the module's docstring)."""
    for source in sources:
        if not source.is_dir():
            raise MergeError(f"results directory {source} does not exist")
    sources = [source for source in sources if source.resolve() != dest.resolve()]
    report = Report()
    benchmarks = reconcile(dest, sources, update_benchmarks, report)  # raises before anything is written
    only = set(machines) if machines is not None else None
    dest.mkdir(parents=True, exist_ok=True)
    for source in sources:
        for machine, path in _machine_files(source, only):
            target = dest / machine / path.name
            try:
                check_file(path, machine)
            except MergeError as exc:
                report.corrupt.append(f"{exc}; skipped")
                continue
            if target.exists():
                if _same(path, target):
                    report.identical.append(str(target))
                else:
                    report.conflicts.append(f"{path} differs from {target}; both left untouched")
            elif _copy_new(path, target):
                report.copied.append(str(target))
            else:
                report.conflicts.append(f"{target} appeared while merging {path}; left untouched")
    if benchmarks is not None:
        _write_json(dest / BENCHMARKS, benchmarks)
    return report


def print_report(report: Report, dest: Path) -> int:
    """Print the report's lines and summary; the exit status: 0 clean, 1 with conflicts or corrupt files."""
    for line in report.lines():
        print(line)
    print(report.summary(dest))
    return 0 if report.clean else 1


# --- command line ----------------------------------------------------------------


def cmd_merge(args: argparse.Namespace) -> int:
    report = merge(args.dest, args.sources, args.machine or None, args.update_benchmarks)
    return print_report(report, args.dest)


def add_subcommand(commands: Any) -> None:
    """Register ``mpsbench results merge`` on the CLI's subparsers."""
    results = commands.add_parser("results", help="asv results directories from several machines")
    actions = results.add_subparsers(dest="results_command", metavar="ACTION")
    actions.required = True
    parser = actions.add_parser(
        "merge", help="merge results directories into one without overwriting any file",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("dest", type=Path, help="the results directory to merge into (created if absent)")
    parser.add_argument("sources", type=Path, nargs="+", help="results directories to merge from")
    parser.add_argument("--machine", action="append", default=[], help="merge only this machine's folder (repeatable)")
    parser.add_argument("--update-benchmarks", action="store_true",
                        help="the sources ran a newer suite: their benchmarks.json entries replace DEST's")
    parser.set_defaults(func=cmd_merge)
