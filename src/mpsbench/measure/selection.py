"""The selection table: which combinations of each benchmark class this run times, and why not.

:data:`RULES` maps each parameterized class to a rule: its params -> why left out, or None.
``setup``, ``setup_cache`` and :mod:`~mpsbench.measure.preselect` all ask :func:`left_out`, so
they cannot disagree. Only MPSBENCH_FULL and MPSBENCH_DEVICES change it. Torch-free.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from mpsbench.core import settings
from mpsbench.measure import devices, models, tolerances

# asv passes the environment through to every benchmark process.
FULL_SWEEP_ENV, DEVICES_ENV = settings.FULL, settings.DEVICES

Rule = Callable[..., "str | None"]


def full_sweep() -> bool:
    return settings.flag(FULL_SWEEP_ENV)


def selected_devices() -> tuple[str, ...] | None:
    return settings.choices(DEVICES_ENV, devices.NAMES)


def device_reason(device: str) -> str | None:
    """Why ``device`` is left out of this run, or None.

    Unset, every device runs but the cpu beside a GPU: its default would take several GPU budgets.
    """
    names = selected_devices()
    if names is not None:
        return None if device in names else f"{device} is not in {DEVICES_ENV}={','.join(names)}"
    accelerators = devices.accelerators_present()
    if device == "cpu" and accelerators:
        return (
            f"the cpu is left out by default on a machine with {' and '.join(accelerators)};"
            f" set {DEVICES_ENV}={','.join(accelerators)},cpu to time it too"
        )
    return None


def _decide(device: str, default: bool, outside: str, never: str | None = None) -> str | None:
    """``never`` (left out even in the full sweep), the device's reason, or ``outside``."""
    reason = never or device_reason(device)
    if reason:
        return reason
    if default or full_sweep():
        return None
    return f"{outside}; set {FULL_SWEEP_ENV}=1 for the full sweep"


def _outside(model: str, device: str, what: str = "", batch_size: int | None = None) -> str:
    batch = models.get(model).seed_batch_size if batch_size is None else batch_size
    what = f"{what} " if what else ""
    return f"{model} at batch {batch} on {device} is outside the default {what}selection"


# --- the model steps
CPU_BATCH_SIZES = (1, 8, 32)
CPU_LARGE_BATCH_SIZES = (1, 8)  # a large model at its seed batch would spend the cpu budget alone


def _not_at(model: str, batch_size: int) -> str | None:
    if batch_size in models.get(model).batch_sizes:
        return None
    return f"{model} is not run at batch {batch_size}"


def steps(device: str, model: str, batch_size: int) -> str | None:
    """GPUs time the seed batch size: batch 1 there is launch-bound and noisier than the
    regression factor can gate."""
    spec = models.get(model)
    if device != "cpu":
        default = batch_size == spec.seed_batch_size
    elif spec.large:
        default = batch_size in CPU_LARGE_BATCH_SIZES
    else:
        default = batch_size in CPU_BATCH_SIZES or batch_size == spec.seed_batch_size
    outside = _outside(model, device, batch_size=batch_size)
    return _decide(device, default, outside, _not_at(model, batch_size))


def modern(device: str, model: str, batch_size: int) -> str | None:
    outside = _outside(model, device, "modern models'", batch_size)
    return _decide(device, device == "cpu" and batch_size == 1, outside, _not_at(model, batch_size))


# --- the classes at each model's seed batch size
# On mps, training (where leaks live) on a CNN and the launch-bound mlp; on cuda, each
# setup_cache is an interpreter the GPU's budget cannot spare.
INSTRUMENTS_ON_GPU: dict[str, dict[str, tuple[str, ...]]] = {
    "mps": {"training": ("mlp", "resnet50"), "inference": ()},
    "cuda": {"training": (), "inference": ()},
}
# A GPU's default is the transformer's mixed-precision training; the cpu, where reduced
# precision is slow, times the mlp in every dtype.
PRECISION_MODELS: dict[str, dict[str, tuple[str, ...]]] = {
    "cpu": {"training": ("mlp",), "inference": ("mlp",)},
    "gpu": {"training": ("bert_base",), "inference": ()},
}
FLOAT32 = "float32"
# Compiling costs more than every timed step together.
COMPILED_DEFAULT: dict[str, tuple[str, ...]] = {"cpu": ("mlp",), "mps": (), "cuda": ()}


def instruments(kind: str, device: str, model: str) -> str | None:
    if device == "cpu":
        return _decide(device, not models.get(model).large, _outside(model, device, "instruments"))
    default = model in INSTRUMENTS_ON_GPU[device][kind]
    return _decide(device, default, _outside(model, device, f"{kind} instruments"))


def cold_start(device: str, model: str) -> str | None:
    """GPUs in the full sweep: every sample imports torch anew."""
    default = device == "cpu" and not models.get(model).large
    return _decide(device, default, _outside(model, device, "cold start"))


def precision(kind: str, device: str, model: str, dtype: str) -> str | None:
    on_gpu = device != "cpu"
    listed = model in PRECISION_MODELS["gpu" if on_gpu else "cpu"][kind]
    if listed and on_gpu and dtype == FLOAT32:
        return _decide(
            device,
            False,
            f"{model} {kind} in {dtype} on {device} is outside the default precision"
            " selection (benchmark_models times it)",
        )
    return _decide(device, listed, _outside(model, device, "precision"))


def precision_memory(kind: str, device: str, model: str, dtype: str) -> str | None:
    if device == "cpu":
        return precision(kind, device, model, dtype)
    return _decide(device, False, _outside(model, device, f"{kind} precision peak memory"))


def compiled(kind: str, device: str, model: str) -> str | None:
    default = model in COMPILED_DEFAULT[device]
    return _decide(device, default, _outside(model, device, f"compiled {kind}"))


def _family(device: str, family: str, default_devices: tuple[str, ...], why: str) -> str | None:
    outside = f"{family} on {device} is full sweep only ({why})"
    return _decide(device, device in default_devices, outside)


def generation(device: str, model: str) -> str | None:
    return _family(
        device,
        f"{model}'s generation",
        ("cpu", "mps"),
        "the GPU's 3-minute default is full; batch-1 decode there is host-bound",
    )


def correctness(device: str, pattern: str, dtype: str) -> str | None:
    """cuda in the full sweep: every timed cuda process checks the guarding patterns anyway."""
    if dtype not in (dtypes := tolerances.dtypes(pattern)):
        return f"{pattern} is measured in {', '.join(dtypes)}, the dtypes its report showed wrong"
    if pattern == "compiled_layer_norm" and device == "cpu":
        return _decide(
            device,
            False,
            "the compiled_layer_norm error on the cpu is full sweep only (a compile costs"
            " more than every other pattern; the bug was mps's)",
        )
    return _family(
        device,
        f"the {pattern} {dtype} error",
        ("cpu", "mps"),
        "every timed process checks the patterns; the GPU's 3 minutes are full",
    )


def leaks(device: str, pattern: str) -> str | None:
    """mps by default: the cpu's RSS moves by more than a leak would, and cuda's loops read
    nothing."""
    return _family(device, f"the {pattern} leak loop", ("mps",), "the leaks were mps's")


# --- ops, epochs, the largest batch
HOST_DEVICE_COPIES = ("copy_h2d", "copy_d2h")
# Reduced precision on an x86 cpu is an order of magnitude slower: a large call takes minutes.
CPU_REDUCED_PRECISION_SIZES = ("small", "medium")


def op(device: str, name: str, dtype: str, size: str) -> str | None:
    """float32; on a GPU the large size, bound by the GPU rather than the host launching it."""
    never = None
    if name in HOST_DEVICE_COPIES and device == "cpu":
        never = f"{name} copies between host and a device; on the cpu both ends are host memory"
    elif device == "cpu" and dtype != FLOAT32 and size not in CPU_REDUCED_PRECISION_SIZES:
        never = f"{name} in {dtype} at {size} on the cpu is not timed: reduced precision is 10-20x slower there"
    default = dtype == FLOAT32 and (size == "large" if device != "cpu" else size != "large")
    outside = f"{name} in {dtype} at {size} on {device} is outside the default selection"
    return _decide(device, default, outside, never)


def epoch(
    device: str, model: str, batch_size: int, num_workers: int, dataset: str, phase: str = "train"
) -> str | None:
    """Both loader settings run: their difference is the data-loading bottleneck."""
    never = None
    if device == "cpu" and dataset == "cifar10":
        never = (
            "a full CIFAR-10 epoch on the cpu takes hours (50,000 images at a few images/s):"
            " run the 'small' dataset on the cpu instead"
        )
    default = (model, batch_size, dataset) == (
        ("resnet50", 8, "tiny") if device == "cpu" else ("vgg16", 64, "small")
    )
    outside = f"{model} at batch {batch_size} with {num_workers} workers on the {dataset} dataset on {device}"
    return _decide(device, default, f"{outside} is outside the default selection", never)


def largest_batch(device: str, model: str, kind: str) -> str | None:
    """Full sweep only: each search steps the model at every batch up to its memory limit."""
    never = None
    if kind == "inference" and model not in models.INFERENCE_NAMES:
        never = (
            f"{model} differs from its base model in training only: its inference is bert_base's"
        )
    if device == "cuda":
        outside = f"the cuda search for {model} {kind} fills the GPU's memory batch by batch (seconds to half a minute)"
    elif device == "mps":
        ratio, env = devices.mps_high_watermark_ratio(), devices.MPS_WATERMARK_ENV
        limit = f"{env}={ratio}" if ratio is not None else f"{env} unset: torch's default"
        outside = f"the mps search grows memory up to the high watermark ({limit}), which can push the Mac into swap first"
    else:
        outside = (
            f"the cpu search for {model} {kind} steps every batch up to a fixed memory budget (minutes; its"
            " growth per sample is what the default's peak-memory rows track)"
        )
    return _decide(device, False, f"{outside}; it is outside the default selection", never)


RULES: dict[str, Rule] = {
    "Training": steps,
    "Inference": steps,
    "TrainingCapacity": steps,
    "InferenceCapacity": steps,
    "ModernTraining": modern,
    "ModernInference": modern,
    "TrainingColdStart": cold_start,
    "InferenceColdStart": cold_start,
    "TrainingInstruments": functools.partial(instruments, "training"),
    "InferenceInstruments": functools.partial(instruments, "inference"),
    "TrainingPrecision": functools.partial(precision, "training"),
    "InferencePrecision": functools.partial(precision, "inference"),
    "TrainingPrecisionCapacity": functools.partial(precision_memory, "training"),
    "InferencePrecisionCapacity": functools.partial(precision_memory, "inference"),
    "CompiledTraining": functools.partial(compiled, "training"),
    "CompiledInference": functools.partial(compiled, "inference"),
    "LlmPrefill": generation,
    "LlmDecode": generation,
    "Correctness": correctness,
    "ReportedCorrectness": correctness,
    "Determinism": correctness,
    "LeakPatterns": leaks,
    "ComputeBoundOps": op,
    "MemoryBoundOps": op,
    "ForwardBackwardOps": op,
    "Epoch": epoch,
    "MaxBatch": largest_batch,
}


def left_out(benchmark: str, *params: object) -> str | None:
    """Why this run leaves out ``benchmark``'s combination ``params``, or None; probes no device
    and builds nothing, as it is asked before asv starts any process."""
    if benchmark not in RULES:
        raise KeyError(
            f"no selection rule for benchmark class {benchmark!r}; the table has: {', '.join(RULES)}"
        )
    return RULES[benchmark](*params)
