"""The calibration slowdown (tools/calibration): parsed strictly, applied only to the named model, inside the timed call."""

from __future__ import annotations

import pytest
from tools.calibration import slowdown as inject

from mpsbench.measure import workloads


def test_unset_means_no_slowdown(monkeypatch):
    monkeypatch.delenv(inject.INJECT_ENV, raising=False)
    assert inject.slowdown_for("mlp") == 0.0


def test_only_the_named_model_is_slowed(monkeypatch):
    monkeypatch.setenv(inject.INJECT_ENV, "resnet50:0.05")
    assert inject.slowdown_for("resnet50") == 0.05
    assert inject.slowdown_for("mlp") == 0.0


@pytest.mark.parametrize(
    "value", ["resnet50", "resnet50:", ":0.05", "resnet50:x", "resnet50:1.5", "resnet50:0"]
)
def test_malformed_values_are_refused_with_the_value(monkeypatch, value):
    monkeypatch.setenv(inject.INJECT_ENV, value)
    with pytest.raises(inject.InjectError, match="MODEL:FRACTION"):
        inject.slowdown_for("resnet50")


@pytest.fixture
def installed(monkeypatch):
    """The calibration's wrappers on the workloads, undone after the test."""
    for name in ("warm_up", "run"):
        monkeypatch.setattr(workloads.Workload, name, getattr(workloads.Workload, name))
    inject.install()


def test_the_suite_has_no_hook_of_its_own(monkeypatch):
    monkeypatch.setenv(inject.INJECT_ENV, "mlp:0.25")
    workload = workloads.build("training", "cpu", "mlp", 8)
    workload.warm_up()
    assert not hasattr(workload, "injected_seconds")


def test_injected_wait_is_a_share_of_the_warm_step_and_scales_with_steps(monkeypatch, installed):
    monkeypatch.setenv(inject.INJECT_ENV, "mlp:0.25")
    workload = workloads.build("training", "cpu", "mlp", 8)
    workload.warm_up()
    assert workload.injected_seconds > 0
    waits: list[float] = []
    monkeypatch.setattr(inject.time, "sleep", waits.append)
    workload.run(3)
    assert waits == [pytest.approx(workload.injected_seconds * 3)]


def test_other_models_run_without_a_wait(monkeypatch, installed):
    monkeypatch.setenv(inject.INJECT_ENV, "resnet50:0.05")
    workload = workloads.build("training", "cpu", "mlp", 8)
    workload.warm_up()
    waits: list[float] = []
    monkeypatch.setattr(inject.time, "sleep", waits.append)
    workload.run(3)
    assert workload.injected_seconds == 0.0 and waits == []
