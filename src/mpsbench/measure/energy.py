"""Energy per step from a device's cumulative energy counter, polled while steps run."""

from __future__ import annotations

import contextlib
import functools
import importlib
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mpsbench.measure import skips
from mpsbench.measure.optional_torch import torch

UNIT = "joules/step"
MIN_SECONDS = 1.0
# dispatch paces shorter steps: joules vary between short windows
SHORT_STEP_SECONDS, SHORT_STEP_WINDOW = 0.01, 4.0
MIN_UPDATES = 10
MAX_SECONDS = 10.0
SETTLE_SECONDS = 0.25  # untimed: the board is busy as the window opens
POWERCAP = Path("/sys/class/powercap")


@dataclass(frozen=True)
class Counter:
    what: str
    joules: Callable[[], float]  # cumulative
    poll_seconds: float


@dataclass(frozen=True)
class Reading:
    joules_per_step: float
    watts: float
    steps: int
    seconds: float
    updates: int


def _import(module: str, needs: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError:
        raise skips.SkipNotImplemented(f"{needs}, which this environment cannot import") from None


def _nvml() -> Counter:
    pynvml = _import("pynvml", "cuda energy needs nvidia-ml-py (import pynvml)")
    try:
        pynvml.nvmlInit()
        handle = _nvml_handle(pynvml)
        pynvml.nvmlDeviceGetTotalEnergyConsumption(handle)  # NOT_SUPPORTED before Volta
        name = pynvml.nvmlDeviceGetName(handle)
    except pynvml.NVMLError as exc:
        raise skips.SkipNotImplemented(
            f"NVML's total energy counter is not readable here: {exc}"
        ) from None
    return Counter(
        f"NVML total energy of {name}",
        lambda: pynvml.nvmlDeviceGetTotalEnergyConsumption(handle) / 1e3,  # millijoules
        0.002,
    )


def _nvml_handle(pynvml: Any) -> Any:
    # by UUID: NVML's order may differ from CUDA's
    index = torch.cuda.current_device()
    uuid = getattr(torch.cuda.get_device_properties(index), "uuid", None)
    if uuid is not None:
        with contextlib.suppress(pynvml.NVMLError):
            return pynvml.nvmlDeviceGetHandleByUUID(f"GPU-{uuid}")
    return pynvml.nvmlDeviceGetHandleByIndex(index)


IOREPORT_FIELDS = {"mps": "gpu_mj", "cpu": "cpu_total_mj"}  # zeus-apple-silicon's names


def _ioreport(device: str) -> Counter:
    zeus = _import(
        "zeus_apple_silicon",
        f"{device} energy on macOS needs zeus-apple-silicon (IOReport without sudo)",
    )
    monitor, field = zeus.AppleEnergyMonitor(), IOREPORT_FIELDS[device]

    def joules() -> float:
        millijoules = getattr(monitor.get_cumulative_energy(), field)
        if millijoules is None:
            raise skips.SkipNotImplemented(f"IOReport has no {field} counter on this Mac")
        return float(millijoules) / 1e3

    joules()
    return Counter(f"IOReport {field}", joules, 0.005)


def _rapl(root: Path) -> Counter:
    zones = [  # the sockets: their subdomains have a second colon
        zone
        for zone in sorted(root.glob("intel-rapl:*"))
        if zone.name.count(":") == 1 and (zone / "name").read_text().startswith("package")
    ]
    if not zones:
        raise skips.SkipNotImplemented(
            f"no RAPL package domain under {root} (a VM, or no intel_rapl driver)"
        )

    def read(name: str) -> list[int]:
        return [int((zone / name).read_text()) for zone in zones]

    try:
        ranges, last = read("max_energy_range_uj"), read("energy_uj")
    except PermissionError:
        raise skips.SkipNotImplemented(
            f"RAPL's energy_uj under {root} is readable by root only (Linux 5.10+)"
        ) from None
    total = [0]  # microjoules, wrap-arounds undone

    def joules() -> float:
        for index, now in enumerate(read("energy_uj")):
            total[0] += (now - last[index]) % ranges[index]
            last[index] = now
        return total[0] / 1e6

    names = ", ".join(zone.name for zone in zones)
    return Counter(f"RAPL package energy ({names})", joules, 0.001)


@functools.cache  # skips are not kept: each combination says why
def counter(device: str) -> Counter:
    skips.require_device(device)
    if device == "cuda":
        return _nvml()
    if sys.platform == "darwin":
        return _ioreport(device)
    if device == "cpu" and sys.platform.startswith("linux"):
        return _rapl(POWERCAP)
    raise skips.SkipNotImplemented(f"no energy counter is known for {device} on {sys.platform}")


def _poll(found: Counter, updates: list[tuple[float, float]], stopping: threading.Event) -> None:
    while not stopping.wait(found.poll_seconds):
        if (value := found.joules()) != updates[-1][1]:
            updates.append((time.perf_counter(), value))


def measure(
    run: Callable[[], Any],
    synchronize: Callable[[], None],
    found: Counter,
    steps_per_call: int = 1,
    min_seconds: float | None = None,
    min_updates: int = MIN_UPDATES,
    settle_seconds: float = SETTLE_SECONDS,
) -> Reading:
    """``run`` untimed for ``settle_seconds``, then until enough time and updates."""
    updates, stopping = [(time.perf_counter(), found.joules())], threading.Event()
    with ThreadPoolExecutor(1) as pool:
        polling = pool.submit(_poll, found, updates, stopping)
        try:
            synchronize()
            settling, calls = time.perf_counter(), 0
            while calls == 0 or time.perf_counter() - settling < settle_seconds:
                run()
                synchronize()
                calls += 1
            first = len(updates)  # stamps rise: those up to begin are a prefix, skipped once
            begin = end = time.perf_counter()
            if min_seconds is None:
                short = (begin - settling) / (calls * steps_per_call) < SHORT_STEP_SECONDS
                min_seconds = SHORT_STEP_WINDOW if short else MIN_SECONDS
            calls = 0
            while end - begin < MAX_SECONDS:
                if end - begin >= min_seconds:
                    size = len(updates)  # one length for both: the poller appends
                    while first < size and updates[first][0] <= begin:
                        first += 1
                    if size - first >= min_updates:
                        break
                run()
                synchronize()
                calls += 1
                end = time.perf_counter()
        finally:
            stopping.set()
    polling.result()  # the counter's error, if reading it failed
    return reading(found.what, updates, begin, end, calls * steps_per_call)


def reading(
    what: str, updates: list[tuple[float, float]], begin: float, end: float, steps: int
) -> Reading:
    """Power from the first to the last update inside [begin, end], per step."""
    inside = [update for update in updates if begin < update[0] <= end]
    if len(inside) < 2:
        raise skips.SkipNotImplemented(
            f"{what} updated {len(inside)} times in {end - begin:.1f} s of steps: too coarse to read"
        )
    (first, start_joules), (last, end_joules) = inside[0], inside[-1]
    watts = (end_joules - start_joules) / (last - first)
    return Reading(watts * (end - begin) / steps, watts, steps, end - begin, len(inside))


def joules_per_step(workload: Any) -> float:
    steps, device = workload.spec.steps_per_call, workload.device
    run = functools.partial(workload.run, steps)
    return measure(run, device.synchronize, counter(device), steps).joules_per_step
