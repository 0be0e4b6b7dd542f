"""What a stopwatch does not show: cpu fallbacks, driver memory, leaks, wrong results.

Every model runs at its seed batch size (models.ModelSpec.seed_batch_size);
on the cpu its small models, on a GPU mlp and resnet50 training
(selection.INSTRUMENTS_ON_GPU), unless MPSBENCH_FULL=1. None of these refuses a
combination the way the timings do: they report the very facts the timings
are refused for.
"""

from mpsbench.measure import devices, figures, measured, models

from .common import Lookup, by_kind


@measured.deferred
def _measure_instruments():
    """The setup_cache of both instrument classes: their first lookup measures both (mpsbench.measure.measured)."""
    return measured.measure_families(
        by_kind(figures.instruments, TrainingInstruments, InferenceInstruments)
    )


class _Instruments(Lookup):
    """Shared by TrainingInstruments and InferenceInstruments: four readings of one warmed-up workload.

    One ``setup_cache`` measures both classes' whole selection (mpsbench.measure.figures); ``track_`` looks up.
    """

    version = "1"
    setup_cache = (
        _measure_instruments  # one key for both classes: asv keys a cache by where it is defined
    )

    def track_fallback_ops(self, readings, device, model):
        """Distinct ops that fell back from mps to the cpu during warm-up.

        0 on cuda and cpu. Needs PYTORCH_ENABLE_MPS_FALLBACK=1 (asv matrix ``env_nobuild``):
        without it such an op raises and the combination fails with its name.
        """
        return self.figure(readings, (device, model), "fallback_ops")

    track_fallback_ops.unit = "ops"

    def track_driver_memory(self, readings, device, model):
        """Peak memory the driver holds for torch over one step, in MiB (mps driver, cuda reserved)."""
        return self.figure(readings, (device, model), "driver_memory")

    track_driver_memory.unit = "MiB"

    def track_leak(self, readings, device, model):
        """Memory growth in MiB per 100 steps.

        Least squares over one reading per step after warm-up; about 0 for a clean step. cuda: memory_allocated;
        mps: current_allocated_memory; cpu (and mps before torch 2.0): process RSS.
        """
        return self.figure(readings, (device, model), "leak")

    track_leak.unit = "MiB/100 steps"

    def track_accuracy_error(self, readings, device, model):
        """Relative error of the device's logits and loss against the cpu's (docs/explanation/instruments.md)."""
        return self.figure(readings, (device, model), "accuracy_error")

    track_accuracy_error.unit = "relative error"


class TrainingInstruments(_Instruments):
    """The readings of a training step."""

    kind = "training"
    params = (devices.NAMES, models.NAMES)
    param_names = ("device", "model")


class InferenceInstruments(_Instruments):
    """The readings of an inference step."""

    kind = "inference"
    params = (devices.NAMES, models.INFERENCE_NAMES)
    param_names = ("device", "model")
