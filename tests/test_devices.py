"""The device layer: cpu for real; mps and cuda through stand-ins that record calls."""

from __future__ import annotations

import contextlib
import dataclasses
import types

import pytest
import torch
from tests import fakes

from mpsbench.core.errors import UserError
from mpsbench.measure import devices, models, workloads


def fake_mps(
    recorder: fakes.Recorder, allocated: list[int], driver: int = 7 * devices.MIB
) -> types.SimpleNamespace:
    """A stand-in for torch.mps (torch >= 2.0): memory readings come from `allocated`."""
    readings = iter(allocated)
    return types.SimpleNamespace(
        synchronize=recorder.fn("mps.synchronize"),
        current_allocated_memory=recorder.fn(
            "mps.current_allocated_memory", lambda: next(readings)
        ),
        driver_allocated_memory=recorder.fn("mps.driver_allocated_memory", driver),
        empty_cache=recorder.fn("mps.empty_cache"),
        manual_seed=recorder.fn("mps.manual_seed"),
    )


# --- cpu, for real ---------------------------------------------------------


def test_cpu_is_usable_and_reports_its_threads():
    found = devices.get("cpu").availability()
    assert found.usable
    assert f"{torch.get_num_threads()} threads" in found.reason
    assert devices.cpu_threads() == torch.get_num_threads() >= 1


def test_cpu_memory_is_the_process_rss():
    reading = devices.get("cpu").memory()
    assert (
        reading.current is not None
        and reading.current > 10 * devices.MIB
        and reading.driver is None
    )


def test_cpu_peak_sees_a_large_allocation_inside_the_step():
    def step(probe):
        block = torch.ones(64 * devices.MIB // 4)  # 64 MiB touched, freed when the step returns
        probe()
        del block

    allocated, driver = devices.peaks_over(devices.get("cpu"), step)
    assert allocated is not None and allocated >= 64 * devices.MIB and driver is None


def test_unknown_device_is_one_line_with_the_choices():
    with pytest.raises(UserError, match=r"unknown device 'gpu'; choose one of: cpu, mps, cuda"):
        devices.get("gpu").availability()


def test_seeding_makes_draws_repeat():
    devices.get("cpu").seed(3)
    first = torch.rand(4)
    devices.get("cpu").seed(3)
    assert torch.equal(first, torch.rand(4))


# --- mps through stand-ins ---------------------------------------------------


def test_mps_sync_and_memory_use_torch_mps_in_order(monkeypatch):
    recorder = fakes.Recorder()
    monkeypatch.setattr(
        torch, "mps", fake_mps(recorder, [5 * devices.MIB, 9 * devices.MIB, 4 * devices.MIB])
    )
    peaks = devices.peaks_over(
        devices.get("mps"), lambda probe: probe()
    )  # mps has no peak to reset: no call
    devices.get("mps").empty_cache()
    sample = [
        "mps.current_allocated_memory",
        "mps.driver_allocated_memory",
    ]  # a sample reads both figures
    assert recorder.calls == [
        "mps.synchronize",
        *sample,
        *sample,
        "mps.synchronize",
        *sample,
        "mps.empty_cache",
    ]
    assert peaks == (9 * devices.MIB, 7 * devices.MIB)


def test_mps_peak_is_the_largest_sample(monkeypatch):
    recorder = fakes.Recorder()
    monkeypatch.setattr(
        torch, "mps", fake_mps(recorder, [2 * devices.MIB, 11 * devices.MIB, 3 * devices.MIB])
    )
    allocated, _ = devices.peaks_over(
        devices.get("mps"), lambda probe: None
    )  # read before and after the step
    assert allocated == 11 * devices.MIB  # the first reading (2 MiB) is lower


def test_mps_before_torch_2_synchronizes_by_read_back(monkeypatch):
    """torch 1.12/1.13 have no torch.mps: a read-back of a tiny tensor drains the queue."""
    monkeypatch.delattr(torch, "mps", raising=False)
    recorder = fakes.Recorder()
    tensor = types.SimpleNamespace(cpu=recorder.fn("tensor.cpu"))

    def fake_zeros(*shape, device=None):
        recorder.calls.append(f"zeros on {device}")
        return tensor

    monkeypatch.setattr(torch, "zeros", fake_zeros)
    devices.get("mps").synchronize()
    assert recorder.calls == ["zeros on mps", "tensor.cpu"]
    assert devices.get("mps").memory() == devices.MemoryReading(None)
    assert devices.peaks_over(devices.get("mps"), lambda probe: probe()) == (None, None)
    devices.get("mps").empty_cache()  # nothing to call, and no AttributeError


def test_mps_available_but_failing_first_op_is_unusable(monkeypatch):
    backend = types.SimpleNamespace(is_built=lambda: True, is_available=lambda: True)
    monkeypatch.setattr(torch.backends, "mps", backend)
    real_ones = torch.ones

    def ones(*shape, device=None, **kwargs):
        if device == "mps":
            raise RuntimeError("MPS backend: failed to allocate private MTLBuffer\nmore detail")
        return real_ones(*shape, device=device, **kwargs)

    monkeypatch.setattr(torch, "ones", ones)
    found = devices.get("mps").availability()
    assert not found.usable
    first_line = "MPS backend: failed to allocate private MTLBuffer"
    assert found.reason == f"mps reported available but a first op failed: {first_line}"


def test_mps_unusable_on_this_platform_says_why():
    found = devices.get("mps").availability()
    if found.usable:  # pragma: no cover - only on a Mac
        pytest.skip("mps is usable here")
    assert "MPS" in found.reason


# --- cuda through stand-ins --------------------------------------------------


def test_cuda_peak_resets_then_reads_the_allocator_peak(monkeypatch):
    recorder = fakes.Recorder()
    for name, result in [
        ("synchronize", None),
        ("reset_peak_memory_stats", None),
        ("memory_allocated", 3 * devices.MIB),
        ("max_memory_allocated", 12 * devices.MIB),
        ("max_memory_reserved", 20 * devices.MIB),
        ("empty_cache", None),
    ]:
        monkeypatch.setattr(torch.cuda, name, recorder.fn(f"cuda.{name}", result))
    peaks = devices.peaks_over(devices.get("cuda"), lambda probe: recorder.calls.append("step"))
    devices.get("cuda").empty_cache()
    assert recorder.calls == [
        "cuda.synchronize",
        "cuda.reset_peak_memory_stats",
        "cuda.memory_allocated",
        "step",
        "cuda.synchronize",
        "cuda.memory_allocated",
        "cuda.max_memory_allocated",
        "cuda.max_memory_reserved",
        "cuda.empty_cache",
    ]
    assert peaks == (12 * devices.MIB, 20 * devices.MIB)


def test_cuda_absent_says_why():
    if torch.cuda.is_available():  # pragma: no cover - only on a GPU machine
        pytest.skip("cuda is usable here")
    assert not devices.get("cuda").availability().usable
    assert devices.get("cuda").availability().reason in (
        "no CUDA device found",
        f"torch {torch.__version__} has no CUDA",
    )


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (
            RuntimeError(
                "MPS backend out of memory (MPS allocated: 17.00 GB, other allocations: 1 GB)"
            ),
            True,
        ),
        (RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB"), True),
        (MemoryError(), True),
        (
            RuntimeError(
                "[enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: can't allocate memory:"
                " you tried to allocate 4294967296 bytes. Error code 12 (Cannot allocate memory)"
            ),
            True,
        ),
        (
            RuntimeError("DefaultCPUAllocator: not enough memory: you tried to allocate 8 bytes"),
            True,
        ),
        (RuntimeError("shape mismatch"), False),
        (ValueError("out of memory"), False),
    ],
)
def test_out_of_memory_is_recognised_by_type_and_message(error, expected):
    assert devices.is_out_of_memory(error) is expected


def test_cuda_out_of_memory_error_type_is_recognised():
    oom = getattr(torch.cuda, "OutOfMemoryError", None)
    assert oom is not None  # torch >= 1.13 in this environment
    assert devices.is_out_of_memory(oom("Tried to allocate 20.00 GiB"))


def test_weights_are_created_on_cuda_directly_and_on_the_cpu_elsewhere():
    on_cuda = devices.get("cuda").creating()
    assert (
        isinstance(on_cuda, torch.device) and on_cuda.type == "cuda"
    )  # torch 2.0+: a context manager
    for name in ("cpu", "mps"):  # mps: an initializer it lacks must not fail a timing
        assert isinstance(devices.get(name).creating(), contextlib.nullcontext)


def test_a_workload_builds_its_model_inside_creating_on(monkeypatch):
    spec = models.get("mlp")
    state = {"inside": None, "built_inside": None}

    @contextlib.contextmanager
    def recording(name):
        state["inside"] = name
        yield
        state["inside"] = None

    def build():
        state["built_inside"] = state["inside"]
        return spec.build()

    monkeypatch.setattr(workloads.devices.Device, "creating", recording)
    workload = workloads.Workload("training", "cpu", dataclasses.replace(spec, build=build), 8)
    assert state["built_inside"] == "cpu" and state["inside"] is None
    assert next(workload.model.parameters()).device.type == "cpu"
