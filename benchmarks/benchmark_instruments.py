"""What a stopwatch does not show: cpu fallbacks, driver memory, leaks, wrong results (issue #6).

Every model runs at its seed batch size (models.ModelSpec.seed_batch_size);
on the cpu its small models, on a GPU mlp, resnet50 and bert_base
(suite.GPU_INSTRUMENT_MODELS), unless MPSBENCH_FULL=1. None of these refuses a
combination the way the timings do: they report the very facts the timings
are refused for.
"""

from mpsbench import devices, instruments, models, suite


class _Instruments:
    """Shared by TrainingInstruments and InferenceInstruments: four readings of one warmed-up workload.

    Measured once per run in ``setup_cache`` (src/mpsbench/instruments.py):
    one process builds each selected combination in turn and takes all four
    readings; the ``track_`` processes look theirs up. ``setup_cache``
    measures the class's whole selection even when ``-b`` picks one.
    """

    kind = "training"
    param_names = ("device", "model")
    left_out = staticmethod(suite.instruments_left_out)  # the selection setup_cache measures
    version = "1"
    rounds = 1  # a lookup: a second round would read the same cache again
    timeout = 60  # per lookup; the measuring happens in setup_cache
    SETUP_CACHE_TIMEOUT = 3 * 3600  # the full sweep's large models step 50 times each for the leak

    def measure(self):
        """The setup_cache of each subclass: asv keys one by where it is defined (see benchmark_models)."""
        return instruments.measure(self.kind, self.params[1])

    def track_fallback_ops(self, table, device, model):
        """Distinct ops that fell back from mps to the cpu during warm-up (0 on cuda and cpu).

        Needs PYTORCH_ENABLE_MPS_FALLBACK=1 (asv matrix ``env_nobuild``):
        without it such an op raises and the combination fails with its name.
        """
        return table.lookup((device, model), "fallback_ops")

    track_fallback_ops.unit = "ops"

    def track_driver_memory(self, table, device, model):
        """Peak memory the driver holds for torch over one step, in MiB (mps driver, cuda reserved)."""
        return table.lookup((device, model), "driver_memory")

    track_driver_memory.unit = "MiB"

    def track_leak(self, table, device, model):
        """Memory growth in MiB per 100 steps: least squares over one reading per step after warm-up.

        About 0 for a clean step. cuda: memory_allocated; mps:
        current_allocated_memory; cpu (and mps before torch 2.0): process RSS.
        """
        return table.lookup((device, model), "leak")

    track_leak.unit = "MiB/100 steps"

    def track_accuracy_error(self, table, device, model):
        """Relative error of the device's logits and loss against the cpu's (docs/instruments.md)."""
        return table.lookup((device, model), "accuracy_error")

    track_accuracy_error.unit = "relative error"


class TrainingInstruments(_Instruments):
    """Instruments around one training step."""

    kind = "training"
    params = (devices.NAMES, models.NAMES)

    def setup_cache(self):
        return self.measure()

    setup_cache.timeout = _Instruments.SETUP_CACHE_TIMEOUT


class InferenceInstruments(_Instruments):
    """Instruments around one inference step."""

    kind = "inference"
    params = (devices.NAMES, models.INFERENCE_NAMES)

    def setup_cache(self):
        return self.measure()

    setup_cache.timeout = _Instruments.SETUP_CACHE_TIMEOUT
