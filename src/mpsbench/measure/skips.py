"""asv's n/a with its reason, before anything is built."""

from __future__ import annotations

import os
import shutil

from mpsbench.core.asv_internals import SkipNotImplemented as SkipNotImplemented
from mpsbench.measure import devices, precision, selection
from mpsbench.measure.optional_torch import torch

CXX_CANDIDATES = ("g++", "clang++", "c++")  # inductor's cpu backend's
# torch's words for an op or dtype a device lacks
LACKING = (
    "not implemented for",
    "not supported",
    "does not support",
    "does not have support",
    "unsupported",
)


def skip_if(reason: str | None) -> None:
    if reason is not None:
        raise SkipNotImplemented(reason)


def selected(benchmark: str, *params: object) -> None:
    skip_if(selection.left_out(benchmark, *params))


def require_device(device: str) -> None:
    found = devices.get(device).availability()
    skip_if(None if found.usable else f"{device} is not usable here: {found.reason}")


def require_dtype(device: str, dtype: str) -> None:
    skip_if(precision.device_lacks(device, dtype))


def require_torch(minimum: tuple[int, int], what: str) -> None:
    if precision.torch_version() < minimum:
        raise SkipNotImplemented(
            f"{what} needs torch {minimum[0]}.{minimum[1]} or later; this is {torch.__version__}"
        )


def torch_lacks(exc: BaseException) -> bool:
    """Whether torch refused an op or dtype here: n/a, not a wrong result."""
    return isinstance(exc, NotImplementedError) or (
        isinstance(exc, (RuntimeError, TypeError)) and any(w in str(exc).lower() for w in LACKING)
    )


def compile_unsupported(device: str) -> str | None:
    version = torch.__version__
    if precision.torch_version() < (2, 0) or not hasattr(torch, "compile"):
        return f"torch {version} has no torch.compile (2.0+)"
    dynamo = getattr(getattr(torch, "_dynamo", None), "is_dynamo_supported", None)
    if dynamo is not None and not dynamo():
        return f"torch {version}'s dynamo does not support this Python"
    if device == "mps" and precision.torch_version() < (2, 8):
        return f"inductor compiles for mps from torch 2.8 (MPSInductor); this is {version}"
    compilers = (os.environ.get("CXX"), *CXX_CANDIDATES)
    if device == "cpu" and not any(shutil.which(name) for name in compilers if name):
        return f"inductor needs a C++ compiler on the cpu; none of {', '.join(CXX_CANDIDATES)} or $CXX is on PATH"
    if device == "cuda":
        try:
            import triton  # noqa: F401
        except ImportError:
            return "inductor needs triton for cuda, which this environment cannot import"
    return None
