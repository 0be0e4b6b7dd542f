"""The ``MPSBENCH_*`` settings, each read and checked here: a bad value is one line naming the variable, the value
and the valid choices, never a setting that silently means something else. Benchmark processes inherit them.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from mpsbench.core.errors import UserError

FULL = "MPSBENCH_FULL"  # on: the full sweep (every device at every batch size), not the default selection
DEVICES = "MPSBENCH_DEVICES"  # a comma-separated list of the devices a run times (default: every device present)
CONFIG = "MPSBENCH_CONFIG"  # another asv.conf.json for scripts/publish (the fleet's)
MACHINE = "MPSBENCH_MACHINE"  # a fleet runner's machine name, e.g. set in the runner's .env file
# Set by compare and bisect in a cpu row's processes, not by users: every timed call is one step, whatever the model's
# steps_per_call, so that a process's fastest sample can be a step the scheduler spared
# (docs/explanation/the-rule.md, "A cpu row's samples"). A recorded run never has it.
SINGLE_STEPS = "MPSBENCH_SINGLE_STEPS"

ON = ("1", "true", "yes", "on")
OFF = ("0", "false", "no", "off")


class SettingError(UserError):
    """An environment setting outside its documented choices."""


def flag(name: str) -> bool:
    """A yes-or-no setting: one of :data:`ON` or :data:`OFF` in any case; unset or empty is off."""
    value = os.environ.get(name, "")
    word = value.strip().lower()
    if word in (*ON, *OFF, ""):
        return word in ON
    raise SettingError(f"{name}={value!r} is neither on ({', '.join(ON)}) nor off ({', '.join(OFF)}, or unset)")


def choices(name: str, valid: Sequence[str]) -> tuple[str, ...] | None:
    """A comma-separated list of ``valid`` names, each once and in order; None where unset or empty."""
    value = os.environ.get(name, "")
    if not value.strip():
        return None
    items = [item.strip() for item in value.split(",")]
    for item in items:
        if item not in valid:
            raise SettingError(f"{name}={value!r} names {item!r}: give a comma-separated list of {', '.join(valid)}")
    return tuple(dict.fromkeys(items))


def text(name: str) -> str | None:
    """Free text (a path, a name checked where it is used); None where unset or empty."""
    return os.environ.get(name, "").strip() or None


def whole(name: str, default: int, least: int, most: int) -> int:
    """A whole number from ``least`` to ``most``; ``default`` where unset or empty."""
    value = os.environ.get(name, "")
    if not value.strip():
        return default
    try:
        number = int(value.strip())
    except ValueError:
        number = least - 1
    if not least <= number <= most:
        raise SettingError(f"{name}={value!r} is not a whole number from {least} to {most}")
    return number
