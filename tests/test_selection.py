"""The one selection table: each family's default, the full sweep, and what is never timed."""

from __future__ import annotations

import pytest

from mpsbench.measure import devices, models, precision, selection


@pytest.fixture(autouse=True)
def default_run(monkeypatch):
    """The default selection on a machine with every device present (MPSBENCH_DEVICES names all three)."""
    monkeypatch.delenv(selection.FULL_SWEEP_ENV, raising=False)
    monkeypatch.setenv(selection.DEVICES_ENV, "cpu,mps,cuda")


def runs(benchmark: str, *params: object) -> bool:
    return selection.left_out(benchmark, *params) is None


def full_sweep(monkeypatch) -> None:
    monkeypatch.setenv(selection.FULL_SWEEP_ENV, "1")


def test_steps_keep_seed_sizes_on_gpus_and_small_batches_for_large_models_on_the_cpu(monkeypatch):
    for device in devices.GPU_NAMES:
        assert runs("Training", device, "resnet50", 128)  # the seed's batch
        assert not runs("Training", device, "resnet50", 8)  # GPUs: the seed size only
    assert not runs("Inference", "mps", "resnet50", 1)  # launch-bound on a GPU: the full sweep
    assert not runs("Training", "cpu", "resnet50", 128) and runs("Training", "cpu", "resnet50", 8)
    assert runs("TrainingCapacity", "cpu", "resnet50", 1) and runs("Training", "cpu", "mlp", 1024)
    reason = selection.left_out("Training", "cpu", "mlp", 64)
    assert (
        reason
        == "mlp at batch 64 on cpu is outside the default selection; set MPSBENCH_FULL=1 for the full sweep"
    )
    full_sweep(monkeypatch)
    assert runs("Training", "cpu", "mlp", 64) and runs("Inference", "mps", "resnet50", 1)
    assert (
        selection.left_out("Training", "cpu", "resnet50", 1024)
        == "resnet50 is not run at batch 1024"
    )


def test_the_modern_steps_are_the_cpus_at_batch_1_and_a_gpus_in_the_full_sweep(monkeypatch):
    assert runs("ModernTraining", "cpu", "llama_small", 1)
    assert "outside the default modern models' selection" in selection.left_out(
        "ModernInference", "cuda", "vit_b_16", 1
    )
    full_sweep(monkeypatch)
    assert runs("ModernInference", "cuda", "vit_b_16", 1)


def test_instruments_and_cold_starts_take_the_cpus_small_models_and_the_listed_gpu_rows(
    monkeypatch,
):
    assert runs("TrainingInstruments", "mps", "resnet50") and runs(
        "TrainingInstruments", "cpu", "mlp"
    )
    assert not runs("InferenceInstruments", "mps", "resnet50") and not runs(
        "TrainingInstruments", "cpu", "vgg16"
    )
    assert "outside the default training instruments" in selection.left_out(
        "TrainingInstruments", "cuda", "mlp"
    )
    assert runs("InferenceColdStart", "cpu", "lenet5")
    assert "vgg16 at batch 64 on cpu is outside the default cold start" in selection.left_out(
        "InferenceColdStart", "cpu", "vgg16"
    )
    for device in devices.GPU_NAMES:
        assert not runs("TrainingColdStart", device, "mlp")
    full_sweep(monkeypatch)
    assert runs("InferenceColdStart", "mps", "bert_base") and runs(
        "InferenceInstruments", "cuda", "vgg16"
    )


def test_precision_is_the_mlp_on_the_cpu_and_bert_training_in_reduced_dtypes_on_gpus(monkeypatch):
    chosen = {
        (device, kind): [
            (name, dtype)
            for name in models.NAMES
            for dtype in precision.NAMES
            if runs(f"{kind.title()}Precision", device, name, dtype)
        ]
        for device in ("cpu", "mps", "cuda")
        for kind in ("training", "inference")
    }
    every_dtype = [("mlp", dtype) for dtype in precision.NAMES]
    reduced = [("bert_base", "float16"), ("bert_base", "bfloat16")]
    assert chosen == {
        ("cpu", "training"): every_dtype,
        ("cpu", "inference"): every_dtype,
        ("mps", "training"): reduced,
        ("mps", "inference"): [],
        ("cuda", "training"): reduced,
        ("cuda", "inference"): [],
    }
    assert "(benchmark_models times it)" in selection.left_out(
        "TrainingPrecision", "cuda", "bert_base", "float32"
    )
    assert runs("TrainingPrecisionCapacity", "cpu", "mlp", "float16")  # the cpu: the timings' rule
    assert "precision peak memory" in selection.left_out(
        "TrainingPrecisionCapacity", "mps", "bert_base", "float16"
    )
    full_sweep(monkeypatch)
    assert runs("InferencePrecision", "cuda", "vgg16", "float32")


def test_compiling_is_the_mlp_on_the_cpu_by_default(monkeypatch):
    assert runs("CompiledTraining", "cpu", "mlp") and not runs(
        "CompiledInference", "cpu", "resnet50"
    )
    assert "outside the default compiled training selection" in selection.left_out(
        "CompiledTraining", "mps", "mlp"
    )
    full_sweep(monkeypatch)
    assert runs("CompiledTraining", "cuda", "bert_base")


def test_ops_are_float32_large_on_gpus_and_small_medium_on_the_cpu(monkeypatch):
    assert runs("ComputeBoundOps", "cpu", "matmul", "float32", "small")
    assert runs("MemoryBoundOps", "cpu", "add", "float32", "medium")
    for dtype, size in (("float32", "large"), ("float16", "small"), ("bfloat16", "medium")):
        assert selection.left_out("ComputeBoundOps", "cpu", "matmul", dtype, size).endswith(
            "set MPSBENCH_FULL=1 for the full sweep"
        )
    for device in devices.GPU_NAMES:
        assert runs("ForwardBackwardOps", device, "linear", "float32", "large")
        assert not runs(
            "ComputeBoundOps", device, "matmul", "float32", "small"
        )  # launch-bound: the full sweep
        assert not runs("ComputeBoundOps", device, "matmul", "float16", "large")
    full_sweep(monkeypatch)
    assert runs("ComputeBoundOps", "cpu", "conv2d", "float32", "large")
    assert runs("ComputeBoundOps", "cpu", "conv2d", "float16", "medium")
    assert "10-20x slower" in selection.left_out(
        "ComputeBoundOps", "cpu", "conv2d", "float16", "large"
    )
    assert "copy_h2d copies between host and a device" in selection.left_out(
        "MemoryBoundOps", "cpu", "copy_h2d", "float32", "small"
    )


def test_epochs_are_resnet50_tiny_on_the_cpu_and_the_seeds_vgg16_small_on_gpus(monkeypatch):
    assert runs("Epoch", "cpu", "resnet50", 8, 2, "tiny", "train") and runs(
        "Epoch", "cuda", "vgg16", 64, 0, "small"
    )
    assert "MPSBENCH_FULL=1" in selection.left_out("Epoch", "cpu", "vgg16", 8, 0, "tiny", "eval")
    assert "MPSBENCH_FULL=1" in selection.left_out(
        "Epoch", "mps", "vgg16", 64, 0, "cifar10", "train"
    )
    full_sweep(monkeypatch)
    assert runs("Epoch", "mps", "vgg16", 64, 0, "cifar10", "train")
    assert "takes hours" in selection.left_out("Epoch", "cpu", "resnet50", 8, 0, "cifar10", "train")


def test_the_largest_batch_searches_run_in_the_full_sweep_only(monkeypatch):
    monkeypatch.setenv(devices.MPS_WATERMARK_ENV, "1.0")
    for model in (
        "bert_base",
        "bert_base_frozen",
    ):  # the seeds' pair: minutes on the cpu (issue 32)
        assert "fixed memory budget" in selection.left_out("MaxBatch", "cpu", model, "training")
    assert "fills the GPU's memory" in selection.left_out(
        "MaxBatch", "cuda", "bert_base_frozen", "training"
    )
    assert "MPSBENCH_FULL=1" in selection.left_out("MaxBatch", "cpu", "resnet50", "training")
    assert "PYTORCH_MPS_HIGH_WATERMARK_RATIO=1.0" in selection.left_out(
        "MaxBatch", "mps", "vgg16", "inference"
    )
    assert "training only" in selection.left_out(
        "MaxBatch", "cuda", "bert_base_frozen", "inference"
    )
    monkeypatch.delenv(devices.MPS_WATERMARK_ENV)
    assert "PYTORCH_MPS_HIGH_WATERMARK_RATIO unset: torch's default" in selection.left_out(
        "MaxBatch", "mps", "vgg16", "inference"
    )
    full_sweep(monkeypatch)
    assert runs("MaxBatch", "cpu", "resnet50", "training") and runs(
        "MaxBatch", "cuda", "resnet50", "inference"
    )
    assert runs("MaxBatch", "cpu", "bert_base_frozen", "training")
    assert not runs("MaxBatch", "cuda", "bert_base_frozen", "inference")  # never: it is bert_base's


def test_the_table_imports_without_torch():
    import subprocess
    import sys

    code = (
        "import sys; sys.modules['torch'] = None\n"  # any import of torch now fails
        "from mpsbench.measure import selection\n"
        "print(selection.left_out('Training', 'cpu', 'mlp', 8))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "None"
