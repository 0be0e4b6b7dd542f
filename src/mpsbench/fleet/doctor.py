"""One line per finding: ok, warn (numbers taken now would be doubtful, and why) or info (not
reported here); load, power and heat judged as the record gate judges them."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass

from mpsbench.measure import devices, host, optional_torch, quiet

MEMORY_FREE_FRACTION = 0.25  # of RAM: below it, may swap
READING = 1.0  # seconds: longer than the gate's, nothing of ours runs meanwhile


@functools.cache
def machine() -> quiet.State:
    return quiet.read(READING)


@dataclass(frozen=True)
class Finding:
    level: str  # ok, warn or info
    what: str
    detail: str


def _judged(what: str, problem: str | None, fine: str) -> Finding:
    return Finding("warn" if problem else "ok", what, problem or fine)


def _by_the_gate(what: str, reported: bool, unreported: str, fine: str) -> Finding:
    if not reported:
        return Finding("info", what, unreported)
    return _judged(what, quiet.problems(machine()).get(what), fine)


def check_devices() -> Iterator[Finding]:
    if not optional_torch.INSTALLED:
        yield Finding("warn", "devices", "torch is not installed here: nothing can be timed")
        return
    for name in filter(devices.present, devices.NAMES):
        found = devices.get(name).availability()
        yield Finding("ok" if found.usable else "warn", name, found.reason)


def check_memory() -> Iterator[Finding]:
    import psutil

    memory, swap, gib = psutil.virtual_memory(), psutil.swap_memory(), 1024**3
    detail = (
        f"{memory.available / gib:.1f} of {memory.total / gib:.1f} GiB available,"
        f" {swap.used / gib:.1f} GiB swap used"
    )
    low = memory.available < MEMORY_FREE_FRACTION * memory.total
    yield _judged("memory", f"{detail}: large batches may swap" if low else None, detail)


def check_power() -> Iterator[Finding]:
    yield _by_the_gate(
        "power",
        machine().battery is not None,
        "the OS reports no power source here (not macOS)",
        "on AC power",
    )


def check_thermal() -> Iterator[Finding]:
    yield _by_the_gate(
        "thermal",
        bool(host.pmset("therm")),
        "the OS reports no thermal pressure here (pmset -g therm is macOS's)",
        "no throttling, no thermal warning recorded",
    )


def check_load() -> Iterator[Finding]:
    state = machine()
    level = "warn" if (problem := quiet.problems(state).get("load")) else "ok"
    used = problem or f"other processes used {state.others:.1f} of {state.cores} cores"
    if state.load is not None:
        used += f"; load average {state.load:.1f} over the last minute"
    yield Finding(level, "load", used)
    if found := host.busy_processes(quiet.BUSY_PERCENT):
        named = ", ".join(f"{name} (pid {pid}, {percent:.0f}%)" for name, pid, percent in found[:5])
        yield Finding(level, "processes", f"busy on the cpu: {named}")
    else:
        yield Finding(
            "ok", "processes", f"no other process above {quiet.BUSY_PERCENT:.0f}% of a core"
        )


CHECKS = (check_devices, check_memory, check_power, check_thermal, check_load)


def run(strict: bool = False) -> int:
    machine.cache_clear()
    findings = [finding for check in CHECKS for finding in check()]
    width = max(len(finding.what) for finding in findings)
    for finding in findings:
        print(f"{finding.level:4}  {finding.what.ljust(width)}  {finding.detail}")
    if warned := [finding.what for finding in findings if finding.level == "warn"]:
        print(
            f"mpsbench doctor: numbers taken now would be untrustworthy ({', '.join(warned)}):"
            " see the warn lines"
        )
    else:
        print("mpsbench doctor: nothing found that would make numbers untrustworthy")
    return int(bool(warned) and strict)
