"""The ``MPSBENCH_*`` settings, each read and checked here: a bad value is one line naming the variable, the value
and the valid choices, never a setting that silently means something else. Benchmark processes inherit them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from mpsbench.core.errors import UserError

FULL = "MPSBENCH_FULL"  # on: the full sweep (every device at every batch size), not the default selection
DEVICES = "MPSBENCH_DEVICES"  # a comma-separated list of the devices a run times (default: every device present)
CONFIG = "MPSBENCH_CONFIG"  # another asv.conf.json for scripts/publish (the fleet's)
MACHINE = "MPSBENCH_MACHINE"  # a fleet runner's machine name, e.g. set in the runner's .env file
# Set by compare and bisect in a cpu row's processes, not by users: every timed call is one step, whatever the model's
# steps_per_call, so that a process's fastest sample can be a step the scheduler spared
# (docs/explanation/the-rule.md, "A cpu row's samples"). A recorded run never has it.
SINGLE_STEPS = "MPSBENCH_SINGLE_STEPS"
ALLOW_FALLBACK = (
    "MPSBENCH_ALLOW_FALLBACK"  # on: time an mps combination whose ops fell back to the cpu
)


@dataclass(frozen=True)
class Setting:
    """One ``MPSBENCH_*`` setting, and what it does to a recorded value."""

    name: str
    does: str  # said where it is refused
    internal: bool = (
        False  # set by mpsbench for its own processes: a recording run never takes it from the user
    )
    changes_values: bool = (
        False  # a value measured with it set means something else: no recording run takes it
    )


# Every setting the suite's processes read. Selection settings (which combinations run) leave each value's meaning
# as it is; those that change how a value is measured are refused for recording (a throw-away run: --dry-run).
# MPSBENCH_CACHE, _PLATFORM and _WHEELHOUSE (builds/install_build.py) say where a build comes from, not how it is
# timed: a build is its wheels' hashes, checked at install.
SETTINGS = {
    setting.name: setting
    for setting in (
        Setting(FULL, "selects the full sweep"),
        Setting(DEVICES, "selects the devices timed"),
        Setting(CONFIG, "names another asv.conf.json"),
        Setting(MACHINE, "names the machine"),
        Setting(
            SINGLE_STEPS,
            "times one step a call, where a recorded value times the model's steps_per_call",
            internal=True,
            changes_values=True,
        ),
        Setting(
            ALLOW_FALLBACK,
            "times mps combinations whose ops fell back to the cpu: no pure device value",
            changes_values=True,
        ),
    )
}


def recording_refusal(environ: Mapping[str, str] | None = None) -> str | None:
    """Why a recording run cannot start with this environment (a setting that changes what a value means is set,
    to anything but off), in one line; None where it can. An internal setting is also dropped from a recording
    run's processes (:func:`without_internal`)."""
    environ = os.environ if environ is None else environ
    for setting in SETTINGS.values():
        value = environ.get(setting.name, "")
        if setting.changes_values and value.strip().lower() not in (*OFF, ""):
            who = "mpsbench sets it for compare and bisect; " if setting.internal else ""
            return (
                f"{setting.name}={value!r} {setting.does}, so the values would not be history: {who}unset it to"
                " record, or add --dry-run for a throw-away run"
            )
    return None


def without_internal(environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` less every internal setting: what a recording run's processes see."""
    internal = {setting.name for setting in SETTINGS.values() if setting.internal}
    return {name: value for name, value in environ.items() if name not in internal}


ON = ("1", "true", "yes", "on")
OFF = ("0", "false", "no", "off")


def flag(name: str) -> bool:
    """A yes-or-no setting: one of :data:`ON` or :data:`OFF` in any case; unset or empty is off."""
    value = os.environ.get(name, "")
    word = value.strip().lower()
    if word in (*ON, *OFF, ""):
        return word in ON
    raise UserError(
        f"{name}={value!r} is neither on ({', '.join(ON)}) nor off ({', '.join(OFF)}, or unset)"
    )


def choices(name: str, valid: Sequence[str]) -> tuple[str, ...] | None:
    """A comma-separated list of ``valid`` names, each once and in order; None where unset or empty."""
    value = os.environ.get(name, "")
    if not value.strip():
        return None
    items = [item.strip() for item in value.split(",")]
    for item in items:
        if item not in valid:
            raise UserError(
                f"{name}={value!r} names {item!r}: give a comma-separated list of {', '.join(valid)}"
            )
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
        raise UserError(f"{name}={value!r} is not a whole number from {least} to {most}")
    return number
