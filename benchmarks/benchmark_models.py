"""Time one training step and one inference step per device, model and batch size.

Motivated by Apple's "7x faster training" chart (ResNet50 bs 128, BERT bs 64,
VGG16 bs 64) and the community's VGG16/CIFAR-10, MLP and BERT fine-tuning
measurements.
"""

import functools

from mpsbench.measure import devices, energy, fallback, figures, measured, models, suite

from .common import _PeakMemory, _TimedSteps, by_kind


class _StepBenchmark(_TimedSteps):
    """Training's and Inference's setup (benchmark_modern's too); the timed step is _TimedSteps'.

    ``setup`` refuses combinations whose numbers would mislead: ops
    that fell back to the cpu during warm-up, or GPU results that disagree
    with the cpu's, fail the combination with the reason (docs/explanation/instruments.md).
    """

    kind: str  # "training" or "inference": each subclass says which
    version = "1"  # bump when what is measured changes, not for cosmetic edits
    timeout = 1800  # the full sweep's largest cpu steps take a minute each
    warmup_time = 0  # setup warms up explicitly (kernels, shaders, optimizer state)
    # min samples, max samples, seconds. At least 10 samples: with 3, a slow cpu row
    # (mlp at 1024, a 3 s sample) gave asv's test too little to decide. Fast rows stop at 20
    # samples (asv's own default count, 2 rounds of 10) or 10 s, as the precision steps do: on a
    # datacenter GPU a device-paced row's median moved 0.2-2% between six runs while 40 samples put its
    # 99% interval within 0.1-0.9% (docs/evidence/samples-per-row.md), so the process, not the samples,
    # sets what a recorded value can show. The explicit `version` keeps this edit from splitting history.
    repeat = (10, 20, 10.0)
    # One process per combination. On a datacenter GPU (docs/explanation/calibration.md) the steps
    # at the seed batch moved under 1% between two runs of two rounds each, and
    # one-round precision steps under 0.5% in float32; the launch-bound rows
    # (batch 1, mlp, lenet5) moved 10-30% either way. A second round doubled
    # the processes, each of which costs seconds before its first step, for
    # neither.
    rounds = 1

    def setup(self, device, model, batch_size):
        suite.selected(type(self).__name__, device, model, batch_size)
        self.ready(suite.prepare(self.kind, device, model, batch_size))


class Training(_StepBenchmark):
    """One training step: zero grads, forward, loss, backward, optimizer step."""

    kind = "training"
    params = (devices.NAMES, models.NAMES, models.BATCH_SIZES)
    param_names = ("device", "model", "batch_size")


class Inference(_StepBenchmark):
    """One inference step: a forward in eval mode under torch.inference_mode()."""

    kind = "inference"
    params = (devices.NAMES, models.INFERENCE_NAMES, models.BATCH_SIZES)
    param_names = ("device", "model", "batch_size")


@measured.deferred
def _measure_once():
    """The setup_cache of both capacity classes and of benchmark_epoch's Epoch: the first of their lookups measures
    all three families (mpsbench.measure.measured), the epochs first, so that they start from a process that has
    measured nothing yet; the cuda default's second measuring interpreter cost about 10 s of imports
    (docs/explanation/budget.md)."""
    from mpsbench.measure import (
        epoch,
    )  # torch at import: a capacity lookup's process never needs it

    return measured.measure_families(
        {
            "epoch": functools.partial(epoch.measure_selection, "Epoch"),
            **by_kind(figures.capacity, TrainingCapacity, InferenceCapacity),
        }
    )


class _Capacity(_PeakMemory):
    """Throughput, peak memory and energy per step of the same combinations as the step timings.

    One ``setup_cache`` measures both classes' whole selection (mpsbench.measure.figures): on a GPU two
    benchmark processes per combination more than doubled the default run (mpsbench.measure.measured says why).
    """

    version = "1"
    setup_cache = (
        _measure_once  # one key for both classes and Epoch: asv keys a cache by where it is defined
    )

    def track_throughput(self, readings, device, model, batch_size):
        """Samples per second: batch size over the median step time of several calls."""
        return self.figure(readings, (device, model, batch_size), "throughput")

    track_throughput.unit = "samples/s"

    def track_joules_per_step(self, readings, device, model, batch_size):
        """Energy per step, in joules: the device's energy counter over at least a second of steps
        (docs/explanation/instruments.md)."""
        return self.figure(readings, (device, model, batch_size), "joules_per_step")

    track_joules_per_step.unit = energy.UNIT


class TrainingCapacity(_Capacity):
    """The figures of Training's combinations."""

    kind = "training"
    params = Training.params
    param_names = Training.param_names


class InferenceCapacity(_Capacity):
    """The figures of Inference's combinations."""

    kind = "inference"
    params = Inference.params
    param_names = Inference.param_names


class Environment:
    """Facts recorded with every run, so that results can be read in context."""

    version = "1"

    def track_cpu_threads(self):
        """Threads torch uses on the cpu: cpu timings scale with it."""
        return devices.cpu_threads()

    track_cpu_threads.unit = "threads"

    # PyTorch reads these two at start-up; they change what mps runs and how
    # much memory it may take, so each run records them (docs/explanation/instruments.md).
    def track_mps_fallback_enabled(self):
        """1 if PYTORCH_ENABLE_MPS_FALLBACK was on: ops mps lacks then run on the cpu."""
        return int(fallback.enabled())

    track_mps_fallback_enabled.unit = "on"

    def track_mps_high_watermark_ratio(self):
        """PYTORCH_MPS_HIGH_WATERMARK_RATIO, the mps allocator's limit; n/a when unset (torch's default)."""
        ratio = devices.mps_high_watermark_ratio()
        if ratio is None:
            raise suite.SkipNotImplemented(
                f"{devices.MPS_WATERMARK_ENV} is unset: torch's default applies"
            )
        return ratio

    track_mps_high_watermark_ratio.unit = "ratio"
