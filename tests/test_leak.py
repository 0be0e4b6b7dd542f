"""Memory instruments: the leak slope (a workload that keeps its outputs climbs) and driver memory."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import types

import pytest
import torch
from benchmarks import benchmark_instruments
from tests import fakes

from mpsbench.measure import devices, figures, leak, models, suite, workloads

MIB = devices.MIB


# --- the slope ---------------------------------------------------------------


def test_the_slope_of_a_straight_line_is_its_growth_per_100_steps():
    readings = [500 * MIB + step * MIB // 4 for step in range(40)]  # a quarter MiB a step
    assert leak.slope_mib_per_100_steps(readings) == pytest.approx(25.0)


def test_flat_readings_have_no_slope_and_noise_averages_out():
    assert leak.slope_mib_per_100_steps([300 * MIB] * 30) == 0.0
    jitter = [300 * MIB + (MIB if step % 2 else -MIB) for step in range(100)]  # +-1 MiB, no trend
    assert abs(leak.slope_mib_per_100_steps(jitter)) < 0.1


def test_one_reading_is_not_a_slope():
    with pytest.raises(ValueError, match="a slope needs at least 2 readings, got 1"):
        leak.slope_mib_per_100_steps([MIB])


# --- cpu, for real (process RSS) ---------------------------------------------

OUTPUT_MIB = 4  # each step's output: 64 x 16384 floats
STEPS = 40

# Run in a fresh process: RSS only grows when the heap has no free memory of the
# right size left, and earlier tests in this process may have left plenty.
LEAK_PROGRAM = """
import contextlib, ctypes, json, torch
from torch import nn
from mpsbench.measure import leak, models, workloads

def make_batch(batch_size, gen):
    return models.Batch({"input": torch.randn(batch_size, 256, generator=gen)}, torch.zeros(batch_size, dtype=torch.long))

spec = models.ModelSpec(
    name="wide_linear", description="test only", build=lambda: nn.Linear(256, 16384), make_batch=make_batch,
    num_classes=16384, seed_batch_size=64, batch_sizes=(64,), large=False,
)
workload = workloads.Workload("inference", "cpu", spec, 64)
workload.warm_up()
kept = []
leaking = leak.slope_mib_per_100_steps(leak.record(lambda: kept.append(workload.step()), "cpu", STEPS))
kept.clear()  # the deliberate leak above: a reference to every output
# glibc may hand those 160 MiB back to the kernel at any later moment, which read as a negative slope in
# the clean recording (-54 MiB/100 steps in one CI run on a loaded machine): hand them back now.
with contextlib.suppress(OSError, AttributeError):  # not glibc: nothing to hand back this way
    ctypes.CDLL("libc.so.6").malloc_trim(0)
clean = leak.slope_mib_per_100_steps(leak.record(workload.step, "cpu", STEPS))
print(json.dumps({"leaking": leaking, "clean": clean}))
"""


def test_a_workload_that_keeps_its_outputs_leaks_and_the_same_one_clean_does_not():
    program = LEAK_PROGRAM.replace("STEPS", str(STEPS))
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stderr
    slopes = json.loads(done.stdout.strip().splitlines()[-1])
    expected = OUTPUT_MIB * leak.PER  # 400 MiB per 100 steps
    # Wide margins on purpose: RSS moves in allocator chunks, never by exact tensor sizes.
    assert slopes["leaking"] > expected / 2
    assert abs(slopes["clean"]) < expected / 10


def test_a_registry_workload_measured_by_the_track_is_flat():
    workload = workloads.build("inference", "cpu", "mlp", 8)
    workload.warm_up()
    # Outputs here are 320 bytes: what the RSS shows is allocator noise, a few MiB at most.
    assert abs(leak.measure(workload, steps=40)) < 25


def test_large_models_run_fewer_leak_steps():
    small = types.SimpleNamespace(spec=models.get("mlp"))
    large = types.SimpleNamespace(spec=models.get("vgg16"))
    assert leak.steps_for(large) < leak.steps_for(small)  # type: ignore[arg-type]


# --- mps and cuda through stand-ins ------------------------------------------------


def test_mps_syncs_before_each_allocator_reading(monkeypatch):
    recorder = fakes.Recorder()
    allocated = iter(100 * MIB + step * 2 * MIB for step in range(5))  # 2 MiB a step
    monkeypatch.setattr(
        torch,
        "mps",
        types.SimpleNamespace(
            synchronize=recorder.fn("mps.synchronize"),
            current_allocated_memory=recorder.fn(
                "mps.current_allocated_memory", lambda: next(allocated)
            ),
            driver_allocated_memory=recorder.fn("mps.driver_allocated_memory", 0),
        ),
        raising=False,
    )
    step = recorder.fn("step")
    readings = leak.record(step, "mps", 5)
    per_step = [
        "step",
        "mps.synchronize",
        "mps.current_allocated_memory",
        "mps.driver_allocated_memory",
    ]
    assert recorder.calls == ["mps.synchronize", *per_step * 5]
    assert leak.slope_mib_per_100_steps(readings) == pytest.approx(200.0)


def test_mps_before_torch_2_is_n_a_with_the_reason_not_a_slope_of_the_process_memory(monkeypatch):
    # its allocator's heaps are private Metal storage, outside the process's resident memory: an RSS slope would
    # read a leak on the device as none
    monkeypatch.delattr(torch, "mps", raising=False)
    monkeypatch.setattr(torch, "__version__", "1.13.1")
    monkeypatch.setattr(
        devices.Device, "synchronize", lambda self: None
    )  # torch 1.13 would read a tensor back
    with pytest.raises(
        suite.SkipNotImplemented,
        match=r"no memory reading for mps: torch 1\.13\.1 keeps no mps memory",
    ):
        leak.record(lambda: None, "mps", 3)


def test_cuda_reads_memory_allocated_after_a_synchronize(monkeypatch):
    recorder = fakes.Recorder()
    allocated = iter([7 * MIB, 7 * MIB, 7 * MIB])
    monkeypatch.setattr(torch.cuda, "synchronize", recorder.fn("cuda.synchronize"))
    monkeypatch.setattr(
        torch.cuda,
        "memory_allocated",
        recorder.fn("cuda.memory_allocated", lambda: next(allocated)),
    )
    readings = leak.record(recorder.fn("step"), "cuda", 3)
    per_step = ["step", "cuda.synchronize", "cuda.memory_allocated"]
    assert recorder.calls == ["cuda.synchronize", *per_step * 3]
    assert leak.slope_mib_per_100_steps(readings) == 0.0


# --- driver memory -----------------------------------------------------------------


def _probing_workload(device: str, recorder: fakes.Recorder) -> types.SimpleNamespace:
    """A stand-in workload whose step probes memory twice, as a training step does."""

    def step(probe=None):
        recorder.calls.append("step")
        probe()
        probe()

    return types.SimpleNamespace(device=devices.get(device), step=step)


def test_mps_driver_memory_is_the_largest_driver_sample_around_the_step(monkeypatch):
    recorder = fakes.Recorder()
    driver = itertools.cycle(
        [mib * MIB for mib in (40, 70, 90, 60)]
    )  # before, forward, backward, after
    monkeypatch.setattr(
        torch,
        "mps",
        types.SimpleNamespace(
            synchronize=recorder.fn("mps.synchronize"),
            current_allocated_memory=recorder.fn("mps.current_allocated_memory", 30 * MIB),
            driver_allocated_memory=recorder.fn(
                "mps.driver_allocated_memory", lambda: next(driver)
            ),
        ),
        raising=False,
    )
    workload = _probing_workload("mps", recorder)
    assert figures.driver_memory(workload) == 90.0  # type: ignore[arg-type]
    sample = ["mps.current_allocated_memory", "mps.driver_allocated_memory"]
    assert recorder.calls == [
        "mps.synchronize",
        *sample,
        "step",
        *sample,
        *sample,
        "mps.synchronize",
        *sample,
    ]
    assert figures.peak_memory(workload) == 30.0  # type: ignore[arg-type]


def test_cuda_driver_memory_is_the_reserved_peak_since_the_reset(monkeypatch):
    recorder = fakes.Recorder()
    for name, result in [
        ("synchronize", None),
        ("reset_peak_memory_stats", None),
        ("memory_allocated", MIB),
        ("max_memory_allocated", 5 * MIB),
        ("max_memory_reserved", 8 * MIB),
    ]:
        monkeypatch.setattr(torch.cuda, name, recorder.fn(f"cuda.{name}", result))
    workload = _probing_workload("cuda", recorder)
    assert figures.driver_memory(workload) == 8.0  # type: ignore[arg-type]
    assert recorder.calls.index("cuda.reset_peak_memory_stats") < recorder.calls.index("step")
    assert recorder.calls[-2:] == ["cuda.max_memory_allocated", "cuda.max_memory_reserved"]
    assert figures.peak_memory(workload) == 5.0  # type: ignore[arg-type]


def test_the_cpu_tracks_skip_driver_memory_and_report_a_flat_leak_slope(monkeypatch):
    monkeypatch.setattr(
        leak, "STEPS_SMALL", 20
    )  # the asv track runs 200; the wiring is what is tested
    table = {
        "inference": figures.instruments(
            "inference", "InferenceInstruments", list(itertools.product(devices.NAMES, ("mlp",)))
        )
    }
    bench = benchmark_instruments.InferenceInstruments()
    with pytest.raises(suite.SkipNotImplemented, match="cpu keeps no driver memory counter"):
        bench.track_driver_memory(table, "cpu", "mlp")
    assert abs(bench.track_leak(table, "cpu", "mlp")) < 25
