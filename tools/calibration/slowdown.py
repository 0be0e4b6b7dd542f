"""A deliberate, measured slowdown of one model's steps, for calibrating the suite.

``MPSBENCH_INJECT_SLOWDOWN=resnet50:0.05`` makes every timed run of resnet50's
steps take 5% longer: after the steps finish on the device, the host waits for
5% of the step time measured when the workload was warmed up. It exists to
prove that ``asv continuous`` flags a slowdown of that size (docs/explanation/calibration.md):
the calibration's build B sets the variable through its timeline entry, so the
two sides of the comparison are two real timeline commits.

The suite itself has no hook for it: the calibration runs its own copy of the
benchmarks, whose package calls :func:`install`, which wraps the workloads'
``warm_up`` and ``run`` from outside. Unset, the wrappers add one attribute
read per timed call, on both sides of every comparison.
"""

from __future__ import annotations

import functools
import os
import time
from typing import Any

INJECT_ENV = "MPSBENCH_INJECT_SLOWDOWN"


class InjectError(ValueError):
    """A malformed MPSBENCH_INJECT_SLOWDOWN value."""


def slowdown_for(model: str) -> float:
    """The fraction by which ``model``'s steps are slowed: 0.0 unless the variable names it."""
    value = os.environ.get(INJECT_ENV, "")
    if not value:
        return 0.0
    name, sep, fraction = value.partition(":")
    try:
        amount = float(fraction)
    except ValueError:
        amount = -1.0
    if not sep or not name or not 0.0 < amount < 1.0:
        raise InjectError(
            f"{INJECT_ENV}={value!r} must be MODEL:FRACTION with 0 < FRACTION < 1, e.g. resnet50:0.05"
        )
    return amount if name == model else 0.0


def install() -> None:
    """Wrap the workloads' warm-up (measure the share to wait) and run (wait it, after a synchronize)."""
    from mpsbench.measure import timing, workloads

    warm_up, run = workloads.Workload.warm_up, workloads.Workload.run

    def warm_up_and_measure(self: Any, *args: Any, **kwargs: Any) -> Any:
        warm_up(self, *args, **kwargs)
        self.injected_seconds = 0.0
        fraction = slowdown_for(self.spec.name)
        if (
            fraction
        ):  # a share of the median of five single steps (the unwrapped run: no wait in it)
            median, _ = timing.median_seconds(
                functools.partial(run, self), self.device, 1, 5, 0.0, 5
            )
            self.injected_seconds = fraction * median
        return self  # the workload, as the wrapped warm_up returns it

    def run_and_wait(self: Any, steps: int) -> None:
        run(self, steps)
        if getattr(self, "injected_seconds", 0.0):
            self.device.synchronize()
            time.sleep(self.injected_seconds * steps)

    workloads.Workload.warm_up = warm_up_and_measure  # type: ignore[method-assign]
    workloads.Workload.run = run_and_wait  # type: ignore[method-assign]
