"""Timing outside asv's clock, as asv's: warm up, synchronize before each clock read."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mpsbench.measure import devices

if TYPE_CHECKING:
    from mpsbench.measure.workloads import Workload


@dataclass(frozen=True)
class StepTiming:
    seconds_per_step: float  # median
    samples_per_second: float
    calls: int
    steps_per_call: int


def median_seconds(
    run: Callable[[int], None],
    device: str,
    per_sample: int,
    min_samples: int = 3,
    min_seconds: float = 1.0,
    max_samples: int = 50,
) -> tuple[float, int]:
    """Median seconds per step of a warmed-up ``run``, and the calls it took."""
    durations: list[float] = []
    synchronize = devices.get(device).synchronize
    synchronize()
    started = time.perf_counter()
    while len(durations) < max_samples and (
        len(durations) < min_samples or time.perf_counter() - started < min_seconds
    ):
        begin = time.perf_counter()
        run(per_sample)
        synchronize()
        durations.append((time.perf_counter() - begin) / per_sample)
    return statistics.median(durations), len(durations)


def time_steps(workload: Workload, min_calls: int = 3, min_seconds: float = 1.0) -> StepTiming:
    steps = workload.spec.steps_per_call
    median, calls = median_seconds(workload.run, workload.device, steps, min_calls, min_seconds)
    return StepTiming(median, workload.batch_size / median, calls, steps)
