"""The correctness patterns: tracked errors against float64, and a wrong kernel tracked and refused."""

from __future__ import annotations

import pytest
import torch
from benchmarks import benchmark_patterns
from torch.nn import functional

from mpsbench.measure import accuracy, correctness, measured, suite

# Where each pattern's kernel lives, to put a wrong one there.
KERNELS = {
    "sdpa_transposed": (functional, "scaled_dot_product_attention"),
    "sdpa_transposed_mask": (functional, "scaled_dot_product_attention"),
    "sdpa_permuted": (functional, "scaled_dot_product_attention"),
    "sdpa_permuted_mask": (functional, "scaled_dot_product_attention"),
    "linear_transposed_weight": (functional, "linear"),
    "conv2d_strided_input": (functional, "conv2d"),
    "index_select_transposed": (torch, "index_select"),
    "gather_transposed": (torch, "gather"),
    "scatter_add_transposed": (torch.Tensor, "scatter_add"),
}


def _drop_strides(tensor: torch.Tensor) -> torch.Tensor:
    """The bug class of the mps issues: a view's storage read as if it were contiguous."""
    if not tensor.is_floating_point() or tensor.dtype == torch.float64 or tensor.is_contiguous():
        return tensor  # the float64 reference and contiguous operands stay right
    return torch.as_strided(tensor, tensor.shape, torch.empty(tensor.shape).stride(), tensor.storage_offset())


def _wrong(kernel):
    def wrong(*args, **kwargs):
        args = tuple(_drop_strides(a) if isinstance(a, torch.Tensor) else a for a in args)
        return kernel(*args, **kwargs)

    return wrong


def test_every_pattern_has_a_kernel_to_break():
    assert set(KERNELS) == set(correctness.NAMES)


@pytest.mark.parametrize("dtype", correctness.DTYPES)
def test_the_cpu_computes_every_pattern_within_the_dtypes_tolerance(dtype):
    for name in correctness.NAMES:
        error = correctness.relative_error("cpu", name, dtype)
        assert error <= accuracy.TOLERANCES[dtype] / 10, (name, error)  # a decade of margin on the cpu


def test_the_patterns_really_are_the_layouts_that_broke():
    for name, pattern in correctness.PATTERNS.items():
        made = pattern.make(torch.Generator().manual_seed(0))
        arranged = pattern.arrange(made)
        assert any(x.is_floating_point() and not x.is_contiguous() for x in arranged), name


@pytest.mark.parametrize("name", correctness.NAMES)
def test_a_kernel_that_drops_strides_is_tracked_and_its_device_is_not_timed(monkeypatch, name):
    owner, attribute = KERNELS[name]
    monkeypatch.setattr(owner, attribute, _wrong(getattr(owner, attribute)))
    readings = {"correctness": measured.of(benchmark_patterns.Correctness, correctness.measure)()}
    tracked = benchmark_patterns.Correctness().track_relative_error(readings, "cpu", name, "float32")
    assert tracked > 100 * accuracy.TOLERANCES["float32"]  # of the order of the values, not of rounding
    with pytest.raises(correctness.CorrectnessError, match=rf"cpu computes .*\b{name} [\d.e+-]+[, ].*is not timed"):
        suite.prepare("inference", "cpu", "mlp", 8)


def test_the_check_runs_once_per_process_and_device(monkeypatch):
    calls = []
    real = correctness.relative_error
    monkeypatch.setattr(correctness, "relative_error", lambda *args: calls.append(args) or real(*args))
    for _ in range(3):  # asv calls setup before every sample
        suite.prepare("inference", "cpu", "mlp", 8)
    assert len(calls) == len(correctness.NAMES)


def test_an_old_torch_skips_the_sdpa_patterns_with_the_reason(monkeypatch):
    monkeypatch.setattr(correctness.precision, "torch_version", lambda: (1, 13))
    with pytest.raises(suite.SkipNotImplemented, match=r"sdpa_permuted needs torch 2\.0 or later"):
        correctness.relative_error("cpu", "sdpa_permuted", "float32")
    assert correctness.relative_error("cpu", "gather_transposed", "float32") == 0.0
