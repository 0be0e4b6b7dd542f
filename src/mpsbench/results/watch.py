"""A record run's plan, progress lines and time left (docs/explanation/estimates.md)."""

from __future__ import annotations

import collections
import contextlib
import math
import re
import shutil
import statistics
import time
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mpsbench.core import asv_saving, progress
from mpsbench.measure import quiet
from mpsbench.results import merge

GB = 1e9
LONG = 60.0  # a long combination or install says so once a minute
RECENT = 10  # readings that say whether the machine is busy now
# wall seconds per combination (docs/evidence/estimates.md); mps: cuda's, no Mac measured
MEASURED_SECONDS: dict[str, dict[str, float]] = {
    "cpu": {
        f"benchmark_{name}": seconds
        for name, seconds in {
            "models.Training": 5.9,
            "models.Inference": 2.6,
            "models.TrainingCapacity": 0.55,
            "models.InferenceCapacity": 0.55,
            "models.Environment": 2.7,
            "coldstart.TrainingColdStart": 9.2,
            "coldstart.InferenceColdStart": 5.2,
            "epoch.Epoch": 4.2,
            "instruments.TrainingInstruments": 2.6,
            "instruments.InferenceInstruments": 2.6,
            "ops.ComputeBoundOps": 0.88,
            "ops.ForwardBackwardOps": 0.8,
            "ops.MemoryBoundOps": 0.6,
            "precision.TrainingPrecision": 8.0,
            "precision.InferencePrecision": 3.1,
            "precision.TrainingPrecisionCapacity": 2.4,
            "precision.InferencePrecisionCapacity": 2.4,
        }.items()
    },
    "cuda": {
        "benchmark_models.Training": 4.0,
        "benchmark_models.Inference": 2.1,
        **{
            f"benchmark_ops.{kind}Ops": 0.68
            for kind in ("ComputeBound", "ForwardBackward", "MemoryBound")
        },
    },
}
MEASURED_SECONDS["mps"] = MEASURED_SECONDS["cuda"]
# docs/explanation/estimates.md
SETUP_SECONDS = {"cpu": {"benchmark_models.InferenceCapacity": 63.0}}
DEVICE_AVERAGE_SECONDS = {"cpu": 787.0 / 354, "cuda": 165.0 / 108, "mps": 165.0 / 108}
STEP_START_SECONDS = 16.0
BUDGET_INSTALL_SECONDS = 80.0  # besides the download
PUBLISH_SECONDS = 5.0
WHERE_MEASURED = "this machine's earlier runs"
WHERE_BUDGET = "figures measured elsewhere: no run here yet"
WHERE_BOTH = "this machine's runs and figures measured elsewhere"
CANNOT = "this machine cannot install it: "
DEVICE = re.compile(r"\('(cpu|mps|cuda)'")
LIKE = 2.0  # classes this close in length slow down alike
CostClass = tuple[str, str]  # device, benchmark class

log = progress.logger(__name__)


def trail(results: Path) -> Path:
    return merge.beside(results, "-costs.jsonl")


def add(results: Path, machine: str, lines: Iterable[dict[str, object]]) -> None:
    merge.append(trail(results), ({"machine": machine, **line} for line in lines))


def _lines(results: Path, machine: str) -> Iterator[dict[str, Any]]:
    return (line for line in merge.read_lines(trail(results)) if line.get("machine") == machine)


def skipped(results: Path, machine: str, commit: str) -> dict[str, str]:
    """Combinations seen to skip on ``commit`` here, with their reasons."""
    return {
        str(line.get("name")): str(line.get("reason", "no reason given"))
        for line in _lines(results, machine)
        if line.get("outcome") == "skipped" and line.get("build") == commit
    }


def clock(seconds: float) -> str:
    """45 s, 3 min 05 s, 1 h 02 min."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


def _gb(size: float) -> str:
    return f"{size / GB:.1f} GB"


def device(name: str) -> str:
    found = DEVICE.search(name)
    return found[1] if found else "cpu"


def group(name: str) -> str:
    """The benchmark's class: its combinations share a setup_cache."""
    return name.split("(", 1)[0].rsplit(".", 1)[0]


def cost_class(name: str) -> CostClass:
    return device(name), group(name)


def _median(seconds: list[float], fallback: float) -> float:
    return statistics.median(seconds) if seconds else fallback


class Costs:
    def __init__(self, results: Path, machine: str) -> None:
        self.by_name: dict[str, list[float]] = {}
        self.by_group: dict[CostClass, list[float]] = {}
        self.starts: dict[bool, list[float]] = {True: [], False: []}  # by installed
        self.publishes: list[float] = []
        walls = []  # name, class, its class's first in its pass, seconds
        begun: set[CostClass] | None = None
        for line in _lines(results, machine):
            with contextlib.suppress(ValueError, KeyError, TypeError):
                if line.get("event") == "begin":
                    self.starts[bool(line["installed"])].append(float(line["seconds"]))
                    begun = set()
                elif line.get("event") == "publish":
                    self.publishes.append(float(line["seconds"]))
                else:
                    name, seconds = str(line["name"]), float(line.get("wall", line["seconds"]))
                    key = cost_class(name)
                    walls.append((name, key, begun is not None and key not in begun, seconds))
                    if begun is not None:
                        begun.add(key)
        later = {key for _, key, first, _ in walls if not first}
        firsts = collections.defaultdict(list)
        for name, key, first, seconds in walls:
            if first and key in later:
                firsts[key].append(seconds)
            else:
                self.by_name.setdefault(name, []).append(seconds)
                self.by_group.setdefault(key, []).append(seconds)
        self.setups: dict[CostClass, float] = {
            key: max(0.0, statistics.median(seconds) - statistics.median(self.by_group[key]))
            for key, seconds in firsts.items()
        }

    def combination(self, name: str) -> float:
        """This machine's median for the combination, else its class's (not another class's: their
        ratios to the table differ), else the table's."""
        seconds = self.by_name.get(name) or self.by_group.get(cost_class(name), [])
        on = device(name)
        return _median(
            seconds, MEASURED_SECONDS.get(on, {}).get(group(name), DEVICE_AVERAGE_SECONDS[on])
        )

    def source(self, names: Iterable[str]) -> str:
        known = {cost_class(n) in self.by_group for n in names}
        return WHERE_BOTH if len(known) > 1 else WHERE_BUDGET if False in known else WHERE_MEASURED

    def setup(self, key: CostClass) -> float:
        return self.setups.get(key, SETUP_SECONDS.get(key[0], {}).get(key[1], 0.0))

    def install(self, installed: bool) -> float:
        budget = STEP_START_SECONDS + (0.0 if installed else BUDGET_INSTALL_SECONDS)
        return _median(self.starts[installed], budget)

    def publish(self) -> float:
        return _median(self.publishes, PUBLISH_SECONDS)


class Pace:
    """This run's seconds taken over estimated, per cost class."""

    PRIOR = 3.0

    def __init__(self, planned: Mapping[str, float]) -> None:
        self.took: dict[CostClass, float] = {}
        self.expected: dict[CostClass, float] = {}
        sums = collections.defaultdict(list)
        for name, seconds in planned.items():
            sums[cost_class(name)].append(max(seconds, 1e-3))
        self.mean = {key: statistics.fmean(values) for key, values in sums.items()}

    def note(self, key: CostClass, took: float, expected: float) -> None:
        self.took[key] = self.took.get(key, 0.0) + took
        self.expected[key] = self.expected.get(key, 0.0) + max(expected, 1e-3)

    def pooled(self, keys: Iterable[CostClass]) -> float:
        """The ratio of the classes ``keys``, leaning on 1."""
        ran = [key for key in keys if key in self.took]
        prior = self.PRIOR * statistics.fmean([self.mean.get(key, 1.0) for key in ran] or [1.0])
        took, expected = (sum(seen[key] for key in ran) for seen in (self.took, self.expected))
        return (took + prior) / (expected + prior)

    def run_ratio(self, module: str = "") -> float:
        return self.pooled(key for key in self.took if key[1].startswith(module))

    def setup_ratio(self, key: CostClass) -> float:
        """A setup_cache runs models: its benchmark file's pace, else the run's."""
        module = key[1].split(".")[0] + "."
        return self.run_ratio(module if any(k[1].startswith(module) for k in self.took) else "")

    def unlike(self, busy: float) -> float:
        """The pace of work unlike any run so far: on a quiet machine, 1."""
        return 1 + busy * (math.sqrt(self.run_ratio()) - 1)

    def lean(self, key: CostClass, seconds: float, busy: float) -> float:
        """The pooled ratio of the classes about as long: a short one is mostly asv's own work."""
        size = max(self.mean.get(key, seconds), 1e-3)
        like = [
            k for k in self.took if k != key and 1 / LIKE <= self.mean.get(k, 0.0) / size <= LIKE
        ]
        return self.pooled(like) if like else self.unlike(busy)

    def ratio(self, key: CostClass, seconds: float = 0.0, busy: float = 1.0) -> float:
        prior = self.PRIOR * max(self.mean.get(key, seconds), 1e-3)
        lean = self.lean(key, seconds, busy)
        return (self.took.get(key, 0.0) + prior * lean) / (self.expected.get(key, 0.0) + prior)


@dataclass(frozen=True)
class Step:
    commit: str
    names: tuple[str, ...]
    tier: str


@dataclass(frozen=True)
class Build:
    """A build's name and builds.disk.Facts' fields, by name."""

    name: str
    need: int
    how: str
    installed: bool
    download: int = 0
    hosts: tuple[str, ...] = ()
    refused: str = ""


@dataclass(frozen=True)
class Disk:
    cache: Path
    builds: Mapping[str, Build]  # the run's, newest first


def free(folder: Path) -> int:
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    return shutil.disk_usage(folder).free


def said_busy(fields: Mapping[str, Any], suffix: str = "") -> bool | None:
    state = quiet.State.of(fields, suffix)
    return None if state is None else bool(quiet.problems(state))


def used(folder: Path) -> int:
    if not folder.is_dir():
        return 0
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


class Watch:
    def __init__(self, steps: Sequence[Step], estimates: Costs, disk: Disk) -> None:
        self.steps, self.estimates, self.disk = list(steps), estimates, disk
        self.commits = list(dict.fromkeys(step.commit for step in self.steps))
        self.done = self.index = 0
        self.started = time.monotonic()
        self.builds = {
            c: disk.builds.get(c) or Build(c[:8], 0, "unknown", True) for c in self.commits
        }
        self.installed = {commit for commit, build in self.builds.items() if build.installed}
        self.skipped: dict[str, str] = {}  # commit: its name and why
        self.cache_used = self._cache()
        self.expected = {n: estimates.combination(n) for s in self.steps for n in s.names}
        self.pace = Pace(self.expected)
        self._start(None, True)
        self.to_publish = False
        self.run_starts: dict[bool, list[float]] = {True: [], False: []}
        self.run_publishes: list[float] = []
        self.held: set[str] = set()  # in this step
        self.holds = self.again = 0  # held in this run; measured again in this pass
        # within passes: combinations started, the gate's wait before them, before this one
        self.started_count, self.waited, self.waiting = 0, 0.0, 0.0
        self.waits: list[tuple[float, bool]] = []  # seconds, whether it ran out
        self.busy_after: list[bool] = []
        self.setup: dict[CostClass, float] = {}
        self.said_reasons: set[str] = set()

    @property
    def total(self) -> int:
        return sum(len(step.names) for step in self.steps if step.commit not in self.skipped)

    def _cache(self) -> int:
        return used(self.disk.cache)

    def _build(self, commit: str) -> str:
        return f"build {self.commits.index(commit) + 1} of {len(self.commits)}"

    def _scaled(self, key: CostClass, seconds: float) -> float:
        return seconds * self.pace.ratio(key, seconds, self._busy())

    def _own(self, seen: list[float], known: float) -> float:
        # a start-up or a publish is mostly asv's and the disk's work
        return statistics.median(seen) if seen else known * self.pace.unlike(self._busy())

    def _start_up(self, installed: bool) -> float:
        return self._own(self.run_starts[installed], self.estimates.install(installed))

    def _publish(self) -> float:
        return self._own(self.run_publishes, self.estimates.publish())

    def _estimate(self, names: Iterable[str]) -> float:
        return sum(self._scaled(cost_class(n), self.estimates.combination(n)) for n in names)

    def _setups(self, names: Iterable[str], begun: Collection[CostClass] = ()) -> float:
        return sum(
            self.setup.get(key, self.estimates.setup(key) * self.pace.setup_ratio(key))
            for key in {cost_class(name) for name in names} - set(begun)
        )

    def _waits(self, count: float) -> float:
        return count * self.waited / (self.started_count + Pace.PRIOR)

    def _busy(self) -> float:
        recent = self.busy_after[-RECENT:]
        return statistics.fmean(recent) if recent else min(1.0, self.holds / max(self.done, 1))

    def _gate_wait(self) -> float:
        return self._busy() * statistics.fmean(w for w, _ in self.waits) if self.waits else 0.0

    def _retry(self, held: Collection[str], left: Collection[str]) -> float:
        rate = self.holds / (self.done + Pace.PRIOR)
        if not held and not (left and rate):
            return 0.0
        values = self._estimate(held) + self._waits(len(held))
        values += rate * (self._estimate(left) + self._waits(len(left)))
        again = self._start_up(True) + self._setups(held) + values
        # a busy machine's wait runs out as often as this run's did: the retry is then skipped
        ran_out = statistics.fmean(out for _, out in self.waits) if self.waits else 0.0
        return self._gate_wait() + (1 - self._busy() * ran_out) * again

    def _steps(self, steps: Iterable[Step], seen: set[str]) -> Iterator[tuple[Step, bool, float]]:
        for step in steps:
            first = step.commit not in seen
            seen.add(step.commit)
            work = self._gate_wait() + self._estimate(step.names) + self._setups(step.names)
            work += self._waits(len(step.names)) + self._retry((), step.names)
            start = self._start_up(step.commit in self.installed or not first)
            yield step, first, start + work + self._publish()

    def _costs(self) -> list[str]:
        fetch = [build for commit, build in self.builds.items() if commit not in self.installed]
        needed, size = sum(b.need for b in fetch), sum(b.download for b in fetch)
        hosts = sorted({host for build in fetch for host in build.hosts})
        space = free(self.disk.cache)
        return [
            f"  disk: about {_gb(needed)} more in the build cache {self.disk.cache} (it holds"
            f" {_gb(self.cache_used)}), {_gb(space)} free there"
            + (
                ""
                if needed <= space
                else ": builds that do not fit are skipped (MPSBENCH_CACHE=/path moves the cache)"
            ),
            f"  downloads: about {_gb(size)} of wheels"
            + (f" from {', '.join(hosts)}" if hosts else "")
            + "; retried and resumed where cut"
            if size
            else "  downloads: none (every build is installed or stored here)",
        ]

    def plan(self) -> str:
        lines = [
            f"the run: {len(self.commits)} build{'s' if len(self.commits) != 1 else ''}, newest"
            f" first, {self.total} combinations; each value is saved as measured: a stopped run"
            " keeps it, the next goes on from there",
            *self._costs(),
        ]
        total = 0.0
        for step, first, estimate in self._steps(self.steps, set()):
            build = self.builds[step.commit]
            if first:
                if build.refused:
                    disk = f"; skipped: {CANNOT}{build.refused}"
                elif build.installed:
                    disk = f"; disk: none, {build.how}"
                else:
                    disk = f"; disk: about {_gb(build.need)} ({build.how})"
                lines.append(f"  {self.commits.index(step.commit) + 1}. {build.name}{disk}")
            if not build.refused:
                total += estimate
                lines.append(
                    f"     {step.tier}: {len(step.names)} combinations, about"
                    f" {clock(estimate)} ({self.estimates.source(step.names)})"
                )
        lines.append(
            f"  in all about {clock(total)}, publishing the site after each step;"
            " the estimate learns as it goes"
        )
        return "\n".join(lines)

    def _start(self, step: Step | None, installed: bool) -> None:
        self.current, self.offset = step, 0
        self.running: tuple[str, float] | None = None  # name, since
        self.left = list(step.names if step else ())
        self.step_began = self.last_event = self.said_long = time.monotonic()
        self.began_at, self.starting, self.start_installed = time.time(), True, installed
        self.last_at: float | None = None  # the previous end, on the events' clock
        self.gate_since: float | None = None
        self.classes: set[CostClass] = set()  # begun in this step

    def begin(self, step: Step) -> bool:
        """False for a build this machine cannot install."""
        if step.commit in self.skipped:
            return False
        build = self.builds[step.commit]
        why = CANNOT + build.refused if build.refused else ""
        if not why and not build.installed and build.need > (space := free(self.disk.cache)):
            why = (
                f"installing it needs about {_gb(build.need)} ({build.how}), {_gb(space)} is free"
                f" at {self.disk.cache}; free space there, or set MPSBENCH_CACHE=/path to a disk"
                " with room, and run again"
            )
        if why:
            self.skipped[step.commit] = f"{build.name}: {why}"
            log.warning(f"skipping {self.skipped[step.commit]}")
            return False
        self.index = self.steps.index(step)
        again = any(s.commit == step.commit for s in self.steps[: self.index])
        self._start(step, step.commit in self.installed or again)
        self.to_publish, self.held, self.again = True, set(), 0
        self.cache_used = self._cache()
        log.info(
            f"{self._build(step.commit)}: {build.name}, {step.tier}: {len(step.names)} combinations"
            + ("" if step.commit in self.installed else ", installed first")
        )
        return True

    def hold(self, names: Iterable[str]) -> None:
        new = set(names) - self.held
        self.holds += len(new)
        self.held |= new

    def gate_waits(self) -> None:
        if self.starting and self.gate_since is None:
            self.gate_since = self.said_long = time.monotonic()

    def retry_waited(self, seconds: float, ran_out: bool) -> None:
        if seconds >= 1.0:
            self.waits.append((seconds, ran_out))
        self.began_at += seconds

    def retry(self, names: Sequence[str]) -> None:
        self._start(Step(self.current.commit if self.current else "", tuple(names), "again"), True)

    def publish(self, seconds: float) -> list[dict[str, object]]:
        """The caller took ``seconds`` after this step: a publish, where any."""
        if seconds < 0.5:
            return []
        self.run_publishes.append(seconds)
        self.to_publish = False
        return [{"event": "publish", "seconds": round(seconds, 3)}]

    def poll(self, scratch: Path) -> list[dict[str, Any]]:
        done: list[dict[str, Any]] = []
        commit = self.current.commit if self.current else ""
        events, self.offset = asv_saving.read_events(scratch, self.offset)
        for event in events:
            at, name = float(event.get("at", time.time())), str(event.get("name"))
            now = time.monotonic()
            if event.get("event") == "start":
                self.running, self.said_long = (name, now), now
                self.waiting = waited = float(event.get("waited") or 0.0)
                if waited >= 1.0:
                    self.waits.append((waited, bool(said_busy(event))))
                if self.starting:
                    # the event is written after the gate's wait: the start-up ends before it
                    self.starting, self.last_at = False, at - waited
                    start_up = max(0.0, at - self.began_at - waited)
                    self.run_starts[self.start_installed].append(start_up)
                    done.append(
                        dict(
                            event="begin",
                            build=commit,
                            installed=commit in self.installed,
                            seconds=round(start_up, 3),
                        )
                    )
                else:
                    self.started_count, self.waited = self.started_count + 1, self.waited + waited
            elif event.get("event") == "done":
                seconds = float(event.get("seconds", 0.0))
                # from the previous end, less the gate's wait
                wall = max(
                    seconds, at - self.last_at - self.waiting if self.last_at is not None else 0.0
                )
                self.last_at, self.running, self.last_event = at, None, now
                done.append({**event, "wall": round(wall, 3), "waited": self.waiting})
                with contextlib.suppress(ValueError):
                    self.left.remove(name)
                # a class's first in a step pays its setup_cache
                key, expected = cost_class(name), self.expected.get(name, wall)
                if key in self.classes:
                    self.pace.note(key, wall, expected)
                else:
                    self.setup[key] = max(0.0, wall - self._scaled(key, expected))
                self.classes.add(key)
                self.waiting = 0.0
                if (busy := said_busy(event, "_after")) is not None:
                    self.busy_after.append(busy)
                if commit not in self.installed:
                    self.cache_used = self._cache()
                self.installed.add(commit)
                log.info(self.line(commit, name, self._outcome(event), seconds))
        now = time.monotonic()
        if now - self.said_long >= LONG and (self.running or (self.starting and self.current)):
            self.said_long = now
            if self.running is not None:
                said = f"still measuring {self.running[0]}: {clock(now - self.running[1])} so far"
            elif self.gate_since is not None:
                said = f"the quiet gate is waiting (above): {clock(now - self.gate_since)} so far"
            else:
                said = (
                    "starting asv"
                    if commit in self.installed
                    else "installing the build and starting asv"
                ) + f": {clock(now - self.step_began)} so far"
                if (grown := self._cache() - self.cache_used) > 0:
                    said += (
                        f", the build cache has grown by {_gb(grown)} (downloads and the install)"
                    )
            log.info(said)
        return done

    def _outcome(self, event: dict[str, Any]) -> str:
        reason = str(event.get("reason", "no reason given"))
        if event.get("outcome") != "skipped":
            return str(event.get("outcome"))
        if reason in self.said_reasons:
            return "skipped (as above)"
        self.said_reasons.add(reason)
        return f"skipped: {reason}"

    def remaining(self) -> float:
        estimate = self._estimate(self.left)
        if self.current is None:
            return estimate
        estimate += self._setups(self.left, self.classes)
        spent = time.monotonic() - (self.step_began if self.starting else self.last_event)
        if self.starting:
            estimate += self._start_up(self.start_installed) + self._gate_wait()
        estimate += self._waits(len(self.left))
        if self.current.tier != "again":
            estimate += self._retry(self.held, self.left)
        under_way = self.starting or self.running is not None
        estimate = max(0.0, estimate - spent * under_way) + self._publish() * self.to_publish
        later = [s for s in self.steps[self.index + 1 :] if s.commit not in self.skipped]
        return sum((e for _, _, e in self._steps(later, {self.current.commit})), estimate)

    def line(self, commit: str, name: str, outcome: str, seconds: float) -> str:
        left = f"about {clock(self.remaining())} left"
        if self.current is not None and self.current.tier == "again":
            self.again += 1
            return (
                f"measured again {self.again} of {len(self.current.names)}: {name}: {outcome},"
                f" {clock(seconds)}, {left}"
            )
        self.done += 1
        return (
            f"{self._build(commit)}, {self.done} of {self.total} combinations"
            f" done ({name}: {outcome}, {clock(seconds)}), elapsed"
            f" {clock(time.monotonic() - self.started)}, {left}, build cache"
            f" {_gb(self.cache_used)}, {_gb(free(self.disk.cache))} free"
        )

    def end(self) -> None:
        skipped = "; ".join(self.skipped.values())
        log.info(
            f"measured {self.done} of {self.total} combinations in"
            f" {clock(time.monotonic() - self.started)}"
            + (f"; skipped: {skipped}" if skipped else "")
        )
