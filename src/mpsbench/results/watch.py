"""What a record run says while it runs, and what each step will cost.

The plan (disk, downloads, hosts, each build's steps with estimates), then a line per combination
measured, a line a minute for a long install or combination, a skip's reason once. Each measured
combination, step start-up and publish adds a line to ``<results>-costs.jsonl``, which the next
run's estimates come from (docs/explanation/estimates.md); skips there count as settled.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import statistics
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mpsbench.core import asv_saving, progress
from mpsbench.results import recorded

GB = 1e9
LONG = 60.0  # seconds: a long combination or install says so once a minute
# Wall seconds per combination by device and benchmark class, from a fresh clone's first quiet run
# (cpu) and docs/explanation/budget.md (cuda; mps takes cuda's, no Mac measured).
MEASURED_SECONDS: dict[str, dict[str, float]] = {
    "cpu": {
        f"benchmark_{name}": seconds
        for name, seconds in {
            "models.Training": 5.9,
            "models.Inference": 2.6,
            "models.TrainingCapacity": 0.55,
            "models.InferenceCapacity": 2.05,
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
DEVICE_AVERAGE_SECONDS = {"cpu": 787.0 / 354, "cuda": 165.0 / 108, "mps": 165.0 / 108}
STEP_START_SECONDS = 16.0  # environment check, .pth switch, discovery, forkserver
BUDGET_INSTALL_SECONDS = 80.0  # a cold install, besides its download
PUBLISH_SECONDS = 5.0  # the site after a step, a first run's few results
WHERE_MEASURED = "this machine's earlier runs"
WHERE_BUDGET = "figures measured elsewhere (no run here yet)"
WHERE_BOTH = "this machine's runs and figures measured elsewhere"
DEVICE = re.compile(r"\('(cpu|mps|cuda)'")
START_UP, PUBLISH = ("start-up",), ("publish",)  # the pace's keys besides (device, group)

log = progress.logger(__name__)


def trail(results: Path) -> Path:
    return results.parent / f"{results.name}-costs.jsonl"


def add(results: Path, machine: str, lines: Iterable[dict[str, object]]) -> None:
    """Append measured costs to the costs file."""
    text = "".join(json.dumps({"machine": machine, **x}, sort_keys=True) + "\n" for x in lines)
    if text:
        with open(trail(results), "a+b") as out:
            if out.tell() and (out.seek(out.tell() - 1), out.read(1))[1] != b"\n":
                text = "\n" + text  # a line cut by a kill stays apart
            out.write(text.encode())


def _lines(results: Path, machine: str) -> Iterator[dict[str, Any]]:
    try:
        texts = trail(results).read_text().splitlines()
    except OSError:
        texts = []
    for text in texts:
        with contextlib.suppress(ValueError):
            line = json.loads(text)
            if isinstance(line, dict) and line.get("machine") == machine:
                yield line


def skipped(results: Path, machine: str, commit: str) -> dict[str, str]:
    """Combinations that skipped on build ``commit`` on ``machine``, with their reasons."""
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
    """A combination's device (the host's cpu where it names none)."""
    found = DEVICE.search(name)
    return found[1] if found else "cpu"


def group(name: str) -> str:
    """A combination's cost class: its benchmark's module and class (a class shares setup_cache)."""
    return name.split("(", 1)[0].rsplit(".", 1)[0]


@dataclass(frozen=True)
class Estimate:
    seconds: float
    source: str  # WHERE_MEASURED, WHERE_BUDGET or WHERE_BOTH

    def __add__(self, other: Estimate) -> Estimate:
        same = self.source == other.source
        return Estimate(self.seconds + other.seconds, self.source if same else WHERE_BOTH)


def _measured(name: str) -> float:
    on = device(name)
    average = DEVICE_AVERAGE_SECONDS.get(on, DEVICE_AVERAGE_SECONDS["cpu"])
    return MEASURED_SECONDS.get(on, {}).get(group(name), average)


def source(estimates: Iterable[Estimate]) -> str:
    found = {estimate.source for estimate in estimates}
    return found.pop() if len(found) == 1 else WHERE_BOTH if found else WHERE_MEASURED


def _median(seconds: list[float], fallback: float, where: str = WHERE_BUDGET) -> Estimate:
    return (
        Estimate(statistics.median(seconds), WHERE_MEASURED)
        if seconds
        else Estimate(fallback, where)
    )


class Costs:
    """This machine's measured costs, read once per record run."""

    def __init__(self, results: Path, machine: str, gpu: bool = False, default: int = 0) -> None:
        self.by_name: dict[str, list[float]] = {}
        self.by_group: dict[tuple[str, str], list[float]] = {}
        self.starts: dict[bool, list[float]] = {True: [], False: []}  # by installed
        self.publishes: list[float] = []
        for line in _lines(results, machine):
            with contextlib.suppress(ValueError, KeyError, TypeError):
                if line.get("event") == "begin":
                    self.starts[bool(line["installed"])].append(float(line["seconds"]))
                elif line.get("event") == "publish":
                    self.publishes.append(float(line["seconds"]))
                else:  # a combination: its wall time, else its own
                    name, seconds = str(line["name"]), float(line.get("wall", line["seconds"]))
                    self.by_name.setdefault(name, []).append(seconds)
                    self.by_group.setdefault((device(name), group(name)), []).append(seconds)
        self.installs = []
        for path in (results / machine).glob("*.json"):
            with contextlib.suppress(ValueError, AttributeError):  # RecordedError is a ValueError
                seconds = recorded.raw(path).get("durations", {}).get("<build>")
                if path.name != "machine.json" and isinstance(seconds, (int, float)):
                    self.installs.append(float(seconds))
        self._scales: dict[str, float] = {}

    def combination(self, name: str) -> Estimate:
        """This machine's median for the combination or its class, else the measured table's
        figure times :meth:`scale`."""
        seconds = self.by_name.get(name) or self.by_group.get((device(name), group(name)), [])
        return _median(seconds, _measured(name) * self.scale(device(name)))

    def scale(self, on: str) -> float:
        """This machine's history over the table for the same combinations on ``on`` (else 1)."""
        if on not in self._scales:
            pairs = [
                (statistics.median(seconds), _measured(name))
                for name, seconds in self.by_name.items()
                if device(name) == on
            ]
            figured = sum(pair[1] for pair in pairs)
            self._scales[on] = sum(pair[0] for pair in pairs) / figured if figured > 0 else 1.0
        return self._scales[on]

    def combinations(self, names: Sequence[str]) -> Estimate:
        found = [self.combination(name) for name in names]
        return Estimate(sum(estimate.seconds for estimate in found), source(found))

    def install(self, installed: bool) -> Estimate:
        """A step's start-up: environment, install or switch, discovery, forkserver."""
        # asv times a cached switch as a build too: seconds, against a minute or more to install
        measured = [seconds for seconds in self.installs if (seconds <= 30) == installed]
        budget = STEP_START_SECONDS + (0.0 if installed else BUDGET_INSTALL_SECONDS)
        if measured and not self.starts[installed]:
            return Estimate(STEP_START_SECONDS + statistics.median(measured), WHERE_BOTH)
        return _median(self.starts[installed], budget)

    def publish(self) -> Estimate:
        return _median(self.publishes, PUBLISH_SECONDS)


class Pace:
    """This run's seconds taken over seconds estimated, per cost class: (device, group), the
    start-ups, the publishes. A class's ratio leans on 1 (its estimate as planned) as
    :data:`PRIOR` of its combinations would, and never on another class's: under load a slow
    model's steps and a fast op's slow down by different factors, and a table's error is its
    class's own."""

    PRIOR = 3.0

    def __init__(self, planned: Mapping[str, float]) -> None:
        """``planned``: each combination of the run with its estimate."""
        self.took: dict[tuple[str, ...], float] = {}
        self.expected: dict[tuple[str, ...], float] = {}
        sums: dict[tuple[str, ...], list[float]] = {}
        for name, seconds in planned.items():
            sums.setdefault(self.key(name), []).append(max(seconds, 1e-3))
        self.mean = {key: statistics.fmean(values) for key, values in sums.items()}

    @staticmethod
    def key(name: str) -> tuple[str, ...]:
        return device(name), group(name)

    def note(self, key: tuple[str, ...], took: float, expected: float) -> None:
        self.took[key] = self.took.get(key, 0.0) + took
        self.expected[key] = self.expected.get(key, 0.0) + max(expected, 1e-3)

    def ratio(self, key: tuple[str, ...], seconds: float = 0.0) -> float:
        """A class's ratio; ``seconds``: its estimate where the plan holds none of it."""
        prior = self.PRIOR * max(self.mean.get(key, seconds), 1e-3)
        return (self.took.get(key, 0.0) + prior) / (self.expected.get(key, 0.0) + prior)


@dataclass(frozen=True)
class Step:
    """One asv run: a build, its combinations, and which pass over the builds it is."""

    commit: str
    names: tuple[str, ...]
    tier: str  # "first tier", "the rest", "every combination" or "again"


@dataclass(frozen=True)
class Build:
    """What a record run knows of a build before running it."""

    name: str  # CHANNEL@ID (torch VERSION)
    need: int  # bytes its install adds to the build cache
    how: str  # how the need is known
    installed: bool  # asv only switches to it
    download: int = 0  # bytes of wheels fetched to install it
    hosts: tuple[str, ...] = ()


@dataclass(frozen=True)
class Disk:
    """The build cache's folder and each build a record run may install, by timeline commit."""

    cache: Path
    builds: Mapping[str, Build]


def free(folder: Path) -> int:
    """Bytes free on the disk of ``folder`` or its nearest parent."""
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    return shutil.disk_usage(folder).free


def used(folder: Path) -> int:
    """Bytes ``folder`` holds."""
    if not folder.is_dir():
        return 0
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


class Watch:
    def __init__(self, steps: Sequence[Step], estimates: Costs, disk: Disk | None) -> None:
        self.steps, self.estimates, self.disk = list(steps), estimates, disk
        self.commits = list(dict.fromkeys(step.commit for step in self.steps))
        self.total = sum(len(step.names) for step in self.steps)
        self.done = self.offset = self.index = 0
        self.started = self.step_began = self.said_long = self.last_event = time.monotonic()
        known = disk.builds if disk is not None else {}
        self.builds = {c: known.get(c) or Build(c[:8], 0, "unknown", True) for c in self.commits}
        self.installed = {commit for commit, build in self.builds.items() if build.installed}
        self.current: Step | None = None
        self.left: list[str] = []
        self.running: tuple[str, float] | None = None  # the combination running, since when
        self.skipped: set[str] = set()
        self.cache_used = used(disk.cache) if disk is not None else 0
        self.expected = {n: estimates.combination(n).seconds for s in self.steps for n in s.names}
        self.pace = Pace(self.expected)
        self.last_at: float | None = None  # the events' clock at this step's previous end
        self.began_at = time.time()
        self.started_up = self.published = 0.0  # estimates of the current step's
        self.held: set[str] = set()  # held in this step, not measured again yet
        self.holds = self.again = 0  # values held in this run; measured again in this pass
        self.starting = True
        self.said_reasons: set[str] = set()

    def _name(self, commit: str) -> str:
        return self.builds[commit].name

    def _scaled(self, key: tuple[str, ...], estimate: Estimate) -> Estimate:
        return Estimate(estimate.seconds * self.pace.ratio(key, estimate.seconds), estimate.source)

    def _start_up(self, installed: bool) -> Estimate:
        return self._scaled(START_UP, self.estimates.install(installed))

    def _estimate(self, names: Iterable[str]) -> Estimate:
        """What ``names`` take at this run's pace."""
        found = [(name, self.estimates.combination(name)) for name in names]
        paced = (self._scaled(self.pace.key(n), e).seconds for n, e in found)
        return Estimate(sum(paced), source(e for _, e in found))

    def _steps(
        self, steps: Iterable[Step], seen: set[str]
    ) -> Iterator[tuple[Step, bool, Estimate]]:
        """Each step, whether it is its build's first, and its estimate with start-up and the
        publish after it, plus the values this run's rate of holds will measure again."""
        rate = self.holds / (self.done + 20)
        for step in steps:
            first = step.commit not in seen
            seen.add(step.commit)
            work = self._estimate(step.names)
            work = Estimate(work.seconds * (1 + rate), work.source)
            start = self._start_up(step.commit in self.installed or not first)
            yield step, first, start + work + self._scaled(PUBLISH, self.estimates.publish())

    def _costs(self) -> list[str]:
        """What the run needs before it starts: disk, downloads, hosts."""
        if self.disk is None:
            return []
        fetch = [build for commit, build in self.builds.items() if commit not in self.installed]
        needed, size = sum(b.need for b in fetch), sum(b.download for b in fetch)
        hosts = sorted({host for build in fetch for host in build.hosts})
        space = free(self.disk.cache)
        short = (
            ": builds that do not fit are skipped, each with a line"
            " (MPSBENCH_CACHE=/path moves the cache to a disk with room)"
        )
        return [
            f"  disk: about {_gb(needed)} more in the build cache {self.disk.cache} (it holds"
            f" {_gb(self.cache_used)}), {_gb(space)} free there"
            + ("" if needed <= space else short),
            f"  downloads: about {_gb(size)} of wheels"
            + (f" from {', '.join(hosts)}" if hosts else "")
            + "; retried and resumed where cut"
            if size
            else "  downloads: none (every build is installed or stored here)",
        ]

    def plan(self) -> str:
        """The run's first lines: what it needs, then each build and its steps."""
        builds = f"{len(self.commits)} build{'s' if len(self.commits) != 1 else ''}"
        lines = [
            f"the run: {builds}, newest first, {self.total} combinations; each value is saved as"
            " it is measured, so a stopped run keeps it and the next one goes on from there",
            *self._costs(),
        ]
        total = Estimate(0.0, WHERE_MEASURED)
        for step, first, estimate in self._steps(self.steps, set()):
            total = total + estimate
            if first:
                build, disk = self.builds[step.commit], ""
                if self.disk is not None:
                    disk = (
                        f"; disk: none, {build.how}"
                        if build.installed
                        else (f"; disk: about {_gb(build.need)} ({build.how})")
                    )
                lines.append(f"  {self.commits.index(step.commit) + 1}. {build.name}{disk}")
            lines.append(
                f"     {step.tier}: {len(step.names)} combinations, about"
                f" {clock(estimate.seconds)} ({estimate.source})"
            )
        lines.append(
            f"  in all about {clock(total.seconds)}, publishing the site after each step;"
            " the estimate learns from each combination measured"
        )
        return "\n".join(lines)

    def _start(self, step: Step, installed: bool) -> None:
        self.current, self.left, self.running, self.offset = step, list(step.names), None, 0
        self.step_began = self.last_event = self.said_long = time.monotonic()
        self.began_at, self.last_at, self.starting = time.time(), None, True
        self.started_up = self.estimates.install(installed).seconds
        self.classes: set[tuple[str, ...]] = set()  # classes begun in this step

    def begin(self, step: Step) -> bool:
        """Say which step starts; False (and a line) for a build that does not fit on the disk."""
        if step.commit in self.skipped:
            return False
        build = self.builds[step.commit]
        space = free(self.disk.cache) if self.disk is not None else 0
        if self.disk is not None and not build.installed and build.need > space:
            self.skipped.add(step.commit)
            self.total -= sum(len(s.names) for s in self.steps if s.commit == step.commit)
            log.warning(
                f"skipping {build.name}: installing it needs about {_gb(build.need)}"
                f" ({build.how}), {_gb(space)} is free at {self.disk.cache}; free space there,"
                " or move the build cache to a disk with room (MPSBENCH_CACHE=/path"
                " scripts/bench), and run again"
            )
            return False
        self.index = self.steps.index(step)
        first = all(s.commit != step.commit for s in self.steps[: self.index])
        self._start(step, step.commit in self.installed or not first)
        self.published, self.held, self.again = self.estimates.publish().seconds, set(), 0
        self.cache_used = used(self.disk.cache) if self.disk is not None else 0
        log.info(
            f"build {self.commits.index(step.commit) + 1} of {len(self.commits)}:"
            f" {build.name}, {step.tier}: {len(step.names)} combinations"
            + ("" if step.commit in self.installed else ", installed first")
        )
        return True

    def hold(self, names: Iterable[str]) -> None:
        """The values the quiet gate holds so far in this step: a retry pass will measure them."""
        new = set(names) - self.held
        self.holds += len(new)
        self.held |= new

    def retry(self, names: Sequence[str]) -> None:
        """The retry pass of this step's held values starts."""
        self._start(Step(self.current.commit if self.current else "", tuple(names), "again"), True)

    def publish(self, seconds: float) -> list[dict[str, object]]:
        """The site took ``seconds`` after this step (none published: nothing to learn)."""
        if seconds < 0.5:
            return []
        self.pace.note(PUBLISH, seconds, self.published)
        self.published = 0.0
        return [{"event": "publish", "seconds": round(seconds, 3)}]

    def poll(self, scratch: Path) -> list[dict[str, Any]]:
        """Combinations measured since the last poll, with wall time, and the step's start-up
        once its first combination starts; says progress."""
        done: list[dict[str, Any]] = []
        commit = self.current.commit if self.current else ""
        events, self.offset = asv_saving.read_events(scratch, self.offset)
        for event in events:
            at, name = float(event.get("at", time.time())), str(event.get("name"))
            now = time.monotonic()
            if event.get("event") == "start":
                self.running, self.said_long = (name, now), now
                if self.starting:
                    self.starting, self.last_at = False, at
                    start_up = max(0.0, at - self.began_at)
                    self.pace.note(START_UP, start_up, self.started_up)
                    installed = commit in self.installed
                    done.append(
                        {
                            "event": "begin",
                            "build": commit,
                            "installed": installed,
                            "seconds": round(start_up, 3),
                        }
                    )
            elif event.get("event") == "done":
                seconds = float(event.get("seconds", 0.0))
                wall = max(seconds, at - self.last_at) if self.last_at is not None else seconds
                self.last_at, self.running, self.last_event = at, None, now
                done.append({**event, "wall": round(wall, 3)})
                with contextlib.suppress(ValueError):
                    self.left.remove(name)
                # the costs stay as read; the pace carries this run, less each class's first
                # combination in a step, which pays the class's setup_cache
                if (key := self.pace.key(name)) in self.classes:
                    self.pace.note(key, wall, self.expected.get(name, wall))
                self.classes.add(key)
                if commit not in self.installed and self.disk is not None:
                    self.cache_used = used(self.disk.cache)  # installed: the disk it took
                self.installed.add(commit)
                log.info(self.line(name, self._outcome(event), seconds))
        now = time.monotonic()
        if self.running is not None and now - self.said_long >= LONG:
            self.said_long = now
            log.info(f"still measuring {self.running[0]}: {clock(now - self.running[1])} so far")
        elif self.starting and self.current is not None and now - self.said_long >= LONG:
            self.said_long = now
            grown = (used(self.disk.cache) - self.cache_used) if self.disk is not None else 0
            fresh = commit not in self.installed
            log.info(
                ("installing the build and starting asv" if fresh else "starting asv")
                + f": {clock(now - self.step_began)} so far"
                + (
                    f", the build cache has grown by {_gb(grown)} (downloads and the install)"
                    if grown > 0
                    else ""
                )
            )
        return done

    def _outcome(self, event: dict[str, Any]) -> str:
        """A combination's outcome; a skip's reason once per run."""
        outcome = str(event.get("outcome"))
        if outcome != "skipped":
            return outcome
        reason = str(event.get("reason", "no reason given"))
        if reason in self.said_reasons:
            return "skipped (as above)"
        self.said_reasons.add(reason)
        return f"skipped: {reason}"

    def remaining(self) -> Estimate:
        """What is left at this run's pace: this step's unmeasured combinations less the running
        one's time so far, its start-up while starting, the retry of what is held, this step's
        publish, then every later step."""
        estimate = self._estimate(self.left)
        if self.current is None:
            return estimate
        now = time.monotonic()
        spent = now - self.step_began if self.starting else now - self.last_event
        if self.starting:
            estimate = estimate + self._scaled(START_UP, Estimate(self.started_up, WHERE_MEASURED))
        if self.held and self.current.tier != "again":
            estimate = estimate + self._estimate(self.held) + self._start_up(True)
        estimate = Estimate(
            max(0.0, estimate.seconds - spent * (self.starting or self.running is not None))
            + self.published * self.pace.ratio(PUBLISH, self.published),
            source([estimate]),
        )
        later = [s for s in self.steps[self.index + 1 :] if s.commit not in self.skipped]
        return sum((e for _, _, e in self._steps(later, {self.current.commit})), estimate)

    def line(self, name: str, outcome: str, seconds: float) -> str:
        what = f"({name}: {outcome}, {clock(seconds)})"
        left = f"about {clock(self.remaining().seconds)} left"
        if self.current is not None and self.current.tier == "again":
            self.again += 1
            count = f"{self.again} of {len(self.current.names)}"
            return f"measured again {count}: {name}: {outcome}, {clock(seconds)}, {left}"
        self.done += 1
        number = self.commits.index(self.current.commit) + 1 if self.current else 0
        disk = (
            f", build cache {_gb(self.cache_used)}, {_gb(free(self.disk.cache))} free"
            if self.disk is not None
            else ""
        )
        return (
            f"build {number} of {len(self.commits)}, {self.done} of {self.total} combinations"
            f" done {what}, elapsed {clock(time.monotonic() - self.started)}, {left}{disk}"
        )

    def end(self) -> None:
        disk = ", ".join(self._name(c) for c in sorted(self.skipped))
        log.info(
            f"measured {self.done} of {self.total} combinations in"
            f" {clock(time.monotonic() - self.started)}"
            + (f"; skipped for disk space: {disk}" if disk else "")
        )
