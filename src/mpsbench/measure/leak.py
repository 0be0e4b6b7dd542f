"""Leaks: how fast memory held after each step grows, as a least-squares slope in MiB per 100 steps.

A step that keeps something alive each time makes the readings climb in a straight line; a clean step's slope is
about zero (docs/instruments.md, Leaks).
"""

from __future__ import annotations

import gc
import statistics
from collections.abc import Callable, Sequence

from mpsbench.measure import devices
from mpsbench.measure.skips import SkipNotImplemented
from mpsbench.measure.workloads import Workload

STEPS_SMALL = 200  # mlp, lenet5: milliseconds a step even on a cpu
STEPS_LARGE = 50  # resnet50, vgg16, bert: a second a step on an M1 at the seed batch
PER = 100  # the slope is reported per this many steps


def steps_for(workload: Workload) -> int:
    return STEPS_LARGE if workload.spec.large else STEPS_SMALL


def reading(device: str) -> int:
    """Bytes held now: the device allocator's count, or the process RSS where there is none."""
    current = devices.get(device).memory().current
    if current is None:  # mps before torch 2.0: no counters; its buffers live in process memory
        current = devices.rss()
    if current is None:  # a skip with the reason (asv's n/a), never a slope of zeros
        raise SkipNotImplemented(f"no memory reading for {device}: {devices.Device.CPU.no_reading_reason()}")
    return current


def slope_mib_per_100_steps(readings: Sequence[float]) -> float:
    if len(readings) < 2:
        raise ValueError(f"a slope needs at least 2 readings, got {len(readings)}")
    return statistics.linear_regression(range(len(readings)), readings).slope * PER / devices.MIB


def record(step: Callable[[], object], device: str, steps: int) -> list[int]:
    """Run ``step`` ``steps`` times, reading memory after each has finished on the device."""
    gc.collect()  # start from a settled heap: garbage from warm-up is not growth
    synchronize = devices.get(device).synchronize
    synchronize()
    readings = []
    for _ in range(steps):
        step()
        synchronize()  # freed buffers return once the device is done with them
        readings.append(reading(device))
    return readings


def measure(workload: Workload, steps: int | None = None) -> float:
    """A warmed-up workload's memory growth in MiB per 100 steps."""
    return slope_mib_per_100_steps(record(workload.step, workload.device, steps or steps_for(workload)))
