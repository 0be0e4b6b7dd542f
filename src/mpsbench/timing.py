"""A minimal, correct step timer for use outside asv (the command line, calibration).

Warm up first, synchronize the device before every clock read, report the
median: the same rules the asv classes follow.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

from mpsbench import devices
from mpsbench.workloads import Workload


@dataclass(frozen=True)
class StepTiming:
    seconds_per_step: float  # median over the timed calls
    samples_per_second: float
    calls: int
    steps_per_call: int


def time_steps(workload: Workload, min_calls: int = 3, min_seconds: float = 1.0, max_calls: int = 50) -> StepTiming:
    """Median seconds per step over at least ``min_calls`` calls and ``min_seconds``.

    Each call runs the model's ``steps_per_call`` steps and then synchronizes,
    so a sub-millisecond step is timed in a batch long enough for the clock.
    The workload must be warmed up already.
    """
    steps = workload.spec.steps_per_call
    durations: list[float] = []
    devices.synchronize(workload.device)
    started = time.perf_counter()
    while len(durations) < max_calls and (
        len(durations) < min_calls or time.perf_counter() - started < min_seconds
    ):
        begin = time.perf_counter()
        workload.run(steps)
        devices.synchronize(workload.device)
        durations.append((time.perf_counter() - begin) / steps)
    median = statistics.median(durations)
    return StepTiming(median, workload.samples_per_step / median, len(durations), steps)
