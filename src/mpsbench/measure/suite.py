"""What the benchmark classes share: preparing, guarding and timing a combination."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass

from mpsbench.core import errors
from mpsbench.measure import (
    accuracy,
    correctness,
    devices,
    fallback,
    models,
    precision,
    skips,
    timing,
    workloads,
)

SkipNotImplemented, selected = skips.SkipNotImplemented, skips.selected


def require(kind: str, device: str, model: str, *, dtype: str = precision.DEFAULT) -> None:
    skips.require_device(device)
    skips.skip_if(models.get(model).unimportable())
    if reason := precision.unsupported_reason(device, kind, dtype):
        raise skips.SkipNotImplemented(f"{model} {kind} in {dtype} on {device}: {reason}")


def prepare(
    kind: str,
    device: str,
    model: str,
    batch_size: int,
    *,
    dtype: str = precision.DEFAULT,
    guarded: bool = True,
    compiled: bool = False,
) -> workloads.Workload:
    """The warmed-up workload for asv's ``setup``, guarded unless ``guarded=False``."""
    require(kind, device, model, dtype=dtype)
    with OutOfMemorySkips(device, model, batch_size):
        try:
            workload = workloads.cached(kind, device, model, batch_size, dtype, compiled)
        except NotImplementedError as exc:
            raise RuntimeError(f"{model} on {device}: torch lacks an op: {exc}") from exc
        if guarded:
            guard(workload)
    return workload


@dataclass
class OutOfMemorySkips(contextlib.AbstractContextManager["OutOfMemorySkips"]):
    """Turns a device's out-of-memory error into a skip (a class: cheap in a timed call)."""

    device: str
    model: str
    batch_size: int

    def __exit__(self, kind: object, exc: BaseException | None, traceback: object) -> None:
        if exc is None or isinstance(exc, skips.SkipNotImplemented):
            return
        if devices.is_out_of_memory(exc):
            workloads.forget()
            devices.get(self.device).empty_cache()
            raise skips.SkipNotImplemented(
                f"{self.model} at batch {self.batch_size} does not fit in {self.device} memory:"
                f" {errors.first_line(exc)}"
            ) from exc


GUARD_ERRORS = (fallback.FallbackError, correctness.CorrectnessError, accuracy.AccuracyError)


def guard(workload: workloads.Workload) -> None:
    """Fails (GUARD_ERRORS) a combination whose timing would not be honest."""
    fallback.refuse(workload.label, workload.fallback_ops)
    correctness.verify(workload.device, workload.dtype)
    if accuracy.needed(workload.device):
        accuracy.verify(workload)


def throughput(workload: workloads.Workload) -> float:
    return timing.time_steps(workload, min_calls=5, min_seconds=0.25).samples_per_second


def cold_first_step(kind: str, device: str, model: str, batch_size: int) -> Callable[[], None]:
    workload = workloads.build(kind, device, model, batch_size)
    workload.device.synchronize()

    def first_step() -> None:
        with fallback.Recorder() as recorder:
            workload.step()
            workload.device.synchronize()
        fallback.refuse(f"{workload.label}, first step", recorder.ops)

    return first_step
