"""What each step of a record run will cost in time, from this machine's earlier runs, else docs/budget.md.

Every combination a record run measures adds a line to ``<results>-costs.jsonl`` (beside the results folder, as the
audit trail is: asv reads every file inside it): machine, build, combination, seconds, outcome. An estimate for a
combination is the median of this machine's lines for it; for one never measured here, the median of its benchmark's;
else docs/budget.md's measured build (below) spread evenly over this machine's default selection. An install's estimate is the
median of the build times asv recorded in this machine's results files (``durations["<build>"]``), else the measured
figure below. Each estimate says where it came from.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

# docs/budget.md, measured on the project's 2-core VM on 2026-11-23: one build's cpu default took 787 s of asv run
# (`scripts/bench 58d72ce^!`); on one H100 the cuda default took 165 s in all. A cold install took 79-82 s there.
BUDGET_BUILD_SECONDS = {"cpu": 787.0, "gpu": 165.0}
BUDGET_INSTALL_SECONDS = 80.0
CACHED_SWITCH_SECONDS = 5.0  # an installed build: asv's environment check and one .pth file (measured: 1-9 s)
WHERE_MEASURED = "this machine's earlier runs"
WHERE_BUDGET = "docs/budget.md's measured build (no run here yet)"


def trail(results: Path) -> Path:
    """This machine's measured costs: beside the results folder, outside it."""
    return results.parent / f"{results.name}-costs.jsonl"


def add(results: Path, machine: str, lines: Iterable[dict[str, object]]) -> None:
    """Append measured combinations (asv_saving's "done" events) to the costs file."""
    text = "".join(json.dumps({"machine": machine, **line}, sort_keys=True) + "\n" for line in lines)
    if text:
        with open(trail(results), "a") as out:
            out.write(text)


@dataclass(frozen=True)
class Estimate:
    seconds: float
    source: str  # WHERE_MEASURED or WHERE_BUDGET

    def __add__(self, other: Estimate) -> Estimate:
        source = self.source if self.source == other.source else "this machine's runs and docs/budget.md"
        return Estimate(self.seconds + other.seconds, source)


def _benchmark(name: str) -> str:
    return name.split("(", 1)[0]


class Costs:
    """This machine's measured costs, read once per record run, and the fallbacks."""

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
        self.installs = sorted(_install_seconds(results / machine))

    def note(self, name: str, seconds: float) -> None:
        self.by_name.setdefault(name, []).append(seconds)
        self.by_benchmark.setdefault(_benchmark(name), []).append(seconds)

    def combinations(self, names: Sequence[str]) -> Estimate:
        """The time ``names`` will take."""
        total, fallback = 0.0, 0
        for name in names:
            known = self.by_name.get(name) or self.by_benchmark.get(_benchmark(name))
            if known:
                total += statistics.median(known)
            else:
                fallback += 1
        if not fallback:
            return Estimate(total, WHERE_MEASURED)
        spread = BUDGET_BUILD_SECONDS["gpu" if self.gpu else "cpu"] / max(self.default, 1) * fallback
        return Estimate(total + spread, WHERE_BUDGET if not total else "this machine's runs and docs/budget.md")

    def install(self, installed: bool) -> Estimate:
        if installed:
            return Estimate(CACHED_SWITCH_SECONDS, WHERE_MEASURED if self.installs else WHERE_BUDGET)
        cold = [seconds for seconds in self.installs if seconds > 30]  # a switch to a cached build takes seconds
        return Estimate(statistics.median(cold), WHERE_MEASURED) if cold else Estimate(BUDGET_INSTALL_SECONDS,
                                                                                        WHERE_BUDGET)


def _install_seconds(folder: Path) -> list[float]:
    found = []
    for path in folder.glob("*.json"):
        if path.name == "machine.json":
            continue
        try:
            seconds = json.loads(path.read_text()).get("durations", {}).get("<build>")
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(seconds, (int, float)):
            found.append(float(seconds))
    return found


def clock(seconds: float) -> str:
    """A duration as a person reads it: 45 s, 3 min 05 s, 1 h 02 min."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"
