"""The op registry: every op runs on the cpu, work counts match hand arithmetic, setup skips with reasons."""

from __future__ import annotations

import dataclasses
import json
import math
import warnings
from pathlib import Path

import pytest
import torch
from benchmarks import benchmark_ops, common
from tools import ops_table

from mpsbench.core.errors import UserError
from mpsbench.measure import devices, fallback, ops, selection, suite, timing


@pytest.fixture(autouse=True)
def _fresh_op_cache():
    ops.forget()
    yield
    ops.forget()


# --- every op runs, with the registered output ---------------------------------


@pytest.mark.parametrize("name", ops.NAMES)
def test_every_op_runs_forward_on_cpu_at_small_size_with_the_right_shape_and_dtype(name):
    spec = ops.get(name)
    case = ops.OpCase(spec, "cpu", "float32", "small", training=False)
    output = case.forward()
    assert tuple(output.shape) == spec.output_shape(spec.dims("small"))
    assert output.dtype == torch.float32
    assert not output.requires_grad  # timed without autograd
    assert torch.isfinite(output).all()


@pytest.mark.parametrize("name", ops.BACKWARD_NAMES)
def test_every_trained_op_runs_backward_on_cpu_with_a_gradient_per_trained_input(name):
    spec = ops.get(name)
    case = ops.OpCase(spec, "cpu", "float32", "small", training=True)
    trained_names = [
        key for key, operand in spec.operands(spec.dims("small")).items() if operand.trained
    ]
    assert trained_names, f"{name} is trained through but trains no input"
    grads = case.forward_backward()
    assert len(grads) == len(trained_names)
    for key, grad in zip(trained_names, grads):
        assert grad.shape == case.inputs[key].shape, key
        assert grad.dtype == torch.float32
        assert torch.isfinite(grad).all()
        assert grad.abs().sum() > 0, f"{name}: zero gradient for {key}"


def test_ops_without_backward_refuse_training_with_the_valid_choices():
    with pytest.raises(UserError, match="add is not trained through; choose one of: matmul, "):
        ops.OpCase(ops.get("add"), "cpu", "float32", "small", training=True)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_reduced_precision_inputs_and_outputs_carry_the_asked_dtype(dtype):
    case = ops.OpCase(ops.get("mul"), "cpu", dtype, "small", training=False)
    assert case.inputs["a"].dtype == getattr(torch, dtype)
    assert case.forward().dtype == getattr(torch, dtype)


def test_transposed_ops_really_take_a_non_contiguous_input_and_compute_the_same_sum():
    plain = ops.OpCase(ops.get("add"), "cpu", "float32", "small", training=False)
    strided = ops.OpCase(ops.get("add_transposed"), "cpu", "float32", "small", training=False)
    assert plain.inputs["a"].is_contiguous()
    assert not strided.inputs["a"].is_contiguous()
    assert strided.inputs["a"].stride() == (1, 128)
    expected = strided.inputs["a"].contiguous() + strided.inputs["b"]
    assert torch.equal(strided.forward(), expected)


def test_inputs_are_seeded_so_every_run_draws_the_same_values():
    first = ops.make_inputs(ops.get("gather"), "small", "cpu", "float32", training=False)
    again = ops.make_inputs(ops.get("gather"), "small", "cpu", "float32", training=False)
    assert all(torch.equal(first[key], again[key]) for key in first)
    index = first["index"]
    assert index.dtype == torch.int64 and int(index.min()) >= 0 and int(index.max()) < 256


def test_copies_keep_one_end_in_host_memory():
    h2d = ops.make_inputs(ops.get("copy_h2d"), "small", "cpu", "float32", training=False)
    assert h2d["source"].device.type == "cpu"
    d2h = ops.make_inputs(ops.get("copy_d2h"), "small", "cpu", "float32", training=False)
    assert d2h["destination"].device.type == "cpu"
    case = ops.OpCase(ops.get("copy_h2d"), "cpu", "float32", "small", training=False)
    assert case.forward().data_ptr() == case.inputs["destination"].data_ptr()  # into the buffer


def test_warm_up_fails_a_case_whose_output_is_not_the_registered_shape(monkeypatch):
    spec = ops.get("softmax")
    wrong = dataclasses.replace(spec, output="n")
    case = ops.OpCase(wrong, "cpu", "float32", "small", training=False)
    with pytest.raises(
        UserError,
        match=r"softmax on cpu in float32 at small gave shape \(128, 128\), expected \(128,\)",
    ):
        case.warm_up()


# --- work counts --------------------------------------------------------------

# One forward call at the small size in float32 (s = 4 bytes), by hand from the shapes in ops.py.
HAND_COUNTS_SMALL_FLOAT32 = {
    "matmul": 2 * 64 * 64 * 64,  # 524288
    "linear": 32 * 128 * (2 * 128 + 1),  # 1052672
    "conv2d": 1 * 16 * 16 * 16 * (2 * 16 * 9 + 1),  # 1183744
    "scaled_dot_product_attention": 2 * (2 * 4 * 64 * 64 * 32),  # 2097152
    "max_pool2d": (4 * 16 * 16 * 16 + 4 * 16 * 8 * 8) * 4,  # 81920
    "batch_norm": (2 * 16384 + 6 * 16) * 4,  # 131456
    "layer_norm": (2 * 64 * 256 + 2 * 256) * 4,  # 133120
    "softmax": 2 * 16384 * 4,  # 131072
    "gelu": 2 * 16384 * 4,
    "add": 3 * 16384 * 4,  # 196608
    "add_transposed": 3 * 16384 * 4,
    "mul": 3 * 16384 * 4,
    "mul_transposed": 3 * 16384 * 4,
    "sum": (16384 + 128) * 4,  # 66048
    "mean": (16384 + 128) * 4,
    "index_select": 2 * 256 * 64 * 4 + 8 * 256,  # 133120
    "gather": 256 * 64 * (2 * 4 + 8),  # 262144
    "embedding": 2 * 256 * 64 * 4 + 8 * 256,  # 133120 (4 x 64 ids)
    "cross_entropy": 64 * 1000 * 4 + 8 * 64 + 4,  # 256516
    "copy_h2d": 65536 * 4,  # 262144
    "copy_d2h": 65536 * 4,
}


def test_the_hand_table_covers_every_op():
    assert set(HAND_COUNTS_SMALL_FLOAT32) == set(ops.NAMES)


@pytest.mark.parametrize("name", ops.NAMES)
def test_work_counts_match_hand_arithmetic_at_the_small_size(name):
    assert ops.get(name).work_at("small", "float32") == HAND_COUNTS_SMALL_FLOAT32[name]


def test_work_counts_scale_with_size_and_element_size():
    assert ops.get("matmul").work_at("large", "float32") == 137_438_953_472  # 2 * 4096^3
    assert (
        ops.get("matmul").work_at("large", "bfloat16") == 137_438_953_472
    )  # FLOPs do not depend on dtype
    assert ops.get("add").work_at("large", "float16") == 402_653_184  # 3 * 8192^2 * 2
    assert ops.get("copy_h2d").work_at("medium", "bfloat16") == 8_388_608  # 4 Mi elements * 2


def _tensor_bytes(tensor: torch.Tensor) -> int:
    return tensor.numel() * tensor.element_size()


# Ops whose compulsory traffic is every input read once and the output written once,
# plus the writes stated: checked against the tensors the op really gets.
EXTRA_WRITES = {"batch_norm": ("running_mean", "running_var")}


@pytest.mark.parametrize(
    "name",
    [
        "max_pool2d",
        "batch_norm",
        "layer_norm",
        "softmax",
        "gelu",
        "add",
        "add_transposed",
        "mul",
        "mul_transposed",
        "sum",
        "mean",
        "cross_entropy",
    ],
)
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_byte_counts_equal_the_bytes_of_the_real_inputs_and_output(name, dtype):
    spec = ops.get(name)
    case = ops.OpCase(spec, "cpu", dtype, "small", training=False)
    inputs = case.inputs
    read = sum(_tensor_bytes(tensor) for tensor in inputs.values())
    written = _tensor_bytes(case.forward()) + sum(
        _tensor_bytes(inputs[key]) for key in EXTRA_WRITES.get(name, ())
    )
    assert spec.work_at("small", dtype) == read + written


@pytest.mark.parametrize("name", ["copy_h2d", "copy_d2h"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_copies_count_the_bytes_that_cross_once(name, dtype):
    case = ops.OpCase(ops.get(name), "cpu", dtype, "small", training=False)
    assert case.work() == _tensor_bytes(case.inputs["source"]) == _tensor_bytes(case.forward())


def _math_attention():
    """Attention through its matmuls: torch's flop counter has no rule for the cpu's fused kernel."""
    attention = pytest.importorskip("torch.nn.attention")
    return attention.sdpa_kernel(attention.SDPBackend.MATH)


@pytest.mark.parametrize("name", ops.COMPUTE_NAMES)
def test_flop_counts_agree_with_torchs_flop_counter_plus_the_bias_adds(name):
    flop_counter = pytest.importorskip("torch.utils.flop_counter")
    spec = ops.get(name)
    case = ops.OpCase(spec, "cpu", "float32", "small", training=False)
    with _math_attention(), flop_counter.FlopCounterMode(display=False) as counter:
        output = case.forward()
    bias_adds = output.numel() if "bias" in case.inputs else 0  # torch counts multiply-adds only
    assert spec.work_at("small", "float32") == counter.get_total_flops() + bias_adds


def test_every_op_has_three_sizes_a_formula_and_a_known_unit():
    for spec in ops.REGISTRY.values():
        assert tuple(spec.shapes) == ops.SIZES, spec.name
        assert spec.unit in (ops.GFLOPS, ops.GBPS)
        assert spec.formula
        works = [spec.work_at(size, "float32") for size in ops.SIZES]
        assert works == sorted(works) and works[0] < works[-1], spec.name


def test_unknown_names_give_one_line_errors_with_the_choices():
    with pytest.raises(UserError, match="unknown op 'matmull'; choose one of: matmul, linear"):
        ops.get("matmull")
    with pytest.raises(
        ValueError, match="unknown dtype 'float64'; choose one of: float32, float16, bfloat16"
    ):
        ops.prepare("cpu", "add", "float64", "small", training=False)
    with pytest.raises(UserError, match="unknown size 'huge'; choose one of: small, medium, large"):
        ops.get("add").dims("huge")


# --- timing ------------------------------------------------------------------


def test_median_takes_several_samples_of_k_calls_each(monkeypatch):
    case = ops.OpCase(ops.get("add"), "cpu", "float32", "small", training=False)
    calls = []
    monkeypatch.setattr(case, "forward", lambda: calls.append(1))
    ticks = iter(range(1000))
    monkeypatch.setattr(timing.time, "perf_counter", lambda: float(next(ticks)))
    seconds = ops.median_seconds_per_call(case, min_samples=5, min_seconds=0.0)
    assert len(calls) == 5 * ops.CALLS_PER_SAMPLE["small"]
    assert seconds == 1.0 / ops.CALLS_PER_SAMPLE["small"]  # one tick per sample, divided by k


def test_throughput_is_work_over_the_median_call(monkeypatch):
    case = ops.OpCase(ops.get("matmul"), "cpu", "float32", "small", training=False)
    monkeypatch.setattr(ops, "median_seconds_per_call", lambda c: 1e-3)
    assert ops.throughput(case) == pytest.approx(524288 / 1e-3 / 1e9)


def test_calls_per_sample_are_a_fixed_table_per_size():
    assert dict(ops.CALLS_PER_SAMPLE) == {"small": 100, "medium": 20, "large": 3}


# --- selection and setup outcomes ---------------------------------------------


def test_copies_are_never_timed_on_the_cpu(monkeypatch):
    monkeypatch.setenv(selection.FULL_SWEEP_ENV, "1")
    with pytest.raises(suite.SkipNotImplemented, match="copy_h2d copies between host and a device"):
        benchmark_ops.MemoryBoundOps().setup("cpu", "copy_h2d", "float32", "small")


def test_prepare_builds_once_and_caches_across_setup_calls():
    first = ops.prepare("cpu", "gelu", "float32", "small", training=True)
    assert ops.prepare("cpu", "gelu", "float32", "small", training=True) is first
    assert ops.prepare("cpu", "gelu", "float32", "small", training=False) is not first


def test_an_absent_device_is_skipped_with_the_reason():
    if devices.get("cuda").usable:  # pragma: no cover - GPU machines
        pytest.skip("cuda is present")
    with pytest.raises(suite.SkipNotImplemented, match="cuda is not usable here: "):
        ops.prepare("cuda", "matmul", "float32", "large", training=False)


def test_a_torch_without_the_function_skips_with_its_version(monkeypatch):
    monkeypatch.delattr(ops.F, "scaled_dot_product_attention")
    with pytest.raises(
        suite.SkipNotImplemented, match=r"has no torch.nn.functional.scaled_dot_product_attention"
    ):
        ops.prepare("cpu", "scaled_dot_product_attention", "float32", "small", training=False)


def _raising(exc):
    def build(*args):
        raise exc

    return build


def test_torch_refusing_a_reduced_precision_dtype_is_skipped_with_torchs_words(monkeypatch):
    monkeypatch.setattr(
        ops,
        "cached",
        _raising(
            TypeError(
                "Trying to convert BFloat16 to the MPS backend but it does not have support for that dtype."
            )
        ),
    )
    with pytest.raises(
        suite.SkipNotImplemented,
        match="gelu on cpu in bfloat16 at small: torch does not support it here: Trying to convert BFloat16",
    ):
        ops.prepare("cpu", "gelu", "bfloat16", "small", training=False)


def test_torch_refusing_float32_fails_the_combination_with_the_op_name(monkeypatch):
    monkeypatch.setattr(
        ops,
        "cached",
        _raising(
            NotImplementedError(
                "The operator 'aten::_foo' is not currently implemented for the MPS device"
            )
        ),
    )
    with pytest.raises(
        RuntimeError, match="gelu on cpu in float32 at small: torch lacks an op: The operator"
    ) as caught:
        ops.prepare("cpu", "gelu", "float32", "small", training=False)
    assert not isinstance(caught.value, NotImplementedError)  # a failure, never an n/a


def test_an_op_that_fell_back_to_the_cpu_fails_with_its_name(monkeypatch):
    def warm_up_with_a_fallback(self):
        warnings.warn(
            "The operator 'aten::gelu' is not currently supported on the MPS backend and will fall back"
            " to run on the CPU. This may have performance implications.",
            UserWarning,
            stacklevel=1,
        )

    monkeypatch.setattr(ops.OpCase, "warm_up", warm_up_with_a_fallback)
    monkeypatch.delenv(fallback.ALLOW_ENV, raising=False)
    with pytest.raises(
        fallback.FallbackError,
        match=r"gelu on cpu in float32 at small: 1 op\(s\) fell back .*aten::gelu",
    ):
        ops.prepare("cpu", "gelu", "float32", "small", training=False)


def test_other_errors_fail_the_combination_unchanged(monkeypatch):
    monkeypatch.setenv(selection.FULL_SWEEP_ENV, "1")
    monkeypatch.setattr(ops, "cached", _raising(ValueError("shapes do not match")))
    with pytest.raises(ValueError, match="shapes do not match"):
        ops.prepare("cpu", "gelu", "float16", "small", training=False)


def test_inputs_that_do_not_fit_are_skipped_with_the_reason(monkeypatch):
    monkeypatch.setattr(
        ops, "cached", _raising(RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB"))
    )
    with pytest.raises(
        suite.SkipNotImplemented, match="matmul on cpu in float32 at small does not fit in memory"
    ):
        ops.prepare("cpu", "matmul", "float32", "small", training=False)


# --- the asv classes ------------------------------------------------------------

CLASSES = [
    benchmark_ops.ComputeBoundOps,
    benchmark_ops.MemoryBoundOps,
    benchmark_ops.ForwardBackwardOps,
]


@pytest.mark.parametrize("cls", CLASSES)
def test_params_are_fixed_and_never_depend_on_the_environment(cls):
    device_names, _, dtypes, sizes = cls.params
    assert cls.param_names == ("device", "op", "dtype", "size")
    assert device_names == ("cpu", "mps", "cuda")
    assert dtypes == ("float32", "float16", "bfloat16")
    assert sizes == ("small", "medium", "large")
    assert cls.version


def test_the_classes_cover_every_op_and_every_trained_op():
    assert set(benchmark_ops.ComputeBoundOps.params[1]) | set(
        benchmark_ops.MemoryBoundOps.params[1]
    ) == set(ops.NAMES)
    assert benchmark_ops.ComputeBoundOps.params[1] == (
        "matmul",
        "linear",
        "conv2d",
        "scaled_dot_product_attention",
    )
    assert set(benchmark_ops.ForwardBackwardOps.params[1]) == set(ops.NAMES) - {
        "add",
        "add_transposed",
        "sum",
        "mean",
        "copy_h2d",
        "copy_d2h",
    }
    assert benchmark_ops.ComputeBoundOps.track_gflops.unit == "GFLOP/s"
    assert benchmark_ops.MemoryBoundOps.track_gbps.unit == "GB/s"


def test_a_class_times_k_calls_per_sample_and_reports_per_call(monkeypatch):
    bench = benchmark_ops.MemoryBoundOps()
    bench.setup("cpu", "mul", "float32", "medium")
    assert bench.calls == 20
    assert isinstance(bench.timer, common.StepTimer) and bench.timer.steps_per_call == 20
    calls = []
    monkeypatch.setattr(bench.case, "forward", lambda: calls.append(1))
    bench.time_forward("cpu", "mul", "float32", "medium")
    assert len(calls) == 20


def test_one_measuring_pass_gives_each_throughput_row_its_figure_or_the_reason():
    measured_here, left_out = (
        ("cpu", "linear", "float32", "small"),
        ("cpu", "linear", "float16", "large"),
    )
    readings = {
        "ComputeBoundOps": benchmark_ops.forward_throughputs(
            "ComputeBoundOps", [measured_here, left_out]
        )
    }
    bench = benchmark_ops.ComputeBoundOps()
    bench.setup(readings, *measured_here)
    value = bench.track_gflops(readings, *measured_here)
    assert math.isfinite(value) and value > 0
    assert not hasattr(bench, "case")  # a lookup builds nothing
    with pytest.raises(
        NotImplementedError, match="10-20x slower"
    ):  # asv's n/a, with the selection's reason
        bench.track_gflops(readings, *left_out)
    assert (
        benchmark_ops.ComputeBoundOps.track_gflops.setup_cache
        is benchmark_ops.MemoryBoundOps.track_gbps.setup_cache
    )
    trained = benchmark_ops.ForwardBackwardOps()
    trained.setup("cpu", "embedding", "float32", "small")
    assert trained.case.training
    trained.time_forward_backward("cpu", "embedding", "float32", "small")


# --- the ops table ---------------------------------------------------------------

ROOT = Path(__file__).resolve().parents[1]


def test_docs_hold_the_registry_table_as_the_registry_prints_it():
    assert ops_table.registry_markdown() in (ROOT / "docs" / "reference" / "ops.md").read_text()


def test_each_op_is_held_against_the_peak_that_applies(monkeypatch):
    peaks = ops_table.peaks_for("NVIDIA H100 80GB HBM3")
    assert peaks is not None and peaks.memory_gbps == 3350.0
    assert ops_table.peaks_for("NVIDIA H100 PCIe").memory_gbps == 2000.0
    assert ops_table.peaks_for("Apple M2") is None
    monkeypatch.setattr(ops_table, "matmul_uses_tf32", lambda: False)
    monkeypatch.setattr(ops_table, "conv_uses_tf32", lambda: True)
    assert ops_table.peak_of(peaks, ops.get("matmul"), "float32") == 67_000.0  # GFLOP/s
    assert ops_table.peak_of(peaks, ops.get("conv2d"), "float32") == 494_500.0  # TF32
    assert ops_table.peak_of(peaks, ops.get("matmul"), "bfloat16") == 989_500.0
    assert ops_table.peak_of(peaks, ops.get("softmax"), "float16") == 3350.0  # GB/s
    assert ops_table.peak_of(peaks, ops.get("copy_h2d"), "float32") == 64.0


def test_the_table_times_what_runs_and_gives_the_reason_for_what_skips(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.delenv(selection.FULL_SWEEP_ENV, raising=False)
    monkeypatch.setenv("OUT", str(tmp_path))
    code = ops_table.main(
        [
            "--device",
            "cpu",
            "--ops",
            "add,copy_d2h",
            "--dtypes",
            "float32",
            "--sizes",
            "small,large",
        ]
    )
    assert code == 0
    rows = {
        (row["op"], row["size"]): row
        for row in json.loads((tmp_path / "ops-table.json").read_text())["rows"]
    }
    timed = rows[("add", "small")]
    assert timed["unit"] == "GB/s" and timed["throughput"] > 0 and timed["note"] == ""
    assert timed["throughput"] == pytest.approx(196608 / timed["seconds_per_call"] / 1e9)
    assert rows[("add", "large")]["note"].startswith(
        "skipped: add in float32 at large on cpu is outside the default"
    )
    assert rows[("copy_d2h", "small")]["note"].startswith(
        "skipped: copy_d2h copies between host and a device"
    )
    assert (tmp_path / "ops-table.txt").read_text().strip() == capsys.readouterr().out.strip()


def test_the_table_refuses_unknown_names_in_one_line(capsys):
    assert ops_table.main(["--device", "cpu", "--dtypes", "float64"]) == 2
    assert capsys.readouterr().err.strip() == (
        "ops-table: error: unknown dtype 'float64'; choose from: float32, float16, bfloat16"
    )
    assert ops_table.main(["--device", "tpu"]) == 2
    assert "unknown device 'tpu'; choose one of: cpu, mps, cuda" in capsys.readouterr().err
