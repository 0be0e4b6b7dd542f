"""The selection table, torch-free: only MPSBENCH_FULL and MPSBENCH_DEVICES change an answer."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from mpsbench.core import settings
from mpsbench.measure import devices, models, tolerances

# asv passes the environment through to every benchmark process
FULL_SWEEP_ENV, DEVICES_ENV = settings.FULL, settings.DEVICES


def full_sweep() -> bool:
    return settings.flag(FULL_SWEEP_ENV)


def selected_devices() -> tuple[str, ...] | None:
    return settings.choices(DEVICES_ENV, devices.NAMES)


def device_reason(device: str) -> str | None:
    """Why this run leaves ``device`` out, or None: by default the cpu beside a GPU."""
    if (names := selected_devices()) is not None:
        return None if device in names else f"{device} is not in {DEVICES_ENV}={','.join(names)}"
    if device == "cpu" and (gpus := devices.accelerators_present()):
        return (
            f"the cpu is left out by default on a machine with {' and '.join(gpus)};"
            f" set {DEVICES_ENV}={','.join(gpus)},cpu to time it too"
        )
    return None


def _decide(device: str, default: bool, outside: str, never: str | None = None) -> str | None:
    if reason := never or device_reason(device):
        return reason
    return (
        None if default or full_sweep() else f"{outside}; set {FULL_SWEEP_ENV}=1 for the full sweep"
    )


def _model(device: str, model: str, default: bool, what: str = "", batch: int = 0) -> str | None:
    spec = models.get(model)
    never = f"{model} is not run at batch {batch}" if batch not in (0, *spec.batch_sizes) else None
    outside = f"{model} at batch {batch or spec.seed_batch_size} on {device} is outside the default"
    return _decide(device, default, f"{outside} {what}selection", never)


CPU_BATCH_SIZES = (1, 8, 32)
CPU_LARGE_BATCH_SIZES = (1, 8)  # a large model at its seed batch would spend the cpu budget alone


def steps(device: str, model: str, batch_size: int) -> str | None:
    """GPUs time the seed batch: batch 1 there is launch-bound, noisier than the gate allows."""
    spec = models.get(model)
    if device != "cpu":
        default = batch_size == spec.seed_batch_size
    elif spec.large:
        default = batch_size in CPU_LARGE_BATCH_SIZES
    else:
        default = batch_size in (*CPU_BATCH_SIZES, spec.seed_batch_size)
    return _model(device, model, default, batch=batch_size)


def modern(device: str, model: str, batch_size: int) -> str | None:
    return _model(device, model, device == "cpu" and batch_size == 1, "modern models' ", batch_size)


# cuda: none, each setup_cache is an interpreter its budget cannot spare
INSTRUMENTS_ON_GPU = {("mps", "training", "mlp"), ("mps", "training", "resnet50")}
PRECISION_MODELS = {
    ("cpu", "training", "mlp"),
    ("cpu", "inference", "mlp"),
    ("gpu", "training", "bert_base"),
}
FLOAT32 = "float32"
# compiling costs more than every timed step together
COMPILED_DEFAULT = {("cpu", "training", "mlp"), ("cpu", "inference", "mlp")}


def instruments(kind: str, device: str, model: str) -> str | None:
    listed = (device, kind, model) in INSTRUMENTS_ON_GPU
    default = not models.get(model).large if device == "cpu" else listed
    return _model(device, model, default, f"{kind} instruments ")


def cold_start(device: str, model: str) -> str | None:
    """GPUs in the full sweep: every sample imports torch anew."""
    return _model(device, model, device == "cpu" and not models.get(model).large, "cold start ")


def precision(kind: str, device: str, model: str, dtype: str) -> str | None:
    on_gpu = device != "cpu"
    listed = ("gpu" if on_gpu else "cpu", kind, model) in PRECISION_MODELS
    if listed and on_gpu and dtype == FLOAT32:
        outside = f"{model} {kind} in {dtype} on {device} is outside the default precision"
        return _decide(device, False, f"{outside} selection (benchmark_models times it)")
    return _model(device, model, listed, "precision ")


def precision_memory(kind: str, device: str, model: str, dtype: str) -> str | None:
    if device == "cpu":
        return precision(kind, device, model, dtype)
    return _model(device, model, False, f"{kind} precision peak memory ")


def compiled(kind: str, device: str, model: str) -> str | None:
    return _model(device, model, (device, kind, model) in COMPILED_DEFAULT, f"compiled {kind} ")


def _family(
    device: str, family: str, why: str, default: tuple[str, ...] = ("cpu", "mps")
) -> str | None:
    return _decide(device, device in default, f"{family} on {device} is full sweep only ({why})")


def generation(device: str, model: str) -> str | None:
    why = "the GPU's 3 minutes are full; batch-1 decode there is host-bound"
    return _family(device, f"{model}'s generation", why)


def correctness(device: str, pattern: str, dtype: str) -> str | None:
    if dtype not in (dtypes := tolerances.dtypes(pattern)):
        return f"{pattern} is measured in {', '.join(dtypes)}, the dtypes its report showed wrong"
    if pattern == "compiled_layer_norm":
        why = "a compile costs more than every other pattern; the bug was mps's"
        return _family(device, f"the {pattern} error", why, ("mps",))
    why = "every timed process checks them; the GPU's 3 minutes are full"
    return _family(device, f"the {pattern} {dtype} error", why)


def leaks(device: str, pattern: str) -> str | None:
    """mps by default: the cpu's RSS moves more than a leak; cuda's loops read nothing."""
    return _family(device, f"the {pattern} leak loop", "the leaks were mps's", ("mps",))


HOST_DEVICE_COPIES = ("copy_h2d", "copy_d2h")
CPU_REDUCED_PRECISION_SIZES = ("small", "medium")


def op(device: str, name: str, dtype: str, size: str) -> str | None:
    """float32; on a GPU the large size, bound by the GPU rather than the host launching it."""
    never = None
    if device == "cpu" and name in HOST_DEVICE_COPIES:
        never = f"{name} copies between host and a device: on the cpu both are host memory"
    elif device == "cpu" and dtype != FLOAT32 and size not in CPU_REDUCED_PRECISION_SIZES:
        never = f"{name} in {dtype} at {size}: reduced precision is 10-20x slower on the cpu"
    default = dtype == FLOAT32 and (size == "large") == (device != "cpu")
    outside = f"{name} in {dtype} at {size} on {device} is outside the default selection"
    return _decide(device, default, outside, never)


def epoch(
    device: str, model: str, batch_size: int, num_workers: int, dataset: str, phase: str = "train"
) -> str | None:
    """Both loader settings run: their difference is the data-loading bottleneck."""
    cpu = device == "cpu"
    never = (
        "a CIFAR-10 epoch on the cpu takes hours: use 'small' there"
        if cpu and dataset == "cifar10"
        else None
    )
    seed = ("resnet50", 8, "tiny") if cpu else ("vgg16", 64, "small")
    outside = f"{model} at batch {batch_size} with {num_workers} workers on {dataset} on {device}"
    default = (model, batch_size, dataset) == seed
    return _decide(device, default, f"{outside} is outside the default selection", never)


def largest_batch(device: str, model: str, kind: str) -> str | None:
    never = models.get(model).refusal(kind)
    if device == "mps":
        ratio, env = devices.mps_high_watermark_ratio(), devices.MPS_WATERMARK_ENV
        limit = f"{env}={ratio}" if ratio is not None else f"{env} unset: torch's default"
        why = f"the mps search grows memory up to the high watermark ({limit}): the Mac may swap"
    else:
        limit = (
            "fills the GPU's memory" if device == "cuda" else "steps up to a fixed memory budget"
        )
        why = f"the {device} search for {model} {kind} {limit}"
    return _decide(device, False, f"{why}; it is outside the default selection", never)


RULES: dict[str, Callable[..., str | None]] = {
    **dict.fromkeys(("Training", "Inference", "TrainingCapacity", "InferenceCapacity"), steps),
    **dict.fromkeys(("ModernTraining", "ModernInference"), modern),
    **dict.fromkeys(("TrainingColdStart", "InferenceColdStart"), cold_start),
    "TrainingInstruments": partial(instruments, "training"),
    "InferenceInstruments": partial(instruments, "inference"),
    "TrainingPrecision": partial(precision, "training"),
    "InferencePrecision": partial(precision, "inference"),
    "TrainingPrecisionCapacity": partial(precision_memory, "training"),
    "InferencePrecisionCapacity": partial(precision_memory, "inference"),
    "CompiledTraining": partial(compiled, "training"),
    "CompiledInference": partial(compiled, "inference"),
    **dict.fromkeys(("LlmPrefill", "LlmDecode"), generation),
    **dict.fromkeys(("Correctness", "ReportedCorrectness", "Determinism"), correctness),
    "LeakPatterns": leaks,
    **dict.fromkeys(("ComputeBoundOps", "MemoryBoundOps", "ForwardBackwardOps"), op),
    "Epoch": epoch,
    "MaxBatch": largest_batch,
}


def left_out(benchmark: str, *params: object) -> str | None:
    """Why this run leaves out ``benchmark``'s combination, or None; probes no device."""
    if benchmark not in RULES:
        raise KeyError(
            f"no selection rule for benchmark class {benchmark!r}; the table has: {', '.join(RULES)}"
        )
    return RULES[benchmark](*params)
