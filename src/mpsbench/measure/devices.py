"""Everything the suite knows about a device: usable here or not, sync, memory, seed.

Every ``torch.mps`` call is guarded by availability *and* by torch version:
torch 1.12/1.13 have ``torch.backends.mps`` but no ``torch.mps`` module, so
their synchronize is a read-back of a tiny tensor and their memory counters
are absent. ``mps`` counts as usable only after a real op on it succeeds: some
hosted Macs report it available and then fail at the first allocation.
"""

from __future__ import annotations

import contextlib
import enum
import functools
import os
import platform
import sys
from collections.abc import Callable, Hashable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from mpsbench.core import errors
from mpsbench.measure import optional_torch, process_memory
from mpsbench.measure.optional_torch import torch  # device names import without torch

NAMES: tuple[str, ...] = ("cpu", "mps", "cuda")
GPU_NAMES: tuple[str, ...] = ("mps", "cuda")
MIB = 1024 * 1024
T = TypeVar("T")


class DeviceError(errors.UserError):
    """A device name that is not one of :data:`NAMES`."""


@dataclass(frozen=True)
class Availability:
    """Whether a device can run workloads in this process, and why not."""

    usable: bool
    reason: str  # a human sentence: what was found, or why it is unusable


@dataclass(frozen=True)
class MemoryReading:
    """Bytes held on a device at one moment; None where the device cannot say."""

    current: int | None  # tensors alive now (cuda/mps allocator; cpu: process RSS)
    peak: int | None  # high-water mark since the last reset (cuda; cpu: process max RSS)
    driver: int | None = None  # mps only: everything the Metal driver holds for us


def _mps_module() -> Any | None:
    """``torch.mps`` where this torch has it (2.0 and later), else None."""
    return getattr(torch, "mps", None)


def _mps_call(name: str) -> bool:
    """Call ``torch.mps.<name>()`` where this torch has it; False where it does not (1.12, 1.13)."""
    function = getattr(_mps_module(), name, None)
    if function is None:
        return False
    function()
    return True


def _mps_missing() -> str | None:
    """Why this torch on this OS has no MPS backend to use, or None."""
    backend = getattr(getattr(torch, "backends", None), "mps", None)
    if backend is None:
        return f"torch {torch.__version__} has no MPS backend (needs 1.12 or later)"
    if not backend.is_built():
        return f"torch {torch.__version__} was built without MPS"
    if not backend.is_available():
        if sys.platform != "darwin":
            return f"MPS needs macOS on Apple silicon; this is {sys.platform}"
        return "MPS is built but not available (macOS 12.3+ on Apple silicon needed)"
    return None


class Device(str, enum.Enum):
    """One device and all its plumbing: a ``str`` (``"mps"``), so torch takes it wherever it takes a device name."""

    CPU = "cpu"
    MPS = "mps"
    CUDA = "cuda"

    # "mps" and 'mps', never "Device.MPS": in messages, f-strings and generated code (cold start)
    __str__, __format__, __repr__ = str.__str__, str.__format__, str.__repr__  # type: ignore[assignment]

    @classmethod
    def _missing_(cls, value: object) -> Device:
        raise DeviceError(f"unknown device {value!r}; choose one of: {', '.join(NAMES)}")

    @functools.cache
    def availability(self) -> Availability:
        """Probe once per process with a real allocation and a real op."""
        if self is Device.CPU:
            return Availability(True, self.describe())
        if self is Device.CUDA and not torch.cuda.is_available():
            built = torch.version.cuda is not None
            return Availability(False, "no CUDA device found" if built else f"torch {torch.__version__} has no CUDA")
        if self is Device.MPS and (missing := _mps_missing()) is not None:
            return Availability(False, missing)
        try:
            probe = torch.ones(4, device=self.value) * 2
            total = float(probe.sum().cpu())  # a read-back proves the op really ran
        except Exception as exc:  # a device that reports available and fails on first use
            return Availability(False, f"{self} reported available but a first op failed: {errors.first_line(exc)}")
        if total != 8.0:
            return Availability(False, f"{self} computed 2*ones(4).sum() = {total}, expected 8")
        return Availability(True, self.describe())

    @property
    def usable(self) -> bool:
        return self.availability().usable

    def describe(self) -> str:
        """A short description of the device: its model name where torch knows it."""
        if self is Device.CUDA:
            return f"cuda: {torch.cuda.get_device_name(0)}"
        if self is Device.MPS:
            return "mps: Apple GPU via Metal Performance Shaders"
        return f"cpu, {torch.get_num_threads()} threads"

    def creating(self) -> AbstractContextManager[Any]:
        """Where a model built inside this context creates its weights: on cuda's GPU (torch 2.0+), else on the cpu.

        Random initialization on the cpu cost the large models seconds in every cuda process, on the GPU
        hundredths (docs/performance.md, "Breakdown"). mps copies after: an initializer it lacks would fail
        the combination for an op that no timed step runs.
        """
        if self is Device.CUDA and hasattr(torch.device, "__enter__"):
            return torch.device(self.value)  # a context manager since torch 2.0
        return contextlib.nullcontext()

    def synchronize(self) -> None:
        """Block until every kernel queued on the device has finished (before a clock read: GPUs run asynchronously)."""
        if self is Device.CUDA:
            torch.cuda.synchronize()
        elif self is Device.MPS and not _mps_call("synchronize"):
            torch.zeros(1, device="mps").cpu()  # torch 1.12/1.13: no torch.mps; a read-back waits for the queue

    def memory(self) -> MemoryReading:
        """Read the device's memory counters now."""
        if self is Device.CUDA:
            return MemoryReading(torch.cuda.memory_allocated(), torch.cuda.max_memory_allocated())
        if self is Device.MPS:
            mps = _mps_module()
            if mps is None or not hasattr(mps, "current_allocated_memory"):
                return MemoryReading(None, None)  # torch < 2.0: no MPS memory counters
            # MPS has no peak counter: callers sample (see PeakSampler).
            return MemoryReading(mps.current_allocated_memory(), None, mps.driver_allocated_memory())
        current = process_memory.rss()
        peak = process_memory.max_rss()
        # The kernel updates the max RSS lazily: it can trail the current RSS slightly.
        return MemoryReading(current, None if peak is None else max(peak, current or 0))

    def no_reading_reason(self) -> str:
        """Why :meth:`memory` has no current reading here (asked after it found none)."""
        if self is Device.CPU:
            return process_memory.unreadable_reason()
        return f"torch {torch.__version__} keeps no {self} memory counters"

    def empty_cache(self) -> None:
        """Hand cached, unused blocks back to the driver, so the next reading starts clean."""
        if self is Device.CUDA:
            torch.cuda.empty_cache()
        elif self is Device.MPS:
            _mps_call("empty_cache")

    def seed(self, value: int) -> None:
        """Seed the host generator and the device's: ``torch.manual_seed`` seeds cuda's and (2.0+) mps's too."""
        torch.manual_seed(value)


class OneSlot(Generic[T]):
    """One built thing per process, for asv's ``setup``, which runs again before every sample.

    A new key drops the old value and empties the cache first: a process never holds two models' memory.
    """

    def __init__(self) -> None:
        self.key: Hashable | None = None
        self.value: T | None = None

    def get(self, key: Hashable, device: str, build: Callable[[], T]) -> T:
        """The value for ``key``, built now unless it is the one kept."""
        if self.key != key or self.value is None:
            self.clear()
            get(device).empty_cache()
            self.value, self.key = build(), key
        return self.value

    def clear(self) -> None:
        self.key, self.value = None, None


def get(name: str) -> Device:
    """The device named ``name``; a one-line :class:`DeviceError` naming the valid ones otherwise."""
    return Device(name)


def present(name: str) -> bool:
    """Whether this machine could have ``name`` at all, whatever torch is installed; touches no GPU.

    Asked before asv starts any process (mpsbench.measure.preselect, in ``.venv``) and
    again in every benchmark's ``setup`` (in the build's environment), so it
    must not depend on which torch answers: the benchmarked build may differ.
    """
    device = get(name)
    if device is Device.CPU:
        return True
    if device is Device.CUDA:
        # The driver's control node exists on any Linux host (or container) given an NVIDIA GPU.
        return os.path.exists("/dev/nvidiactl") or (optional_torch.INSTALLED and bool(torch.cuda.is_available()))
    return sys.platform == "darwin" and platform.machine() == "arm64"


def absent_reason(name: str) -> str | None:
    """Why this machine plainly lacks ``name``, or None if it could have it."""
    if present(name):
        return None
    what = "NVIDIA driver" if name == "cuda" else "Apple silicon under macOS"
    return f"{name} is absent: this machine has no {what}"


def accelerators_present() -> tuple[str, ...]:
    """The GPUs this machine could have (see :func:`present`), in :data:`GPU_NAMES` order."""
    return tuple(name for name in GPU_NAMES if present(name))


def usable_gpu() -> Device | None:
    """The GPU a tool times when none is named: cuda, else mps (a machine has one or the other)."""
    return next((device for device in (Device.CUDA, Device.MPS) if device.usable), None)


class PeakSampler:
    """The largest memory reading at explicit sample points (after forward, after backward): mps has no peak counter.

    On the cpu too: the process's max RSS would carry the high-water mark of whatever
    ran in it before (setup_cache measures many combinations in one process).
    """

    def __init__(self, device: str) -> None:
        self.device = get(device)
        self.allocated: int | None = None  # None until a sample has a reading: no reading is None, never 0
        self.driver = 0
        if self.device is Device.CUDA:
            torch.cuda.reset_peak_memory_stats()  # the only device with a high-water mark of its own

    def sample(self) -> None:
        reading = self.device.memory()
        if reading.current is not None:
            self.allocated = max(self.allocated or 0, reading.current)
        if reading.driver is not None:
            self.driver = max(self.driver, reading.driver)

    def peak_bytes(self) -> int | None:
        """The peak: the device's own counter where it has one, else the largest sample."""
        return self.device.memory().peak if self.device is Device.CUDA else self.allocated

    def driver_peak_bytes(self) -> int | None:
        """The peak the driver holds for torch, caches included: mps's samples (torch 2.0+), cuda's reserved; cpu None."""
        if self.device is Device.CUDA:
            return int(torch.cuda.max_memory_reserved())
        if self.device is Device.MPS and hasattr(_mps_module(), "driver_allocated_memory"):
            return self.driver
        return None


MPS_WATERMARK_ENV = "PYTORCH_MPS_HIGH_WATERMARK_RATIO"  # read by torch when mps first allocates


def mps_high_watermark_ratio() -> float | None:
    """The mps allocator's memory limit as a fraction of the recommended working set; None if unset.

    Unset means torch's built-in default (1.7 in current releases); 0 means no limit.
    """
    text = os.environ.get(MPS_WATERMARK_ENV, "").strip()
    if not text:
        return None
    try:
        return float(text)
    except ValueError:
        raise DeviceError(f"{MPS_WATERMARK_ENV}={text!r} is not a number") from None


def cpu_threads() -> int:
    """Threads torch uses for intra-op work: recorded with every cpu result."""
    return torch.get_num_threads()


# The host allocator's words when an allocation fails (torch 2.x, then 1.x): the cpu's
# out-of-memory under a memory limit (ulimit -v, RLIMIT_AS), and a GPU's host-side copies.
HOST_OUT_OF_MEMORY = ("DefaultCPUAllocator: can't allocate memory", "DefaultCPUAllocator: not enough memory")


def is_out_of_memory(exc: BaseException) -> bool:
    """The one check for the whole suite: the out-of-memory errors of cuda, mps, the host allocator and Python.

    cuda raises ``torch.cuda.OutOfMemoryError`` (torch 1.13+, a RuntimeError before),
    mps a RuntimeError saying "MPS backend out of memory", the cpu's allocator one of :data:`HOST_OUT_OF_MEMORY`.
    """
    if isinstance(exc, (MemoryError, getattr(torch.cuda, "OutOfMemoryError", MemoryError))):
        return True
    text = str(exc)
    return isinstance(exc, RuntimeError) and (
        "out of memory" in text or any(words in text for words in HOST_OUT_OF_MEMORY)
    )
