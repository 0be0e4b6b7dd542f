"""Training and inference steps in float32, float16 and bfloat16 at each model's seed batch size.

Kept apart from benchmark_models so that Training and Inference keep their params and history. How each
dtype is applied, what skips and what fails: docs/explanation/instruments.md, Precision. Default: selection.PRECISION_MODELS.
"""

from mpsbench.measure import devices, figures, measured, models, precision, suite

from .common import _PeakMemory, _TimedSteps, by_kind


class _PrecisionStep(_TimedSteps):
    """Shared by TrainingPrecision and InferencePrecision; per-step times as in benchmark_models."""

    kind: str  # "training" or "inference": each subclass says which
    version = "1"
    timeout = 1800
    warmup_time = 0  # setup warms up explicitly
    repeat = (3, 20, 10.0)
    # One round: a GPU benchmark process costs seconds before its first step,
    # and these steps (milliseconds and up, at the seed batch) vary less
    # between processes than within one (docs/explanation/calibration.md).
    rounds = 1

    def setup(self, device, model, dtype):
        suite.selected(type(self).__name__, device, model, dtype)
        self.ready(
            suite.prepare(self.kind, device, model, models.get(model).seed_batch_size, dtype=dtype)
        )


class TrainingPrecision(_PrecisionStep):
    """One training step: autocast forward and loss, (scaled) backward, update."""

    kind = "training"
    params = (devices.NAMES, models.NAMES, precision.NAMES)
    param_names = ("device", "model", "dtype")


class InferencePrecision(_PrecisionStep):
    """One inference step, the model and its inputs in the dtype."""

    kind = "inference"
    params = (devices.NAMES, models.INFERENCE_NAMES, precision.NAMES)
    param_names = ("device", "model", "dtype")


@measured.deferred
def _measure_peak_memory():
    """The setup_cache of both capacity classes below: their first lookup measures both (mpsbench.measure.measured)."""
    return measured.measure_families(
        by_kind(figures.precision_capacity, TrainingPrecisionCapacity, InferencePrecisionCapacity)
    )


class _PrecisionCapacity(_PeakMemory):
    """Peak memory of the same combinations, measured once per run in one ``setup_cache`` (see benchmark_models)."""

    version = "1"
    setup_cache = (
        _measure_peak_memory  # one key for both classes: asv keys a cache by where it is defined
    )


class TrainingPrecisionCapacity(_PrecisionCapacity):
    """The peaks of TrainingPrecision's combinations."""

    kind = "training"
    params = TrainingPrecision.params
    param_names = TrainingPrecision.param_names


class InferencePrecisionCapacity(_PrecisionCapacity):
    """The peaks of InferencePrecision's combinations."""

    kind = "inference"
    params = InferencePrecision.params
    param_names = InferencePrecision.param_names
