"""What the asv benchmark classes share: preparing a combination and timing it per step.

Kept in the package (not in ``benchmarks/``) so it is unit-tested and typed;
the benchmark modules stay declarative.
"""

from __future__ import annotations

import time

from mpsbench import devices, models, selection, timing, workloads

try:  # present in every asv environment; absent only outside asv
    from asv_runner.benchmarks.mark import SkipNotImplemented
except ImportError:  # pragma: no cover - exercised only without asv installed

    class SkipNotImplemented(NotImplementedError):  # type: ignore[no-redef]
        """Stand-in with asv's meaning: show this combination as n/a."""


class StepTimer:
    """asv ``timer`` that reports seconds per step for bodies that loop k steps.

    asv subtracts two timer readings around each timed call; dividing the clock
    by k turns that difference into the time of one step. asv reads ``timer``
    after ``setup``, so a benchmark sets it there, per combination.
    """

    def __init__(self, steps_per_call: int) -> None:
        self.steps_per_call = steps_per_call

    def __call__(self) -> float:
        return time.perf_counter() / self.steps_per_call


def prepare(kind: str, device: str, model: str, batch_size: int) -> workloads.Workload:
    """Build (once per process) and warm up a workload for an asv ``setup``.

    Turns the reasons a combination cannot run into asv's outcomes: absent
    devices, combinations the registry does not define, missing packages,
    selections and batches that do not fit in memory are skipped with the
    reason (n/a); an op that torch lacks on the device fails the combination
    with the op's name, never a silent skip.
    """
    spec = models.get(model)
    if batch_size not in spec.batch_sizes:
        raise SkipNotImplemented(str(models.BatchSizeError(f"{model} is not run at batch {batch_size}")))
    reason = selection.skip_reason(device, spec, batch_size)
    if reason is not None:
        raise SkipNotImplemented(reason)
    found = devices.availability(device)
    if not found.usable:
        raise SkipNotImplemented(f"{device} is not usable here: {found.reason}")
    missing = spec.missing_requirements()
    if missing:
        raise SkipNotImplemented(f"{model} needs {', '.join(missing)}, not importable in this environment")
    try:
        workload, _ = workloads.cached(kind, device, model, batch_size)
    except SkipNotImplemented:
        raise
    except NotImplementedError as exc:  # torch has no kernel for an op on this device
        raise RuntimeError(f"{model} on {device}: torch lacks an op: {exc}") from exc
    except Exception as exc:
        if devices.is_out_of_memory(exc):
            workloads.forget()
            devices.empty_cache(device)
            first_line = str(exc).strip().splitlines()[0]
            raise SkipNotImplemented(
                f"{model} at batch {batch_size} does not fit in {device} memory: {first_line}"
            ) from exc
        raise
    return workload


def throughput(workload: workloads.Workload) -> float:
    """Samples per second from the median of several timed calls (never a single one)."""
    return timing.time_steps(workload).samples_per_second


def peak_memory_mib(workload: workloads.Workload) -> float | None:
    """Peak memory over one step, in MiB; None where the device keeps no counters."""
    device = workload.device
    devices.synchronize(device)
    sampler = devices.PeakSampler(device)
    sampler.sample()
    workload.step(probe=sampler.sample)
    devices.synchronize(device)
    peak = sampler.peak_bytes()
    return None if peak is None else peak / devices.MIB
