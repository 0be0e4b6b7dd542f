"""One training epoch and one evaluation epoch through a DataLoader, end to end.

The seeds' VGG16-on-CIFAR-10 benchmark timed whole epochs, with torchvision
transforms resizing 32x32 images to 224x224 in the loop, and claimed data
loading was the bottleneck. See src/mpsbench/measure/epoch.py for the loop and how the
wait for data is told apart from compute, and docs/explanation/workloads.md for the sizes.
"""

from mpsbench.measure import devices, epoch, suite

from .benchmark_models import _measure_once
from .common import Lookup


class Epoch(Lookup):
    """Per phase (train, eval): median epoch time, images/s and fraction of it spent waiting for data.

    Every figure comes from one measurement per run in ``setup_cache`` (``epoch.EPOCHS_MEASURED`` epochs
    of each selected combination): asv would otherwise re-run the epochs for each figure. The cache is
    benchmark_models' capacity one: a run of either module alone measures both.
    The datasets and the default selection: docs/explanation/workloads.md.
    """

    params = (
        devices.NAMES,
        epoch.MODELS,
        epoch.BATCH_SIZES,
        epoch.NUM_WORKERS,
        epoch.DATASET_NAMES,
        epoch.PHASES,
    )
    param_names = ("device", "model", "batch_size", "num_workers", "dataset", "phase")
    version = "2"  # bump when what is measured changes, not for cosmetic edits
    kind = (
        "epoch"  # its family in the setup_cache it shares with benchmark_models' capacity classes
    )
    setup_cache = (
        _measure_once  # one cache for both modules: asv keys a cache by where it is defined
    )

    def setup(self, readings, device, model, batch_size, num_workers, dataset, phase):
        suite.selected(type(self).__name__, device, model, batch_size, num_workers, dataset, phase)
        self.phase = self.figure(readings, (device, model, batch_size, num_workers, dataset), phase)

    def track_epoch_seconds(self, readings, device, model, batch_size, num_workers, dataset, phase):
        """Wall time of one epoch of the phase's split: from iter(loader) to the last step's end."""
        return self.phase.seconds

    track_epoch_seconds.unit = "seconds"

    def track_images_per_second(
        self, readings, device, model, batch_size, num_workers, dataset, phase
    ):
        """Images of the split over the epoch's wall time, loading included (median over epochs)."""
        return self.phase.images_per_second

    track_images_per_second.unit = "images/s"

    def track_data_wait_fraction(
        self, readings, device, model, batch_size, num_workers, dataset, phase
    ):
        """Fraction of the epoch blocked in the DataLoader's iter() and next(): 1 means all loading."""
        return self.phase.data_wait_fraction

    track_data_wait_fraction.unit = "fraction"
