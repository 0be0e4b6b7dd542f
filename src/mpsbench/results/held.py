"""Values a busy machine measured (:func:`mpsbench.measure.quiet.judge`): set to not run in the
copy merged, so they stay missing and are measured again, and kept in ``<results>-held.jsonl``."""

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
STATS = ("q_25", "q_75", "ci_99_a", "ci_99_b", "number", "repeat")  # asv's get_result_stats names

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
    """Each combination's last start and done events."""
    found: dict[tuple[str, str], dict[str, dict[str, Any]]] = collections.defaultdict(dict)
    for event in asv_saving.read_events(scratch)[0]:
        if event.get("event") in ("start", "done"):
            found[(str(event.get("build")), str(event.get("name")))][str(event["event"])] = event
    return found


def _values(path: Path) -> dict[tuple[str, merge.Combination], dict[str, Any]]:
    try:
        return merge.values(recorded.raw(path))
    except (ValueError, KeyError, TypeError, AttributeError):  # RecordedError is a ValueError
        return {}


def _stats(columns: dict[str, Any]) -> dict[str, Any]:
    return {key: columns.get(f"stats_{key}") for key in STATS}


def _reasons(
    columns: dict[str, Any],
    events: dict[str, dict[str, Any]],
    earlier: dict[str, Any] | None,
    first: float | None,
) -> dict[str, str]:
    stats = _stats(columns) if columns.get("stats_q_25") is not None else None
    before = quiet.State.of(events.get("start", {}))
    after = quiet.State.of(events.get("done", {}), "_after")
    measured = earlier is not None and merge.measured(earlier["result"])
    previous = float(earlier["result"]) if earlier is not None and measured else None
    value = float(columns["result"])
    return quiet.judge(value, stats, columns.get("samples"), before, after, previous, first)


def _held(results: Path) -> dict[tuple[str, ...], float]:
    """Each value in the held file, by (machine, commit, combination, run)."""
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


def judged(
    results: Path, scratch: Path, accept: bool = False, again: Sequence[str] = ()
) -> tuple[Path, list[Held]]:
    """``scratch``'s results with disturbed values set to not run, and those held. ``accept``:
    record them all the same; ``again``: the runs whose held values this retries."""
    out = scratch / JUDGED
    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(scratch / "results", out, ignore=shutil.ignore_patterns(".*"))
    run, events, already = scratch.name, _events(scratch), _held(results)
    new: list[dict[str, Any]] = []
    kept: list[Held] = []
    for path in sorted(p for p in out.glob("*/*.json") if p.name != merge.MACHINE):
        try:
            data = recorded.raw(path)
            found = merge.values(data)
        except (ValueError, KeyError, TypeError, AttributeError):
            continue  # the merge reports it
        machine, commit = path.parent.name, str(data.get("commit_hash"))
        on_record = _values(results / machine / path.name)
        changed = False
        for (benchmark, combo), columns in found.items():
            name = asv.combination(benchmark, combo)
            state = events.get((commit, name), {})
            first = [
                already[k] for k in ((machine, commit, name, r) for r in again) if k in already
            ]
            earlier = on_record.get((benchmark, combo))
            reasons = _reasons(columns, state, earlier, first[-1] if first else None)
            if not reasons:
                continue
            if (machine, commit, name, run) not in already:  # said and kept once a run
                shown = f"{name} of build {commit[:8]}: {columns['result']:.4g}; "
                shown += "; ".join(reasons.values())
                log.warning(
                    f"quiet gate: recorded all the same ({quiet.ACCEPT_BUSY} is on): {shown}"
                    if accept
                    else f"quiet gate: held out of the record, to be measured again: {shown}"
                )
                entry = _entry(machine, commit, benchmark, combo, columns, reasons, state)
                new.append({**entry, "run": run, "recorded": accept})
            if not accept:
                kept.append(Held(machine, commit, name, reasons, run))
                _unset(data, benchmark, combo)
                changed = True
        if changed:
            path.write_text(json.dumps(data))
    if text := "".join(json.dumps(entry, sort_keys=True) + "\n" for entry in new):
        with open(trail(results), "a") as handle:
            handle.write(text)
    return out, kept


def _entry(
    machine: str,
    commit: str,
    benchmark: str,
    combo: merge.Combination,
    columns: dict[str, Any],
    reasons: dict[str, str],
    events: dict[str, dict[str, Any]],
) -> dict[str, Any]:
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
        "held_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
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
