"""The accuracy guard: device results are compared with the cpu's; wrong ones fail, never get timed."""

from __future__ import annotations

import dataclasses
import itertools
import math

import pytest
import torch
from benchmarks import benchmark_instruments

from mpsbench.measure import accuracy, devices, figures, suite, tolerances, workloads


def test_relative_error_is_scaled_by_the_reference():
    reference = torch.tensor([[2.0, -4.0], [1.0, 0.5]])
    assert accuracy.relative_error(reference, reference) == 0.0
    off_by_one = reference + torch.tensor([[0.0, 0.0], [0.0, 0.4]])
    assert accuracy.relative_error(off_by_one, reference) == pytest.approx(0.4 / 4.0)


def test_non_finite_results_are_infinitely_wrong_and_shapes_must_match():
    reference = torch.ones(3)
    assert accuracy.relative_error(torch.tensor([1.0, math.nan, 1.0]), reference) == math.inf
    assert accuracy.relative_error(torch.tensor([1.0, math.inf, 1.0]), reference) == math.inf
    with pytest.raises(accuracy.AccuracyError, match=r"shape \(2,\) differs from the cpu's \(3,\)"):
        accuracy.relative_error(torch.ones(2), reference)


class _MpsResult:
    """An mps result as torch treats one: a copy to the cpu that casts to float64 on the way raises (to 2.13) or
    writes nothing (2.14: pytorch#197715); a plain copy to the cpu works."""

    def __init__(self, values: torch.Tensor) -> None:
        self.values = values

    def detach(self) -> _MpsResult:
        return self

    def cpu(self) -> torch.Tensor:
        return self.values

    def to(self, *args: object, **kwargs: object) -> torch.Tensor:
        raise TypeError(
            "Cannot convert a MPS Tensor to float64 dtype as the MPS framework doesn't support float64."
        )


def test_a_device_result_is_copied_to_the_cpu_before_it_becomes_float64():
    found = accuracy.relative_error(
        _MpsResult(torch.tensor([1.0, 2.0])), _MpsResult(torch.tensor([1.0, 2.5]))
    )
    assert found == pytest.approx(0.5 / 2.5)


def test_tolerances_are_looser_for_narrower_dtypes():
    limits = tolerances.TOLERANCES
    assert limits["float32"] < limits["float16"] < limits["bfloat16"]


@pytest.mark.parametrize("kind", ["training", "inference"])
def test_a_cpu_workload_agrees_with_its_cpu_reference(kind):
    """Same weights, batch and kernels: the comparison itself adds no error."""
    workload = workloads.build(kind, "cpu", "lenet5", 8)
    workload.warm_up()  # training: the weights have moved away from their initial values
    found = accuracy.compare(workload)
    assert found.ok
    assert found.logits_error < 1e-6 and found.loss_error < 1e-6


def test_the_comparison_sees_reduced_precision_and_stays_within_its_tolerance():
    workload = workloads.build("training", "cpu", "mlp", 8, "bfloat16")
    workload.warm_up()
    found = accuracy.compare(workload)
    assert found.tolerance == tolerances.TOLERANCES["bfloat16"]
    assert 0 < found.logits_error < found.tolerance  # bfloat16 rounding shows, and passes


def test_evaluation_leaves_a_training_workload_in_training_mode():
    workload = workloads.build("training", "cpu", "mlp", 8)
    accuracy.compare(workload)
    assert workload.model.training


@pytest.fixture
def wrong_device(monkeypatch):
    """A device whose forward returns every logit 30% too large (what a broken kernel does)."""
    real_evaluate = workloads.Workload.evaluate

    def evaluate(self, samples=None):
        logits, _ = real_evaluate(self, samples)
        wrong = logits * 1.3
        return wrong, torch.nn.functional.cross_entropy(
            wrong.float(), self.batch.head(len(wrong)).target
        )

    monkeypatch.setattr(workloads.Workload, "evaluate", evaluate)
    monkeypatch.setattr(
        accuracy, "needed", lambda device: True
    )  # check the cpu as if it were a GPU


def test_wrong_results_fail_the_timing_with_the_measured_error(wrong_device):
    expected = (
        r"mlp inference on cpu at batch 8 \(float32\) disagrees with the cpu: logits error 0\.3,"
        r" loss error [\d.e-]+ \(relative\), tolerance 0\.01; a device computing wrong results is not timed"
    )
    with pytest.raises(accuracy.AccuracyError, match=expected):
        suite.prepare("inference", "cpu", "mlp", 8)


def test_the_instrument_reports_the_error_instead_of_failing(wrong_device):
    table = {
        "inference": figures.instruments(
            "inference", "InferenceInstruments", list(itertools.product(devices.NAMES, ("lenet5",)))
        )
    }
    bench = benchmark_instruments.InferenceInstruments()
    assert bench.track_accuracy_error(table, "cpu", "lenet5") == pytest.approx(0.3, rel=1e-3)


def test_the_check_runs_once_per_workload_across_setup_calls(monkeypatch):
    monkeypatch.setattr(accuracy, "needed", lambda device: True)
    calls = []
    real_compare = accuracy.compare

    def counting_compare(workload):
        calls.append(workload)
        return real_compare(workload)

    monkeypatch.setattr(accuracy, "compare", counting_compare)
    for _ in range(3):  # asv calls setup before every sample
        suite.prepare("inference", "cpu", "mlp", 8)
    assert len(calls) == 1


@pytest.mark.parametrize(("device", "checked"), [("cpu", False), ("mps", True), ("cuda", True)])
def test_only_gpu_results_are_checked(device, checked):
    assert accuracy.needed(device) is checked


def test_the_cpu_has_no_accuracy_track():
    table = {
        "training": figures.instruments(
            "training", "TrainingInstruments", list(itertools.product(devices.NAMES, ("lenet5",)))
        )
    }
    bench = benchmark_instruments.TrainingInstruments()
    with pytest.raises(suite.SkipNotImplemented, match="the cpu is the reference"):
        bench.track_accuracy_error(table, "cpu", "lenet5")


def test_the_check_compares_only_the_first_samples_of_a_large_batch(monkeypatch):
    seen: list[int] = []
    real_forward = accuracy.models.get("mlp").forward

    def counting_forward(model, inputs):
        seen.append(len(next(iter(inputs.values()))))
        return real_forward(model, inputs)

    workload = workloads.build("inference", "cpu", "mlp", 1024)
    monkeypatch.setattr(
        workload, "spec", dataclasses.replace(workload.spec, forward=counting_forward)
    )
    assert accuracy.compare(workload).ok
    assert seen == [
        accuracy.CHECK_SAMPLES,
        accuracy.CHECK_SAMPLES,
    ]  # the device's forward, then the cpu's
