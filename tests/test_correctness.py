"""The correctness patterns: tracked errors against float64, a wrong kernel tracked and refused, the reports'
calls within tolerance and their historic wrong results tracked, identical calls compared, a crash isolated."""

from __future__ import annotations

import dataclasses
import os

import pytest
import torch
from benchmarks import benchmark_patterns, common
from torch.nn import functional

from mpsbench.measure import correctness, isolated, suite, tolerances

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
    return torch.as_strided(
        tensor, tensor.shape, torch.empty(tensor.shape).stride(), tensor.storage_offset()
    )


def _wrong(kernel):
    def wrong(*args, **kwargs):
        args = tuple(_drop_strides(a) if isinstance(a, torch.Tensor) else a for a in args)
        return kernel(*args, **kwargs)

    return wrong


def test_every_pattern_has_a_kernel_to_break():
    assert set(KERNELS) == set(correctness.NAMES)


@pytest.mark.parametrize("dtype", tolerances.DTYPES)
def test_the_cpu_computes_every_pattern_within_the_dtypes_tolerance(dtype):
    for name in correctness.NAMES:
        error = correctness.relative_error("cpu", name, dtype)
        assert error <= tolerances.TOLERANCES[dtype] / 10, (
            name,
            error,
        )  # a decade of margin on the cpu


def test_the_patterns_really_are_the_layouts_that_broke():
    for name in correctness.NAMES:
        pattern = correctness.PATTERNS[name]
        made = pattern.make(torch.Generator().manual_seed(0))
        arranged = pattern.arrange(made)
        assert any(x.is_floating_point() and not x.is_contiguous() for x in arranged), name


@pytest.mark.parametrize("name", correctness.NAMES)
def test_a_kernel_that_drops_strides_is_tracked_and_its_device_is_not_timed(monkeypatch, name):
    owner, attribute = KERNELS[name]
    monkeypatch.setattr(owner, attribute, _wrong(getattr(owner, attribute)))
    readings = {
        "correctness": common.measuring(correctness.measure, benchmark_patterns.Correctness)()
    }
    tracked = benchmark_patterns.Correctness().track_relative_error(
        readings, "cpu", name, "float32"
    )
    assert (
        tracked > 100 * tolerances.TOLERANCES["float32"]
    )  # of the order of the values, not of rounding
    with pytest.raises(
        correctness.CorrectnessError, match=rf"cpu computes .*\b{name} [\d.e+-]+[, ].*is not timed"
    ):
        suite.prepare("inference", "cpu", "mlp", 8)


def test_the_check_runs_once_per_process_and_device(monkeypatch):
    calls = []
    real = correctness.relative_error
    monkeypatch.setattr(
        correctness, "relative_error", lambda *args: calls.append(args) or real(*args)
    )
    for _ in range(3):  # asv calls setup before every sample
        suite.prepare("inference", "cpu", "mlp", 8)
    assert len(calls) == len(correctness.NAMES)


def test_an_old_torch_skips_the_sdpa_patterns_with_the_reason(monkeypatch):
    monkeypatch.setattr(correctness.precision, "torch_version", lambda: (1, 13))
    with pytest.raises(suite.SkipNotImplemented, match=r"sdpa_permuted needs torch 2\.0 or later"):
        correctness.relative_error("cpu", "sdpa_permuted", "float32")
    assert correctness.relative_error("cpu", "gather_transposed", "float32") == 0.0


# --- the 2025-2026 reports (issue 33) ---------------------------------------------------------------------


def test_every_reported_pattern_is_built_and_names_its_issue():
    assert set(correctness.REPORTED) <= set(correctness.PATTERNS)
    assert not set(correctness.REPORTED) & set(correctness.NAMES)
    for name in correctness.REPORTED:
        assert correctness.PATTERNS[name].issue.startswith("pytorch#"), name


@pytest.mark.parametrize("name", correctness.REPORTED)
def test_the_cpu_computes_every_reported_pattern_within_tolerance_and_repeats_it_bit_for_bit(name):
    for dtype in tolerances.dtypes(name):
        found = correctness.reading("cpu", name, dtype)
        assert found.error <= tolerances.TOLERANCES[dtype] / 10, (
            dtype,
            found,
        )  # a decade of margin on the cpu
        assert found.difference == 0.0, (dtype, found)


def test_the_cpu_repeats_every_earlier_pattern_bit_for_bit():
    for name in correctness.NAMES:
        assert correctness.reading("cpu", name, "float32").difference == 0.0, name


def _rows(monkeypatch, *names):
    """The reported and determinism rows of ``names`` on the cpu in their first dtype, as benchmark_patterns reads them."""
    monkeypatch.setenv("MPSBENCH_FULL", "1")  # the compiled pattern's cpu row too
    keys = [("cpu", name, tolerances.dtypes(name)[0]) for name in names]
    return {
        "reported": correctness.measure_reported("ReportedCorrectness", keys),
        "determinism": correctness.measure_determinism("Determinism", keys),
    }


def _replace_op(monkeypatch, name, wrong):
    """The pattern's op on the device (any dtype but the reference's float64) replaced by ``wrong(real, call, *args)``."""
    pattern = correctness.PATTERNS[name]
    calls = []

    def op(*args):
        if any(isinstance(x, torch.Tensor) and x.dtype == torch.float64 for x in args):
            return pattern.op(*args)  # the reference stays right
        calls.append(None)
        return wrong(pattern.op, len(calls) - 1, *args)

    monkeypatch.setitem(correctness.PATTERNS, name, dataclasses.replace(pattern, op=op))


def _wrong_after_churn(monkeypatch):
    """pytorch#193487: the Gram matrix off by 20% once the allocator has seen other sizes."""
    churned = []
    real_churn = correctness._churn
    monkeypatch.setattr(
        correctness, "_churn", lambda device: churned.append(device) or real_churn(device)
    )
    _replace_op(
        monkeypatch,
        "matmul_transposed_after_churn",
        lambda op, call, *args: op(*args) * (1.2 if churned else 1),
    )


def _calls_disagree(monkeypatch):
    """pytorch#180776: the second of two identical float16 calls off by 123.5 in one element."""

    def wrong(op, call, *args):
        out = op(*args).clone()
        out.view(-1)[7] += 123.5 * (call > 0)
        return out

    _replace_op(monkeypatch, "linear_3d_no_bias", wrong)


def _ninth_sum_wrong(monkeypatch):
    """pytorch#178497: one sum of many issued in quick succession wrong."""

    def wrong(op, call, *args):
        found = op(*args)
        return (found[0] * (0.9 if call == 8 else 1), *found[1:])

    _replace_op(monkeypatch, "reductions_in_succession", wrong)


def _compiled_off(monkeypatch):
    """pytorch#191976: torch.compile's LayerNorm off by 1.8 while eager is exact (no compiler runs here)."""
    monkeypatch.setattr(correctness.torch, "compile", lambda op: lambda *args: op(*args) + 1.8)
    monkeypatch.setattr(correctness.skips, "compile_unsupported", lambda device: None)


def _bias_off(monkeypatch):
    """pytorch#188438: a Linear with bias 20% off."""
    _replace_op(
        monkeypatch, "linear_bias", lambda op, call, x, weight, bias: op(x, weight, bias) * 1.2
    )


HISTORIC = {
    "matmul_transposed_after_churn": _wrong_after_churn,
    "linear_3d_no_bias": _calls_disagree,
    "reductions_in_succession": _ninth_sum_wrong,
    "compiled_layer_norm": _compiled_off,
    "linear_bias": _bias_off,
}
NONDETERMINISTIC = {
    "matmul_transposed_after_churn",
    "linear_3d_no_bias",
    "reductions_in_succession",
}


def test_every_reported_pattern_but_the_crash_has_its_historic_wrong_result():
    assert set(HISTORIC) | {"linear_broadcast_input"} == set(correctness.REPORTED)


@pytest.mark.parametrize("name", HISTORIC)
def test_the_historic_wrong_result_makes_its_row_jump(monkeypatch, name):
    monkeypatch.setattr(
        correctness.torch, "compile", lambda op: op
    )  # compiled is eager here: the real compile is
    monkeypatch.setattr(
        correctness.skips, "compile_unsupported", lambda device: None
    )  # tested within tolerance
    other = "linear_bias" if name != "linear_bias" else "matmul_transposed_after_churn"
    clean = _rows(monkeypatch, name, other)
    correctness.forget()
    HISTORIC[name](monkeypatch)
    wrong = _rows(monkeypatch, name, other)
    dtype = tolerances.dtypes(name)[0]
    error = benchmark_patterns.ReportedCorrectness().track_relative_error
    difference = benchmark_patterns.Determinism().track_largest_difference
    assert error(clean, "cpu", name, dtype) <= tolerances.TOLERANCES[dtype] / 10
    assert (
        error(wrong, "cpu", name, dtype) > tolerances.TOLERANCES[dtype]
    )  # past the line the site draws red
    assert difference(clean, "cpu", name, dtype) == 0.0
    assert (difference(wrong, "cpu", name, dtype) > 0) == (name in NONDETERMINISTIC)
    assert error(wrong, "cpu", other, "float32") == error(
        clean, "cpu", other, "float32"
    )  # its own row only


def test_the_crashing_pattern_runs_in_a_child_that_reads_it(monkeypatch):
    children = []
    real = isolated.call
    monkeypatch.setattr(
        correctness.isolated, "call", lambda *args: children.append(args) or real(*args)
    )
    found = correctness.reading("cpu", "linear_broadcast_input", "float32")
    assert [args[1:] for args in children] == [("cpu", "linear_broadcast_input", "float32")]
    assert found.error < tolerances.TOLERANCES["float32"] / 10


def _abort():
    os.abort()  # what an MPSNDArray assertion does to its process (pytorch#167154)


def test_a_child_killed_by_an_assertion_is_one_error_here():
    with pytest.raises(
        isolated.ChildDied, match=r"_abort died in its child process \(killed by SIGABRT\)"
    ):
        isolated.call(_abort)


def test_a_pattern_that_crashes_its_child_fails_its_rows_only(monkeypatch):
    def crash(function, device, name, dtype):
        raise isolated.ChildDied(
            f"{function.__name__} died in its child process (killed by SIGABRT)"
        )

    monkeypatch.setattr(correctness.isolated, "call", crash)
    rows = _rows(monkeypatch, "linear_broadcast_input", "linear_bias")
    error = benchmark_patterns.ReportedCorrectness().track_relative_error
    difference = benchmark_patterns.Determinism().track_largest_difference
    for track in (error, difference):
        with pytest.raises(RuntimeError, match=r"died in its child process \(killed by SIGABRT\)"):
            track(rows, "cpu", "linear_broadcast_input", "float32")
    # the run went on: the other pattern's rows read as they do without a crash beside them
    assert error(rows, "cpu", "linear_bias", "float32") <= tolerances.TOLERANCES["float32"] / 10
    assert difference(rows, "cpu", "linear_bias", "float32") == 0.0


def test_a_dtype_the_report_never_showed_is_left_out_of_every_run(monkeypatch):
    monkeypatch.setenv("MPSBENCH_FULL", "1")
    rows = {
        "reported": correctness.measure_reported(
            "ReportedCorrectness", [("cpu", "linear_bias", "float16")]
        )
    }
    with pytest.raises(
        suite.SkipNotImplemented, match="linear_bias is measured in float32, the dtypes its report"
    ):
        benchmark_patterns.ReportedCorrectness().track_relative_error(
            rows, "cpu", "linear_bias", "float16"
        )
