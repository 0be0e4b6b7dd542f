"""What a record run says while it runs, and what each step will cost.

First the plan (disk, downloads and hosts, each build's steps with estimates), then a line per
measured combination, a line a minute while a build installs or a combination runs long, and a
skip's reason once; read from the events of :mod:`mpsbench.core.asv_saving`.

Estimates (docs/explanation/estimates.md): each measured combination and step start-up adds a line
to ``<results>-costs.jsonl`` (beside the results folder, which asv reads whole). A combination's
estimate is this machine's median for it, else for its benchmark, else :data:`MEASURED_SECONDS`,
else its device's average; :class:`Pace` scales what is left by how the run goes. The file also
records skips (:func:`skipped`), which the record counts as settled.
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
LONG = 60.0  # seconds: a combination running longer, or a build installing, says so once a minute
# Measured seconds per combination, by device and benchmark (docs/evidence/estimates.md); mps takes
# cuda's (no Mac measured); an unlisted benchmark takes its device's average.
_CAPACITY = ("track_peak_memory", "track_throughput", "track_joules_per_step")
MEASURED_SECONDS: dict[str, dict[str, float]] = {
    "cpu": {
        "benchmark_models.Training.time_step": 9.35,
        "benchmark_models.Inference.time_step": 5.36,
        **{
            f"benchmark_models.{kind}Capacity.{metric}": 3.0
            for kind in ("Training", "Inference")
            for metric in _CAPACITY
        },
        "benchmark_coldstart.TrainingColdStart.timeraw_first_step": 9.2,
        "benchmark_coldstart.InferenceColdStart.timeraw_first_step": 5.2,
        **{
            f"benchmark_epoch.Epoch.{metric}": 4.2
            for metric in (
                "track_data_wait_fraction",
                "track_epoch_seconds",
                "track_images_per_second",
            )
        },
        **{
            f"benchmark_instruments.{kind}Instruments.{metric}": 2.6
            for kind in ("Training", "Inference")
            for metric in (
                "track_accuracy_error",
                "track_driver_memory",
                "track_fallback_ops",
                "track_leak",
            )
        },
        "benchmark_ops.ComputeBoundOps.time_forward": 0.41,
        "benchmark_ops.ComputeBoundOps.track_gflops": 0.48,
        "benchmark_ops.ForwardBackwardOps.time_forward_backward": 0.70,
        "benchmark_ops.MemoryBoundOps.time_forward": 0.47,
        "benchmark_ops.MemoryBoundOps.track_gbps": 0.46,
        "benchmark_precision.TrainingPrecision.time_step": 7.98,
        "benchmark_precision.InferencePrecision.time_step": 3.07,
        "benchmark_precision.TrainingPrecisionCapacity.track_peak_memory": 2.4,
        "benchmark_precision.InferencePrecisionCapacity.track_peak_memory": 2.4,
    },
    "cuda": {
        "benchmark_models.Training.time_step": 4.0,
        "benchmark_models.Inference.time_step": 2.1,
        **{
            f"benchmark_ops.{name}": 0.68
            for name in (
                "ComputeBoundOps.time_forward",
                "ComputeBoundOps.track_gflops",
                "ForwardBackwardOps.time_forward_backward",
                "MemoryBoundOps.time_forward",
                "MemoryBoundOps.track_gbps",
            )
        },
    },
}
MEASURED_SECONDS["mps"] = MEASURED_SECONDS["cuda"]
# A device's measured seconds over combinations (docs/explanation/budget.md)
DEVICE_AVERAGE_SECONDS = {"cpu": 787.0 / 354, "cuda": 165.0 / 108, "mps": 165.0 / 108}
STEP_START_SECONDS = 16.0  # environment check, .pth switch, discovery, forkserver
BUDGET_INSTALL_SECONDS = 80.0  # a cold install, besides its download
CACHED_SWITCH_SECONDS = 5.0  # an installed build: environment check and .pth
WHERE_MEASURED = "this machine's earlier runs"
WHERE_BUDGET = "figures measured elsewhere (no run here yet)"
WHERE_BOTH = "this machine's runs and figures measured elsewhere"
DEVICE = re.compile(r"\('(cpu|mps|cuda)'")  # a combination's first param, where it is a device

log = progress.logger(__name__)


def trail(results: Path) -> Path:
    return results.parent / f"{results.name}-costs.jsonl"


def add(results: Path, machine: str, lines: Iterable[dict[str, object]]) -> None:
    """Append measured combinations and steps' start-ups to the costs file."""
    text = "".join(
        json.dumps({"machine": machine, **line}, sort_keys=True) + "\n" for line in lines
    )
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
    """A duration as a person reads it: 45 s, 3 min 05 s, 1 h 02 min."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


def _gb(size: float) -> str:
    return f"{size / GB:.1f} GB"


def device(name: str) -> str:
    """A combination's device ("cpu" where it names none: the host runs it)."""
    found = DEVICE.search(name)
    return found[1] if found else "cpu"


def benchmark(name: str) -> str:
    return name.split("(", 1)[0]


@dataclass(frozen=True)
class Estimate:
    seconds: float
    source: str  # WHERE_MEASURED, WHERE_BUDGET or WHERE_BOTH

    def __add__(self, other: Estimate) -> Estimate:
        return Estimate(
            self.seconds + other.seconds, self.source if self.source == other.source else WHERE_BOTH
        )


def _measured(name: str) -> float:
    """A combination's measured figure: its benchmark's on its device, else its device's average."""
    on = device(name)
    average = DEVICE_AVERAGE_SECONDS.get(on, DEVICE_AVERAGE_SECONDS["cpu"])
    return MEASURED_SECONDS.get(on, {}).get(benchmark(name), average)


def source(estimates: Sequence[Estimate]) -> str:
    """Where a sum of estimates comes from."""
    found = {estimate.source for estimate in estimates}
    return found.pop() if len(found) == 1 else WHERE_BOTH if found else WHERE_MEASURED


class Costs:
    """This machine's measured costs, read once per record run."""

    def __init__(self, results: Path, machine: str, gpu: bool = False, default: int = 0) -> None:
        self.by_name: dict[str, list[float]] = {}
        self.by_benchmark: dict[tuple[str, str], list[float]] = {}  # by device and benchmark
        self.starts: dict[bool, list[float]] = {
            True: [],
            False: [],
        }  # start-ups, by installed
        for line in _lines(results, machine):
            with contextlib.suppress(ValueError, KeyError, TypeError):
                if line.get("event") == "begin":
                    self.starts[bool(line["installed"])].append(float(line["seconds"]))
                else:  # a combination: wall time, else its own
                    self.note(str(line["name"]), float(line.get("wall", line["seconds"])))
        self.installs: list[float] = []
        self._scales: dict[str, float] = {}
        for path in (results / machine).glob("*.json"):
            if path.name == "machine.json":
                continue
            try:
                seconds = recorded.raw(path).get("durations", {}).get("<build>")
            except (ValueError, AttributeError):  # RecordedError is a ValueError
                continue
            if isinstance(seconds, (int, float)):
                self.installs.append(float(seconds))

    def note(self, name: str, seconds: float) -> None:
        self.by_name.setdefault(name, []).append(seconds)
        self.by_benchmark.setdefault((device(name), benchmark(name)), []).append(seconds)

    def combination(self, name: str) -> Estimate:
        """This machine's median for the combination or its benchmark, else the measured figure
        times :meth:`scale`."""
        seconds = self.by_name.get(name) or self.by_benchmark.get((device(name), benchmark(name)))
        if seconds:
            return Estimate(statistics.median(seconds), WHERE_MEASURED)
        return Estimate(_measured(name) * self.scale(device(name)), WHERE_BUDGET)

    def scale(self, on: str) -> float:
        """This machine's seconds over the measured figures for the same combinations on ``on``
        (1 without history)."""
        if on not in self._scales:
            pairs = [
                (statistics.median(seconds), _measured(name))
                for name, seconds in self.by_name.items()
                if device(name) == on
            ]
            had, figured = sum(pair[0] for pair in pairs), sum(pair[1] for pair in pairs)
            self._scales[on] = had / figured if pairs and figured > 0 else 1.0
        return self._scales[on]

    def combinations(self, names: Sequence[str]) -> Estimate:
        found = [self.combination(name) for name in names]
        return Estimate(sum(estimate.seconds for estimate in found), source(found))

    def install(self, installed: bool) -> Estimate:
        """A step's start-up: environment, install or switch, discovery, forkserver."""
        if self.starts[installed]:
            return Estimate(statistics.median(self.starts[installed]), WHERE_MEASURED)
        # asv times a cached switch as a build too: seconds, against a minute or more to install
        measured = [seconds for seconds in self.installs if (seconds <= 30) == installed]
        if measured:
            return Estimate(STEP_START_SECONDS + statistics.median(measured), WHERE_BOTH)
        return Estimate(
            STEP_START_SECONDS + (0.0 if installed else BUDGET_INSTALL_SECONDS), WHERE_BUDGET
        )


class Pace:
    """This run's seconds taken over seconds estimated. The run's ratio shrinks toward 1, a
    device's toward the run's, a benchmark's toward its device's, each weighted as :data:`PRIOR`
    combinations still to run: one odd combination does not swing what is left."""

    PRIOR = 3.0

    def __init__(self, planned: dict[str, float]) -> None:
        """``planned``: each combination of the run with its estimate."""
        self.took: dict[tuple[str, ...], float] = {}
        self.expected: dict[tuple[str, ...], float] = {}
        self.count: dict[tuple[str, ...], int] = {}
        self.all_expected: dict[tuple[str, ...], float] = {}
        self.all_count: dict[tuple[str, ...], int] = {}
        for name, expected in planned.items():
            for key in self._keys(name):
                self.all_expected[key] = self.all_expected.get(key, 0.0) + max(expected, 1e-3)
                self.all_count[key] = self.all_count.get(key, 0) + 1

    @staticmethod
    def _keys(name: str) -> tuple[tuple[str, ...], ...]:
        return (), (device(name),), (device(name), benchmark(name))

    def note(self, name: str, took: float, expected: float) -> None:
        for key in self._keys(name):
            self.took[key] = self.took.get(key, 0.0) + took
            self.expected[key] = self.expected.get(key, 0.0) + max(expected, 1e-3)
            self.count[key] = self.count.get(key, 0) + 1

    def _prior(self, key: tuple[str, ...]) -> float:
        """PRIOR combinations' worth of estimated seconds of ``key`` still to run (else of all)."""
        left = self.all_count.get(key, 0) - self.count.get(key, 0)
        if left > 0:
            return self.PRIOR * (self.all_expected[key] - self.expected.get(key, 0.0)) / left
        count = max(self.all_count.get(key, 0), self.count.get(key, 0), 1)
        return (
            self.PRIOR * max(self.all_expected.get(key, 0.0), self.expected.get(key, 0.0)) / count
        )

    def _ratio(self, keys: Sequence[tuple[str, ...]]) -> float:
        ratio = 1.0
        for key in keys:
            prior = max(self._prior(key), 1e-3)
            ratio = (self.took.get(key, 0.0) + prior * ratio) / (
                self.expected.get(key, 0.0) + prior
            )
        return ratio

    def overall(self) -> float:
        """The whole run's ratio (scales a step's start-up)."""
        return self._ratio([()])

    def ratio(self, name: str) -> float:
        return self._ratio(self._keys(name))


@dataclass(frozen=True)
class Step:
    """One asv run: a build, its combinations, and which pass over the builds it is."""

    commit: str
    names: tuple[str, ...]
    tier: str  # "first tier", "the rest" or "every combination"


@dataclass(frozen=True)
class Build:
    """What a record run knows of a build before running it."""

    name: str  # as people read it: CHANNEL@ID (torch VERSION)
    need: int  # bytes its install adds to the build cache
    how: str  # how the need is known
    installed: bool  # asv only switches to it
    download: int = 0  # bytes of wheels fetched to install it
    hosts: tuple[str, ...] = ()  # where they come from


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
    """Bytes ``folder`` holds now (the build cache: wheels and installed builds)."""
    return (
        sum(
            path.stat().st_size
            for path in folder.rglob("*")
            if path.is_file() and not path.is_symlink()
        )
        if folder.is_dir()
        else 0
    )


class Again:
    """What a retry pass says while it measures held values again: a line per combination, and a
    line a minute for one that runs longer. Its costs are not learnt: the first pass's are."""

    def __init__(self, total: int) -> None:
        self.total, self.done, self.offset = total, 0, 0
        self.running: tuple[str, float] | None = None
        self.said = time.monotonic()

    def poll(self, scratch: Path) -> list[dict[str, Any]]:
        events, self.offset = asv_saving.read_events(scratch, self.offset)
        now = time.monotonic()
        for event in events:
            name = str(event.get("name"))
            if event.get("event") == "start":
                self.running, self.said = (name, now), now
            elif event.get("event") == "done":
                self.done, self.running = self.done + 1, None
                seconds = float(event.get("seconds", 0.0))
                log.info(
                    f"measured again {self.done} of {self.total}: {name}:"
                    f" {event.get('outcome')}, {clock(seconds)}"
                )
        if self.running is not None and now - self.said >= LONG:
            self.said = now
            log.info(
                f"still measuring {self.running[0]} again: {clock(now - self.running[1])} so far"
            )
        return []


class Watch:
    def __init__(self, steps: Sequence[Step], estimates: Costs, disk: Disk | None) -> None:
        self.steps, self.estimates, self.disk = list(steps), estimates, disk
        self.commits = list(dict.fromkeys(step.commit for step in self.steps))
        self.total = sum(len(step.names) for step in self.steps)
        self.done = self.offset = 0
        self.started = time.monotonic()
        known = disk.builds if disk is not None else {}
        self.builds = {
            commit: known.get(commit) or Build(commit[:8], 0, "unknown", True)
            for commit in self.commits
        }
        self.installed = {commit for commit, build in self.builds.items() if build.installed}
        self.current: Step | None = None
        self.left: list[str] = []
        self.running: tuple[str, float] | None = None  # the combination running, since when
        self.said_long = 0.0
        self.skipped: set[str] = set()
        self.cache_used = used(disk.cache) if disk is not None else 0
        self.expected = {
            name: self.estimates.combination(name).seconds
            for step in self.steps
            for name in step.names
        }
        self.pace = Pace(self.expected)
        self.step_began = self.last_event = 0.0  # monotonic
        self.last_at: float | None = None  # events' clock (time.time()) of this step's previous end
        self.began_at = 0.0  # time.time(): the previous step's last value, else now
        self.last_end: float | None = None
        self.begun: set[str] = set()
        self.first_of_build = True
        self.starting = True  # asv installs, discovers
        self.said_reasons: set[str] = set()

    def _name(self, commit: str) -> str:
        return self.builds[commit].name

    def _start_up(self, commit: str, first: bool) -> Estimate:
        """A step's start-up, from the previous step's last value to its first combination (with
        the install in a build's first step)."""
        estimate = self.estimates.install(commit in self.installed or not first)
        return Estimate(estimate.seconds * self.pace.overall(), estimate.source)

    def _estimate(self, names: Sequence[str]) -> Estimate:
        """What ``names`` will take at this run's pace."""
        found = [self.estimates.combination(name) for name in names]
        seconds = sum(
            estimate.seconds * self.pace.ratio(name)
            for name, estimate in zip(names, found, strict=True)
        )
        return Estimate(seconds, source(found))

    def _estimates(
        self, steps: Iterable[Step], seen: set[str]
    ) -> Iterator[tuple[Step, bool, Estimate]]:
        """Each step, whether it is its build's first, and its estimate with start-up."""
        for step in steps:
            first = step.commit not in seen
            seen.add(step.commit)
            yield step, first, self._start_up(step.commit, first) + self._estimate(step.names)

    def _costs(self) -> list[str]:
        """What the run needs before it starts: disk, downloads, hosts."""
        if self.disk is None:
            return []
        fetch = [build for commit, build in self.builds.items() if commit not in self.installed]
        needed = sum(build.need for build in fetch)
        size = sum(build.download for build in fetch)
        hosts = sorted({host for build in fetch for host in build.hosts})
        space = free(self.disk.cache)
        lines = [
            f"  disk: about {_gb(needed)} more in the build cache {self.disk.cache} (it holds"
            f" {_gb(self.cache_used)}), {_gb(space)} free there"
            + (
                ""
                if needed <= space
                else ": builds that do not fit are skipped, each with a line"
                " (MPSBENCH_CACHE=/path moves the cache to a disk with room)"
            )
        ]
        lines.append(
            f"  downloads: about {_gb(size)} of wheels"
            + (f" from {', '.join(hosts)}" if hosts else "")
            + "; retried and resumed where cut"
            if size
            else "  downloads: none (every build is installed or stored here)"
        )
        return lines

    def plan(self) -> str:
        """The run's first lines: what it needs, then each build and its steps."""
        lines = [
            f"the run: {len(self.commits)} build{'s' if len(self.commits) != 1 else ''}, newest first,"
            f" {self.total} combinations; each value is saved as it is measured, so a stopped run keeps it and"
            " the next one goes on from there",
            *self._costs(),
        ]
        total = Estimate(0.0, WHERE_MEASURED)
        for step, first, estimate in self._estimates(self.steps, set()):
            total = total + estimate
            if first:
                build = self.builds[step.commit]
                disk = ""
                if self.disk is not None:
                    disk = (
                        f"; disk: none, {build.how}"
                        if build.installed
                        else f"; disk: about {_gb(build.need)} ({build.how})"
                    )
                lines.append(
                    f"  {self.commits.index(step.commit) + 1}. {self._name(step.commit)}{disk}"
                )
            lines.append(
                f"     {step.tier}: {len(step.names)} combinations, about {clock(estimate.seconds)}"
                f" ({estimate.source})"
            )
        lines.append(
            f"  in all about {clock(total.seconds)}; the estimate learns from each combination measured"
        )
        return "\n".join(lines)

    def begin(self, step: Step) -> bool:
        """Say which step starts; False (and a line) for a build that does not fit on the disk."""
        if step.commit in self.skipped:
            return False
        self.current, self.left, self.running, self.offset = (
            step,
            list(step.names),
            None,
            0,
        )
        build = self.builds[step.commit]
        if (
            self.disk is not None
            and not build.installed
            and build.need > (space := free(self.disk.cache))
        ):
            self.skipped.add(step.commit)
            self.total -= sum(len(s.names) for s in self.steps if s.commit == step.commit)
            log.warning(
                f"skipping {build.name}: installing it needs about {_gb(build.need)} ({build.how}),"
                f" {_gb(space)} is free at {self.disk.cache}; free space there, or move the build cache"
                " to a disk with room (MPSBENCH_CACHE=/path scripts/bench), and run again"
            )
            return False
        self.cache_used = used(self.disk.cache) if self.disk is not None else 0
        self.step_began = self.last_event = self.said_long = time.monotonic()
        self.began_at = self.last_end if self.last_end is not None else time.time()
        self.step_began -= max(0.0, time.time() - self.began_at)
        self.last_at, self.starting = None, True
        self.first_of_build = step.commit not in self.begun
        self.begun.add(step.commit)
        log.info(
            f"build {self.commits.index(step.commit) + 1} of {len(self.commits)}: {self._name(step.commit)},"
            f" {step.tier}: {len(step.names)} combinations"
            + ("" if step.commit in self.installed else ", installed first")
        )
        return True

    def poll(self, scratch: Path) -> list[dict[str, Any]]:
        """Combinations measured since the last poll, with wall time, and the step's start-up
        once its first combination starts; says progress.
        """
        done: list[dict[str, Any]] = []
        commit = self.current.commit if self.current else ""
        for event in self._read(scratch):
            at = float(event.get("at", time.time()))
            if event.get("event") == "start":
                self.running, self.said_long = (
                    (str(event.get("name")), time.monotonic()),
                    time.monotonic(),
                )
                if self.starting:
                    self.starting = False
                    self.last_at = at
                    start_up = max(0.0, at - self.began_at)
                    done.append(
                        {
                            "event": "begin",
                            "build": commit,
                            "installed": commit in self.installed,
                            "seconds": round(start_up, 3),
                        }
                    )
            elif event.get("event") == "done":
                name, seconds = str(event.get("name")), float(event.get("seconds", 0.0))
                wall = max(seconds, at - self.last_at) if self.last_at is not None else seconds
                self.last_at = self.last_end = at
                done.append({**event, "wall": round(wall, 3)})
                self.done += 1
                self.running = None
                self.last_event = time.monotonic()
                if name in self.left:
                    self.left.remove(name)
                # the costs stay as read; the pace carries this run
                self.pace.note(name, wall, self.expected.get(name, wall))
                if commit not in self.installed and self.disk is not None:
                    self.cache_used = used(self.disk.cache)  # installed: the disk it took
                self.installed.add(commit)
                log.info(self.line(name, self._outcome(event), seconds))
        now = time.monotonic()
        if self.running is not None:
            name, since = self.running
            if now - self.said_long >= LONG:
                self.said_long = now
                log.info(f"still measuring {name}: {clock(now - since)} so far")
        elif self.starting and self.current is not None and now - self.said_long >= LONG:
            self.said_long = now
            grown = (used(self.disk.cache) - self.cache_used) if self.disk is not None else 0
            what = (
                "installing the build and starting asv"
                if commit not in self.installed
                else "starting asv"
            )
            grew = (
                f", the build cache has grown by {_gb(grown)} (downloads and the install)"
                if grown > 0
                else ""
            )
            log.info(f"{what}: {clock(now - self.step_began)} so far{grew}")
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

    def _read(self, scratch: Path) -> list[dict[str, Any]]:
        events, self.offset = asv_saving.read_events(scratch, self.offset)
        return events

    def remaining(self) -> Estimate:
        """What is left at this run's pace: this step's unmeasured combinations (less the running
        one's time), its start-up while starting, then every later step."""
        estimate = self._estimate(self.left)
        if self.current is None:
            return estimate
        now = time.monotonic()
        if self.starting:
            start_up = self._start_up(self.current.commit, self.first_of_build).seconds
            estimate = estimate + Estimate(
                max(0.0, start_up - (now - self.step_began)), estimate.source
            )
        elif self.running is not None:  # time since the last end is spent
            estimate = Estimate(
                max(0.0, estimate.seconds - (now - self.last_event)), estimate.source
            )
        later = [
            step
            for step in self.steps[self.steps.index(self.current) + 1 :]
            if step.commit not in self.skipped
        ]
        return sum(
            (
                step_estimate
                for _, _, step_estimate in self._estimates(later, {self.current.commit})
            ),
            estimate,
        )

    def line(self, name: str, outcome: str, seconds: float) -> str:
        number = self.commits.index(self.current.commit) + 1 if self.current else 0
        disk = (
            f", build cache {_gb(self.cache_used)}, {_gb(free(self.disk.cache))} free"
            if self.disk is not None
            else ""
        )
        return (
            f"build {number} of {len(self.commits)}, {self.done} of {self.total} combinations done"
            f" ({name}: {outcome}, {clock(seconds)}), elapsed {clock(time.monotonic() - self.started)},"
            f" about {clock(self.remaining().seconds)} left{disk}"
        )

    def end(self) -> None:
        log.info(
            f"measured {self.done} of {self.total} combinations in {clock(time.monotonic() - self.started)}"
            + (
                f"; skipped for disk space: {', '.join(self._name(c) for c in sorted(self.skipped))}"
                if self.skipped
                else ""
            )
        )
