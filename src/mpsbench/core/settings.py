"""The ``MPSBENCH_*`` settings, read and checked."""

from __future__ import annotations

import os
from collections.abc import Sequence

from mpsbench.core.errors import UserError

FULL = "MPSBENCH_FULL"
DEVICES = "MPSBENCH_DEVICES"
CONFIG = "MPSBENCH_CONFIG"
MACHINE = "MPSBENCH_MACHINE"
SINGLE_STEPS = "MPSBENCH_SINGLE_STEPS"  # docs/explanation/the-rule.md
ALLOW_FALLBACK = "MPSBENCH_ALLOW_FALLBACK"
ON = ("1", "true", "yes", "on")
OFF = ("0", "false", "no", "off")


# they change what a value means: a recording run refuses them
CHANGES_VALUES = {
    SINGLE_STEPS: "times one step a call, where a recorded value times the model's steps_per_call",
    ALLOW_FALLBACK: "times mps combinations whose ops fell back to the cpu: no pure device value",
}
INTERNAL = (SINGLE_STEPS,)  # set by mpsbench for its own processes


def recording_refusal() -> str | None:
    for name, does in CHANGES_VALUES.items():
        value = os.environ.get(name, "")
        if value.strip().lower() not in (*OFF, ""):
            who = "mpsbench sets it for compare and bisect; " if name in INTERNAL else ""
            return (
                f"{name}={value!r} {does}, so the values would not be history:"
                f" {who}unset it to record, or add --dry-run for a throw-away run"
            )
    return None


def flag(name: str) -> bool:
    """Unset or empty is off."""
    value = os.environ.get(name, "")
    if (word := value.strip().lower()) in (*ON, *OFF, ""):
        return word in ON
    raise UserError(
        f"{name}={value!r} is neither on ({', '.join(ON)}) nor off ({', '.join(OFF)}, or unset)"
    )


def choices(name: str, valid: Sequence[str]) -> tuple[str, ...] | None:
    """None if unset or empty."""
    if not (value := os.environ.get(name, "")).strip():
        return None
    items = [item.strip() for item in value.split(",")]
    for item in items:
        if item not in valid:
            raise UserError(
                f"{name}={value!r} names {item!r}: give a comma-separated list of"
                f" {', '.join(valid)}"
            )
    return tuple(dict.fromkeys(items))


def text(name: str) -> str | None:
    return os.environ.get(name, "").strip() or None


def whole(name: str, default: int, least: int, most: int) -> int:
    if not (value := os.environ.get(name, "")).strip():
        return default
    try:
        number = int(value)
    except ValueError:
        number = least - 1
    if not least <= number <= most:
        raise UserError(f"{name}={value!r} is not a whole number from {least} to {most}")
    return number
