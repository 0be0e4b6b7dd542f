"""Each device: usable or not, sync, memory, seed; every ``torch.mps`` call guarded."""

from __future__ import annotations

import contextlib
import enum
import functools
import os
import platform
import sys
from collections.abc import Callable, Hashable, Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from mpsbench.core import errors, settings
from mpsbench.measure import optional_torch
from mpsbench.measure.optional_torch import torch

NAMES: tuple[str, ...] = ("cpu", "mps", "cuda")
GPU_NAMES: tuple[str, ...] = ("mps", "cuda")
MIB = 1024 * 1024
T = TypeVar("T")


@dataclass(frozen=True)
class Availability:
    usable: bool
    reason: str


@dataclass(frozen=True)
class MemoryReading:
    current: int | None
    driver: int | None = None


def rss() -> int | None:
    with contextlib.suppress(ImportError):
        import psutil

        return int(psutil.Process().memory_info().rss)
    with contextlib.suppress(OSError, ValueError, IndexError), open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    return None


def _mps_missing() -> str | None:
    backend = getattr(torch.backends, "mps", None)
    if backend is None:
        return f"torch {torch.__version__} has no MPS backend (1.12+)"
    if not backend.is_built():
        return f"torch {torch.__version__} was built without MPS"
    if backend.is_available():
        return None
    if sys.platform != "darwin":
        return f"MPS needs macOS on Apple silicon; this is {sys.platform}"
    return "MPS is built but unavailable (needs macOS 12.3+ on Apple silicon)"


class Device(str, enum.Enum):
    """A ``str``, so torch takes it as a device name."""

    CPU = "cpu"
    MPS = "mps"
    CUDA = "cuda"

    # mps, never Device.MPS, in messages
    __str__, __format__, __repr__ = str.__str__, str.__format__, str.__repr__  # type: ignore[assignment]

    @classmethod
    def _missing_(cls, value: object) -> Device:
        raise errors.UserError(f"unknown device {value!r}; choose one of: {', '.join(NAMES)}")

    @functools.cache
    def availability(self) -> Availability:
        unusable = self._unusable()
        return Availability(unusable is None, unusable or self.describe())

    def _unusable(self) -> str | None:
        if self is Device.CPU:
            return None
        if self is Device.CUDA and not torch.cuda.is_available():
            return (
                "no CUDA device found"
                if torch.version.cuda
                else f"torch {torch.__version__} has no CUDA"
            )
        if self is Device.MPS and (missing := _mps_missing()):
            return missing
        try:  # some hosted Macs report mps, then fail
            total = float((torch.ones(4, device=self.value) * 2).sum().cpu())
        except Exception as exc:
            return f"{self} reported available but a first op failed: {errors.first_line(exc)}"
        return None if total == 8.0 else f"{self} computed 2*ones(4).sum() = {total}, expected 8"

    @property
    def usable(self) -> bool:
        return self.availability().usable

    def describe(self) -> str:
        if self is Device.CUDA:
            return f"cuda: {torch.cuda.get_device_name(0)}"
        if self is Device.MPS:
            return "mps: Apple GPU via Metal Performance Shaders"
        return f"cpu, {cpu_threads()} threads"

    def creating(self) -> AbstractContextManager[Any]:
        """Weights built inside land on cuda's GPU, else the cpu (mps lacks some initializers)."""
        if self is Device.CUDA and hasattr(torch.device, "__enter__"):
            return torch.device(self.value)
        return contextlib.nullcontext()

    def _backend(self, name: str) -> Any:
        return None if self is Device.CPU else getattr(getattr(torch, self.value, None), name, None)

    def synchronize(self) -> None:
        if synchronize := self._backend("synchronize"):
            synchronize()
        elif self is Device.MPS:
            torch.zeros(1, device="mps").cpu()  # a read-back waits for the queue

    def memory(self) -> MemoryReading:
        if self is Device.CUDA:
            return MemoryReading(torch.cuda.memory_allocated())
        if self is Device.CPU:
            return MemoryReading(rss())
        if not (current := self._backend("current_allocated_memory")):  # before torch 2.0
            return MemoryReading(None)
        return MemoryReading(current(), self._backend("driver_allocated_memory")())

    def no_reading_reason(self) -> str:
        if self is Device.CPU:
            return f"the process's memory is unreadable on {sys.platform} without psutil"
        return f"torch {torch.__version__} keeps no {self} memory counters"

    def empty_cache(self) -> None:
        if empty := self._backend("empty_cache"):
            empty()

    def seed(self, value: int) -> None:
        torch.manual_seed(value)  # also cuda's, and (2.0+) mps's


class OneSlot(Generic[T]):
    """One built thing per process; a new key frees the old one first."""

    key: Hashable | None = None
    value: T | None = None

    def get(self, key: Hashable, device: str, build: Callable[[], T]) -> T:
        if self.key != key or self.value is None:
            self.clear()
            get(device).empty_cache()
            self.value, self.key = build(), key
        return self.value

    def clear(self) -> None:
        self.key, self.value = None, None


get = Device


def present(name: str) -> bool:
    """Whether this machine could have ``name``, whatever torch is installed."""
    device = get(name)
    if device is Device.CUDA:  # asking torch would import it
        return sys.platform != "darwin" and (
            os.path.exists("/dev/nvidiactl")
            or (optional_torch.INSTALLED and bool(torch.cuda.is_available()))
        )
    return device is Device.CPU or (sys.platform == "darwin" and platform.machine() == "arm64")


def usable_names() -> list[str]:
    return [name for name in NAMES if Device(name).usable]


def require_usable(names: Iterable[str]) -> None:
    """A user's device that cannot run here: one line with why and the usable ones."""
    for name in names:
        if not (found := Device(name).availability()).usable:
            usable = usable_names()
            hint = f"; usable here: {', '.join(usable)}: try --device {usable[0]}" if usable else ""
            mac = " (mps needs a Mac with Apple silicon)" if name == "mps" else ""
            raise errors.UserError(f"device {name} is not usable here: {found.reason}{hint}{mac}")


def absent_reason(name: str) -> str | None:
    if present(name):
        return None
    what = "NVIDIA driver" if name == "cuda" else "Apple silicon under macOS"
    return f"{name} is absent: this machine has no {what}"


def accelerators_present() -> tuple[str, ...]:
    return tuple(filter(present, GPU_NAMES))


def usable_gpu() -> Device | None:
    return next((device for device in (Device.CUDA, Device.MPS) if device.usable), None)


def peaks_over(
    device: Device, step: Callable[[Callable[[], None]], object]
) -> tuple[int | None, int | None]:
    """Peak bytes allocated and held by the driver over ``step(probe)``; without a peak counter,
    each ``probe()`` reads."""
    device.synchronize()
    if device is Device.CUDA:
        torch.cuda.reset_peak_memory_stats()
    readings = [device.memory()]
    step(lambda: readings.append(device.memory()))
    device.synchronize()
    readings.append(device.memory())  # the mps driver may grow late
    if device is Device.CUDA:
        return torch.cuda.max_memory_allocated(), torch.cuda.max_memory_reserved()
    return _most(found.current for found in readings), _most(found.driver for found in readings)


def _most(values: Iterable[int | None]) -> int | None:
    return max((value for value in values if value is not None), default=None)


MPS_WATERMARK_ENV = "PYTORCH_MPS_HIGH_WATERMARK_RATIO"


def mps_high_watermark_ratio() -> float | None:
    if not (text := settings.text(MPS_WATERMARK_ENV)):
        return None
    try:
        return float(text)
    except ValueError:
        raise errors.UserError(f"{MPS_WATERMARK_ENV}={text!r} is not a number") from None


def cpu_threads() -> int:
    return torch.get_num_threads()


OUT_OF_MEMORY = (
    "DefaultCPUAllocator: can't allocate memory",
    "DefaultCPUAllocator: not enough memory",
    "out of memory",
)


def is_out_of_memory(exc: BaseException) -> bool:
    if isinstance(exc, (MemoryError, getattr(torch.cuda, "OutOfMemoryError", MemoryError))):
        return True
    # cuda's too before torch 1.13
    return isinstance(exc, RuntimeError) and any(words in str(exc) for words in OUT_OF_MEMORY)
