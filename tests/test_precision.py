"""The dtype dimension: each dtype really computed, unsupported ones skipped, silent float32 failed."""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import re
import warnings

import pytest
import torch
from benchmarks import benchmark_precision

from mpsbench.core.errors import UserError
from mpsbench.measure import (
    correctness,
    devices,
    figures,
    models,
    ops,
    precision,
    skips,
    suite,
    workloads,
)

CLASSES = [benchmark_precision.TrainingPrecision, benchmark_precision.InferencePrecision]


@pytest.mark.parametrize("cls", CLASSES)
def test_params_never_depend_on_the_environment(cls):
    assert cls.param_names == ("device", "model", "dtype")
    assert cls.params[0] == ("cpu", "mps", "cuda")
    assert cls.params[2] == ("float32", "float16", "bfloat16")
    assert cls.version


def test_an_unknown_dtype_is_one_line_with_the_choices():
    with pytest.raises(
        UserError,
        match=r"unknown dtype 'fp8'; choose one of: float32, float16, bfloat16",
    ):
        workloads.build("training", "cpu", "mlp", 8, "fp8")


def test_a_reduced_batch_casts_its_floating_inputs_and_keeps_its_ids_and_target():
    ids = torch.arange(6).view(2, 3)
    target = torch.ones(2)  # floating, so a cast of it would show
    batch = models.Batch({"pixels": torch.ones(2, 3), "input_ids": ids}, target)
    cast = batch.cast(torch.bfloat16)
    assert cast.inputs["pixels"].dtype == torch.bfloat16
    assert cast.inputs["input_ids"] is ids
    assert cast.target is target and cast.target.dtype == torch.float32


# --- cpu, for real -------------------------------------------------------------


@pytest.mark.parametrize("dtype", precision.NAMES)
@pytest.mark.parametrize("kind", ["training", "inference"])
def test_each_dtype_is_the_one_the_logits_are_computed_in(kind, dtype):
    workload = workloads.build(kind, "cpu", "mlp", 8, dtype)
    workload.warm_up()  # checks the computed dtype itself
    assert workload.computed_dtype == precision.dtype_of(dtype)
    weights = next(workload.model.parameters()).dtype
    if kind == "training":  # mixed precision: float32 master weights, float16 with loss scaling
        assert weights == torch.float32
        assert (workload.scaler is not None) == (dtype == "float16")
    else:  # inference casts the model
        assert weights == precision.dtype_of(dtype)


def test_the_asv_class_times_a_reduced_precision_step_on_cpu(monkeypatch):
    small_mlp = dataclasses.replace(
        models.get("mlp"), seed_batch_size=8
    )  # bfloat16 is slow on many cpus
    monkeypatch.setitem(models.REGISTRY, "mlp", small_mlp)
    bench = benchmark_precision.TrainingPrecision()
    bench.setup("cpu", "mlp", "bfloat16")
    bench.time_step("cpu", "mlp", "bfloat16")
    assert bench.workload.batch_size == 8  # the seed batch size
    keys = list(itertools.product(devices.NAMES, ("mlp",), precision.NAMES))
    table = {"training": figures.precision_capacity("training", "TrainingPrecisionCapacity", keys)}
    assert (
        benchmark_precision.TrainingPrecisionCapacity().track_peak_memory(
            table, "cpu", "mlp", "bfloat16"
        )
        > 0
    )


# --- autocast that silently runs float32 -----------------------------------------


@pytest.fixture
def autocast_disabled(monkeypatch):
    """torch.autocast as it behaves on an unsupported device/dtype: it warns and does nothing."""
    real_autocast = torch.autocast

    def unsupported(device_type, dtype=None, **kwargs):
        warnings.warn(
            "In MPS autocast, but the target dtype is not supported. Disabling autocast.",
            UserWarning,
            stacklevel=2,
        )
        return real_autocast(device_type, dtype=dtype, enabled=False)

    monkeypatch.setattr(torch, "autocast", unsupported)


def test_autocast_that_silently_runs_float32_fails_the_combination(autocast_disabled):
    expected = (
        r"mlp training on cpu at batch 8 \(bfloat16\): asked for bfloat16 but the logits were computed"
        r" in torch.float32"
    )
    with (
        pytest.warns(UserWarning, match="Disabling autocast"),
        pytest.raises(RuntimeError, match=expected),
    ):
        suite.prepare("training", "cpu", "mlp", 8, dtype="bfloat16")


def test_a_mismatch_is_a_failure_never_a_skip(autocast_disabled):
    with pytest.warns(UserWarning), pytest.raises(RuntimeError) as caught:
        suite.prepare("training", "cpu", "mlp", 8, dtype="float16")
    assert not isinstance(caught.value, NotImplementedError)


# --- what is supported where -----------------------------------------------------


@pytest.fixture
def on(monkeypatch):
    """Pretend a torch version and macOS release."""

    def pretend(torch_version: str, macos: str = "") -> None:
        monkeypatch.setattr(torch, "__version__", torch_version)
        monkeypatch.setattr(precision.platform, "mac_ver", lambda: (macos, ("", "", ""), ""))

    return pretend


@pytest.mark.parametrize(
    ("torch_version", "macos", "device", "kind", "dtype", "reason"),
    [
        (
            "2.4.1",
            "14.5",
            "mps",
            "training",
            "float16",
            "mps float16 training .* needs torch 2.8; this is torch 2.4.1",
        ),
        (
            "2.5.0",
            "14.5",
            "mps",
            "training",
            "bfloat16",
            r"mps bfloat16 training \(autocast\) needs torch 2.6; this is torch 2.5.0",
        ),
        (
            "2.9.0",
            "13.6",
            "mps",
            "training",
            "bfloat16",
            "bfloat16 on mps needs macOS 14 or later; this is macOS 13.6",
        ),
        (
            "2.9.0",
            "13.6",
            "mps",
            "inference",
            "bfloat16",
            "bfloat16 on mps needs macOS 14 or later",
        ),
        (
            "2.2.2",
            "14.5",
            "mps",
            "inference",
            "bfloat16",
            r"mps bfloat16 inference \(bfloat16 tensors\) needs torch 2.3",
        ),
        (
            "2.3.1",
            "",
            "cpu",
            "training",
            "float16",
            "cpu float16 training .* needs torch 2.4; this is torch 2.3.1",
        ),
        (
            "2.0.1",
            "",
            "cpu",
            "inference",
            "float16",
            r"cpu float16 inference \(matrix products\) needs torch 2.1; this is torch 2.0.1",
        ),
    ],
)
def test_unsupported_combinations_have_a_reason(
    on, torch_version, macos, device, kind, dtype, reason
):
    on(torch_version, macos)
    found = precision.unsupported_reason(device, kind, dtype)
    assert found is not None
    assert re.search(reason, found), found


@pytest.mark.parametrize(
    ("torch_version", "macos", "device", "kind", "dtype"),
    [
        ("2.8.0", "15.1", "mps", "training", "float16"),
        ("2.6.0", "14.0", "mps", "training", "bfloat16"),
        ("1.13.1", "12.6", "mps", "inference", "float16"),
        ("1.12.0", "12.3", "mps", "training", "float32"),
        ("2.4.0", "", "cpu", "training", "float16"),
        ("1.12.0", "", "cpu", "training", "bfloat16"),
    ],
)
def test_supported_combinations_have_none(on, torch_version, macos, device, kind, dtype):
    on(torch_version, macos)
    assert precision.unsupported_reason(device, kind, dtype) is None


def test_cuda_without_bfloat16_says_which_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *args, **kwargs: False)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *args: "Tesla T4")
    assert precision.unsupported_reason("cuda", "training", "bfloat16") == (
        "Tesla T4 lacks bfloat16 (compute capability 8.0 or later needed)"
    )
    assert precision.unsupported_reason("cuda", "training", "float16") is None


def test_an_unsupported_dtype_is_skipped_before_anything_is_built(on, monkeypatch):
    on("2.3.1")
    monkeypatch.setattr(
        workloads, "cached", lambda *args: pytest.fail("built an unsupported combination")
    )
    with pytest.raises(
        suite.SkipNotImplemented, match=r"mlp training in float16 on cpu: cpu float16 training"
    ):
        suite.prepare("training", "cpu", "mlp", 8, dtype="float16")


def test_float32_training_adds_no_autocast_region(monkeypatch):
    """The float32 path stays what Training times: no autocast, no scaler."""
    monkeypatch.setattr(
        torch, "autocast", lambda *args, **kwargs: pytest.fail("autocast in float32")
    )
    workload = workloads.build("training", "cpu", "mlp", 8)
    workload.warm_up()
    assert workload.scaler is None
    assert isinstance(precision.autocast("cpu", "training", "float32"), contextlib.nullcontext)


def test_bfloat16_ops_and_patterns_on_a_mac_before_macos_14_are_n_a_before_torch_is_asked(
    on, monkeypatch
):
    # torch 2.3-2.8 refuse there with "MPS BFloat16 is only supported on MacOS 14 or newer", which names no lack
    # (skips.LACKING) and so would fail the row; nothing reaches torch here, whatever it would say
    on("2.8.0", "13.6")
    monkeypatch.setattr(
        devices.Device,
        "availability",
        lambda self: devices.Availability(True, f"{self}, a stand-in"),
    )
    reason = "bfloat16 on mps needs macOS 14 or later; this is macOS 13.6"
    with pytest.raises(skips.SkipNotImplemented, match=reason):
        ops.prepare("mps", "matmul", "bfloat16", "small", training=False)
    with pytest.raises(skips.SkipNotImplemented, match=reason):
        correctness.relative_error("mps", correctness.NAMES[0], "bfloat16")
