"""The capacity figures and instruments, per combination."""

from __future__ import annotations

import functools

from mpsbench.measure import (
    accuracy,
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


def _capacity_workload(
    kind: str, device: str, model: str, batch_size: int, dtype: str = precision.DEFAULT
) -> workloads.Workload:
    # unguarded: these report what a timing is refused for
    workload = suite.prepare(kind, device, model, batch_size, dtype=dtype, guarded=False)
    fallback.refuse(workload.label, workload.fallback_ops)
    return workload


# peak memory first: a settled workload's step
CAPACITY: dict[str, measured.Figure] = {
    "peak_memory": suite.peak_memory_mib,
    "throughput": suite.throughput,
    "joules_per_step": energy.joules_per_step,
}


def capacity(kind: str, benchmark: str, keys: list[measured.Key]) -> measured.Table:
    return measured.measure(benchmark, keys, functools.partial(_capacity_workload, kind), CAPACITY)


def precision_capacity(kind: str, benchmark: str, keys: list[measured.Key]) -> measured.Table:
    def prepare(device: str, model: str, dtype: str) -> workloads.Workload:
        return _capacity_workload(kind, device, model, models.get(model).seed_batch_size, dtype)

    return measured.measure(benchmark, keys, prepare, {"peak_memory": suite.peak_memory_mib})


def driver_memory(workload: workloads.Workload) -> float:
    if (driver := suite.memory_peaks(workload).driver) is None:
        raise skips.SkipNotImplemented(
            f"{workload.device} keeps no driver memory counter; see *Capacity.track_peak_memory"
        )
    return driver


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
    def prepare(device: str, model: str) -> workloads.Workload:
        return suite.prepare(kind, device, model, models.get(model).seed_batch_size, guarded=False)

    return measured.measure(benchmark, keys, prepare, INSTRUMENTS)
