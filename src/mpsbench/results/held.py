"""Values a busy machine measured, held out of the merge to be measured again
(``<results>-held.jsonl``)."""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import json
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from mpsbench.core import asv, asv_saving, progress
from mpsbench.measure import quiet
from mpsbench.results import merge, recorded

log = progress.logger(__name__)


def trail(results: Path) -> Path:
    return merge.beside(results, "-held.jsonl")


@dataclasses.dataclass(frozen=True)
class Held:
    machine: str
    commit: str
    name: str  # as -b sees it
    reasons: dict[str, str]  # by kind
    run: str


def _events(scratch: Path) -> dict[tuple[str, str], dict[str, dict[str, Any]]]:
    found: dict[tuple[str, str], dict[str, dict[str, Any]]] = collections.defaultdict(dict)
    for event in asv_saving.read_events(scratch)[0]:
        if event.get("event") in ("start", "done"):
            found[(str(event.get("build")), str(event.get("name")))][str(event["event"])] = event
    return found


def _read(path: Path) -> tuple[dict[str, Any], dict[tuple[str, merge.Combination], Any]]:
    with contextlib.suppress(ValueError, KeyError, TypeError, AttributeError):
        data = recorded.raw(path)
        return data, merge.values(data)
    return {}, {}


def _held(results: Path) -> dict[tuple[str, ...], float]:
    found = {}
    for entry in merge.read_lines(trail(results)):
        with contextlib.suppress(ValueError, KeyError, TypeError):
            key = tuple(str(entry[field]) for field in ("machine", "commit", "name", "run"))
            found[key] = float(entry["value"])
    return found


def judged(
    results: Path, scratch: Path, accept: bool = False, again: str = ""
) -> tuple[Path, list[Held]]:
    """``scratch``'s results less the disturbed values, and those held (``again``: the run
    retried)."""
    out = scratch / "judged"
    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(scratch / "results", out, ignore=shutil.ignore_patterns(".*"))
    run, events, already = scratch.name, _events(scratch), _held(results)
    new: list[dict[str, Any]] = []
    kept: list[Held] = []
    for path in sorted(p for p in out.glob("*/*.json") if p.name != merge.MACHINE):
        data, found = _read(path)
        machine, commit, held_before = path.parent.name, str(data.get("commit_hash")), len(kept)
        on_record = _read(results / machine / path.name)[1]
        for (benchmark, combo), columns in found.items():
            name, value = asv.combination(benchmark, combo), columns["result"]
            events_of = events.get((commit, name), {})
            before, after = events_of.get("start", {}), events_of.get("done", {})
            earlier = on_record.get((benchmark, combo))
            stats = {key: columns[f"stats_{key}"] for key in merge.STATISTICS + merge.COUNTS}
            reasons = quiet.judge(
                float(value),
                stats if columns["stats_q_25"] is not None else None,
                columns["samples"],
                quiet.State.of(before),
                quiet.State.of(after, "_after"),
                float(earlier["result"]) if earlier else None,
                already.get((machine, commit, name, again)),
            )
            if not reasons:
                continue
            entry = Held(machine, commit, name, reasons, run)
            if (machine, commit, name, run) not in already:  # said once a run
                done = (
                    f"recorded all the same ({quiet.ACCEPT_BUSY} is on)"
                    if accept
                    else "held out of the record, to be measured again"
                )
                log.warning(
                    f"quiet gate: {done}: {name} of build {commit[:8]}: {value:.4g}; "
                    + "; ".join(reasons.values())
                )
                new.append(
                    dict(
                        dataclasses.asdict(entry),
                        benchmark=benchmark,
                        params=list(combo),
                        value=value,
                        stats=stats,
                        samples=columns["samples"],
                        before=before,
                        after=after,
                        held_at=merge.now(),
                        recorded=accept,
                    )
                )
            if not accept:
                kept.append(entry)
                merge.unset(data, benchmark, combo)
        if len(kept) > held_before:
            path.write_text(json.dumps(data))
    if new:
        merge.append(trail(results), new)
    return out, kept


def still_held(
    held: Iterable[Held], recorded: set[tuple[str, str, str]]
) -> tuple[int, collections.Counter[str]]:
    """How many of ``held`` are not ``recorded``, and their reasons' kinds."""
    left = {key: h for h in held if (key := (h.machine, h.commit, h.name)) not in recorded}
    return len(left), collections.Counter(kind for h in left.values() for kind in h.reasons)
