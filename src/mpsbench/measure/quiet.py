"""Whether the machine is quiet enough to time, and whether a value was disturbed."""

from __future__ import annotations

import contextlib
import os
import statistics
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import psutil

from mpsbench.core import asv_saving, progress, settings
from mpsbench.measure import host

# measured in docs/explanation/quiet-gate.md
OTHERS_SHARE = 0.25  # of all cores
SPREAD = 0.30  # interquartile range over median
DRIFT = 0.25  # from the same build's recorded value
BUSY_PERCENT = 25.0  # of a core
WINDOW = 0.5  # seconds per reading
POLL = 2.0  # seconds between readings while waiting
FRESH = 5.0  # seconds an "after" reading stands for the next "before"

WAIT = "MPSBENCH_QUIET_WAIT"
WAIT_DEFAULT = 120
WAIT_MOST = 3600
WAITING = "waiting up to"  # record relays the line to the watch
ACCEPT_BUSY = "MPSBENCH_ACCEPT_BUSY"

log = progress.logger(__name__)


def wait_seconds() -> int:
    return settings.whole(WAIT, WAIT_DEFAULT, 0, WAIT_MOST)


def accept_busy() -> bool:
    return settings.flag(ACCEPT_BUSY)


@dataclass(frozen=True)
class State:
    cores: int
    others: float  # cores' worth, by other processes
    load: float | None  # kept, not judged
    battery: bool | None = None
    thermal: str | None = None

    def fields(self, suffix: str = "") -> dict[str, Any]:
        return {f"{key}{suffix}": value for key, value in asdict(self).items()}

    @classmethod
    def of(cls, event: Mapping[str, Any], suffix: str = "") -> State | None:
        try:
            return cls(
                int(event[f"cores{suffix}"]),
                float(event[f"others{suffix}"]),
                *(event.get(name + suffix) for name in ("load", "battery", "thermal")),
            )
        except (KeyError, TypeError, ValueError):
            return None


def problems(state: State) -> dict[str, str]:
    found = {}
    if state.others > (limit := OTHERS_SHARE * state.cores):
        found["load"] = (
            f"other processes used {state.others:.1f} of {state.cores} cores (the limit: {limit:.1f})"
        )
    if state.battery:
        found["power"] = "on battery: a Mac throttles on battery; plug it in"
    if state.thermal:
        found["thermal"] = state.thermal
    return found


def _busy_seconds() -> float:
    times = psutil.cpu_times()._asdict()  # Linux counts guest time in user time
    idle = sum(times.get(key, 0.0) for key in ("idle", "iowait", "guest", "guest_nice"))
    return float(sum(times.values()) - idle)


def own_processes() -> list[Any]:
    me = psutil.Process()
    return [me, *([parent] if (parent := me.parent()) else []), *me.children(recursive=True)]


def _used(processes: Sequence[Any]) -> float:
    total = 0.0
    for process in processes:
        with contextlib.suppress(psutil.Error):
            times = process.cpu_times()
            total += times.user + times.system + times.children_user + times.children_system
    return total


def read(window: float = WINDOW, own: Callable[[], list[Any]] = own_processes) -> State:
    """The state over ``window`` seconds, less ``own()``'s processes."""
    mine = own()
    busy, used, started = _busy_seconds(), _used(mine), time.monotonic()
    time.sleep(window)
    mine = [*mine, *(process for process in own() if process not in mine)]
    others = (_busy_seconds() - busy) - (_used(mine) - used)
    return State(
        os.cpu_count() or 1,
        round(max(0.0, others) / (time.monotonic() - started), 2),
        psutil.getloadavg()[0],
        host.on_battery(),
        host.thermal_problem(),
    )


def named(state: State) -> str:
    found = problems(state)
    if "load" in found:
        own = {process.pid for process in own_processes()}
        busy = [
            f"{name} {percent:.0f}%"
            for name, pid, percent in host.busy_processes(BUSY_PERCENT)
            if pid not in own
        ]
        if busy:
            found["load"] += ": " + ", ".join(busy[:3])
    return "; ".join(found.values())


@dataclass
class Gate:
    """Waits up to ``limit`` seconds for a quiet machine before each combination, once per busy
    spell."""

    limit: float
    # looked up as the gate is made: a stand-in set after import counts
    reader: Callable[[float], State] = field(default_factory=lambda: read)
    say: Callable[[str], None] = log.info
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    last: tuple[float, State] | None = field(default=None, init=False)  # quiet, after a combination
    ran_out: bool = field(default=False, init=False)

    def before(self, name: str) -> dict[str, Any]:
        """Fields of the state before ``name``, with ``waited``."""
        last = self.last
        state = last[1] if last and self.clock() - last[0] <= FRESH else self.reader(WINDOW)
        started = self.clock()
        if problems(state) and not self.ran_out and self.limit > 0:
            self.say(
                f"the machine is busy ({named(state)}); {WAITING} {self.limit:.0f} s before"
                f" {name} (set by {WAIT})"
            )
            while problems(state) and self.clock() - started < self.limit:
                self.sleep(POLL - WINDOW)
                state = self.reader(WINDOW)
        self.ran_out = bool(problems(state))
        return {**state.fields(), "waited": round(self.clock() - started, 1)}

    def after(self) -> dict[str, Any]:
        state = self.reader(WINDOW)
        self.last = None if problems(state) else (self.clock(), state)
        return state.fields("_after")


def spread(
    value: float, stats: Mapping[str, Any] | None, samples: Sequence[float] | None
) -> float | None:
    """Interquartile range over median, from the samples or else asv's statistics."""
    if samples is not None and len(samples) >= 4:
        q1, _, q3 = statistics.quantiles(samples, n=4)
        middle = statistics.median(samples)
    elif stats and None not in (stats.get("q_25"), stats.get("q_75")):
        q1, q3, middle = float(stats["q_25"]), float(stats["q_75"]), value
    else:
        return None
    return (q3 - q1) / abs(middle) if middle else None


def judge(
    value: float,
    stats: Mapping[str, Any] | None,
    samples: Sequence[float] | None,
    before: State | None,
    after: State | None,
    earlier: float | None,
    first: float | None = None,
) -> dict[str, str]:
    """Why ``value`` looks disturbed, by kind; a wide spread that a ``first`` measurement agrees
    with is the benchmark's own."""
    reasons: dict[str, str] = {}
    for state, when in ((before, "before it"), (after, "after it")):
        for kind, text in (problems(state) if state else {}).items():
            reasons[kind] = (
                f"{reasons[kind]}; {text} {when}" if kind in reasons else f"{text} {when}"
            )
    found = spread(value, stats, samples)
    agrees = first is not None and abs(value - first) <= max(DRIFT, found or 0.0) * abs(first)
    if found is not None and found > SPREAD and not agrees:
        again = (
            ""
            if first is None
            else f"; {value / first - 1:+.0%} from its first measurement {first:.4g}"
        )
        reasons["spread"] = (
            f"its samples spread {found:.0%} (interquartile range over median; the limit:"
            f" {SPREAD:.0%}){again}"
        )
    if earlier and abs(value - earlier) > DRIFT * abs(earlier):
        reasons["drift"] = (
            f"it is {value / earlier - 1:+.0%} from this machine's recorded {earlier:.4g} of the"
            f" same build (the limit: {DRIFT:.0%})"
        )
    return reasons


if __name__ == "__main__":  # the imported module, not this copy
    from mpsbench.measure import quiet

    asv_saving.main(sys.argv[1:], gate=quiet.Gate(0 if accept_busy() else wait_seconds()))
