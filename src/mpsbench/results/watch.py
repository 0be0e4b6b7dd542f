"""What a record run says while it runs, and what each step will cost.

First the plan (each step's order, estimated time and disk), then a line per measured combination (build i of n,
combinations done of m, elapsed, what is left, disk used and free), a line a minute for a combination that runs longer,
and a one-line skip for a build that does not fit on the disk; read from the events asv's saving runner writes
(:mod:`mpsbench.core.asv_saving`).

Estimates: every combination measured adds a line to ``<results>-costs.jsonl`` (beside the results folder: asv reads
every file inside it). A combination's estimate is the median of this machine's lines for it, else of its benchmark's,
else docs/evidence/default-run.md's measured build spread over this machine's default selection; an install's (or a switch to a
build installed already), the median of the build times of that kind asv recorded here (``durations["<build>"]``),
else the measured figure. Each says where it came from.
"""

from __future__ import annotations

import contextlib
import json
import statistics
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from mpsbench.core import asv_saving, progress

GB = 1e9
LONG = 60.0  # seconds: a combination running longer says so, once a minute
# The measured builds (docs/evidence/default-run.md): the default selection on a 2-core Linux machine (cpu) and
# on one datacenter GPU (gpu)
BUDGET_BUILD_SECONDS = {"cpu": 787.0, "gpu": 165.0}
BUDGET_INSTALL_SECONDS = 80.0  # a cold install on that machine (measured: 79-82 s)
CACHED_SWITCH_SECONDS = 5.0  # an installed build: asv's environment check and one .pth file (measured: 1-9 s, budget.md: 9 s)
WHERE_MEASURED = "this machine's earlier runs"
WHERE_BUDGET = "docs/evidence/default-run.md's measured build (no run here yet)"
WHERE_BOTH = "this machine's runs and docs/evidence/default-run.md"

log = progress.logger(__name__)


def trail(results: Path) -> Path:
    return results.parent / f"{results.name}-costs.jsonl"


def add(results: Path, machine: str, lines: Iterable[dict[str, object]]) -> None:
    """Append measured combinations (asv_saving's "done" events) to the costs file."""
    text = "".join(json.dumps({"machine": machine, **line}, sort_keys=True) + "\n" for line in lines)
    if text:
        with open(trail(results), "a") as out:
            out.write(text)


def clock(seconds: float) -> str:
    """A duration as a person reads it: 45 s, 3 min 05 s, 1 h 02 min."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


def _gb(size: float) -> str:
    return f"{size / GB:.1f} GB"


@dataclass(frozen=True)
class Estimate:
    seconds: float
    source: str  # WHERE_MEASURED, WHERE_BUDGET or WHERE_BOTH

    def __add__(self, other: Estimate) -> Estimate:
        return Estimate(self.seconds + other.seconds, self.source if self.source == other.source else WHERE_BOTH)


class Costs:
    """This machine's measured costs, read once per record run."""

    def __init__(self, results: Path, machine: str, gpu: bool, default: int) -> None:
        self.by_name: dict[str, list[float]] = {}
        self.by_benchmark: dict[str, list[float]] = {}
        self.gpu = gpu
        self.default = default  # combinations in this machine's default selection: the budget's build ran those
        try:
            lines = trail(results).read_text().splitlines()
        except OSError:
            lines = []
        for text in lines:
            try:
                line = json.loads(text)
                name, seconds = str(line["name"]), float(line["seconds"])
            except (ValueError, KeyError, TypeError):
                continue  # a line cut short by a kill
            if line.get("machine") == machine:
                self.note(name, seconds)
        self.installs: list[float] = []
        for path in (results / machine).glob("*.json"):
            try:
                seconds = json.loads(path.read_text()).get("durations", {}).get("<build>")
            except (OSError, ValueError, AttributeError):
                continue
            if isinstance(seconds, (int, float)) and path.name != "machine.json":
                self.installs.append(float(seconds))

    def note(self, name: str, seconds: float) -> None:
        self.by_name.setdefault(name, []).append(seconds)
        self.by_benchmark.setdefault(name.split("(", 1)[0], []).append(seconds)

    def combinations(self, names: Sequence[str]) -> Estimate:
        known = [self.by_name.get(name) or self.by_benchmark.get(name.split("(", 1)[0]) for name in names]
        total = sum((statistics.median(seconds) for seconds in known if seconds), 0.0)
        fallback = sum(not seconds for seconds in known)
        if not fallback:
            return Estimate(total, WHERE_MEASURED)
        spread = BUDGET_BUILD_SECONDS["gpu" if self.gpu else "cpu"] / max(self.default, 1) * fallback
        return Estimate(total + spread, WHERE_BUDGET if not total else WHERE_BOTH)

    def install(self, installed: bool) -> Estimate:
        # asv records a switch to a cached build as a build time too: seconds, where an install takes a minute or more
        switches = [seconds for seconds in self.installs if seconds <= 30]
        cold = [seconds for seconds in self.installs if seconds > 30]
        measured = switches if installed else cold
        if measured:
            return Estimate(statistics.median(measured), WHERE_MEASURED)
        return Estimate(CACHED_SWITCH_SECONDS if installed else BUDGET_INSTALL_SECONDS, WHERE_BUDGET)


@dataclass(frozen=True)
class Step:
    """One asv run: one build, the combinations it measures, and which pass over the builds it is."""

    commit: str
    names: tuple[str, ...]
    tier: str  # "first tier", "the rest" or "every combination"


class Builds(Protocol):
    """What a record run asks about a build before it runs it (bench.py answers, from the timeline and the cache)."""

    def name(self, commit: str) -> str: ...

    def need(self, commit: str) -> tuple[int, str, bool]: ...  # bytes the install adds, where that figure is from, installed

    def free(self) -> int: ...

    def used(self) -> int: ...

    def cache(self) -> Path: ...


class Watch:
    def __init__(self, steps: Sequence[Step], estimates: Costs, builds: Builds | None) -> None:
        self.steps, self.estimates, self.builds = list(steps), estimates, builds
        self.commits = list(dict.fromkeys(step.commit for step in self.steps))
        self.total = sum(len(step.names) for step in self.steps)
        self.done = self.offset = 0
        self.started = time.monotonic()
        self.needs = {commit: builds.need(commit) if builds else (0, "unknown", True) for commit in self.commits}
        self.installed = {commit for commit, need in self.needs.items() if need[2]}
        self.current: Step | None = None
        self.left: list[str] = []
        self.running: tuple[str, float] | None = None  # the combination asv measures now, since when
        self.said_long = 0.0
        self.skipped: set[str] = set()
        self.cache_used = builds.used() if builds else 0

    def _name(self, commit: str) -> str:
        return self.builds.name(commit) if self.builds else commit[:8]

    def _estimates(self, steps: Iterable[Step], seen: set[str]) -> Iterator[tuple[Step, bool, Estimate]]:
        """Each step, whether it is the first of its build not in ``seen`` (its install counted), and its estimate."""
        for step in steps:
            first = step.commit not in seen
            seen.add(step.commit)
            estimate = self.estimates.combinations(step.names)
            yield step, first, self.estimates.install(step.commit in self.installed) + estimate if first else estimate

    def plan(self) -> str:
        """The run's first lines: what it will do, in what order, each step's estimated time and disk."""
        lines = [f"the run: {len(self.commits)} builds, newest first, {self.total} combinations; each value is saved"
                 " as it is measured, so a stopped run keeps it and the next one goes on from there"]
        total = Estimate(0.0, WHERE_MEASURED)
        for number, (step, first, estimate) in enumerate(self._estimates(self.steps, set()), 1):
            total = total + estimate
            need, how, installed = self.needs[step.commit]
            disk = ""
            if first and self.builds is not None:  # without them, nothing is known of the build's install
                disk = f"  disk: none, {how}" if installed else f"  disk: about {_gb(need)} ({how})"
            lines.append(f"  {number}. {self._name(step.commit)}: {step.tier}, {len(step.names)} combinations,"
                         f" about {clock(estimate.seconds)} ({estimate.source}){disk}")
        if self.builds is not None:
            needed = sum(need for need, _, installed in self.needs.values() if not installed)
            lines.append(f"  in all about {clock(total.seconds)} and {_gb(needed)} more disk; the build cache"
                         f" {self.builds.cache()} holds {_gb(self.cache_used)}, {_gb(self.builds.free())} free there"
                         + ("" if needed <= self.builds.free() else ": builds that do not fit are skipped, each"
                            " with a line (MPSBENCH_CACHE=/path moves the cache to a disk with room)"))
        return "\n".join(lines)

    def begin(self, step: Step) -> bool:
        """Say which step starts; False (with one line) for a build whose install does not fit on the disk."""
        if step.commit in self.skipped:
            return False
        self.current, self.left, self.running, self.offset = step, list(step.names), None, 0  # a new events file
        need, how, installed = self.needs[step.commit]
        if self.builds is not None and not installed and need > (free := self.builds.free()):
            self.skipped.add(step.commit)
            self.total -= sum(len(s.names) for s in self.steps if s.commit == step.commit)
            log.warning(f"skipping {self._name(step.commit)}: installing it needs about {_gb(need)} ({how}),"
                        f" {_gb(free)} is free at {self.builds.cache()}; free space there, or move the build cache"
                        " to a disk with room (MPSBENCH_CACHE=/path scripts/bench), and run again")
            return False
        self.cache_used = self.builds.used() if self.builds is not None else 0
        log.info(f"build {self.commits.index(step.commit) + 1} of {len(self.commits)}: {self._name(step.commit)},"
                 f" {step.tier}: {len(step.names)} combinations")
        return True

    def poll(self, scratch: Path) -> list[dict[str, Any]]:
        """The combinations measured since the last poll (each already saved in ``scratch``), progress said."""
        done = []
        for event in self._read(scratch):
            if event.get("event") == "start":
                self.running, self.said_long = (str(event.get("name")), time.monotonic()), 0.0
            elif event.get("event") == "done":
                done.append(event)
                self.done += 1
                self.running = None
                name, seconds = str(event.get("name")), float(event.get("seconds", 0.0))
                if name in self.left:
                    self.left.remove(name)
                self.estimates.note(name, seconds)
                commit = self.current.commit if self.current else ""
                if commit not in self.installed and self.builds is not None:  # its install is done: the disk it took
                    self.cache_used = self.builds.used()
                self.installed.add(commit)
                log.info(self.line(name, str(event.get("outcome")), seconds))
        if self.running is not None:
            name, since = self.running
            running_for = time.monotonic() - since
            if running_for >= LONG and running_for - self.said_long >= LONG:
                self.said_long = running_for
                log.info(f"still measuring {name}: {clock(running_for)} so far")
        return done

    def _read(self, scratch: Path) -> list[dict[str, Any]]:
        try:
            with open(scratch / asv_saving.EVENTS) as handle:
                handle.seek(self.offset)
                text = handle.read()
        except OSError:
            return []
        whole = text[:text.rfind("\n") + 1]  # a line still being written waits for the next poll
        self.offset += len(whole.encode())
        events = []
        for line in whole.splitlines():
            with contextlib.suppress(ValueError):
                events.append(json.loads(line))
        return events

    def remaining(self) -> Estimate:
        """What is left: this step's combinations not yet measured, then every later step."""
        estimate = self.estimates.combinations(self.left)
        if self.current is None:
            return estimate
        later = [step for step in self.steps[self.steps.index(self.current) + 1:] if step.commit not in self.skipped]
        return sum((step_estimate for _, _, step_estimate in self._estimates(later, {self.current.commit})), estimate)

    def line(self, name: str, outcome: str, seconds: float) -> str:
        number = self.commits.index(self.current.commit) + 1 if self.current else 0
        disk = f", build cache {_gb(self.cache_used)}, {_gb(self.builds.free())} free" if self.builds is not None else ""
        return (f"build {number} of {len(self.commits)}, {self.done} of {self.total} combinations done"
                f" ({name}: {outcome}, {clock(seconds)}), elapsed {clock(time.monotonic() - self.started)},"
                f" about {clock(self.remaining().seconds)} left{disk}")

    def end(self) -> None:
        log.info(f"measured {self.done} of {self.total} combinations in {clock(time.monotonic() - self.started)}"
                 + (f"; skipped for disk space: {', '.join(self._name(c) for c in sorted(self.skipped))}"
                    if self.skipped else ""))
