"""mpsbench doctor: check a machine before a run, and say what would make its numbers untrustworthy.

Each finding is one line (one per check of CHECKS): ok, warn (numbers taken now would be doubtful, and why) or
info (the OS does not report it here). --strict exits 1 when anything warned, for scripts that should not
time a machine in that state. Load, power and thermal state are judged by the rule a record
run's quiet gate applies before each value (mpsbench.measure.quiet), from one reading of
the machine.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass

from mpsbench.measure import devices, host, optional_torch, quiet

MEMORY_FREE_FRACTION = 0.25  # of RAM available; below it, may swap
# seconds of reading: longer than the gate's, as nothing of ours runs meanwhile
READING = 1.0


@functools.cache
def machine() -> quiet.State:
    """The machine's state, read once per doctor run (:func:`run` forgets it)."""
    return quiet.read(READING)


@dataclass(frozen=True)
class Finding:
    level: str  # "ok", "warn" or "info"
    what: str
    detail: str


def check_devices() -> Iterator[Finding]:
    if not optional_torch.INSTALLED:
        yield Finding("warn", "devices", "torch is not installed here: nothing can be timed")
        return
    for name in devices.NAMES:
        if not devices.present(name):
            continue
        found = devices.get(name).availability()
        yield Finding("ok" if found.usable else "warn", name, found.reason)


def check_memory() -> Iterator[Finding]:
    import psutil

    memory, swap = psutil.virtual_memory(), psutil.swap_memory()
    gib = 1024**3
    detail = f"{memory.available / gib:.1f} of {memory.total / gib:.1f} GiB available, {swap.used / gib:.1f} GiB swap used"
    low = memory.available < MEMORY_FREE_FRACTION * memory.total
    yield Finding(
        "warn" if low else "ok", "memory", detail + (": large batches may swap" if low else "")
    )


def check_power() -> Iterator[Finding]:
    state = machine()
    if state.battery is None:
        yield Finding("info", "power", "the OS reports no power source here (not macOS)")
    else:
        problem = quiet.problems(state).get("power")
        yield Finding("warn" if problem else "ok", "power", problem or "on AC power")


def check_thermal() -> Iterator[Finding]:
    if host.thermal_state() is None:
        yield Finding(
            "info", "thermal", "the OS reports no thermal pressure here (pmset -g therm is macOS's)"
        )
        return
    problem = quiet.problems(machine()).get("thermal")
    yield Finding(
        "warn" if problem else "ok",
        "thermal",
        problem or "no throttling, no thermal warning recorded",
    )


def check_load() -> Iterator[Finding]:
    state = machine()
    problem = quiet.problems(state).get("load")
    used = problem or f"other processes used {state.others:.1f} of {state.cores} cores"
    if state.load is not None:
        used += f"; load average {state.load:.1f} over the last minute"
    yield Finding("warn" if problem else "ok", "load", used)
    found = host.busy_processes(quiet.BUSY_PERCENT)
    if found:
        named = ", ".join(f"{name} (pid {pid}, {percent:.0f}%)" for name, pid, percent in found[:5])
        yield Finding("warn" if problem else "ok", "processes", f"busy on the cpu: {named}")
    else:
        said = f"no other process above {quiet.BUSY_PERCENT:.0f}% of a core"
        yield Finding("ok", "processes", said)


CHECKS = (check_devices, check_memory, check_power, check_thermal, check_load)


def run(strict: bool = False) -> int:
    """Print every check's findings; 1 if ``strict`` and any warned, else 0."""
    machine.cache_clear()
    findings = [finding for check in CHECKS for finding in check()]
    width = max(len(finding.what) for finding in findings)
    for finding in findings:
        print(f"{finding.level:4}  {finding.what.ljust(width)}  {finding.detail}")
    warned = [finding.what for finding in findings if finding.level == "warn"]
    print(
        f"mpsbench doctor: numbers taken now would be untrustworthy ({', '.join(warned)}): see the warn lines"
        if warned
        else "mpsbench doctor: nothing found that would make numbers untrustworthy"
    )
    return 1 if warned and strict else 0
