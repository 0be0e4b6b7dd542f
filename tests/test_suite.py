"""suite.prepare turns every reason a combination cannot run into asv's outcome."""

from __future__ import annotations

import types

import pytest
from benchmarks import common

from mpsbench.core import settings
from mpsbench.measure import devices, figures, suite, workloads


def test_step_timer_divides_the_clock_by_the_steps_per_call(monkeypatch):
    monkeypatch.setattr(common.time, "perf_counter", lambda: 10.0)
    assert common.StepTimer(20)() == 0.5


def test_prepare_builds_once_and_caches_across_setup_calls():
    first = suite.prepare("training", "cpu", "mlp", 8)
    again = suite.prepare("training", "cpu", "mlp", 8)
    assert first is again


def test_compare_and_bisect_time_a_cpu_row_one_step_a_call_and_a_gpu_row_as_recorded(monkeypatch):
    """settings.SINGLE_STEPS, which compare and bisect set for a cpu row's processes (docs/explanation/the-rule.md)."""
    cpu = suite.prepare("training", "cpu", "lenet5", 8)
    gpu = types.SimpleNamespace(
        device=devices.Device.CUDA, spec=cpu.spec
    )  # only what ready() reads
    timed = common._TimedSteps()
    for workload in (cpu, gpu):
        timed.ready(workload)  # type: ignore[arg-type]
        assert (
            timed.steps == timed.timer.steps_per_call == cpu.spec.steps_per_call == 20
        )  # as asv run records
    monkeypatch.setenv(settings.SINGLE_STEPS, "1")
    timed.ready(cpu)
    assert timed.steps == timed.timer.steps_per_call == 1
    timed.ready(gpu)  # type: ignore[arg-type]
    assert timed.steps == 20  # a GPU's synchronize is what the 20 steps spread


def test_an_absent_device_is_skipped_with_the_reason():
    if devices.get("cuda").usable:  # pragma: no cover - GPU machines
        pytest.skip("cuda is present")
    with pytest.raises(suite.SkipNotImplemented, match="cuda is not usable here: "):
        suite.prepare("training", "cuda", "mlp", 1024)


def test_torch_lacking_an_op_fails_the_combination_with_the_op_name(monkeypatch):
    def missing_op(*args):
        raise NotImplementedError(
            "The operator 'aten::_foo' is not currently implemented for the MPS device"
        )

    monkeypatch.setattr(workloads, "cached", missing_op)
    with pytest.raises(
        RuntimeError, match="torch lacks an op: The operator 'aten::_foo'"
    ) as caught:
        suite.prepare("training", "cpu", "mlp", 8)
    assert not isinstance(caught.value, NotImplementedError)  # a failure, never an n/a


def test_out_of_memory_is_skipped_with_the_reason(monkeypatch):
    def too_big(*args):
        raise RuntimeError("MPS backend out of memory (MPS allocated: 18.00 GB)\nTip: ...")

    monkeypatch.setattr(workloads, "cached", too_big)
    expected = r"mlp at batch 8 does not fit in cpu memory: MPS backend out of memory \(MPS allocated: 18.00 GB\)$"
    with pytest.raises(suite.SkipNotImplemented, match=expected):
        suite.prepare("training", "cpu", "mlp", 8)


def test_other_errors_fail_the_combination(monkeypatch):
    def broken(*args):
        raise ValueError("shape mismatch")

    monkeypatch.setattr(workloads, "cached", broken)
    with pytest.raises(ValueError, match="shape mismatch"):
        suite.prepare("training", "cpu", "mlp", 8)


def test_throughput_and_peak_memory_are_positive_on_cpu():
    workload = suite.prepare("inference", "cpu", "mlp", 8)
    assert suite.throughput(workload) > 0
    assert figures.peak_memory(workload) > 10
