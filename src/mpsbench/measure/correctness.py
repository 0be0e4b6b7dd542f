"""Correctness history: the input layouts that made mps return wrong numbers, checked per build.

Each pattern is one op fed a layout a past release computed wrong without an
error (issue 21). The reference is the same op in float64 on the cpu over the
same inputs rounded to the dtype, so the error is the kernel's alone; a kernel
that ignores a view's strides errs by the size of the values, four to six
orders of magnitude above rounding (docs/instruments.md, Correctness patterns).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch.nn import functional

from mpsbench.core import errors
from mpsbench.measure import accuracy, devices, measured, models, precision, suite  # suite: a cycle, used in calls only

Tensors = Sequence[torch.Tensor]
DTYPES: tuple[str, ...] = precision.NAMES
# Batch 2, 4 heads, 64 tokens, 32 per head: big enough for a kernel's tiling to
# matter, small enough that every check takes milliseconds on any device.
B, H, T, D = 2, 4, 64, 32


class CorrectnessError(RuntimeError):
    """A device computed a pattern beyond the dtype's tolerance: its timings would be of wrong kernels."""


@dataclass(frozen=True)
class Pattern:
    """One op on one layout: ``make`` draws contiguous inputs, ``arrange`` lays them out as the bug needed."""

    name: str
    issue: str  # the PyTorch issue that showed the layout broken
    make: Callable[[torch.Generator], tuple[torch.Tensor, ...]]  # float64 (indices: int64), on the cpu
    arrange: Callable[[Tensors], tuple[torch.Tensor, ...]]  # views of the made tensors: no copy
    op: Callable[..., torch.Tensor]  # looks its kernel up at each call (a test can put a wrong kernel there)
    min_torch: tuple[int, int] = (1, 12)  # the first torch that has the op


def _randn(gen: torch.Generator, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=gen, dtype=torch.float64)


def _qkv_transposed(gen: torch.Generator) -> tuple[torch.Tensor, ...]:
    return tuple(_randn(gen, B, T, H, D) for _ in range(3))  # (batch, tokens, heads, dim), as a projection gives


def _qkv_packed(gen: torch.Generator) -> tuple[torch.Tensor, ...]:
    return (_randn(gen, B, T, 3, H, D),)  # one fused qkv projection


def _mask(gen: torch.Generator) -> torch.Tensor:
    keep = torch.rand(B, 1, T, T, generator=gen, dtype=torch.float64) > 0.3
    return keep | torch.eye(T, dtype=torch.bool)  # every query keeps at least itself


def _transposed(inputs: Tensors) -> tuple[torch.Tensor, ...]:
    return tuple(x.transpose(1, 2) for x in inputs[:3]) + tuple(inputs[3:])  # (batch, heads, tokens, dim) views


def _permuted(inputs: Tensors) -> tuple[torch.Tensor, ...]:
    q, k, v = inputs[0].permute(2, 0, 3, 1, 4).unbind(0)  # the packed layout of #181133
    return (q, k, v, *inputs[1:])


def _sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    return functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def _with_mask(make: Callable[[torch.Generator], tuple[torch.Tensor, ...]]) -> Callable[..., tuple[torch.Tensor, ...]]:
    return lambda gen: (*make(gen), _mask(gen))


def _scatter_add(source: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    return torch.zeros(source.shape[0], 16, dtype=source.dtype, device=source.device).scatter_add(1, index, source)


def _indices(gen: torch.Generator, high: int, *shape: int) -> torch.Tensor:
    return torch.randint(0, high, shape, generator=gen)


PATTERNS: dict[str, Pattern] = {
    pattern.name: pattern
    for pattern in (
        Pattern("sdpa_transposed", "pytorch#163597", _qkv_transposed, _transposed, _sdpa, (2, 0)),
        Pattern("sdpa_transposed_mask", "pytorch#163597", _with_mask(_qkv_transposed), _transposed, _sdpa, (2, 0)),
        Pattern("sdpa_permuted", "pytorch#181133", _qkv_packed, _permuted, _sdpa, (2, 0)),
        Pattern("sdpa_permuted_mask", "pytorch#181133", _with_mask(_qkv_packed), _permuted, _sdpa, (2, 0)),
        Pattern(
            "linear_transposed_weight", "pytorch#162730",
            lambda gen: (_randn(gen, 64, 256), _randn(gen, 256, 128), _randn(gen, 128)),
            lambda x: (x[0], x[1].t(), x[2]),  # the weight stored (in, out) and passed transposed
            lambda x, weight, bias: functional.linear(x, weight, bias),
        ),
        Pattern(
            "conv2d_strided_input", "strided views",
            lambda gen: (_randn(gen, 2, 16, 32, 32), _randn(gen, 8, 8, 3, 3)),
            lambda x: (x[0][:, ::2, ::2, 1::2], x[1]),  # every other channel, row and column: strides 2, 2, 2
            lambda x, weight: functional.conv2d(x, weight, padding=1),
        ),
        Pattern(
            "index_select_transposed", "mps index ops",
            lambda gen: (_randn(gen, 48, 64), _indices(gen, 64, 40)),
            lambda x: (x[0].t(), x[1]),
            lambda source, index: torch.index_select(source, 0, index),
        ),
        Pattern(
            "gather_transposed", "mps index ops",
            lambda gen: (_randn(gen, 48, 32), _indices(gen, 48, 32, 24)),
            lambda x: (x[0].t(), x[1]),
            lambda source, index: torch.gather(source, 1, index),
        ),
        Pattern(
            "scatter_add_transposed", "mps index ops",
            lambda gen: (_randn(gen, 24, 32), _indices(gen, 16, 32, 24)),
            lambda x: (x[0].t(), x[1]),
            _scatter_add,
        ),
    )
}
NAMES: tuple[str, ...] = tuple(PATTERNS)


def relative_error(device: str, name: str, dtype: str) -> float:
    """The pattern's error on ``device`` in ``dtype`` against float64 on the cpu.

    Skips (n/a) where the device is not usable, or this torch lacks the op, or lacks it in this
    dtype on this device; other errors propagate (the combination fails).
    """
    suite.require_device(device)
    pattern = PATTERNS[name]
    suite.require_torch(pattern.min_torch, name)
    made = pattern.make(torch.Generator().manual_seed(models.SEED))
    kind = precision.dtype_of(dtype)
    rounded = [x.to(kind) if x.is_floating_point() else x for x in made]  # the values the device gets
    reference = pattern.op(*pattern.arrange([x.to(torch.float64) if x.is_floating_point() else x for x in rounded]))
    try:
        result = pattern.op(*pattern.arrange([x.to(device) for x in rounded]))
        devices.get(device).synchronize()
    except (NotImplementedError, RuntimeError, TypeError) as exc:
        # Torch lacks the op or the dtype here (mps before macOS 14 has no bfloat16): n/a, not a wrong result.
        lacks = ("not implemented for", "Unsupported", "not supported")
        if isinstance(exc, NotImplementedError) or any(phrase in str(exc) for phrase in lacks):
            raise suite.SkipNotImplemented(f"{name} in {dtype} on {device}: {errors.first_line(exc)}") from exc
        raise
    return accuracy.relative_error(result, reference)


@functools.cache  # a pass is kept for the process; a failure raises, so is not kept
def verify(device: str, dtype: str) -> None:
    """Run every pattern once per process, device and dtype; raise :class:`CorrectnessError` on a failure.

    A pattern this torch or device lacks is no evidence either way and is passed over.
    """
    tolerance = accuracy.TOLERANCES[dtype]  # the model guard's: rounding far below, a wrong kernel far above
    wrong = []
    for name in NAMES:
        try:
            error = relative_error(device, name, dtype)
        except suite.SkipNotImplemented:
            continue
        if not error <= tolerance:  # NaN and infinity fail too
            wrong.append(f"{name} {error:.3g}")
    if wrong:
        raise CorrectnessError(
            f"{device} computes {', '.join(wrong)} (relative error, {dtype} tolerance {tolerance:g});"
            " a device that computes wrong results is not timed"
        )


def measure(benchmark: str, keys: list[measured.Key]) -> measured.Table:
    """Every (device, pattern, dtype) of this run: its relative error (one process: benchmark_patterns)."""
    return measured.measure(benchmark, keys, relative_error, {"relative_error": float})
