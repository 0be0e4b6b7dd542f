"""The largest-batch search: stops at the first real out-of-memory error, holds nothing afterwards."""

from __future__ import annotations

import gc
import weakref

import pytest
import torch
from benchmarks import benchmark_maxbatch

from mpsbench.measure import maxbatch, selection, suite

CUDA_OOM_TEXT = (
    "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.19 GiB"
    " of which 1.06 GiB is free."
)
MPS_OOM_TEXT = (
    "MPS backend out of memory (MPS allocated: 17.00 GB, other allocations: 1.20 GB, max allowed:"
    " 18.13 GB). Tried to allocate 256.00 MB on private pool. Use PYTORCH_MPS_HIGH_WATERMARK_RATIO=0.0"
    " to disable upper limit for memory allocations (may cause system failure)."
)
OUT_OF_MEMORY = {
    "cuda": lambda: torch.cuda.OutOfMemoryError(CUDA_OOM_TEXT),
    "mps": lambda: RuntimeError(MPS_OOM_TEXT),
    "cpu under RLIMIT_AS": lambda: RuntimeError(
        "[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate memory:"
        " you tried to allocate 1073741824 bytes. Error code 12 (Cannot allocate memory)"
    ),
}


class StandIn:
    """A step that allocates in proportion to the batch and fails like a full device above ``fits``."""

    def __init__(self, fits: int, error) -> None:
        self.fits = fits
        self.error = error
        self.allocations: list[weakref.ref] = []
        self.released = 0

    def __call__(self, batch_size: int) -> None:
        activations = torch.empty(
            batch_size, 1024
        )  # held by this frame, so by the error's traceback
        self.allocations.append(weakref.ref(activations))
        if batch_size > self.fits:
            raise self.error()

    def release(self) -> None:
        self.released += 1


@pytest.mark.parametrize("kind", list(OUT_OF_MEMORY))
@pytest.mark.parametrize("fits", [1, 32, 100])
def test_the_search_returns_the_largest_power_of_two_that_fits_and_holds_nothing(kind, fits):
    stand_in = StandIn(fits, OUT_OF_MEMORY[kind])
    found = maxbatch.search(stand_in, stand_in.release)
    expected = 1 << (fits.bit_length() - 1)  # the largest power of two not above fits
    assert found.largest == expected
    assert found.tried[-1] == 2 * expected and found.tried == tuple(
        1 << n for n in range(len(found.tried))
    )
    assert found.error == str(OUT_OF_MEMORY[kind]())  # the error's text, kept as a string only
    assert stand_in.released == len(found.tried)  # memory freed after every try, failed or not
    assert all(allocation() is None for allocation in stand_in.allocations)


def test_a_step_that_always_fits_stops_at_the_ceiling():
    stand_in = StandIn(fits=10**9, error=None)
    found = maxbatch.search(stand_in, stand_in.release, ceiling=maxbatch.CEILING)
    assert (
        found.largest == maxbatch.CEILING == 4096 and found.error is None
    )  # None: the ceiling ended it
    assert len(found.tried) == 13


def test_batch_one_not_fitting_gives_zero():
    found = maxbatch.search(StandIn(0, OUT_OF_MEMORY["cuda"]), lambda: None)
    assert (found.largest, found.tried) == (0, (1,))


@pytest.mark.parametrize(
    "error", [ValueError("a bug"), RuntimeError("shape mismatch in mat1 and mat2")]
)
def test_errors_other_than_out_of_memory_are_never_swallowed(error):
    def broken(batch_size):
        raise error

    with pytest.raises(type(error), match=str(error)):
        maxbatch.search(broken, lambda: None)


def test_every_try_says_on_stderr_how_it_went(capsys):
    stand_in = StandIn(2, OUT_OF_MEMORY["cpu under RLIMIT_AS"])
    maxbatch.search(stand_in, stand_in.release, what="mlp training on cpu")
    lines = capsys.readouterr().err.splitlines()
    assert [line.split(" (")[0] for line in lines] == [
        "mpsbench maxbatch: mlp training on cpu: batch 1 fits",
        "mpsbench maxbatch: mlp training on cpu: batch 2 fits",
        "mpsbench maxbatch: mlp training on cpu: batch 4 does not fit",
    ]


def test_a_real_workload_is_searched_and_dropped_afterwards():
    step = maxbatch.SizedStep("training", "cpu", "mlp")
    found = maxbatch.search(step, step.release, ceiling=8)
    assert (found.largest, found.tried) == (8, (1, 2, 4, 8))
    model = weakref.ref(step.workload.model)
    step.close()
    gc.collect()
    assert model() is None


@pytest.mark.slow
def test_the_cpu_search_in_a_memory_limited_child_stops_at_the_limit():
    # MLP training at batch 4096 needs about a hundred MiB beyond batch 1 (its input alone is
    # 16 MiB): a 16 MiB budget stops it below. (At a 1024 ceiling the search once fit whole in a
    # loaded full run: how much the allocator holds back at batch 1 varies from run to run.)
    found = maxbatch.measure("cpu", "mlp", "training", ceiling=4096, budget=16 * 2**20)
    assert 1 <= found.largest < 4096
    assert "DefaultCPUAllocator" in found.error


def test_the_benchmark_skips_an_absent_device_with_the_reason(monkeypatch):
    if maxbatch.devices.get("cuda").usable:  # pragma: no cover - GPU machines
        pytest.skip("cuda is present")
    monkeypatch.setenv(
        selection.FULL_SWEEP_ENV, "1"
    )  # the GPUs' searches are in the full sweep only
    with pytest.raises(suite.SkipNotImplemented, match="cuda is not usable here"):
        benchmark_maxbatch.MaxBatch().setup("cuda", "bert_base", "training")


def test_params_are_fixed_and_cover_the_seed_models_and_both_kinds():
    cls = benchmark_maxbatch.MaxBatch
    assert cls.params == (
        ("cpu", "mps", "cuda"),
        ("resnet50", "vgg16", "bert_base", "bert_base_frozen"),
        ("training", "inference"),
    )
    assert cls.version
