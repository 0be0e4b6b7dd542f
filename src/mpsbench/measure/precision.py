"""What a dtype means for a step, where it is supported, and proof that it was used."""

from __future__ import annotations

import contextlib
import platform
import re
from typing import Any

from mpsbench.core import errors
from mpsbench.measure import host
from mpsbench.measure.optional_torch import torch

NAMES: tuple[str, ...] = ("float32", "float16", "bfloat16")
DEFAULT = "float32"


def check_name(name: str) -> str:
    return errors.one_of("dtype", name, NAMES)


def dtype_of(name: str) -> torch.dtype:
    dtype: torch.dtype = getattr(torch, check_name(name))
    return dtype


def is_reduced(name: str) -> bool:
    return check_name(name) != DEFAULT


def autocast(device: str, kind: str, name: str) -> contextlib.AbstractContextManager[Any]:
    if kind != "training" or not is_reduced(name):
        return contextlib.nullcontext()
    return torch.autocast(device_type=device, dtype=dtype_of(name))


def grad_scaler(device: str, kind: str, name: str) -> Any | None:
    if kind != "training" or name != "float16":
        return None
    if (amp_scaler := getattr(getattr(torch, "amp", None), "GradScaler", None)) is not None:
        return amp_scaler(device)
    return torch.cuda.amp.GradScaler()  # before torch 2.3 only cuda had one


def torch_version() -> tuple[int, int]:
    major, minor = re.findall(r"\d+", torch.__version__)[:2]
    return int(major), int(minor)


# the first torch that runs each, and what it lacked before
_MIN_TORCH: dict[tuple[str, str, str], tuple[int, int, str]] = {
    ("mps", "training", "float16"): (2, 8, "GradScaler kernels"),
    ("mps", "training", "bfloat16"): (2, 6, "autocast"),
    ("mps", "inference", "bfloat16"): (2, 3, "bfloat16 tensors"),
    ("cpu", "training", "float16"): (2, 4, "autocast, GradScaler"),
    ("cpu", "inference", "float16"): (2, 1, "matrix products"),
}


def unsupported_reason(device: str, kind: str, name: str) -> str | None:
    """Why a usable ``device`` cannot run ``kind`` in ``name`` with this torch and OS."""
    if not is_reduced(name):
        return None
    major, minor, lacking = _MIN_TORCH.get((device, kind, name), (0, 0, ""))
    if torch_version() < (major, minor):
        return (
            f"{device} {name} {kind} ({lacking}) needs torch {major}.{minor};"
            f" this is torch {torch.__version__}"
        )
    return device_lacks(device, name)


def device_lacks(device: str, name: str) -> str | None:
    """Asked before torch, whose macOS 13 bfloat16 refusal skips.torch_lacks misses."""
    macos = platform.mac_ver()[0]
    if device == "mps" and name == "bfloat16" and macos and host.version_number(macos) < 14:
        return f"bfloat16 on mps needs macOS 14 or later; this is macOS {macos}"
    if device == "cuda" and name == "bfloat16" and not torch.cuda.is_bf16_supported():
        return f"{torch.cuda.get_device_name(0)} lacks bfloat16 (compute capability 8.0 or later needed)"
    return None


def check_computed(what: str, name: str, computed: torch.dtype | None) -> None:
    if computed != dtype_of(name):
        raise RuntimeError(
            f"{what}: asked for {name} but the logits were computed in {computed}"
            " (autocast where unsupported runs float32)"
        )
