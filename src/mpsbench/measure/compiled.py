"""The compile axis: ``torch.compile`` (the default inductor backend) beside eager (issue 21).

The first warm-up step of the compiled model is the compile time, cold in every process; the later steps are
the steady state. What skips and what fails: docs/workloads.md (The compile axis).
"""

from __future__ import annotations

import os
import shutil
import tempfile

import torch

from mpsbench.core import errors
from mpsbench.measure import models, precision, suite, workloads

FIRST_TORCH = (2, 0)  # torch.compile's first release
FIRST_MPS_TORCH = (2, 8)  # MPSInductor in the release notes of 2.8.0
CXX_CANDIDATES = ("g++", "clang++", "c++")  # what inductor's cpu backend finds on Linux and macOS
# Inductor and triton read these when they first cache; a fresh folder per process keeps compiles cold.
CACHE_ENVS = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")

# The models whose step torch.compile suits: every registered one; the frozen
# BERT differs from bert_base in its optimizer only.
TRAINING_NAMES: tuple[str, ...] = tuple(
    name for name, spec in models.REGISTRY.items() if spec.trains and name != "bert_base_frozen"
)
INFERENCE_NAMES: tuple[str, ...] = tuple(name for name, spec in models.REGISTRY.items() if spec.trainable is None)


def unsupported_reason(device: str) -> str | None:
    """Why this build or device cannot compile, or None if it should."""
    if precision.torch_version() < FIRST_TORCH or not hasattr(torch, "compile"):
        return f"torch {torch.__version__} has no torch.compile (2.0 and later)"
    dynamo = getattr(getattr(torch, "_dynamo", None), "is_dynamo_supported", None)
    if dynamo is not None and not dynamo():
        return f"torch {torch.__version__}'s dynamo does not support this Python"
    if device == "mps" and precision.torch_version() < FIRST_MPS_TORCH:
        return f"inductor compiles for mps from torch 2.8 (MPSInductor); this is {torch.__version__}"
    if device == "cpu" and not any(shutil.which(name) for name in (os.environ.get("CXX"), *CXX_CANDIDATES) if name):
        return f"inductor needs a C++ compiler on the cpu; none of {', '.join(CXX_CANDIDATES)} or $CXX is on PATH"
    if device == "cuda":
        try:
            import triton  # noqa: F401  # inductor generates triton kernels for cuda
        except ImportError:
            return "inductor needs triton for cuda, which this environment cannot import"
    return None


def cold_caches() -> None:
    """Point inductor's and triton's caches at a new folder (once per process): every compile is cold."""
    if os.environ.get("MPSBENCH_COMPILE_CACHE") is None:
        folder = tempfile.mkdtemp(prefix="mpsbench-inductor-")
        os.environ["MPSBENCH_COMPILE_CACHE"] = folder
        for name in CACHE_ENVS:
            os.environ[name] = os.path.join(folder, name.lower())


def prepare(kind: str, device: str, model: str) -> workloads.Workload:
    """Build, compile (the first warm-up step) and guard a compiled workload at the seed batch size."""
    suite.require(kind, device, model)
    reason = unsupported_reason(device)
    if reason is not None:
        raise suite.SkipNotImplemented(reason)
    cold_caches()
    try:
        return suite.prepare(kind, device, model, models.get(model).seed_batch_size, compiled=True)
    except suite.SkipNotImplemented:
        raise
    except Exception as exc:
        first = errors.first_line(exc)
        raise RuntimeError(f"torch.compile of {model} {kind} on {device} failed: {type(exc).__name__}: {first}") from exc


def compile_seconds(workload: workloads.Workload) -> float:
    """The first step of a compiled workload: tracing, code generation, kernel builds and one step."""
    if workload.first_step_seconds is None:
        raise RuntimeError(f"{workload.label} was not warmed up: no first step was timed")
    return workload.first_step_seconds
