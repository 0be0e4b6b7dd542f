"""The fallback recorder: PyTorch's real warning text in, op names out; timings refuse fallbacks."""

from __future__ import annotations

import dataclasses
import itertools
import warnings

import pytest
import torch
from benchmarks import benchmark_instruments, benchmark_models

from mpsbench.core.errors import UserError
from mpsbench.measure import devices, fallback, figures, models, suite

# The warning of aten/src/ATen/mps/MPSFallback.mm as PyTorch releases have
# printed it: the 1.12 text, the 1.13-2.0 text (with its typo), the current
# text, each as Python shows a C++ warning (with the "Triggered internally" tail).
TAIL = " (Triggered internally at /Users/runner/work/pytorch/aten/src/ATen/mps/MPSFallback.mm:13.)"
RELEASE_TEXTS = [
    "The operator '{op}' is not currently supported on the MPS backend and will fall back to run on the CPU.",
    "The operator '{op}' is not currently supported on the MPS backend and will fall back to run on the CPU."
    " This may performance implications.",
    "The operator '{op}' is not currently supported on the MPS backend and will fall back to run on the CPU."
    " This may have performance implications." + TAIL,
]


def warn_fallback(op: str, text: str = RELEASE_TEXTS[-1]) -> None:
    warnings.warn(text.format(op=op), UserWarning, stacklevel=2)


@pytest.mark.parametrize("text", RELEASE_TEXTS)
@pytest.mark.parametrize(
    "op", ["aten::linalg_svd.U", "aten::_embedding_bag", "aten::upsample_bicubic2d.out"]
)
def test_every_release_text_gives_the_op_name(text, op):
    assert fallback.ops_in(text.format(op=op)) == [op]


def test_other_warnings_name_no_op():
    assert (
        fallback.ops_in("The operator 'aten::foo' is not currently implemented for the MPS device.")
        == []
    )
    assert fallback.ops_in("Casting complex values to real discards the imaginary part") == []


def test_recorder_collects_distinct_ops_in_order_and_swallows_their_warnings():
    with warnings.catch_warnings(record=True) as after:
        warnings.simplefilter("always")
        with fallback.Recorder() as recorder:
            warn_fallback("aten::linalg_svd.U")
            warn_fallback("aten::_embedding_bag", RELEASE_TEXTS[0])
            warn_fallback("aten::linalg_svd.U")  # warn-always: the same op warns on every call
    assert recorder.ops == ["aten::linalg_svd.U", "aten::_embedding_bag"]
    assert after == []  # recorded, not printed again


def test_recorder_re_emits_other_warnings_once():
    with (
        pytest.warns(UserWarning, match="something else") as caught,
        fallback.Recorder() as recorder,
    ):
        warnings.warn("something else", UserWarning, stacklevel=1)
        warnings.warn("something else", UserWarning, stacklevel=1)
        warn_fallback("aten::_embedding_bag")
    assert recorder.ops == ["aten::_embedding_bag"]
    assert [str(w.message) for w in caught] == ["something else"]


def test_recorder_makes_torch_warn_once_fire_every_time_and_restores_the_setting():
    """A real TORCH_WARN_ONCE from C++ (the fallback uses the same macro) reaches the recorder again."""
    complex_value = torch.tensor([1 + 2j])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.zeros(1).copy_(complex_value)  # spends the once-per-process warning
    before = torch.is_warn_always_enabled()
    with pytest.warns(UserWarning, match="Casting complex values to real"), fallback.Recorder():
        assert torch.is_warn_always_enabled()
        torch.zeros(1).copy_(complex_value)
    assert torch.is_warn_always_enabled() == before


def _model_that_falls_back(op: str) -> models.ModelSpec:
    """The mlp, with a forward that reports a fallback as mps would (what PyTorch prints)."""
    mlp = models.get("mlp")

    def forward(model, inputs):
        warn_fallback(op)
        return mlp.forward(model, inputs)

    return dataclasses.replace(mlp, forward=forward)


@pytest.fixture
def falls_back(monkeypatch):
    monkeypatch.setitem(models.REGISTRY, "mlp", _model_that_falls_back("aten::_embedding_bag"))
    monkeypatch.delenv(fallback.ALLOW_ENV, raising=False)


def test_warm_up_records_the_ops_and_the_timing_fails_naming_them(falls_back):
    expected = (
        r"mlp training on cpu at batch 8 \(float32\): 1 op\(s\) fell back to the cpu during warm-up"
        r" \(aten::_embedding_bag\): not a pure device time;"
        r" set MPSBENCH_ALLOW_FALLBACK=1 to time it anyway"
    )
    with pytest.raises(fallback.FallbackError, match=expected):
        suite.prepare("training", "cpu", "mlp", 8)


@pytest.mark.parametrize("value", ["1", "true", "yes", "on", " True "])
def test_every_spelling_of_on_allows_timing_a_combination_that_fell_back(
    falls_back, monkeypatch, value
):
    monkeypatch.setenv(fallback.ALLOW_ENV, value)
    workload = suite.prepare("inference", "cpu", "mlp", 8)
    assert workload.fallback_ops == ("aten::_embedding_bag",)


@pytest.mark.parametrize("value", ["0", "false", "no", "off", "OFF", ""])
def test_every_spelling_of_off_refuses_a_combination_that_fell_back(monkeypatch, value):
    monkeypatch.setenv(fallback.ALLOW_ENV, value)
    with pytest.raises(fallback.FallbackError, match="fell back to the cpu"):
        fallback.refuse("mlp training on mps", ["aten::_embedding_bag"])


def test_a_switch_neither_on_nor_off_is_refused_in_one_line(monkeypatch):
    monkeypatch.setenv(fallback.ALLOW_ENV, "maybe")
    with pytest.raises(
        UserError,
        match=r"^MPSBENCH_ALLOW_FALLBACK='maybe' is neither on \(1, true, yes, on\)"
        r" nor off \(0, false, no, off, or unset\)$",
    ):
        fallback.refuse("mlp training on mps", ["aten::_embedding_bag"])


def test_the_track_counts_the_ops_that_fell_back(falls_back):
    table = {
        "training": figures.instruments(
            "training", "TrainingInstruments", list(itertools.product(devices.NAMES, ("mlp",)))
        )
    }
    assert benchmark_instruments.TrainingInstruments().track_fallback_ops(table, "cpu", "mlp") == 1


def test_a_real_cpu_workload_has_no_fallbacks():
    table = {
        "inference": figures.instruments(
            "inference", "InferenceInstruments", list(itertools.product(devices.NAMES, ("mlp",)))
        )
    }
    assert benchmark_instruments.InferenceInstruments().track_fallback_ops(table, "cpu", "mlp") == 0


@pytest.mark.parametrize(("value", "on"), [("1", 1), ("0", 0), ("", 0)])
def test_the_environment_records_whether_fallback_was_on(monkeypatch, value, on):
    monkeypatch.setenv(fallback.ENABLE_ENV, value)
    assert benchmark_models.Environment().track_mps_fallback_enabled() == on


def test_the_environment_records_the_watermark_ratio_or_skips_when_unset(monkeypatch):
    monkeypatch.setenv("PYTORCH_MPS_HIGH_WATERMARK_RATIO", "1.4")
    assert benchmark_models.Environment().track_mps_high_watermark_ratio() == 1.4
    monkeypatch.delenv("PYTORCH_MPS_HIGH_WATERMARK_RATIO")
    with pytest.raises(suite.SkipNotImplemented, match="unset: torch's default applies"):
        benchmark_models.Environment().track_mps_high_watermark_ratio()
