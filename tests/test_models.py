"""Every registered model trains (parameters change, loss finite) and infers on the cpu."""

from __future__ import annotations

import pytest
import torch

from mpsbench.measure import models, workloads


def _snapshot(workload: workloads.Workload) -> list[torch.Tensor]:
    return [p.detach().clone() for p in workload.trained_parameters()]


@pytest.mark.parametrize("name", models.NAMES)
def test_training_step_changes_trained_parameters_and_gives_finite_loss(name):
    workload = workloads.build("training", "cpu", name, 1 if models.get(name).large else 8)
    before = _snapshot(workload)
    loss = workload.step()
    assert torch.isfinite(loss).item()
    after = _snapshot(workload)
    changed = [not torch.equal(a, b) for a, b in zip(before, after)]
    assert all(changed), f"{sum(changed)} of {len(changed)} trained tensors changed"


def test_frozen_bert_trains_only_its_classifier_head():
    workload = workloads.build("training", "cpu", "bert_base_frozen", 1)
    encoder = [p.detach().clone() for p in workload.model.bert.parameters()]
    workload.step()
    assert all(torch.equal(a, b) for a, b in zip(encoder, workload.model.bert.parameters()))
    trained = {id(p) for p in workload.trained_parameters()}
    assert trained == {id(p) for p in workload.model.classifier.parameters()}
    assert not any(p.requires_grad for p in workload.model.bert.parameters())


@pytest.mark.parametrize("name", models.INFERENCE_NAMES)
def test_inference_step_gives_logits_of_the_right_shape_on_the_device(name):
    spec = models.get(name)
    batch_size = 1 if spec.large else 8
    workload = workloads.build("inference", "cpu", name, batch_size)
    logits = workload.step()
    assert logits.shape == (batch_size, spec.num_classes)
    assert logits.device.type == "cpu"
    assert not workload.model.training


def test_batches_are_fixed_and_seeded():
    spec = models.get("bert_base")
    first, second = models.make_batch(spec, 8), models.make_batch(spec, 8)
    assert first.inputs["input_ids"].shape == (8, models.BERT_SEQUENCE_LENGTH)
    assert torch.equal(first.inputs["input_ids"], second.inputs["input_ids"])
    assert torch.equal(first.target, second.target)


def test_seed_batch_sizes_are_among_the_benchmarked_sizes():
    seeds = {"mlp": 1024, "resnet50": 128, "vgg16": 64, "bert_base": 64}
    for name, size in seeds.items():
        assert models.get(name).seed_batch_size == size
        assert size in models.get(name).batch_sizes
        assert size in models.BATCH_SIZES


def test_bert_attention_is_pinned():
    workload = workloads.build("inference", "cpu", "bert_base", 1)
    assert workload.model.config._attn_implementation == models.BERT_ATTENTION == "eager"


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: models.get("resnet51"), "unknown model 'resnet51'; choose one of: mlp, lenet5"),
        (
            lambda: models.check_batch_size(models.get("vgg16"), 1024),
            "batch size 1024 is not run for vgg16",
        ),
        (lambda: workloads.build("eval", "cpu", "mlp", 8), "unknown workload kind 'eval'"),
        (
            lambda: workloads.build("training", "tpu", "mlp", 8),
            "unknown device 'tpu'; choose one of: cpu, mps",
        ),
        (
            lambda: workloads.build("inference", "cpu", "bert_base_frozen", 8),
            "time its inference as bert_base",
        ),
    ],
)
def test_bad_input_gives_one_line_naming_value_and_choices(call, message):
    with pytest.raises(ValueError) as caught:
        call()
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_missing_package_is_named(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_torchvision(name, *args, **kwargs):
        if name.startswith("torchvision"):
            raise ImportError("no torchvision here")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_torchvision)
    monkeypatch.delitem(__import__("sys").modules, "torchvision", raising=False)
    assert (
        models.get("resnet50").unimportable() == "resnet50 needs torchvision, not importable here"
    )
    with pytest.raises(workloads.WorkloadError, match="resnet50 needs torchvision"):
        workloads.build("training", "cpu", "resnet50", 1)


def test_optional_packages_are_preloaded_only_in_asvs_forkserver(monkeypatch):
    import gc
    import sys
    import types

    monkeypatch.delitem(sys.modules, "asv_runner.server", raising=False)
    assert models.preload_for_forkserver() == []
    monkeypatch.setitem(sys.modules, "asv_runner.server", types.ModuleType("asv_runner.server"))
    for spawned in (
        "run",
        "setup_cache",
        "discover",
    ):  # asv's benchmark.py imports asv_runner.server in every mode
        monkeypatch.setattr(sys, "argv", ["benchmark.py", spawned, "benchmarks"])
        assert models.preload_for_forkserver() == []
    assert gc.get_freeze_count() == 0  # nothing frozen outside the forkserver
    monkeypatch.setattr(
        sys, "argv", ["benchmark.py", models.FORKSERVER_MODE, "benchmarks", "socket"]
    )
    try:
        assert models.preload_for_forkserver() == list(
            models.PRELOADED
        )  # both installed in the test venv
        assert gc.get_freeze_count() > 0  # what the forked processes' collections skip
    finally:
        gc.unfreeze()  # this test process is no forkserver
    assert all(package in sys.modules for package in models.PRELOADED)
