"""The largest power-of-two batch whose training or inference step fits.

The seeds found full BERT fine-tuning fit only batch 1 on an M1 while a frozen
encoder fit 64. See src/mpsbench/measure/maxbatch.py for how each device runs out of
memory and how the search survives it, and docs/explanation/workloads.md for reading the
numbers.
"""

from mpsbench.measure import devices, maxbatch, suite, workloads


class MaxBatch:
    """Largest batch size in 1, 2, 4, ..., 4096 whose step completes (doubling, stop at the first OOM).

    4096 (``maxbatch.CEILING``) means everything up to the ceiling fit; 0 means not even batch 1 did.
    How each device runs out of memory, and what its number means: docs/explanation/workloads.md.
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
