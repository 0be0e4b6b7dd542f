"""mpsbench explain A B -b ROW: which ops inside one combination's step got slower from build A to build B.

For each build, fresh processes in that build's environment (the asv environment compare and bisect make,
the build alone on sys.path), interleaved A B, B A, ... run the combination's own setup, time steps without
the profiler, then profile a few with torch.profiler (profile_step.py). The table ranks ops by the change in
self time per step (the device's kernel time where the profiler sees the device, else the cpu's): calls per
step, time per call and share of the step in each build, and the input shapes where they differ. The sum of
every row's change is set against the step's change measured without the profiler: what is left is said as
unexplained. What a build's profiler lacks is said, never filled in. Nothing is recorded into the results.
"""

from __future__ import annotations

import hashlib
import json
import os
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from mpsbench.builds import timeline
from mpsbench.core import asv, progress, text
from mpsbench.core.errors import UserError
from mpsbench.regressions import compare, fresh, profile_step, servers

log = progress.logger(__name__)
SCRIPT = Path(profile_step.__file__)
ROUNDS = 2  # processes per build: A B, B A cancels drift between the first and the last
CALLS = 5  # profiled calls per process
TOP = 12  # rows shown; every row counts in the sums
SHAPES_SHOWN = 3  # input shapes listed under an op whose shapes differ
NAME_SHOWN = 90  # characters of an op's or kernel's name in the table
PROCESS_TIMEOUT = 1800.0  # a hang guard of a benchmark's own size (the model rows' asv timeout)
EXIT_STATUSES = """exit status:
  0  the table was printed (whatever it shows: explain judges nothing; compare does)
  2  bad input (an unknown build, a regex matching no or several combinations or one on an absent device, a
     process of either build that could not run the combination)"""


@dataclass(frozen=True)
class Options:
    """What explain measures with, typed at the command's edge (cli.py declares the options)."""

    bench: str  # a regex naming ONE combination
    manifest: Path
    timeline: Path
    machine: str | None = None
    log: Path | None = None
    threads: int | None = None
    suite_root: Path | None = None  # tests: a stand-in suite
    rounds: int = ROUNDS
    calls: int = CALLS
    top: int = TOP
    save: Path | None = None  # the table (text) here, its numbers beside it as JSON
    keep: bool = (
        False  # also keep it beside the results for the site (:func:`keep`), as bisect does
    )

    @cached_property
    def measuring(self) -> fresh.Options:
        """The options of the fresh session explain runs in (its rounds are explain's own); one for
        the command, so that the suite's asv.conf.json is read once."""
        return fresh.Options(
            self.bench,
            self.rounds,
            self.rounds,
            self.manifest,
            self.timeline,
            self.machine,
            self.log,
            self.threads,
            self.suite_root,
        )


@dataclass(frozen=True)
class Op:
    """One op (or kernel) of one build, per step: its calls (the median over the build's processes) and its self
    time, each input shape's calls times the median of one call's, in the fastest process for it (contention
    only ever adds time: a loaded machine's descheduled calls do not move a median, nor the fastest process)."""

    calls: float
    seconds: float  # self time per step, on the table's basis
    shapes: dict[str, float]  # input shapes -> calls per step


@dataclass(frozen=True)
class Side:
    """One build's profile of the combination."""

    build: str
    torch: str
    device: str
    basis: str  # "device" (kernel times) or "cpu"
    step: float  # seconds per step without the profiler: each process's fastest call, the fastest process's
    profiled_step: float  # the same under the profiler
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
    ops: list[Row]  # the largest growth in self time per step first
    kernels: list[Row]
    seconds: float = 0.0  # what explaining took, processes and discovery included
    notes: list[str] = field(default_factory=list)
    commits: tuple[str, str] = ("", "")  # A's and B's timeline commits: the stored table's name

    @property
    def step_change(self) -> float:
        return self.b.step - self.a.step

    @property
    def explained(self) -> float:
        return sum(row.change for row in self.ops)


def side(build: str, said: list[dict[str, Any]]) -> Side:
    """One build's processes' profiles (profile_step.py's JSON), per step (Op)."""
    first = said[0]
    basis = first["basis"]
    per_process: dict[str, dict[str, list[tuple[float, float, dict[str, float]]]]] = {
        "op": {},
        "kernel": {},
    }
    for process in said:
        steps = process["calls"] * process["steps_per_call"]
        grouped: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0, 0.0])
        shapes: dict[tuple[str, str], dict[str, float]] = defaultdict(lambda: defaultdict(float))
        for row in process["rows"]:
            key = (row["kind"], row["name"])
            per_call = row["device_us_median" if basis == "device" else "cpu_us_median"] * 1e-6
            grouped[key][0] += row["calls"] / steps
            grouped[key][1] += per_call * row["calls"] / steps
            shapes[key][row["shapes"]] += row["calls"] / steps
        for (kind, name), (calls, seconds) in grouped.items():
            per_process[kind].setdefault(name, []).append(
                (calls, seconds, dict(shapes[(kind, name)]))
            )

    def medians(found: dict[str, list[tuple[float, float, dict[str, float]]]]) -> dict[str, Op]:
        ops = {}
        for name, seen in found.items():
            # a process that never ran it ran it 0 times
            values = seen + [(0.0, 0.0, {})] * (len(said) - len(seen))
            ops[name] = Op(
                statistics.median(calls for calls, _, _ in values),
                min(seconds for _, seconds, _ in values),
                seen[0][2],
            )
        return ops

    # the kernels' own rows, apart: the ops' device times already hold them
    kernels = medians(per_process["kernel"]) if basis == "device" else {}
    return Side(
        build,
        first["torch"],
        first["device"],
        basis,
        min(p["call_seconds"] / p["steps_per_call"] for p in said),
        min(p["profiled_call_seconds"] / p["steps_per_call"] for p in said),
        len(said),
        medians(per_process["op"]),
        kernels,
        list(first["missing"]),
    )


def rows(before: dict[str, Op], after: dict[str, Op]) -> list[Row]:
    """Every op of either side, the largest growth in self time per step first."""
    found = [Row(name, before.get(name), after.get(name)) for name in before.keys() | after.keys()]
    return sorted(found, key=lambda row: (-row.change, row.name))


def diff(combination: str, a: Side, b: Side) -> Explained:
    notes = []
    if (
        a.basis != b.basis
    ):  # one side's profiler saw the device and the other's did not: cpu times for both
        notes.append(
            f"one build's profiler timed the device's kernels and the other's did not ({a.build}: {a.basis},"
            f" {b.build}: {b.basis}); the table holds what both have"
        )
    return Explained(combination, a, b, rows(a.ops, b.ops), rows(a.kernels, b.kernels), notes=notes)


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3f}"


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:.1f}"


def _calls(value: float) -> str:
    return f"{value:.0f}" if value == round(value) else f"{value:.2f}"


def _table(found: list[Row], a: Side, b: Side, top: int, what: str) -> list[str]:
    header = [
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
    lines: list[list[str]] = [header]
    for row in found[:top]:
        before, after = row.before, row.after
        # the time outside any op has no calls of its own (its row is one a profiled call of the timed method)
        counted = row.name != profile_step.OUTSIDE_OPS
        lines.append(
            [
                _short(row.name),
                _calls(before.calls) if before and counted else "-",
                _calls(after.calls) if after and counted else "-",
                _us(before.seconds / before.calls) if before and before.calls and counted else "-",
                _us(after.seconds / after.calls) if after and after.calls and counted else "-",
                _ms(before.seconds) if before else "-",
                _ms(after.seconds) if after else "-",
                f"{row.change * 1e3:+.3f}",
                f"{100 * after.seconds / b.step:.1f}" if after else "-",
            ]
        )
    shown = [text.table(lines)]
    for row in found[:top]:
        shown += [f"  {_short(row.name)} shapes: {said}" for said in _shapes(row)]
    rest = found[top:]
    if rest:
        shown.append(
            f"  ... {len(rest)} more {what}s: {sum(row.change for row in rest) * 1e3:+.3f} ms/step together"
        )
    return shown


def _short(name: str) -> str:
    """A kernel's name as the table shows it: its start (a template's arguments run to hundreds of characters;
    the saved numbers keep the whole name)."""
    return name if len(name) <= NAME_SHOWN else name[: NAME_SHOWN - 3] + "..."


def _shapes(row: Row) -> list[str]:
    """The input shapes whose calls per step differ between the builds, the largest difference first (a kernel,
    whose shapes the profiler does not record, has none: its calls are in the table)."""
    before = row.before.shapes if row.before else {}
    after = row.after.shapes if row.after else {}
    changed = sorted(
        (
            (after.get(s, 0.0) - before.get(s, 0.0), s)
            for s in before.keys() | after.keys()
            if s and abs(after.get(s, 0.0) - before.get(s, 0.0)) > 1e-9
        ),
        key=lambda found: (-abs(found[0]), found[1]),
    )
    return [
        f"{shape} {_calls(before.get(shape, 0.0))} -> {_calls(after.get(shape, 0.0))} a step"
        for _, shape in changed[:SHAPES_SHOWN]
    ]


def format_explained(found: Explained, top: int = TOP) -> str:
    a, b = found.a, found.b
    basis = "the device's kernel time" if a.basis == b.basis == "device" else "cpu time"
    change = found.step_change
    lines = [
        f"explain {found.combination}: A {a.build} (torch {a.torch}) against B {b.build} (torch {b.torch}),"
        f" {a.processes} + {b.processes} processes, interleaved",
        f"ops ranked by the change in self time per step ({basis}); A = {a.build}, B = {b.build}",
        *_table(found.ops, a, b, top, "op"),
    ]
    if found.kernels:
        lines += [
            "",
            "kernels (device time; the ops' device times above hold them)",
            *_table(found.kernels, a, b, top, "kernel"),
        ]
    explained = found.explained
    left = change - explained
    share = f" ({100 * left / change:.0f}% of the change)" if abs(change) > 1e-12 else ""
    lines += [
        "",
        f"step without the profiler: A {_ms(a.step)} ms, B {_ms(b.step)} ms, change {change * 1e3:+.3f} ms"
        f" ({100 * change / a.step:+.1f}%)",
        f"the table's changes, every row summed: {explained * 1e3:+.3f} ms/step; unexplained"
        f" {left * 1e3:+.3f} ms{share}",
        f"step under the profiler: A {_ms(a.profiled_step)} ms, B {_ms(b.profiled_step)} ms (its own cost included)",
    ]
    for side_ in (a, b):
        lines += [
            f"missing in {side_.build} (torch {side_.torch}): {said}" for said in side_.missing
        ]
    lines += found.notes
    if found.seconds:
        lines.append(f"explained in {found.seconds:.0f} s")
    return "\n".join(lines)


def _profile(
    session: fresh.Session, builds: list[fresh.Named], options: Options
) -> dict[str, list[dict[str, Any]]]:
    """``options.rounds`` fresh processes per build, interleaved (A B, B A, ...); each one's profile."""
    python = asv.environment_python(session.config)
    reader = timeline.Reader(session.timeline)
    benchmark_id = session.key if session.index < 0 else f"{session.key}-{session.index}"
    assert benchmark_id is not None
    environments = {}
    for build in builds:
        placed = servers.place(
            python, reader.build(build.commit), session.root / "src", session.scratch, session.env
        )
        # a build server's environment, its process never started: the build's paths and variables, as compare's
        environments[build.name] = (
            placed,
            servers.Server(
                python, placed, session.benchmarks, benchmark_id, session.env, session.scratch
            ).env,
        )
    said: dict[str, list[dict[str, Any]]] = {build.name: [] for build in builds}
    total, started = options.rounds * len(builds), time.monotonic()
    for number in range(options.rounds):
        for build in builds if number % 2 == 0 else builds[::-1]:
            placed, env = environments[build.name]
            out = session.scratch / f"profile-{build.name.replace('@', '-')}-{number}.json"
            command = [
                str(python),
                "-S",
                str(SCRIPT),
                str(session.benchmarks),
                benchmark_id,
                placed.torch_dir,
                str(out),
                str(options.calls),
                str(os.getpid()),
            ]
            try:
                done = subprocess.run(
                    command, capture_output=True, text=True, env=env, timeout=PROCESS_TIMEOUT
                )
                output, rc = done.stdout + done.stderr, done.returncode
            except subprocess.TimeoutExpired:
                output, rc = f"timed out after {PROCESS_TIMEOUT:.0f} s", -1
            if options.log is not None:
                with open(options.log, "a") as handle:
                    handle.write(f"$ {' '.join(command)}\n{output}\n")
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
            step = found["call_seconds"] / found["steps_per_call"]
            left = elapsed / count * (total - count)
            log.info(
                f"process {count}/{total} ({build.name}): a step {step * 1e3:.2f} ms; {elapsed:.0f} s so far,"
                f" ~{left:.0f} s left"
            )
    return said


def explain(a_ref: str, b_ref: str, options: Options) -> Explained:
    """Profile the combination in builds A and B afresh and tabulate what changed; nothing is recorded."""
    started = time.monotonic()
    measuring = options.measuring
    compare.check(measuring)
    _, _, (a, b) = fresh.name_builds([a_ref, b_ref], options.manifest, options.timeline)
    if a.name == b.name:
        raise UserError(f"A and B are the same build ({a.name}): name two builds")
    with fresh.Session(measuring, [a, b]) as session:
        combination = session.check_bench(a.commit)
        log.info(
            f"profiling {combination} in {a.name} and {b.name}: {options.rounds} processes each,"
            f" {options.calls} profiled calls a process"
        )
        said = _profile(session, [a, b], options)
    found = diff(combination, side(a.name, said[a.name]), side(b.name, said[b.name]))
    return Explained(
        found.combination,
        found.a,
        found.b,
        found.ops,
        found.kernels,
        time.monotonic() - started,
        found.notes,
        (a.commit, b.commit),
    )


def save(found: Explained, path: Path, top: int = TOP) -> None:
    """The table as text at ``path``, its numbers beside it (``.json``), for the site and for scripts."""
    path.write_text(format_explained(found, top) + "\n")
    path.with_name(path.name + ".json").write_text(json.dumps(asdict(found), indent=1) + "\n")


def run(a_ref: str, b_ref: str, options: Options) -> int:
    """The command: explain, print the table, keep it where --save says; returns the exit status."""
    found = explain(a_ref, b_ref, options)
    print(format_explained(found, options.top))
    if options.save is not None:
        save(found, options.save, options.top)
    if options.keep:
        print(f"the table is kept for the site in {keep(found, options)}")
    sys.stdout.flush()
    return 0


def stored(results: Path) -> Path:
    """Where bisect keeps its tables for the site: ``explain/`` beside the results folder."""
    return results.parent / "explain"


def stored_name(combination: str, old_commit: str, new_commit: str) -> str:
    """A stored table's file name: the combination and the two builds' timeline commits, hashed (the site finds
    the table of a regression it keeps by the same three)."""
    return (
        hashlib.sha256(f"{combination}\0{old_commit}\0{new_commit}".encode()).hexdigest()[:20]
        + ".txt"
    )


def after_bisect(before: str, first: str, options: Options, bisected: float) -> Path | None:
    """bisect's last part: the table of its first bad build against the build before it, timed apart from the
    bisection and kept beside the results (:func:`stored`) for the site. Whatever stops it is said in one
    line: bisect's own answer and exit status stand. Returns the stored table's path."""
    print(
        f"\nexplaining {first} against {before}: mpsbench explain (--no-explain leaves it out)",
        flush=True,
    )
    try:
        found = explain(before, first, options)
    except UserError as exc:
        print(f"explain could not run: {exc}")
        return None
    print(format_explained(found, options.top))
    path = keep(found, options)
    print(
        f"timed apart: the bisection {bisected:.0f} s, explain {found.seconds:.0f} s; the table is kept in {path}"
    )
    return path


def keep(found: Explained, options: Options) -> Path:
    """The table kept beside the suite's results (:func:`stored`), named for the site (:func:`stored_name`)."""
    folder = stored(options.measuring.conf.results)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / stored_name(found.combination, *found.commits)
    save(found, path, options.top)
    return path
