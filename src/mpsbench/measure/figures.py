"""The capacity figures and instruments, per combination."""

from __future__ import annotations

import functools

from mpsbench.measure import (
    accuracy,
    devices,
    energy,
    fallback,
    leak,
    measured,
    models,
    precision,
    skips,
    suite,
    workloads,
)


def _workload(
    kind: str,
    device: str,
    model: str,
    batch_size: int | None = None,
    *,
    dtype: str = precision.DEFAULT,
    refuse: bool = True,
) -> workloads.Workload:
    """Unguarded: these figures report what a timing is refused for; by default the seed batch."""
    batch_size = models.get(model).seed_batch_size if batch_size is None else batch_size
    workload = suite.prepare(kind, device, model, batch_size, dtype=dtype, guarded=False)
    if refuse:
        fallback.refuse(workload.label, workload.fallback_ops)
    return workload


def _peak_mib(workload: workloads.Workload, index: int, missing: str) -> float:
    """Peak MiB over one step: 0, live tensors (cpu: the largest RSS sample); 1, the driver's."""
    if (peak := devices.peaks_over(workload.device, workload.step)[index]) is None:
        raise skips.SkipNotImplemented(missing)
    return peak / devices.MIB


def peak_memory(workload: workloads.Workload) -> float:
    reason = workload.device.no_reading_reason()
    return _peak_mib(workload, 0, f"no {workload.device} memory reading: {reason}")


def driver_memory(workload: workloads.Workload) -> float:
    missing = f"{workload.device} keeps no driver memory counter; see *Capacity.track_peak_memory"
    return _peak_mib(workload, 1, missing)


# peak memory first: a settled workload's step
CAPACITY: dict[str, measured.Figure] = {
    "peak_memory": peak_memory,
    "throughput": suite.throughput,
    "joules_per_step": energy.joules_per_step,
}


def capacity(kind: str, benchmark: str, keys: list[measured.Key]) -> measured.Table:
    return measured.measure(benchmark, keys, functools.partial(_workload, kind), CAPACITY)


def precision_capacity(kind: str, benchmark: str, keys: list[measured.Key]) -> measured.Table:
    def prepare(device: str, model: str, dtype: str) -> workloads.Workload:
        return _workload(kind, device, model, dtype=dtype)

    return measured.measure(benchmark, keys, prepare, {"peak_memory": peak_memory})


def accuracy_error(workload: workloads.Workload) -> float:
    if not accuracy.needed(workload.device):
        raise skips.SkipNotImplemented("the cpu is the reference the others are compared with")
    return accuracy.compare(workload).error


# the leak after one-step memory; accuracy's cpu copy last
INSTRUMENTS: dict[str, measured.Figure] = {
    "fallback_ops": lambda workload: len(workload.fallback_ops),
    "driver_memory": driver_memory,
    "leak": leak.measure,
    "accuracy_error": accuracy_error,
}


def instruments(kind: str, benchmark: str, keys: list[measured.Key]) -> measured.Table:
    # fallbacks are counted here, not refused
    prepare = functools.partial(_workload, kind, refuse=False)
    return measured.measure(benchmark, keys, prepare, INSTRUMENTS)
