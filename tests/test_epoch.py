"""The epoch benchmark: every image once per epoch, the wait for data told apart from compute."""

from __future__ import annotations

import dataclasses
import time
import warnings

import pytest
import torch
from benchmarks import benchmark_epoch
from torch import nn

from mpsbench.core.errors import UserError
from mpsbench.measure import epoch, fallback, measured, models, suite, workloads

BATCH = 8


RESNET50 = models.get("resnet50")


def _tiny_cnn() -> nn.Module:
    # Takes the real 3 x 224 x 224 transformed images at a fraction of ResNet-50's cost, with its classes.
    return nn.Sequential(
        nn.Conv2d(3, 4, kernel_size=3, stride=8),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(4, RESNET50.num_classes),
    )


# ResNet-50's inputs, labels and optimizer around a stand-in network: the epoch's own code, cheaply.
TINY_CNN = dataclasses.replace(
    RESNET50,
    name="tiny_cnn",
    description="a stand-in image classifier for tests",
    build=_tiny_cnn,
    seed_batch_size=BATCH,
    batch_sizes=(BATCH,),
    large=False,
    requires=(),
)


class CountingImages(epoch.SyntheticImages):
    """Counts every item fetched, in a shared-memory tensor that worker processes write to."""

    def __init__(self, images, labels, transform):
        super().__init__(images, labels, transform)
        self.counts = torch.zeros(len(labels), dtype=torch.int32).share_memory_()

    def __getitem__(self, index):
        self.counts[index] += 1
        return super().__getitem__(index)


@pytest.fixture
def odd_sizes(monkeypatch):
    """Splits that batch 8 does not divide, so the last partial batch is counted too."""
    monkeypatch.setitem(epoch.DATASETS, "tiny", epoch.DatasetSize(train=21, test=11))
    monkeypatch.setattr(epoch, "SyntheticImages", CountingImages)


def _runner(num_workers: int, multiprocessing_context: str | None = None) -> epoch.EpochRunner:
    workload = workloads.Workload("training", "cpu", TINY_CNN, BATCH)
    return epoch.EpochRunner(workload, "tiny", num_workers, multiprocessing_context)


@pytest.mark.parametrize("num_workers", [0, 2])
def test_every_image_goes_through_exactly_once_per_epoch(odd_sizes, num_workers):
    runner = _runner(num_workers)
    for _ in range(2):
        train, evaluation = runner.epoch("train"), runner.epoch("eval")
        assert (train.images, evaluation.images) == (21, 11)
    assert runner.train.counts.tolist() == [2] * 21
    assert runner.test.counts.tolist() == [2] * 11
    for timing in (train, evaluation):
        assert 0 < timing.data_wait_fraction < 1
        assert timing.images_per_second == timing.images / timing.seconds


@pytest.mark.slow  # each spawned worker imports torch and torchvision afresh
def test_workers_started_by_spawn_receive_the_dataset_by_pickling():
    timing = _runner(2, "spawn").epoch("train")
    assert timing.images == epoch.DATASETS["tiny"].train
    assert 0 < timing.data_wait_fraction < 1


class _Clock:
    """A stand-in for time.perf_counter that moves only when the loader or the step says it spent time."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def spend(self, seconds: float) -> None:
        self.now += seconds


class _Images(torch.utils.data.Dataset):
    def __init__(self, count: int, clock: _Clock, seconds_per_item: float) -> None:
        self.count, self.clock, self.seconds_per_item = count, clock, seconds_per_item

    def __len__(self):
        return self.count

    def __getitem__(self, index):
        self.clock.spend(self.seconds_per_item)
        return torch.zeros(1), 0


@pytest.mark.parametrize(
    ("per_item", "per_step", "fraction"), [(0.0, 0.05, 0.0), (0.025, 0.0, 1.0), (0.01, 0.03, 0.4)]
)
def test_time_in_the_step_is_compute_and_time_in_the_loader_is_wait(
    monkeypatch, per_item, per_step, fraction
):
    clock = _Clock()
    monkeypatch.setattr(time, "perf_counter", clock)
    loader = torch.utils.data.DataLoader(
        _Images(8, clock, per_item), batch_size=2
    )  # 4 batches of 2
    timing = epoch.run_epoch(loader, "cpu", lambda inputs, labels: clock.spend(per_step))
    assert timing.images == 8
    assert timing.seconds == pytest.approx(4 * (2 * per_item + per_step))
    assert timing.data_wait_fraction == pytest.approx(fraction)


def test_the_dataset_is_seeded_cifar10_shaped_uint8_with_labels_in_range():
    images, labels = epoch.synthetic_split(64, 1000, models.SEED)
    again, _ = epoch.synthetic_split(64, 1000, models.SEED)
    epoch.synthetic_split.cache_clear()
    rebuilt, rebuilt_labels = epoch.synthetic_split(64, 1000, models.SEED)
    assert images.shape == (64, 32, 32, 3) and images.dtype == torch.uint8
    assert torch.equal(images, rebuilt) and torch.equal(labels, rebuilt_labels) and again is images
    assert int(labels.min()) >= 0 and int(labels.max()) < 1000
    train, test = epoch.make_datasets(epoch.DatasetSize(train=4, test=4), num_classes=10)
    assert not torch.equal(train.images, test.images)  # the test split is drawn from another seed
    image, label = train[0]
    assert image.shape == (3, 224, 224) and image.dtype == torch.float32 and 0 <= label < 10


def test_bad_parameters_give_one_line_errors_naming_the_choices():
    workload = workloads.Workload("training", "cpu", TINY_CNN, BATCH)
    with pytest.raises(
        UserError, match="unknown dataset 'huge'; choose one of: tiny, small, cifar10"
    ):
        epoch.EpochRunner(workload, "huge", 0)


@pytest.fixture
def stand_in(monkeypatch):
    """The tiny stand-in as the epoch's only model, at one batch, on the tiny split without workers ("StandIn")."""
    monkeypatch.setitem(models.REGISTRY, "tiny_cnn", TINY_CNN)
    monkeypatch.setattr(epoch, "MODELS", ("tiny_cnn",))
    monkeypatch.setattr(epoch, "BATCH_SIZES", (BATCH,))
    monkeypatch.setitem(
        epoch.selection.RULES,
        "StandIn",
        lambda device, model, batch, workers, dataset: (
            None if dataset == "tiny" and workers == 0 else "not selected"
        ),
    )


def test_measure_selection_measures_what_is_selected_and_records_why_the_rest_cannot_run(stand_in):
    table = epoch.measure_selection("StandIn", epochs=2)
    train, evaluation = (
        table.lookup(("cpu", "tiny_cnn", BATCH, 0, "tiny"), phase) for phase in epoch.PHASES
    )
    assert train.images == epoch.DATASETS["tiny"].train
    assert evaluation.images == epoch.DATASETS["tiny"].test
    assert 0 < train.data_wait_fraction < 1
    assert set(table.figures) == {
        (device, "tiny_cnn", BATCH, 0, "tiny") for device in ("cpu", "mps", "cuda")
    }
    if not epoch.devices.get("cuda").usable:
        with pytest.raises(suite.SkipNotImplemented, match=r"^cuda is not usable here"):
            table.lookup(("cuda", "tiny_cnn", BATCH, 0, "tiny"), "eval")


def test_a_model_whose_warm_up_fails_is_handed_back_and_never_reaches_capacity(
    stand_in, monkeypatch
):
    stepped = []

    def failing_warm_up(runner):
        stepped.append(runner.workload)
        runner.workload.step()  # as far as a real warm-up got before it failed
        raise ValueError("the warm-up broke")

    monkeypatch.setattr(epoch.EpochRunner, "warm_up", failing_warm_up)
    table = epoch.measure_selection("StandIn", epochs=1)
    assert (
        table.figures[("cpu", "tiny_cnn", BATCH, 0, "tiny")]["train"].failed
        == "ValueError: the warm-up broke"
    )
    # capacity, measured next in the same setup_cache, builds its own workload for the same key
    assert suite.prepare("training", "cpu", "tiny_cnn", BATCH, guarded=False) is not stepped[0]


def test_an_epoch_whose_warm_up_fell_back_to_the_cpu_is_refused_as_capacity_is(
    stand_in, monkeypatch
):
    def forward(
        model, inputs
    ):  # warns as TORCH_WARN_ONCE does: every time under fallback.Recorder, else spent
        if torch.is_warn_always_enabled():
            warnings.warn(
                "The operator 'aten::_embedding_bag' is not currently supported on the MPS backend and will"
                " fall back to run on the CPU.",
                UserWarning,
                stacklevel=2,
            )
        return TINY_CNN.forward(model, inputs)

    monkeypatch.setitem(models.REGISTRY, "tiny_cnn", dataclasses.replace(TINY_CNN, forward=forward))
    monkeypatch.delenv(fallback.ALLOW_ENV, raising=False)
    key = ("cpu", "tiny_cnn", BATCH, 0, "tiny")
    with pytest.raises(
        RuntimeError,
        match=r"^FallbackError: tiny_cnn training on cpu at batch 8 \(float32\): 1 op\(s\) fell",
    ):
        epoch.measure_selection("StandIn", epochs=1).lookup(key, "train")
    monkeypatch.setenv(fallback.ALLOW_ENV, "1")
    assert (
        epoch.measure_selection("StandIn", epochs=1).lookup(key, "train").images
        == epoch.DATASETS["tiny"].train
    )


def test_the_benchmark_reports_the_measured_phase_and_turns_outcomes_into_asv_results():
    summary = epoch.PhaseSummary(
        images=16, seconds=2.0, images_per_second=8.0, data_wait_fraction=0.25
    )
    combination = ("cpu", "resnet50", 8, 0, "tiny")
    readings = {
        "epoch": measured.Table({combination: {"train": measured.Outcome(value=summary)}})
    }  # its family
    bench = benchmark_epoch.Epoch()
    bench.setup(readings, *combination, "train")
    assert bench.track_epoch_seconds(readings, *combination, "train") == 2.0
    assert bench.track_images_per_second(readings, *combination, "train") == 8.0
    assert bench.track_data_wait_fraction(readings, *combination, "train") == 0.25
    with pytest.raises(suite.SkipNotImplemented, match="does not fit"):
        bench.setup(
            {
                "epoch": measured.Table(
                    {combination: {"train": measured.Outcome(skipped="does not fit")}}
                )
            },
            *combination,
            "train",
        )
    with pytest.raises(RuntimeError, match="ValueError: broken"):
        bench.setup(
            {
                "epoch": measured.Table(
                    {combination: {"train": measured.Outcome(failed="ValueError: broken")}}
                )
            },
            *combination,
            "train",
        )
    with pytest.raises(
        RuntimeError, match="was not measured in this run's setup_cache; the selection changed"
    ):
        bench.setup({"epoch": measured.Table()}, *combination, "train")
    with pytest.raises(
        RuntimeError, match="measuring epoch failed"
    ):  # the shared cache's epoch family raised
        bench.setup(
            {"epoch": measured.Outcome(failed="measuring epoch failed: OSError")},
            *combination,
            "train",
        )


def test_params_are_fixed_and_the_class_has_a_version():
    cls = benchmark_epoch.Epoch
    assert len(cls.params) == len(cls.param_names) == 6
    assert cls.params[0] == ("cpu", "mps", "cuda")
    assert cls.params[3] == (0, 2) and cls.params[5] == ("train", "eval")
    assert cls.version
