"""What a record run says while it runs: the plan first (each step's order, estimated time and disk), then a line per
measured combination (build i of n, combinations done of m, elapsed, an estimate of what is left, disk used and
free), a line every minute for a combination that runs longer than one, and a one-line skip for a build that does not
fit on the disk. It reads the events asv's saving runner writes (:mod:`mpsbench.core.asv_saving`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from mpsbench.core import asv_saving, progress
from mpsbench.results import costs

GB = 1e9
LONG = 60.0  # seconds: a combination running longer says so, once a minute

log = progress.logger(__name__)


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


def _gb(size: float) -> str:
    return f"{size / GB:.1f} GB"


class Watch:
    """The progress of one record run over its steps."""

    def __init__(self, steps: Sequence[Step], estimates: costs.Costs, builds: Builds | None) -> None:
        self.steps = list(steps)
        self.estimates = estimates
        self.builds = builds
        self.commits = list(dict.fromkeys(step.commit for step in self.steps))
        self.total = sum(len(step.names) for step in self.steps)
        self.done = 0
        self.started = time.monotonic()
        self.needs = {commit: builds.need(commit) if builds else (0, "unknown", True) for commit in self.commits}
        self.installed = {commit for commit, need in self.needs.items() if need[2]}
        self.current: Step | None = None
        self.left: list[str] = []
        self.running: tuple[str, float] | None = None  # the combination asv measures now, since when
        self.said_long = 0.0
        self.offset = 0
        self.skipped: set[str] = set()
        self.cache_used = builds.used() if builds else 0

    def _name(self, commit: str) -> str:
        return self.builds.name(commit) if self.builds else commit[:8]

    def _step_estimate(self, step: Step, first_of_build: bool) -> costs.Estimate:
        estimate = self.estimates.combinations(step.names)
        if first_of_build:
            estimate = self.estimates.install(step.commit in self.installed) + estimate
        return estimate

    def plan(self) -> str:
        """The run's first lines: what it will do, in what order, each step's estimated time and disk."""
        lines = [f"the run: {len(self.commits)} builds, newest first, {self.total} combinations; each value is saved"
                 " as it is measured, so a stopped run keeps it and the next one goes on from there"]
        seen: set[str] = set()
        total = costs.Estimate(0.0, costs.WHERE_MEASURED)
        for number, step in enumerate(self.steps, 1):
            first = step.commit not in seen
            seen.add(step.commit)
            estimate = self._step_estimate(step, first)
            total = total + estimate
            need, how, installed = self.needs[step.commit]
            disk = ("" if not first else "  disk: installed already" if installed else
                    f"  disk: about {_gb(need)} ({how})")
            lines.append(f"  {number}. {self._name(step.commit)}: {step.tier}, {len(step.names)} combinations,"
                         f" about {costs.clock(estimate.seconds)} ({estimate.source}){disk}")
        if self.builds is not None:
            needed = sum(need for need, _, installed in self.needs.values() if not installed)
            lines.append(f"  in all about {costs.clock(total.seconds)} and {_gb(needed)} more disk; the build cache"
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
        if self.builds is not None and not installed:
            free = self.builds.free()
            if need > free:
                self.skipped.add(step.commit)
                self.total -= sum(len(s.names) for s in self.steps if s.commit == step.commit)
                log.warning(f"skipping {self._name(step.commit)}: installing it needs about {_gb(need)} ({how}),"
                            f" {_gb(free)} is free at {self.builds.cache()}; free space there, or move the build cache"
                            " to a disk with room (MPSBENCH_CACHE=/path scripts/bench), and run again")
                return False
        self.cache_used = self.builds.used() if self.builds is not None else 0
        number = self.commits.index(step.commit) + 1
        log.info(f"build {number} of {len(self.commits)}: {self._name(step.commit)}, {step.tier}:"
                 f" {len(step.names)} combinations")
        return True

    def poll(self, scratch: Path) -> list[dict[str, Any]]:
        """The combinations measured since the last poll (each already saved in ``scratch``), progress said."""
        events = self._read(scratch)
        done = []
        for event in events:
            if event.get("event") == "start":
                self.running, self.said_long = (str(event.get("name")), time.monotonic()), 0.0
            elif event.get("event") == "done":
                done.append(event)
                self.done += 1
                self.running = None
                name = str(event.get("name"))
                if name in self.left:
                    self.left.remove(name)
                self.estimates.note(name, float(event.get("seconds", 0.0)))
                commit = self.current.commit if self.current else ""
                if commit not in self.installed and self.builds is not None:  # its install is done: the disk it took
                    self.cache_used = self.builds.used()
                self.installed.add(commit)
                log.info(self.line(name, str(event.get("outcome")), float(event.get("seconds", 0.0))))
        if self.running is not None:
            name, since = self.running
            running_for = time.monotonic() - since
            if running_for >= LONG and running_for - self.said_long >= LONG:
                self.said_long = running_for
                log.info(f"still measuring {name}: {costs.clock(running_for)} so far")
        return done

    def _read(self, scratch: Path) -> list[dict[str, Any]]:
        path = scratch / asv_saving.EVENTS
        try:
            with open(path) as handle:
                handle.seek(self.offset)
                text = handle.read()
        except OSError:
            return []
        whole = text[:text.rfind("\n") + 1]  # a line still being written waits for the next poll
        self.offset += len(whole.encode())
        events = []
        for line in whole.splitlines():
            try:
                events.append(json.loads(line))
            except ValueError:
                continue
        return events

    def remaining(self) -> costs.Estimate:
        """What is left: this step's combinations not yet measured, then every later step."""
        estimate = self.estimates.combinations(self.left)
        if self.current is not None:
            later = self.steps[self.steps.index(self.current) + 1:]
            seen = {self.current.commit}
            for step in later:
                if step.commit in self.skipped:
                    continue
                estimate = estimate + self._step_estimate(step, step.commit not in seen)
                seen.add(step.commit)
        return estimate

    def line(self, name: str, outcome: str, seconds: float) -> str:
        """The running line after a combination is measured."""
        number = self.commits.index(self.current.commit) + 1 if self.current else 0
        left = self.remaining()
        disk = (f", build cache {_gb(self.cache_used)}, {_gb(self.builds.free())} free" if self.builds is not None
                else "")
        return (f"build {number} of {len(self.commits)}, {self.done} of {self.total} combinations done"
                f" ({name}: {outcome}, {costs.clock(seconds)}), elapsed {costs.clock(time.monotonic() - self.started)},"
                f" about {costs.clock(left.seconds)} left{disk}")

    def end(self) -> None:
        log.info(f"measured {self.done} of {self.total} combinations in {costs.clock(time.monotonic() - self.started)}"
                 + (f"; skipped for disk space: {', '.join(self._name(c) for c in sorted(self.skipped))}"
                    if self.skipped else ""))
