"""mpsbench explain A B -b ROW: one combination's ops ranked by their change in self time, A to B."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import statistics
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mpsbench.core import progress, text
from mpsbench.core.errors import UserError
from mpsbench.regressions import fresh, profile_step

log = progress.logger(__name__)
SCRIPT = Path(profile_step.__file__)
ROUNDS = 2  # per build: A B then B A cancels drift
CALLS = 5
TOP = 12
SHAPES_SHOWN = 3
NAME_SHOWN = 90  # a kernel template's name runs to hundreds
PROCESS_TIMEOUT = 1800.0  # the model rows' asv timeout
EXIT_STATUSES = """exit status:
  0  the table was printed (explain judges nothing; compare does)
  2  bad input: an unknown build, a -b naming no or several combinations or one on an absent
     device, or a build that could not run it"""


@dataclass(frozen=True)
class Options(fresh.Options):
    rounds: int = ROUNDS
    calls: int = CALLS
    top: int = TOP
    save: Path | None = None
    keep: bool = False


@dataclass(frozen=True)
class Op:
    """Per step: the median process's calls, the fastest's self time."""

    calls: float
    seconds: float
    shapes: dict[str, float]  # calls per step


@dataclass(frozen=True)
class Side:
    build: str
    torch: str
    device: str
    basis: str  # "device" or "cpu"
    step: float  # without the profiler
    profiled_step: float
    processes: int
    ops: dict[str, Op]
    kernels: dict[str, Op]
    missing: list[str]


@dataclass(frozen=True)
class Row:
    name: str
    before: Op | None
    after: Op | None

    @property
    def change(self) -> float:
        return (self.after.seconds if self.after else 0.0) - (
            self.before.seconds if self.before else 0.0
        )


@dataclass(frozen=True)
class Explained:
    combination: str
    a: Side
    b: Side
    ops: list[Row]
    kernels: list[Row]
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    commits: tuple[str, str] = ("", "")

    @property
    def step_change(self) -> float:
        return self.b.step - self.a.step

    @property
    def explained(self) -> float:
        return sum(row.change for row in self.ops)


def side(build: str, said: list[dict[str, Any]]) -> Side:
    """One build's profiles, per step."""
    first, basis = said[0], said[0]["basis"]
    seen: dict[tuple[str, str], list[tuple[list[float], defaultdict[str, float]]]] = {}
    for number, process in enumerate(said):
        steps = process["calls"] * process["steps_per_call"]
        for row in process["rows"]:
            runs = seen.setdefault(
                (row["kind"], row["name"]), [([0.0, 0.0], defaultdict(float)) for _ in said]
            )
            totals, shapes = runs[number]
            calls = row["calls"] / steps
            totals[0] += calls
            totals[1] += calls * row[f"{basis}_us_median"] * 1e-6
            shapes[row["shapes"]] += calls
    per_step: dict[str, dict[str, Op]] = {"op": {}, "kernel": {}}
    for (kind, name), runs in seen.items():
        per_step[kind][name] = Op(
            statistics.median(totals[0] for totals, _ in runs),
            min(totals[1] for totals, _ in runs),
            dict(next(shapes for _, shapes in runs if shapes)),
        )
    return Side(
        build,
        first["torch"],
        first["device"],
        basis,
        min(p["call_seconds"] / p["steps_per_call"] for p in said),
        min(p["profiled_call_seconds"] / p["steps_per_call"] for p in said),
        len(said),
        per_step["op"],
        per_step["kernel"] if basis == "device" else {},
        list(first["missing"]),
    )


def diff(combination: str, a: Side, b: Side) -> Explained:
    def rows(before: dict[str, Op], after: dict[str, Op]) -> list[Row]:
        found = [Row(name, before.get(name), after.get(name)) for name in before | after]
        return sorted(found, key=lambda row: (-row.change, row.name))

    notes = []
    if a.basis != b.basis:
        notes.append(
            f"only one build's profiler timed device kernels ({a.build}: {a.basis}, {b.build}:"
            f" {b.basis}); the table holds what both have"
        )
    return Explained(combination, a, b, rows(a.ops, b.ops), rows(a.kernels, b.kernels), notes=notes)


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3f}"


def _calls(value: float) -> str:
    return f"{value:.0f}" if value == round(value) else f"{value:.2f}"


def _short(name: str) -> str:
    return name if len(name) <= NAME_SHOWN else name[: NAME_SHOWN - 3] + "..."


def _table(found: list[Row], b: Side, top: int, what: str) -> list[str]:
    lines = [
        [
            what,
            "calls/step A",
            "B",
            "us/call A",
            "B",
            "self ms/step A",
            "B",
            "change ms",
            "% of step B",
        ]
    ]
    shapes = []
    for row in found[:top]:
        ops = (row.before, row.after)
        counted = (None, None) if row.name == profile_step.OUTSIDE_OPS else ops
        lines.append(
            [
                _short(row.name),
                *(_calls(op.calls) if op else "-" for op in counted),
                *(
                    f"{op.seconds / op.calls * 1e6:.1f}" if op and op.calls else "-"
                    for op in counted
                ),
                *(_ms(op.seconds) if op else "-" for op in ops),
                f"{row.change * 1e3:+.3f}",
                f"{100 * row.after.seconds / b.step:.1f}" if row.after else "-",
            ]
        )
        before, after = (Counter(op.shapes if op else {}) for op in ops)
        moved = {s: after[s] - before[s] for s in before | after if s}
        changed = sorted(
            (s for s in moved if abs(moved[s]) > 1e-9), key=lambda s: (-abs(moved[s]), s)
        )
        shapes += [
            f"  {_short(row.name)} shapes: {s} {_calls(before[s])} -> {_calls(after[s])} a step"
            for s in changed[:SHAPES_SHOWN]
        ]
    if rest := found[top:]:
        change = sum(row.change for row in rest) * 1e3
        shapes.append(f"  ... {len(rest)} more {what}s: {change:+.3f} ms/step together")
    return [text.table(lines), *shapes]


def format_explained(found: Explained, top: int = TOP) -> str:
    a, b = found.a, found.b
    basis = "the device's kernel time" if a.basis == b.basis == "device" else "cpu time"
    change, explained = found.step_change, found.explained
    lines = [
        f"explain {found.combination}: A {a.build} (torch {a.torch}) against B {b.build} (torch"
        f" {b.torch}), {a.processes} + {b.processes} processes, interleaved",
        f"ops by their change in self time per step ({basis})",
        *_table(found.ops, b, top, "op"),
    ]
    if found.kernels:
        lines += [
            "",
            "kernels (device time, held in the ops' above)",
            *_table(found.kernels, b, top, "kernel"),
        ]
    left = change - explained
    share = f" ({100 * left / change:.0f}% of the change)" if abs(change) > 1e-12 else ""
    lines += [
        "",
        f"step without the profiler: A {_ms(a.step)} ms, B {_ms(b.step)} ms, change"
        f" {change * 1e3:+.3f} ms ({100 * change / a.step:+.1f}%)",
        f"the table's changes, every row summed: {explained * 1e3:+.3f} ms/step; unexplained"
        f" {left * 1e3:+.3f} ms{share}",
        f"step under the profiler: A {_ms(a.profiled_step)} ms, B {_ms(b.profiled_step)} ms (its"
        " own cost included)",
        *(f"missing in {s.build} (torch {s.torch}): {said}" for s in (a, b) for said in s.missing),
        *found.notes,
    ]
    if found.seconds:
        lines.append(f"explained in {found.seconds:.0f} s")
    return "\n".join(lines)


def _profile(
    session: fresh.Session, builds: list[fresh.Named], options: Options
) -> dict[str, list[dict[str, Any]]]:
    made = {build.name: session.server(build) for build in builds}
    said: dict[str, list[dict[str, Any]]] = {build.name: [] for build in builds}
    total, started = options.rounds * len(builds), time.monotonic()
    for number in range(options.rounds):
        for build in builds if number % 2 == 0 else builds[::-1]:
            out = session.scratch / f"profile-{build.name.replace('@', '-')}-{number}.json"
            server = made[build.name]
            python, _, _, *where, _mode = server.command
            command = [
                python,
                "-S",
                str(SCRIPT),
                *where,
                str(out),
                str(options.calls),
                str(os.getpid()),
            ]
            output, rc = fresh.run_logged(command, server.env, options.log, PROCESS_TIMEOUT)
            found: dict[str, Any] = (
                json.loads(out.read_text()) if out.is_file() else {"error": f"exit status {rc}"}
            )
            if "error" in found:
                tail = " | ".join(output.strip().splitlines()[-2:])
                raise UserError(
                    f"{build.name} could not profile {session.combination}: {found['error']}"
                    + (f" ({tail})" if tail and tail not in found["error"] else "")
                )
            said[build.name].append(found)
            count, elapsed = sum(map(len, said.values())), time.monotonic() - started
            log.info(
                f"process {count}/{total} ({build.name}): a step"
                f" {found['call_seconds'] / found['steps_per_call'] * 1e3:.2f} ms; {elapsed:.0f} s"
                f" so far, ~{elapsed / count * (total - count):.0f} s left"
            )
    return said


def explain(a_ref: str, b_ref: str, options: Options) -> Explained:
    started = time.monotonic()
    (a, b), chosen = fresh.name_builds([a_ref, b_ref], options, "A and B")
    with fresh.Session(options, [a, b], chosen) as session:
        combination = session.check_bench(a.commit)
        log.info(
            f"profiling {combination} in {a.name} and {b.name}: {options.rounds} processes each,"
            f" {options.calls} calls a process"
        )
        said = _profile(session, [a, b], options)
    found = diff(combination, side(a.name, said[a.name]), side(b.name, said[b.name]))
    return dataclasses.replace(
        found, seconds=time.monotonic() - started, commits=(a.commit, b.commit)
    )


def save(found: Explained, path: Path, top: int) -> None:
    """The table, its numbers beside it as JSON."""
    path.write_text(format_explained(found, top) + "\n")
    path.with_name(path.name + ".json").write_text(
        json.dumps(dataclasses.asdict(found), indent=1) + "\n"
    )


def run(a_ref: str, b_ref: str, options: Options) -> int:
    found = explain(a_ref, b_ref, options)
    print(format_explained(found, options.top))
    if options.save is not None:
        save(found, options.save, options.top)
    if options.keep:
        print(f"kept for the site in {keep(found, options)}")
    return 0


def stored(results: Path) -> Path:
    return results.parent / "explain"


def stored_name(combination: str, old_commit: str, new_commit: str) -> str:
    """A kept table's name, which the site finds by the same three."""
    named = f"{combination}\0{old_commit}\0{new_commit}".encode()
    return hashlib.sha256(named).hexdigest()[:20] + ".txt"


def after_bisect(before: str, first: str, options: Options, bisected: float) -> None:
    """bisect's first bad build explained and kept; a failure leaves bisect's answer alone."""
    print(f"\nexplaining {first} against {before} (--no-explain leaves it out)", flush=True)
    try:
        found = explain(before, first, options)
    except UserError as exc:
        print(f"explain could not run: {exc}")
        return
    print(format_explained(found, options.top))
    kept = keep(found, options)
    print(
        f"timed apart: the bisection {bisected:.0f} s, explain {found.seconds:.0f} s; kept in {kept}"
    )


def keep(found: Explained, options: Options) -> Path:
    path = stored(options.suite.conf.results) / stored_name(found.combination, *found.commits)
    path.parent.mkdir(parents=True, exist_ok=True)
    save(found, path, options.top)
    return path
