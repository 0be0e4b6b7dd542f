"""Throughput per machine, build and step, and the points each figure plots."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mpsbench.builds.timeline import Reader
from mpsbench.core import asv
from mpsbench.measure import devices, models
from mpsbench.results import recorded

CLASSES = {"training": "benchmark_models.Training", "inference": "benchmark_models.Inference"}
KINDS = tuple(CLASSES)
TIME = "time_step"
JOULES = "track_joules_per_step"
COMPILE_SECONDS = "track_compile_seconds"
METRICS = {
    f"{cls}{suffix}.{metric}": (kind, metric)
    for kind, cls in CLASSES.items()
    for metric, suffix in ((TIME, ""), ("track_throughput", "Capacity"), (JOULES, "Capacity"))
}
CPU = "cpu"
FALLBACK_NOTE = (
    "bs N*: not the model's seed batch, which that device has no value for: its largest batch."
)
BY_RELEASE_DEVICE = "mps"
COMPILED = {kind: f"benchmark_compile.Compiled{kind.title()}" for kind in KINDS}
EAGER = {
    kind: (f"{CLASSES[kind]}.{TIME}", f"benchmark_modern.Modern{kind.title()}.{TIME}")
    for kind in KINDS
}


@dataclass(frozen=True, order=True)
class Step:
    kind: str
    model: str
    device: str
    batch: int

    @property
    def seed(self) -> bool:
        return self.batch == seed_batch(self.model)

    @property
    def batch_note(self) -> str:
        """Its batch size, starred where it is not the model's seed batch (a fallback)."""
        return f"bs {self.batch}" + ("" if self.seed else "*")


Build = tuple[str, str]
Timed = tuple[recorded.Row, recorded.Measured]


@dataclass
class Results:
    recorded: recorded.Recorded
    samples: dict[Build, dict[Step, float]] = field(default_factory=dict)
    timed: dict[Build, dict[Step, Timed]] = field(default_factory=dict)
    joules: dict[Build, dict[Step, float]] = field(default_factory=dict)

    @property
    def machines(self) -> list[str]:
        return sorted({machine for machine, _ in self.samples})

    def builds(self, machine: str) -> list[str]:
        return [c for c in self.recorded.builds(machine) if (machine, c) in self.samples]

    def newest(self, names: set[str]) -> dict[str, dict[tuple[Any, ...], float]]:
        """Values on each machine's newest build, by name and (machine, *params)."""
        found: dict[str, dict[tuple[Any, ...], float]] = {name: {} for name in names}
        described = names & self.recorded.units.keys()  # in benchmarks.json, as asv publish shows
        for machine in self.recorded.machines:
            newest = self.recorded.values[(machine, self.recorded.builds(machine)[-1])]
            for row, measured in newest.items():
                if row.benchmark in described and measured.value > 0:
                    key = (machine, *asv.param_values(row.params))
                    found[row.benchmark][key] = measured.value
        return found


def _results(found: recorded.Recorded) -> Results:
    results = Results(found)
    for build, rows in found.values.items():
        for row, measured in rows.items():
            if row.benchmark not in METRICS or measured.value <= 0:
                continue
            kind, metric = METRICS[row.benchmark]
            device, model, batch = asv.param_values(row.params)
            step = Step(kind, str(model), str(device), int(batch))
            if metric == JOULES:
                results.joules.setdefault(build, {})[step] = measured.value
            elif metric == TIME:  # a step time wins over a capacity throughput
                results.timed.setdefault(build, {})[step] = row, measured
                results.samples.setdefault(build, {})[step] = step.batch / measured.value
            else:
                results.samples.setdefault(build, {}).setdefault(step, measured.value)
    return results


def load(results_dir: Path) -> Results:
    return _results(recorded.load(results_dir, strict=False))


def seed_batch(model: str) -> int | None:
    return spec.seed_batch_size if (spec := models.REGISTRY.get(model)) else None


def ranked(name: str, names: Sequence[str]) -> tuple[int, str]:
    """Registered names first, in registry order, then the others by name."""
    return (names.index(name), "") if name in names else (len(names), name)


@dataclass(frozen=True)
class Point:
    machine: str
    commit: str
    step: Step
    samples_per_second: float


def _order(point: Point) -> tuple[Any, ...]:
    step = point.step
    return (
        ranked(step.model, models.NAMES),
        KINDS.index(step.kind),
        point.machine,
        ranked(step.device, devices.NAMES),
    )


def chosen(measured: Iterable[Step], kind: str, model: str, device: str) -> Step | None:
    """The step at the model's seed batch, else at the largest batch measured."""
    batches = [s.batch for s in measured if (s.kind, s.model, s.device) == (kind, model, device)]
    seed = seed_batch(model)
    return Step(kind, model, device, seed if seed in batches else max(batches)) if batches else None


Chosen = dict[tuple[str, str, str], Point]  # by kind, model and device


def _points(results: Results, machine: str, commit: str) -> Chosen:
    measured = results.samples.get((machine, commit), {})
    return {
        key: Point(machine, commit, step, measured[step])
        for key in {(s.kind, s.model, s.device) for s in measured}
        if (step := chosen(measured, *key))
    }


@dataclass(frozen=True)
class Speedup:
    machine: str
    kind: str
    model: str
    device: str
    gpu: Point
    cpu: Point

    @property
    def ratio(self) -> float:
        return self.gpu.samples_per_second / self.cpu.samples_per_second


def _speedups(found: Chosen, gpus: Iterable[str]) -> Iterator[Speedup]:
    for gpu in sorted(found.values(), key=_order):
        step = gpu.step
        if step.device in gpus and (cpu := found.get((step.kind, step.model, CPU))):
            yield Speedup(gpu.machine, step.kind, step.model, step.device, gpu, cpu)


def _newest(results: Results) -> Iterator[Chosen]:
    return (_points(results, m, results.builds(m)[-1]) for m in results.machines)


def speedups(results: Results) -> list[Speedup]:
    found = (s for each in _newest(results) for s in _speedups(each, devices.GPU_NAMES))
    return sorted(found, key=lambda s: _order(s.gpu))


def across_machines(results: Results) -> list[Point]:
    return sorted((p for each in _newest(results) for p in each.values()), key=_order)


def batch_curves(results: Results) -> dict[tuple[str, str, str, str], list[tuple[int, float]]]:
    curves: dict[tuple[str, str, str, str], list[tuple[int, float]]] = {}
    for machine in results.machines:
        for w, value in sorted(results.samples[(machine, results.builds(machine)[-1])].items()):
            curves.setdefault((w.model, w.kind, machine, w.device), []).append((w.batch, value))
    return curves


@dataclass(frozen=True)
class Change:
    machine: str
    old: str
    new: str
    step: Step
    row: recorded.Row
    before: recorded.Measured
    after: recorded.Measured

    @property
    def ratio(self) -> float:
        return self.after.value / self.before.value


def previous_build(results: Results, machine: str, timeline: Reader) -> str | None:
    """The build before the newest on its channel, not by date: a release may follow a nightly."""
    builds = results.builds(machine)
    return next((c for c in reversed(timeline.lineage(builds[-1])[:-1]) if c in builds), None)


def build_changes(results: Results, timeline: Reader) -> list[Change]:
    found = []
    for machine in results.machines:
        if old := previous_build(results, machine, timeline):
            new = results.builds(machine)[-1]
            before, after = (results.timed.get((machine, c), {}) for c in (old, new))
            found += [
                Change(machine, old, new, step, after[step][0], before[step][1], after[step][1])
                for step in sorted(before.keys() & after.keys())
            ]
    return found


@dataclass(frozen=True)
class Pair:
    machine: str
    kind: str
    device: str
    model: str
    eager: float
    compiled: float
    compile_seconds: float | None

    @property
    def speedup(self) -> float:
        return self.eager / self.compiled


def eager_and_compiled(results: Results) -> list[Pair]:
    names = {f"{c}.{m}" for c in COMPILED.values() for m in (TIME, COMPILE_SECONDS)}
    rows = results.newest(names | {name for eager in EAGER.values() for name in eager})
    found = []
    for kind, cls in COMPILED.items():
        eager = {key: value for name in EAGER[kind] for key, value in rows[name].items()}
        for (machine, device, model), seconds in rows[f"{cls}.{TIME}"].items():
            if (twin := eager.get((machine, device, model, seed_batch(model)))) is not None:
                spent = rows[f"{cls}.{COMPILE_SECONDS}"].get((machine, device, model))
                found.append(Pair(machine, kind, device, model, twin, seconds, spent))
    return sorted(found, key=lambda p: (p.machine, p.device, p.kind, p.model))


@dataclass(frozen=True)
class ReleasePoint:
    python: str
    torch_version: str
    date_ms: int
    link: str
    machine: str
    kind: str
    model: str
    ratio: float


# -> (machine label, kind, model, ratio)
Ratios = Callable[[Results, str, str], Iterable[tuple[str, str, str, float]]]


def by_release(
    each_python: dict[str, recorded.Recorded], timeline: Reader, ratios: Ratios
) -> list[ReleasePoint]:
    """Every build's ``ratios``, per Python: none has wheels for every release."""
    return [
        ReleasePoint(python, timeline.version(c), each.dates.get(c, 0), timeline.link(c), *row)
        for python, each in sorted(each_python.items())
        for results in [_results(each)]
        for machine in each.machines
        for c in each.builds(machine)
        for row in ratios(results, machine, c)
    ]


def speedup_by_release(
    each_python: dict[str, recorded.Recorded], timeline: Reader
) -> list[ReleasePoint]:
    return by_release(
        each_python,
        timeline,
        lambda results, machine, commit: (
            (machine, s.kind, s.model, s.ratio)
            for s in _speedups(_points(results, machine, commit), [BY_RELEASE_DEVICE])
        ),
    )


def samples_per_joule(
    each_python: dict[str, recorded.Recorded], timeline: Reader
) -> list[ReleasePoint]:
    return by_release(
        each_python,
        timeline,
        lambda results, machine, commit: (
            (f"{machine} {step.device}", step.kind, step.model, step.batch / joules)
            for step, joules in results.joules.get((machine, commit), {}).items()
            if step.seed
        ),
    )
