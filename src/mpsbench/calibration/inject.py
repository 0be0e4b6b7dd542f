"""A deliberate, measured slowdown of one model's steps, for calibrating the suite.

``MPSBENCH_INJECT_SLOWDOWN=resnet50:0.05`` makes every timed run of resnet50's
steps take 5% longer: after the steps finish on the device, the host waits for
5% of the step time measured when the workload was warmed up. It exists to
prove that ``asv continuous`` flags a slowdown of that size (docs/performance.md):
a calibration build sets it through its timeline entry (``mpsbench build
add-existing --env``), so the two sides of the comparison are two real timeline
commits. Unset, it costs nothing.
"""

from __future__ import annotations

import os

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
        raise InjectError(f"{INJECT_ENV}={value!r} must be MODEL:FRACTION with 0 < FRACTION < 1, e.g. resnet50:0.05")
    return amount if name == model else 0.0
