"""What a stopwatch does not show: cpu fallbacks, driver memory, leaks, wrong results (issue #6).

Every model runs at its seed batch size (models.ModelSpec.seed_batch_size);
on the cpu, small models only unless MPSBENCH_FULL=1. None of these refuses a
combination the way the timings do: they report the very facts the timings
are refused for.
"""

from mpsbench import accuracy, devices, leak, models, suite


class _Instruments:
    """Shared by TrainingInstruments and InferenceInstruments: one warmed-up workload, four readings."""

    kind = "training"
    param_names = ("device", "model")
    version = "1"
    timeout = 1800

    def setup(self, device, model):
        batch_size = models.get(model).seed_batch_size
        self.workload = suite.prepare(
            self.kind, device, model, batch_size, skip_reason=suite.instrument_skip_reason, guarded=False
        )

    def track_fallback_ops(self, device, model):
        """Distinct ops that fell back from mps to the cpu during warm-up (0 on cuda and cpu).

        Needs PYTORCH_ENABLE_MPS_FALLBACK=1 (asv matrix ``env_nobuild``):
        without it such an op raises and the combination fails with its name.
        """
        return len(self.workload.fallback_ops)

    track_fallback_ops.unit = "ops"

    def track_driver_memory(self, device, model):
        """Peak memory the driver holds for torch over one step, in MiB (mps driver, cuda reserved)."""
        driver = suite.memory_peaks(self.workload).driver
        if driver is None:
            raise suite.SkipNotImplemented(f"{device} keeps no driver memory counter; see track_peak_memory")
        return driver

    track_driver_memory.unit = "MiB"

    def track_leak(self, device, model):
        """Memory growth in MiB per 100 steps: least squares over one reading per step after warm-up.

        About 0 for a clean step. cuda: memory_allocated; mps:
        current_allocated_memory; cpu (and mps before torch 2.0): process RSS.
        """
        return leak.measure(self.workload)

    track_leak.unit = "MiB/100 steps"

    def track_accuracy_error(self, device, model):
        """Relative error of the device's logits and loss against the cpu's (docs/instruments.md)."""
        if not accuracy.needed(device):
            raise suite.SkipNotImplemented("the cpu is the reference the other devices are compared with")
        return accuracy.compare(self.workload).error

    track_accuracy_error.unit = "relative error"


class TrainingInstruments(_Instruments):
    """Instruments around one training step."""

    kind = "training"
    params = (devices.NAMES, models.NAMES)


class InferenceInstruments(_Instruments):
    """Instruments around one inference step."""

    kind = "inference"
    params = (devices.NAMES, models.INFERENCE_NAMES)
