"""Values a busy machine measured: kept out of the recorded results, in a side file.

Before a scratch run is merged, each value is judged (:func:`mpsbench.measure.quiet.judge`). A
disturbed value is set to not run in the merged copy, so it never enters or replaces the record and
the combination stays missing, to be measured again. It is kept with its reasons in
``<results>-held.jsonl`` beside the results folder, one JSON line each (``recorded`` is true only
where ``MPSBENCH_ACCEPT_BUSY`` recorded it all the same).
"""

from __future__ import annotations

import collections
import datetime
import itertools
import json
import shutil
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mpsbench.core import asv, asv_saving, progress
from mpsbench.measure import quiet
from mpsbench.results import merge, recorded

JUDGED = "judged"  # the merged copy, held values left out
STATS = {
    "q_25": "stats_q_25",
    "q_75": "stats_q_75",
    "ci_99_a": "stats_ci_99_a",
    "ci_99_b": "stats_ci_99_b",
    "number": "stats_number",
    "repeat": "stats_repeat",
}

log = progress.logger(__name__)


def trail(results: Path) -> Path:
    return results.parent / f"{results.name}-held.jsonl"


@dataclass(frozen=True)
class Held:
    machine: str
    commit: str
    name: str  # as -b sees it
    reasons: dict[str, str]  # by kind
    run: str


def _events(scratch: Path) -> dict[tuple[str, str], dict[str, dict[str, Any]]]:
    """Each combination's last ``start`` and ``done`` events, by (build, combination)."""
    found: dict[tuple[str, str], dict[str, dict[str, Any]]] = collections.defaultdict(dict)
    for event in asv_saving.read_events(scratch)[0]:
        if event.get("event") in ("start", "done"):
            found[(str(event.get("build")), str(event.get("name")))][str(event["event"])] = event
    return found


def _recorded(path: Path) -> dict[tuple[str, merge.Combination], dict[str, Any]]:
    try:
        return merge.values(recorded.raw(path))
    except (ValueError, KeyError, TypeError, AttributeError):  # RecordedError is a ValueError
        return {}


def _stats(columns: dict[str, Any]) -> dict[str, Any]:
    """One combination's statistics, named as asv's ``get_result_stats`` names them."""
    return {key: columns.get(column) for key, column in STATS.items()}


def _reasons(
    columns: dict[str, Any],
    events: dict[str, dict[str, Any]],
    earlier: dict[str, Any] | None,
    first: float | None,
) -> dict[str, str]:
    stats = _stats(columns) if columns.get("stats_q_25") is not None else None
    before = quiet.State.of(events.get("start", {}))
    after = quiet.State.of(events.get("done", {}), "_after")
    previous = (
        float(earlier["result"])
        if earlier is not None and merge.measured(earlier["result"])
        else None
    )
    return quiet.judge(
        float(columns["result"]), stats, columns.get("samples"), before, after, previous, first
    )


def _held(results: Path) -> dict[tuple[str, ...], float]:
    """Each value kept in the held file, by (machine, commit, combination, run)."""
    path = trail(results)
    found: dict[tuple[str, ...], float] = {}
    for line in path.read_text().splitlines() if path.is_file() else []:
        try:
            entry = json.loads(line)
            key = tuple(str(entry[field]) for field in ("machine", "commit", "name", "run"))
            found[key] = float(entry["value"])
        except (ValueError, KeyError, TypeError):
            continue
    return found


def _keep(results: Path, entries: Iterable[dict[str, Any]]) -> None:
    text = "".join(json.dumps(entry, sort_keys=True) + "\n" for entry in entries)
    if text:
        with open(trail(results), "a") as out:
            out.write(text)


def judged(
    results: Path, scratch: Path, accept: bool = False, again: Sequence[str] = ()
) -> tuple[Path, list[Held]]:
    """A copy of ``scratch``'s results with disturbed values set to not run, and the values held.
    ``accept``: record them all the same; ``again``: the runs whose held values this retries."""
    out = scratch / JUDGED
    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(scratch / "results", out, ignore=shutil.ignore_patterns(".*"))
    judge = _Judge(results, scratch, accept, again)
    for path in sorted(out.glob("*/*.json")):
        if path.name != merge.MACHINE:
            judge.file(path)
    _keep(results, judge.new)
    return out, judge.held


class _Judge:
    """One scratch run's values, file by file: what is held, and the held file's new lines."""

    def __init__(self, results: Path, scratch: Path, accept: bool, again: Sequence[str]) -> None:
        self.results, self.run, self.accept, self.again = results, scratch.name, accept, again
        self.events, self.already = _events(scratch), _held(results)
        self.new: list[dict[str, Any]] = []
        self.held: list[Held] = []

    def file(self, path: Path) -> None:
        """Judge each value of one results file; rewrite it with the held ones set to not run."""
        try:
            data = recorded.raw(path)
            found = merge.values(data)
        except (ValueError, KeyError, TypeError, AttributeError):
            return  # the merge reports it
        machine, commit = path.parent.name, str(data.get("commit_hash"))
        on_record = _recorded(self.results / machine / path.name)
        changed = False
        for (benchmark, combo), columns in found.items():
            name = asv.combination(benchmark, combo)
            state = self.events.get((commit, name), {})
            runs = ((machine, commit, name, run) for run in self.again)
            first = [self.already[key] for key in runs if key in self.already]
            earlier = on_record.get((benchmark, combo))
            reasons = _reasons(columns, state, earlier, first[-1] if first else None)
            if not reasons:
                continue
            if (machine, commit, name, self.run) not in self.already:  # once a run
                shown = f"{name} of build {commit[:8]}: {columns['result']:.4g}; "
                shown += "; ".join(reasons.values())
                log.warning(
                    f"quiet gate: recorded all the same ({quiet.ACCEPT_BUSY} is on): {shown}"
                    if self.accept
                    else f"quiet gate: held out of the record, to be measured again: {shown}"
                )
                entry = _entry(machine, commit, benchmark, combo, columns, reasons, state)
                self.new.append({**entry, "run": self.run, "recorded": self.accept})
            if not self.accept:
                self.held.append(Held(machine, commit, name, reasons, self.run))
                _unset(data, benchmark, combo)
                changed = True
        if changed:
            path.write_text(json.dumps(data))


def _entry(
    machine: str,
    commit: str,
    benchmark: str,
    combo: merge.Combination,
    columns: dict[str, Any],
    reasons: dict[str, str],
    events: dict[str, dict[str, Any]],
) -> dict[str, Any]:
    stamp = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    return {
        "machine": machine,
        "commit": commit,
        "benchmark": benchmark,
        "params": list(combo),
        "name": asv.combination(benchmark, combo),
        "value": columns["result"],
        "stats": _stats(columns),
        "samples": columns.get("samples"),
        "reasons": reasons,
        "before": events.get("start", {}),
        "after": events.get("done", {}),
        "held_at": stamp,
    }


def _unset(data: dict[str, Any], benchmark: str, combo: merge.Combination) -> None:
    """Set the combination to not run (NaN, no statistics, no samples)."""
    row = dict(zip(data["result_columns"], data["results"][benchmark], strict=False))
    index = list(itertools.product(*(row.get("params") or []))).index(combo)
    for position, column in enumerate(data["result_columns"][: len(data["results"][benchmark])]):
        cells = data["results"][benchmark][position]
        if column in merge.PER_COMBINATION and isinstance(cells, list):
            cells[index] = float("nan") if column == "result" else None


def still_held(held: Iterable[Held], recorded: set[tuple[str, str, str]]) -> dict[str, int]:
    """How many of ``held`` are still not in ``recorded``, by kind of reason."""
    kinds: collections.Counter[str] = collections.Counter()
    for entry in {(h.machine, h.commit, h.name): h for h in held}.values():
        if (entry.machine, entry.commit, entry.name) not in recorded:
            kinds.update(list(entry.reasons))
    return dict(kinds)
