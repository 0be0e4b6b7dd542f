"""Measure once per run, report per combination."""

from __future__ import annotations

import functools
import gc
import inspect
import pickle
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mpsbench.core import errors, files
from mpsbench.measure import devices, skips, workloads

Key = tuple[Any, ...]
Figure = Callable[[Any], "float | None"]


@dataclass(frozen=True)
class Outcome:
    value: Any = None
    skipped: str | None = None
    failed: str | None = None

    def get(self) -> Any:
        if self.skipped is not None:
            raise skips.SkipNotImplemented(self.skipped)
        if self.failed is not None or self.value is None:
            raise RuntimeError(self.failed or "no value was measured")
        return self.value


def outcome_of(exc: BaseException) -> Outcome:
    if isinstance(exc, skips.SkipNotImplemented):
        return Outcome(skipped=errors.first_line(exc))
    if devices.is_out_of_memory(exc):
        return Outcome(skipped=f"does not fit in device memory: {errors.first_line(exc)}")
    return Outcome(failed=f"{type(exc).__name__}: {errors.first_line(exc)}")


@dataclass
class Table:
    figures: dict[Key, dict[str, Outcome]] = field(default_factory=dict)

    def lookup(self, key: Key, figure: str) -> Any:
        if (found := self.figures.get(key)) is None:
            raise RuntimeError(
                f"{key} was not measured in this run's setup_cache; the selection changed"
            )
        return found[figure].get()


def measure(
    benchmark: str,
    keys: Iterable[Key],
    prepare: Callable[..., Any],
    figures: Mapping[str, Figure],
    after_each: Callable[[str], None] | None = None,
) -> Table:
    """Each figure of ``prepare(*key)`` per selected key; ``after_each(device)`` frees memory."""
    table = Table()
    for key in keys:
        try:
            skips.selected(benchmark, *key)
            state = prepare(*key)
        except Exception as exc:
            table.figures[key] = dict.fromkeys(figures, outcome_of(exc))
            continue
        table.figures[key] = {name: _reading(key, name, f, state) for name, f in figures.items()}
        del state
        (after_each or release)(key[0])
    return table


def release(device: str) -> None:
    workloads.forget()
    gc.collect()
    if (found := devices.get(device)).usable:
        found.empty_cache()


def _reading(key: Key, name: str, figure: Figure, state: Any) -> Outcome:
    try:
        value = figure(state)
    except Exception as exc:
        return outcome_of(exc)
    return Outcome(value, None if value is not None else f"{key[0]} keeps no reading for {name}")


@dataclass(frozen=True)
class Deferred:
    """A setup_cache's result; the first lookup measures (asv's process would import torch again)."""

    setup_cache: Callable[..., Any]  # module-level, pickled by name

    def readings(self) -> Any:
        name = self.setup_cache.__name__
        done, begun = Path(f"mpsbench{name}.pickle"), Path(f"mpsbench{name}.begun")
        if not done.exists():
            if not files.create(begun, b""):
                raise RuntimeError(
                    f"an earlier lookup began {name} in {Path.cwd()} and did not finish"
                    " (a crash or its timeout): its output says why"
                )
            files.write(done, pickle.dumps(inspect.unwrap(self.setup_cache)()))
        return pickle.loads(done.read_bytes())


def deferred(measure: Callable[[], Any]) -> Callable[..., Deferred]:
    """asv's ``setup_cache`` for ``measure``, keyed by ``measure``'s line."""

    @functools.wraps(measure)
    def setup_cache(*_: Any) -> Deferred:
        return Deferred(setup_cache)

    return setup_cache


def measure_families(families: Mapping[str, Callable[[], Any]]) -> dict[str, Any]:
    """Each family's readings or failed :class:`Outcome`: a bug costs one family."""
    readings: dict[str, Any] = {}
    for name, measure_family in families.items():
        try:
            readings[name] = measure_family()
        except Exception as exc:
            failed = f"measuring {name} failed: {type(exc).__name__}: {errors.first_line(exc)}"
            readings[name] = Outcome(failed=failed)
    return readings


def family(readings: Mapping[str, Any] | Deferred, name: str) -> Any:
    families = readings.readings() if isinstance(readings, Deferred) else readings
    if name not in families:
        raise RuntimeError(
            f"the setup_cache measured no family {name!r}; it measured: {', '.join(families)}"
        )
    found = families[name]
    return found.get() if isinstance(found, Outcome) else found
