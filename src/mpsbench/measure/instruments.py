"""The instruments' four readings of every selected combination, from one build and warm-up per combination.

benchmark_instruments reports them from ``setup_cache`` (:mod:`mpsbench.measure.measured`)
instead of four processes that each build the model.
"""

from __future__ import annotations

from mpsbench.measure import accuracy, leak, measured, models, suite, workloads


def fallback_ops(workload: workloads.Workload) -> float:
    """Ops that ran on the cpu instead of the device during warm-up."""
    return len(workload.fallback_ops)


def driver_memory(workload: workloads.Workload) -> float:
    """Peak memory the driver holds for torch over one step, in MiB (mps driver, cuda reserved)."""
    driver = suite.memory_peaks(workload).driver
    if driver is None:
        raise suite.SkipNotImplemented(
            f"{workload.device} keeps no driver memory counter; see *Capacity.track_peak_memory"
        )
    return driver


def accuracy_error(workload: workloads.Workload) -> float:
    """Relative error of the device's logits and loss against the cpu's."""
    if not accuracy.needed(workload.device):
        raise suite.SkipNotImplemented("the cpu is the reference the other devices are compared with")
    return accuracy.compare(workload).error


# In this order: memory is read over one step of the settled workload, before
# the leak's many steps; the accuracy check builds a cpu copy last.
FIGURES: dict[str, measured.Figure] = {
    "fallback_ops": fallback_ops,
    "driver_memory": driver_memory,
    "leak": leak.measure,
    "accuracy_error": accuracy_error,
}


def measure(kind: str, benchmark: str, keys: list[measured.Key]) -> measured.Table:
    """Every (device, model) of this run's instrument selection, at the model's seed batch size."""

    def prepare(device: str, model: str) -> workloads.Workload:
        # Unguarded: these readings report the very facts a timing is refused for.
        return suite.prepare(kind, device, model, models.get(model).seed_batch_size, guarded=False)

    return measured.measure(benchmark, keys, prepare, FIGURES)
