"""The largest power-of-two batch whose training or inference step fits: issue #9.

The seeds found full BERT fine-tuning fit only batch 1 on an M1 while a frozen
encoder fit 64. See src/mpsbench/measure/maxbatch.py for how each device runs out of
memory and how the search survives it, and docs/workloads.md for reading the
numbers.
"""

from mpsbench.measure import devices, maxbatch, suite, workloads


class MaxBatch:
    """Largest batch size in 1, 2, 4, ..., 4096 whose step completes (doubling, stop at the first OOM).

    Training runs two steps per try (the optimizer state exists from the
    second), inference one. 4096 (``maxbatch.CEILING``) means everything up to
    the ceiling fit; 0 means not even batch 1 did.

    cuda: torch.cuda.OutOfMemoryError ends the search; default selection.
    mps: "MPS backend out of memory", raised at PYTORCH_MPS_HIGH_WATERMARK_RATIO
    times the recommended working set (default 1.7, past it into swap; 0.0 turns
    the limit off, and the search then ends at the ceiling); the ratio in effect
    is recorded with every run by ``Environment.track_mps_high_watermark_ratio``
    (benchmark_models); full sweep only.
    cpu: a spawned child limited by RLIMIT_AS to its state after batch 1 plus
    ``maxbatch.CPU_MEMORY_BUDGET`` (2 GiB); full sweep only, Linux only.
    """

    params = (devices.NAMES, maxbatch.MODELS, workloads.KINDS)
    param_names = ("device", "model", "kind")
    version = "1"  # bump when what is measured changes, not for cosmetic edits
    rounds = 1  # the search is deterministic up to the device: a second round repeats it
    timeout = 3600  # a cpu search steps the model at every size up to its budget

    def setup(self, device, model, kind):
        suite.selected(type(self).__name__, device, model, kind)
        maxbatch.require(device, model, kind)

    def track_largest_batch(self, device, model, kind):
        """The largest power-of-two batch size whose step completed on the device."""
        return maxbatch.measure(device, model, kind).largest

    track_largest_batch.unit = "samples"

