"""Layouts and calls that made mps silently wrong, checked against float64 on the cpu."""

from __future__ import annotations

import contextlib
import functools
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Union

from mpsbench.core import errors
from mpsbench.measure import (
    accuracy,
    devices,
    isolated,
    measured,
    models,
    precision,
    skips,
    tolerances,
)
from mpsbench.measure.optional_torch import F, torch

Tensors = Sequence["torch.Tensor"]  # strings: torch is not loaded at import
Outputs = tuple["torch.Tensor", ...]
Output = Union["torch.Tensor", Outputs]
Make = Callable[["torch.Generator"], Outputs]
Arrange = Callable[[Tensors], Outputs]
B, H, T, D = 2, 4, 64, 32
# unrelated allocations between identical calls, as pytorch#193487 needed
CHURN_ELEMENTS = (1 << 18, 1 << 22, 1 << 24)


class CorrectnessError(RuntimeError):
    """A device computing wrong numbers."""


@dataclass(frozen=True)
class Pattern:
    name: str
    issue: str
    make: Make  # float64 (indices int64), cpu
    op: Callable[..., Output]
    arrange: Arrange = tuple
    min_torch: tuple[int, int] = (1, 12)
    calls: int = 2
    compiled: bool = False
    isolated: bool = False  # in a child: a crash fails this pattern, not the run


def _randn(gen: torch.Generator, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=gen, dtype=torch.float64)


def _transposed_source(inputs: Tensors) -> Outputs:
    return (inputs[0].t(), *inputs[1:])


def _sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: Any = None) -> Output:
    return F.scaled_dot_product_attention(q, k, v, mask)


def _sdpa_pair(layout: str, issue: str, make: Make, arrange: Arrange) -> tuple[Pattern, Pattern]:
    def masked(gen: torch.Generator) -> Outputs:
        made = make(gen)
        mask = torch.rand(B, 1, T, T, generator=gen, dtype=torch.float64) > 0.3
        return (*made, mask | torch.eye(T, dtype=torch.bool))

    return (
        Pattern(f"sdpa_{layout}", issue, make, _sdpa, arrange, (2, 0)),
        Pattern(f"sdpa_{layout}_mask", issue, masked, _sdpa, arrange, (2, 0)),
    )


def _permuted(inputs: Tensors) -> Outputs:
    q, k, v = inputs[0].permute(2, 0, 3, 1, 4).unbind(0)  # pytorch#181133's packed layout
    return (q, k, v, *inputs[1:])


def _with_nans(gen: torch.Generator) -> Outputs:
    x = torch.rand(16, 2100, 256, generator=gen, dtype=torch.float64)  # pytorch#178497's shape
    with_nans = x.clone().flatten()
    with_nans[::100] = float("nan")
    return x, with_nans.reshape(x.shape), torch.rand(2048, 2048, generator=gen, dtype=torch.float64)


def _linear(*inputs: torch.Tensor) -> Output:
    return F.linear(*inputs)


PATTERNS: dict[str, Pattern] = {
    pattern.name: pattern
    for pattern in (
        *_sdpa_pair(
            "transposed",
            "pytorch#163597",
            lambda gen: tuple(_randn(gen, B, T, H, D) for _ in range(3)),
            lambda x: (*(tensor.transpose(1, 2) for tensor in x[:3]), *x[3:]),
        ),
        *_sdpa_pair(
            "permuted", "pytorch#181133", lambda gen: (_randn(gen, B, T, 3, H, D),), _permuted
        ),
        Pattern(
            "linear_transposed_weight",
            "pytorch#162730",
            lambda gen: (_randn(gen, 64, 256), _randn(gen, 256, 128), _randn(gen, 128)),
            _linear,
            lambda x: (x[0], x[1].t(), x[2]),  # the weight stored (in, out), passed transposed
        ),
        Pattern(
            "conv2d_strided_input",
            "strided views",
            lambda gen: (_randn(gen, 2, 16, 32, 32), _randn(gen, 8, 8, 3, 3)),
            lambda x, weight: F.conv2d(x, weight, padding=1),
            lambda x: (x[0][:, ::2, ::2, 1::2], x[1]),
        ),
        Pattern(
            "index_select_transposed",
            "mps index ops",
            lambda gen: (_randn(gen, 48, 64), models.random_ints(gen, 64, 40)),
            lambda source, index: torch.index_select(source, 0, index),
            _transposed_source,
        ),
        Pattern(
            "gather_transposed",
            "mps index ops",
            lambda gen: (_randn(gen, 48, 32), models.random_ints(gen, 48, 32, 24)),
            lambda source, index: torch.gather(source, 1, index),
            _transposed_source,
        ),
        Pattern(
            "scatter_add_transposed",
            "mps index ops",
            lambda gen: (_randn(gen, 24, 32), models.random_ints(gen, 16, 32, 24)),
            lambda source, index: source.new_zeros(source.shape[0], 16).scatter_add(
                1, index, source
            ),
            _transposed_source,
        ),
        Pattern(
            "matmul_transposed_after_churn",
            "pytorch#193487",
            lambda gen: (
                _randn(gen, 50000, 25),
                torch.rand(50000, generator=gen, dtype=torch.float64),
            ),
            lambda a, w: (a * w[:, None]).t() @ a,  # A'WA, the left operand a transposed view
        ),
        Pattern(
            "linear_3d_no_bias",
            "pytorch#180776",
            lambda gen: (_randn(gen, 2, 13, 1024), _randn(gen, 1024, 1024)),
            _linear,
        ),
        Pattern(
            "reductions_in_succession",
            "pytorch#178497",
            _with_nans,
            lambda x, nans, square: (
                x.sum(),
                x.mean(),
                nans.nansum(),
                torch.count_nonzero(x),
                torch.trace(square),
            ),
            calls=16,
        ),
        Pattern(
            "compiled_layer_norm",
            "pytorch#191976",
            lambda gen: (_randn(gen, 4, 512), 1 + _randn(gen, 512) / 10, _randn(gen, 512) / 10),
            lambda x, weight, bias: F.layer_norm(x, (x.shape[-1],), weight, bias),
            min_torch=(2, 0),
            compiled=True,
        ),
        Pattern(
            "linear_bias",
            "pytorch#188438",
            lambda gen: (_randn(gen, 80, 1, 2), _randn(gen, 192, 2), _randn(gen, 192)),
            _linear,
        ),
        Pattern(
            "linear_broadcast_input",
            "pytorch#167154",  # an MPSNDArray assertion aborted
            lambda gen: (_randn(gen, 499 * 768), _randn(gen, 768, 768) / 28, _randn(gen, 768)),
            _linear,
            lambda x: (torch.as_strided(x[0], (5, 499, 768), (0, 768, 1)), *x[1:]),
            isolated=True,
        ),
    )
}
REPORTED: tuple[str, ...] = tuple(tolerances.REPORTED)
NAMES: tuple[str, ...] = tuple(name for name in PATTERNS if name not in REPORTED)


def _outputs(result: Output) -> Outputs:
    return result if isinstance(result, tuple) else (result,)


def _error(results: Outputs, reference: Outputs) -> float:
    # each output's own, so a count beside a sum keeps its scale
    return max(map(accuracy.relative_error, results, reference))


def _require(device: str, pattern: Pattern, dtype: str) -> None:
    skips.require_device(device)
    skips.require_torch(pattern.min_torch, pattern.name)
    if pattern.compiled and (reason := skips.compile_unsupported(device)) is not None:
        raise skips.SkipNotImplemented(f"{pattern.name}: {reason}")
    skips.require_dtype(device, dtype)


def _churn(device: str) -> None:
    for elements in CHURN_ELEMENTS:
        torch.ones(elements, device=device).add_(1).sum()


def _calls(device: str, name: str, dtype: str, repeated: bool) -> tuple[list[Outputs], Outputs]:
    pattern = PATTERNS[name]
    _require(device, pattern, dtype)
    made = pattern.make(torch.Generator().manual_seed(models.SEED))
    rounded = [models.float_cast(x, precision.dtype_of(dtype)) for x in made]
    reference = pattern.op(*pattern.arrange([models.float_cast(x, torch.float64) for x in rounded]))
    op = torch.compile(pattern.op) if pattern.compiled else pattern.op
    try:
        arranged = pattern.arrange([x.to(device) for x in rounded])
        calls = [_outputs(op(*arranged)) for _ in range(pattern.calls if repeated else 1)]
        if repeated:
            _churn(device)
            calls.append(_outputs(op(*arranged)))
        devices.get(device).synchronize()
    except Exception as exc:
        if skips.torch_lacks(exc):
            raise skips.SkipNotImplemented(
                f"{name} in {dtype} on {device}: {errors.first_line(exc)}"
            ) from exc
        raise
    return calls, _outputs(reference)


def relative_error(device: str, name: str, dtype: str) -> float:
    calls, reference = _calls(device, name, dtype, repeated=False)
    return _error(calls[0], reference)


@dataclass(frozen=True)
class Reading:
    error: float
    difference: float  # a later call's furthest from the first


def _read(device: str, name: str, dtype: str) -> Reading:
    calls, reference = _calls(device, name, dtype, repeated=True)
    return Reading(
        max(_error(call, reference) for call in calls),
        max(_error(call, calls[0]) for call in calls[1:]),
    )


@functools.cache  # one reading gives both figures
def _outcome(device: str, name: str, dtype: str) -> measured.Outcome:
    try:
        if not PATTERNS[name].isolated:
            return measured.Outcome(value=_read(device, name, dtype))
        _require(device, PATTERNS[name], dtype)  # before a child starts
        return measured.Outcome(value=isolated.call(_read, device, name, dtype))
    except Exception as exc:
        return measured.outcome_of(exc)


forget = _outcome.cache_clear


def reading(device: str, name: str, dtype: str) -> Reading:
    """Over ``calls`` identical calls, unrelated work and one more call."""
    value: Reading = _outcome(device, name, dtype).get()
    return value


@functools.cache  # a failure raises, so only a pass is kept
def verify(device: str, dtype: str) -> None:
    """Once per process, device and dtype; a pattern torch lacks is skipped."""
    tolerance = tolerances.TOLERANCES[dtype]
    wrong = []
    for name in NAMES:
        with contextlib.suppress(skips.SkipNotImplemented):
            if not (error := relative_error(device, name, dtype)) <= tolerance:  # NaN fails too
                wrong.append(f"{name} {error:.3g}")
    if wrong:
        raise CorrectnessError(
            f"{device} computes {', '.join(wrong)} (relative error, {dtype} tolerance {tolerance:g});"
            " a device that computes wrong results is not timed"
        )


measure = functools.partial(
    measured.measure, prepare=relative_error, figures={"relative_error": float}
)
measure_reported = functools.partial(
    measured.measure, prepare=reading, figures={"relative_error": operator.attrgetter("error")}
)
measure_determinism = functools.partial(
    measured.measure,
    prepare=reading,
    figures={"largest_difference": operator.attrgetter("difference")},
)
