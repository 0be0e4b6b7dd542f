"""Epochs through torchvision transforms and a DataLoader: is data loading the bottleneck?"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import itertools
import statistics
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from mpsbench.core import errors
from mpsbench.measure import devices, fallback, measured, models, selection, suite, workloads
from mpsbench.measure.optional_torch import torch

if TYPE_CHECKING:
    from torch.utils.data import Dataset

    _MapStyle = Dataset[tuple[torch.Tensor, int]]
else:  # subclassing Dataset would import torch here
    _MapStyle = object

MODELS: tuple[str, ...] = ("vgg16", "resnet50")
BATCH_SIZES: tuple[int, ...] = (8, 64)
NUM_WORKERS: tuple[int, ...] = (0, 2)
PHASES: tuple[str, ...] = ("train", "eval")
Batches = Iterable[tuple["torch.Tensor", "torch.Tensor"]]


@dataclasses.dataclass(frozen=True)
class DatasetSize:
    train: int
    test: int


DATASETS: dict[str, DatasetSize] = {
    "tiny": DatasetSize(16, 8),
    "small": DatasetSize(1024, 256),
    "cifar10": DatasetSize(50_000, 10_000),
}
DATASET_NAMES: tuple[str, ...] = tuple(DATASETS)

IMAGE_SIDE = 32
RESIZED_SIDE = 224
CIFAR10_MEAN = (0.4914, 0.4822, 0.4465)
CIFAR10_STD = (0.2470, 0.2435, 0.2616)
EPOCHS_MEASURED = 3


@dataclasses.dataclass(eq=False)
class SyntheticImages(_MapStyle):
    """CIFAR-10-shaped images, transformed per item; picklable for the workers."""

    images: torch.Tensor
    labels: torch.Tensor
    transform: Callable[[Any], torch.Tensor]

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        # HWC uint8, as CIFAR-10's loader hands to ToTensor
        return self.transform(self.images[index].numpy()), int(self.labels[index])


@functools.cache
def synthetic_split(count: int, num_classes: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    shape = (count, IMAGE_SIDE, IMAGE_SIDE, 3)
    images = torch.randint(0, 256, shape, dtype=torch.uint8, generator=generator)
    return images, models.random_ints(generator, num_classes, count)


def make_datasets(size: DatasetSize, num_classes: int) -> tuple[SyntheticImages, SyntheticImages]:
    transforms = importlib.import_module("torchvision.transforms")
    # torchvision's antialias default for tensors changed (a no-op when enlarging)
    transform = transforms.Compose(
        [
            transforms.ToTensor(),
            transforms.Resize((RESIZED_SIDE, RESIZED_SIDE), antialias=True),
            transforms.Normalize(CIFAR10_MEAN, CIFAR10_STD),
        ]
    )
    return (
        SyntheticImages(*synthetic_split(size.train, num_classes, models.SEED), transform),
        SyntheticImages(*synthetic_split(size.test, num_classes, models.SEED + 1), transform),
    )


@dataclasses.dataclass(frozen=True)
class PhaseSummary:
    images: int
    seconds: float  # iter(loader) to the last step's end, synchronized
    images_per_second: float
    data_wait_fraction: float  # blocked in the loader's iter() and next()


def run_epoch(
    loader: Batches,
    device: str,
    step: Callable[[torch.Tensor, torch.Tensor], None],
) -> PhaseSummary:
    """Synchronizes after each step, so queued GPU work does not count as waiting for data."""
    images, waited = 0, 0.0
    synchronize = devices.get(device).synchronize
    synchronize()
    started = asked = time.perf_counter()
    for inputs, labels in loader:
        waited += time.perf_counter() - asked
        images += len(labels)
        step(inputs.to(device), labels.to(device))
        synchronize()
        asked = time.perf_counter()
    ended = time.perf_counter()
    seconds, waited = ended - started, waited + ended - asked
    return PhaseSummary(images, seconds, images / seconds, waited / seconds)


class EpochRunner:
    def __init__(
        self,
        workload: workloads.Workload,
        dataset: str,
        num_workers: int,
        multiprocessing_context: str | None = None,
    ) -> None:
        from torch.utils.data import DataLoader

        size = DATASETS[errors.one_of("dataset", dataset, DATASETS)]
        self.workload = workload
        self.train, self.test = make_datasets(size, workload.spec.num_classes)
        self.loaders = {
            phase: DataLoader(
                split,
                batch_size=workload.batch_size,
                shuffle=split is self.train,
                num_workers=num_workers,
                generator=torch.Generator().manual_seed(models.SEED),
                multiprocessing_context=multiprocessing_context if num_workers > 0 else None,
            )
            for phase, split in zip(PHASES, (self.train, self.test))
        }

    def _train_step(self, inputs: torch.Tensor, labels: torch.Tensor) -> None:
        self.workload.batch = models.Batch({"input": inputs}, labels)
        self.workload.step()

    def _eval_step(self, inputs: torch.Tensor, labels: torch.Tensor) -> None:
        with torch.inference_mode():
            self.workload.spec.forward(self.workload.model, {"input": inputs})

    def epoch(self, phase: str, loader: Batches | None = None) -> PhaseSummary:
        training = phase == "train"
        self.workload.model.train(training)
        try:
            step = self._train_step if training else self._eval_step
            batches = loader if loader is not None else self.loaders[phase]
            return run_epoch(batches, self.workload.device, step)
        finally:
            self.workload.model.train()

    def warm_up(self) -> None:
        # a last partial batch's kernels are chosen in the first epoch: the median absorbs it
        from torch.utils.data import default_collate

        items = [self.train[index % len(self.train)] for index in range(self.workload.batch_size)]
        batch = default_collate(items)
        for phase in PHASES:
            self.epoch(phase, [batch])


def measure(runner: EpochRunner, epochs: int) -> dict[str, PhaseSummary]:
    rounds = [[runner.epoch(phase) for phase in PHASES] for _ in range(epochs)]
    medians = {}
    for phase, found in zip(PHASES, zip(*rounds)):
        images, *figures = zip(*map(dataclasses.astuple, found))
        medians[phase] = PhaseSummary(images[0], *map(statistics.median, figures))
    return medians


def _measure_model(
    device: str, model: str, batch_size: int, loaders: list[tuple[int, str]], epochs: int
) -> dict[measured.Key, dict[str, measured.Outcome]]:
    # one warmed-up model serves all its (num_workers, dataset) settings
    figures = {}
    try:
        workload = suite.prepare("training", device, model, batch_size, guarded=False)
        fallback.refuse(workload.label, workload.fallback_ops)
        EpochRunner(workload, "tiny", 0).warm_up()
    except Exception as exc:
        failed = measured.outcome_of(exc)
        return {(device, model, batch_size, *key): dict.fromkeys(PHASES, failed) for key in loaders}
    for num_workers, dataset in loaders:
        try:
            phases = measure(EpochRunner(workload, dataset, num_workers), epochs)
            found = {phase: measured.Outcome(value=value) for phase, value in phases.items()}
        except Exception as exc:
            found = dict.fromkeys(PHASES, measured.outcome_of(exc))
        figures[device, model, batch_size, num_workers, dataset] = found
    return figures


def measure_selection(benchmark: str, epochs: int = EPOCHS_MEASURED) -> measured.Table:
    """One model in memory at a time."""
    table = measured.Table()
    for device, model, batch_size in itertools.product(devices.NAMES, MODELS, BATCH_SIZES):
        loaders = itertools.product(NUM_WORKERS, DATASET_NAMES)
        key = (device, model, batch_size)
        if selected := [x for x in loaders if selection.left_out(benchmark, *key, *x) is None]:
            try:
                table.figures.update(_measure_model(*key, selected, epochs))
            finally:
                measured.release(device)
    return table
