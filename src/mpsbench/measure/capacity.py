"""Throughput, peak memory and energy per step of every selected step combination, from one build and warm-up each.

benchmark_models' ``*Capacity`` classes report them from ``setup_cache`` (:mod:`mpsbench.measure.measured`).
"""

from __future__ import annotations

import functools

from mpsbench.measure import energy, fallback, measured, models, precision, suite, workloads


def _prepare(kind: str, device: str, model: str, batch_size: int, dtype: str = precision.DEFAULT) -> workloads.Workload:
    # No accuracy check here: Training/Inference.time_step checks the same
    # combination and fails it, visibly, when the device computes wrong results.
    workload = suite.prepare(kind, device, model, batch_size, dtype=dtype, guarded=False)
    fallback.refuse(workload.label, workload.fallback_ops)
    return workload


# Peak memory first: it reads the allocator's peak over one step of a settled workload.
FIGURES: dict[str, measured.Figure] = {
    "peak_memory": suite.peak_memory_mib,
    "throughput": suite.throughput,
    "joules_per_step": energy.joules_per_step,  # n/a with the reason where the device has no readable counter
}


def measure(kind: str, benchmark: str, keys: list[measured.Key]) -> measured.Table:
    """Every (device, model, batch size) of this run's selection: its peak memory (MiB), samples/s and J/step."""
    return measured.measure(benchmark, keys, functools.partial(_prepare, kind), FIGURES)


def measure_precision(kind: str, benchmark: str, keys: list[measured.Key]) -> measured.Table:
    """Every (device, model, dtype) of the precision selection, at the seed batch: its peak memory (MiB)."""

    def prepare(device: str, model: str, dtype: str) -> workloads.Workload:
        return _prepare(kind, device, model, models.get(model).seed_batch_size, dtype)

    return measured.measure(benchmark, keys, prepare, {"peak_memory": suite.peak_memory_mib})
