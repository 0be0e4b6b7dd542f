"""Measure once per run, report per combination: asv's ``setup_cache`` for ``track_`` figures.

On a GPU every asv process pays seconds before its first step (docs/explanation/budget.md),
so a class whose figures are not timings measures every combination of its
selection in one ``setup_cache`` process, and its ``track_`` processes only look
the figure up. An error is recorded for its combination (or figure) only.
"""

from __future__ import annotations

import functools
import gc
import inspect
import itertools
import pickle
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mpsbench.core import errors, files
from mpsbench.measure import devices, skips, workloads

Key = tuple[Any, ...]


@dataclass(frozen=True)
class Outcome:
    """One figure's value (a number; an epoch's phase), or why there is none: skipped (n/a) or failed (an error)."""

    value: Any = None
    skipped: str | None = None
    failed: str | None = None

    def get(self) -> Any:
        """The value; asv's n/a or a failure with the reason otherwise (call in ``setup`` or a ``track_``)."""
        if self.skipped is not None:
            raise skips.SkipNotImplemented(self.skipped)
        if self.failed is not None or self.value is None:
            raise RuntimeError(self.failed or "no value was measured")
        return self.value


def outcome_of(exc: BaseException) -> Outcome:
    """What an exception means for a combination: skips and out-of-memory are n/a, the rest fail."""
    if isinstance(exc, skips.SkipNotImplemented):
        return Outcome(skipped=errors.first_line(exc))
    if devices.is_out_of_memory(exc):
        return Outcome(skipped=f"does not fit in device memory: {errors.first_line(exc)}")
    return Outcome(failed=f"{type(exc).__name__}: {errors.first_line(exc)}")


# A figure: takes the prepared state of one combination, returns a number (or
# raises: SkipNotImplemented for n/a, anything else for a failure).
Figure = Callable[[Any], "float | None"]


@dataclass
class Table:
    """Every combination's figures, as ``setup_cache`` returns them (picklable)."""

    figures: dict[Key, dict[str, Outcome]] = field(default_factory=dict)

    def lookup(self, key: Key, figure: str) -> Any:
        """The figure of ``key``, or asv's n/a / failure with the reason."""
        found = self.figures.get(key)
        if found is None:  # selected now but not when the cache was measured
            raise RuntimeError(f"{key} was not measured in this run's setup_cache; the selection changed")
        return found[figure].get()


def measure(
    benchmark: str,
    keys: Iterable[Key],
    prepare: Callable[..., Any],
    figures: Mapping[str, Figure],
    after_each: Callable[[str], None] | None = None,
) -> Table:
    """For each key ``benchmark`` selects: ``prepare(*key)``, then every figure of that state; one model at a time.

    A key left out, or ``prepare`` raising, gives every figure of the key that outcome. ``after_each(device)`` hands
    the state's memory back (default :func:`release`, a model's: a garbage collection, a tenth of a second with torch).
    """
    table = Table()
    for key in keys:
        try:
            skips.selected(benchmark, *key)
            state = prepare(*key)
        except Exception as exc:
            failed = outcome_of(exc)
            table.figures[key] = {name: failed for name in figures}
            continue
        table.figures[key] = {name: _reading(key, name, figure, state) for name, figure in figures.items()}
        del state
        (after_each or release)(key[0])
    return table


def release(device: str) -> None:
    """Hand the measured model's memory back before the next is built: one model at a time."""
    workloads.forget()
    gc.collect()
    found = devices.get(device)
    if found.usable:
        found.empty_cache()


def _reading(key: Key, name: str, figure: Figure, state: Any) -> Outcome:
    try:
        value = figure(state)
    except Exception as exc:
        return outcome_of(exc)
    # an int (a count) stays one in asv's table
    return Outcome(skipped=f"{key[0]} keeps no reading for {name}") if value is None else Outcome(value=value)


def grid(*axes: Iterable[Any]) -> list[Key]:
    """Every combination of the params' axes, in asv's order."""
    return list(itertools.product(*axes))


# --- one setup_cache for a module's classes, measured by its first lookup --------------
# asv keys a ``setup_cache`` by the module and line that define the function, so a module whose classes measure once
# per run defines one function that measures every family, and each class names it: one cache, each class reading
# its part. asv runs each ``setup_cache`` in a freshly spawned interpreter, even under forkserver, which imports
# torch, torchvision and transformers again before it measures anything: 10-15 s on a GPU host (docs/explanation/processes.md).
# So the setup_cache only names what to measure (:func:`deferred`), and the first lookup process measures it: under
# forkserver a fork of the server that imported them already; under spawn (macOS) a process that imports them as the
# setup_cache's did. It leaves the readings in asv's cache folder, the working folder of every process that shares
# the cache (how asv lets a setup_cache's users share files), and the later lookups read them there.

# Any lookup may be the one that measures: the full sweep's cpu steps at the seed batch take a minute each,
# CIFAR-10 epochs more, every op at every size and dtype more still.
MEASURING_TIMEOUT = 6 * 3600


@dataclass(frozen=True)
class Deferred:
    """What a setup_cache returns: the readings are measured by the first lookup that asks (:func:`readings`)."""

    setup_cache: Callable[..., Any]  # the module-level setup_cache (pickled by name); the function it wraps measures

    def readings(self) -> Any:
        """The readings in the working folder, measured here if no process of this cache has begun them."""
        name = self.setup_cache.__name__
        done, begun = Path(f"mpsbench{name}.pickle"), Path(f"mpsbench{name}.begun")
        if not done.exists():
            if not files.create(begun, b""):
                raise RuntimeError(f"an earlier lookup began {name} in {Path.cwd()} and did not finish (it crashed or"
                                   " reached its timeout): its output says why")
            files.write(done, pickle.dumps(inspect.unwrap(self.setup_cache)()))
        with done.open("rb") as handle:
            return pickle.load(handle)


def deferred(measure: Callable[[], Any]) -> Callable[..., Deferred]:
    """asv's ``setup_cache`` for ``measure``: returns a :class:`Deferred` at once. asv keys the cache by ``measure``'s
    module and line, as inspect unwraps the decorator."""

    @functools.wraps(measure)
    def setup_cache(*_: Any) -> Deferred:  # asv passes a class's benchmark instance, a function's nothing
        return Deferred(setup_cache)

    return setup_cache


def measure_families(families: Mapping[str, Callable[[], Any]]) -> dict[str, Any]:
    """Each family's readings, or the failed :class:`Outcome` of its measuring, one family after the other."""
    readings: dict[str, Any] = {}
    for name, measure_family in families.items():
        try:
            readings[name] = measure_family()
        except Exception as exc:  # one family's bug must not cost the other its readings
            readings[name] = Outcome(failed=f"measuring {name} failed: {type(exc).__name__}: {errors.first_line(exc)}")
    return readings


def family(readings: Mapping[str, Any] | Deferred, name: str) -> Any:
    """Family ``name``'s readings from a shared setup_cache; raises (the benchmark fails) if it has none."""
    families: Mapping[str, Any] = readings.readings() if isinstance(readings, Deferred) else readings
    if name not in families:
        raise RuntimeError(f"the setup_cache measured no family {name!r}; it measured: {', '.join(families)}")
    found = families[name]
    return found.get() if isinstance(found, Outcome) else found


class Lookup:
    """Base of a benchmark class whose ``track_`` figures a shared ``setup_cache`` measured: each one is a lookup."""

    kind: str  # the class's family in the setup_cache's readings: training, inference, epoch, ...
    rounds = 1  # a lookup: a second round would read the same cache again
    timeout = MEASURING_TIMEOUT


def track(figure: str, unit: str, doc: str) -> Callable[..., float]:
    """A :class:`Lookup`'s ``track_`` method: figure ``figure`` of its combination, or asv's n/a / failure with the reason.

    asv names a benchmark by the attribute it is bound to and reads ``unit`` and the docstring from the function.
    """

    def track_figure(self: Lookup, readings: Mapping[str, Any], *params: Any) -> float:
        value: float = family(readings, self.kind).lookup(params, figure)
        return value

    track_figure.unit = unit  # type: ignore[attr-defined]
    track_figure.__doc__ = doc
    return track_figure


class PeakMemory(Lookup):
    """The peak-memory figure shared by the step classes' capacity lookups (models and precision)."""

    track_peak_memory = track("peak_memory", "MiB",
                              "Peak device memory over one step, in MiB (cpu: the process's largest RSS sample over the step).")


def of(benchmark: Any, measure_family: Callable[[str, list[Key]], Table]) -> Callable[[], Table]:
    """``measure_family`` over every combination of the benchmark class's params, selected by its name's rule."""
    return functools.partial(measure_family, benchmark.__name__, grid(*benchmark.params))


def kind_families(measure_kind: Callable[[str, str, list[Key]], Table], *benchmarks: Any) -> dict[str, Callable[[], Any]]:
    """Each class's family by its ``kind`` (training, inference): ``measure_kind(kind, ...)`` over its params."""
    return {benchmark.kind: of(benchmark, functools.partial(measure_kind, benchmark.kind)) for benchmark in benchmarks}


def measure_kinds(measure_kind: Callable[[str, str, list[Key]], Table], *benchmarks: Any) -> dict[str, Any]:
    """:func:`measure_families` of :func:`kind_families`."""
    return measure_families(kind_families(measure_kind, *benchmarks))
