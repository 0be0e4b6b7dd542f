"""What the asv benchmark classes share: preparing, guarding and timing a combination, its memory, its cold start.

Kept in the package (not in ``benchmarks/``) so it is unit-tested and typed;
the benchmark modules stay declarative.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from mpsbench import command
from mpsbench.measure import accuracy, correctness, devices, fallback, models, precision, selection, timing, workloads

try:  # present in every asv environment; absent only outside asv
    from asv_runner.benchmarks.mark import SkipNotImplemented as SkipNotImplemented  # re-exported
except ImportError:  # pragma: no cover - exercised only without asv installed

    class SkipNotImplemented(NotImplementedError):  # type: ignore[no-redef]
        """Stand-in with asv's meaning: show this combination as n/a."""


class StepTimer:
    """asv ``timer`` that reports seconds per step for bodies that loop k steps.

    asv subtracts two timer readings around each timed call; dividing the clock
    by k turns that difference into the time of one step. asv reads ``timer``
    after ``setup``, so a benchmark sets it there, per combination.
    """

    def __init__(self, steps_per_call: int) -> None:
        self.steps_per_call = steps_per_call

    def __call__(self) -> float:
        return time.perf_counter() / self.steps_per_call


# Decides whether a (device, model spec, batch size) runs in this asv run: a
# reason to skip, or None. Each family of benchmark classes has its own.
SkipRule = Callable[[str, models.ModelSpec, int], "str | None"]

# On a GPU every benchmark process pays seconds before its first step (device
# context, warm-up, accuracy check: docs/performance.md), and one GPU's default
# run has 3 minutes (docs/budget.md). The classes beyond the step timings
# therefore run a shortlist there by default; the full sweep (MPSBENCH_FULL=1)
# runs every model, kind and dtype.
# Instruments: on mps, training, where leaks live (the May 2022 nightly leaked in
# VGG16 training), on a CNN and on the sub-millisecond mlp where launch overhead
# is the point. On cuda, where nothing falls back to the cpu, the full sweep only:
# their setup_cache is an interpreter of its own (22 s of the H100's default).
GpuModels = dict[str, dict[str, tuple[str, ...]]]  # device -> kind -> models
GPU_INSTRUMENT_MODELS: GpuModels = {
    "mps": {"training": ("mlp", "resnet50"), "inference": ()},
    "cuda": {"training": (), "inference": ()},
}
# Precision: reduced precision is for CNNs and transformers; a GPU's default is
# the transformer's mixed-precision training (its float32 row is
# benchmark_models' Training at the same batch); the cpu, where reduced
# precision is slow, times the mlp in every dtype. Its peak memory on a GPU is in
# the full sweep: another setup_cache interpreter (15 s of the H100's default).
PRECISION_MODELS: dict[str, dict[str, tuple[str, ...]]] = {
    "cpu": {"training": ("mlp",), "inference": ("mlp",)},
    "gpu": {"training": ("bert_base",), "inference": ()},
}
GPU_PRECISION_DTYPES = tuple(name for name in precision.NAMES if name != precision.DEFAULT)
# Cold start: every sample is a fresh interpreter that imports torch and builds
# the model (about 12 s a sample for resnet50 on the H100 host, 38 s for three):
# the cpu's default times its small models, a GPU's is the full sweep only.
GPU_COLD_START: GpuModels = {gpu: {"training": (), "inference": ()} for gpu in devices.GPU_NAMES}


def outside(what: str, spec: models.ModelSpec, batch_size: int, device: str) -> str:
    return (
        f"{spec.name} at batch {batch_size} on {device} is outside the default {what} selection;"
        f" set {selection.FULL_SWEEP_ENV}=1 for the full sweep"
    )


def _small_on_cpu_listed_on_gpus(what: str, kind: str, gpu_models: GpuModels) -> SkipRule:
    """A rule for ``kind``: the cpu's small models; on a GPU, the models ``gpu_models`` lists for it."""

    def reason(device: str, spec: models.ModelSpec, batch_size: int) -> str | None:
        if selection.full_sweep():
            return None
        if device == "cpu" and spec.large:
            return outside(what, spec, batch_size, device)
        if device != "cpu" and spec.name not in gpu_models[device][kind]:
            return outside(f"{kind} {what}", spec, batch_size, device)
        return None

    return reason


def instrument_skip_reason(kind: str) -> SkipRule:
    """The instruments' rule for ``kind`` (seed batch): the cpu's small models, :data:`GPU_INSTRUMENT_MODELS`."""
    return _small_on_cpu_listed_on_gpus("instruments", kind, GPU_INSTRUMENT_MODELS)


def cold_start_skip_reason(kind: str) -> SkipRule:
    """The cold-start rule for ``kind``: the cpu's small models; on a GPU, the full sweep only."""
    return _small_on_cpu_listed_on_gpus("cold start", kind, GPU_COLD_START)


def precision_skip_reason(kind: str, dtype: str) -> SkipRule:
    """The dtype classes' rule for ``kind`` and ``dtype`` (seed batch): :data:`PRECISION_MODELS`.

    On a GPU only the reduced dtypes: the float32 step is benchmark_models' own.
    """

    def reason(device: str, spec: models.ModelSpec, batch_size: int) -> str | None:
        if selection.full_sweep():
            return None
        on_gpu = device != "cpu"
        if spec.name not in PRECISION_MODELS["gpu" if on_gpu else "cpu"][kind]:
            return outside("precision", spec, batch_size, device)
        if on_gpu and dtype not in GPU_PRECISION_DTYPES:
            return (
                f"{spec.name} {kind} in {dtype} on {device} is outside the default precision selection"
                f" (benchmark_models times it); set {selection.FULL_SWEEP_ENV}=1 for the full sweep"
            )
        return None

    return reason


def left_out(device: str, model: str, batch_size: int, skip_reason: SkipRule = selection.skip_reason) -> str | None:
    """Why this run leaves the combination out, judged from its params alone, or None if it runs.

    The model is not run at the batch size, the device is not in
    MPSBENCH_DEVICES, or ``skip_reason`` leaves it out. Probes no device and
    builds nothing: :mod:`mpsbench.measure.preselect` asks it before asv starts any
    process, and :func:`require` asks it first in every ``setup``.
    """
    spec = models.get(model)
    if batch_size not in spec.batch_sizes:
        return str(models.BatchSizeError(f"{model} is not run at batch {batch_size}"))
    return selection.device_reason(device) or skip_reason(device, spec, batch_size)


# Each benchmark class's ``left_out``: its params in order, the reason this run
# leaves the combination out (None: it runs). The class's setup applies the same
# rule through require(); tests/test_preselect.py checks the two agree.
def steps_left_out(device: str, model: str, batch_size: int) -> str | None:
    """Training, Inference and their capacity classes."""
    return left_out(device, model, batch_size)


def at_seed_batch(skip_reason: SkipRule) -> Callable[[str, str], str | None]:
    """The rule of a class whose params are (device, model), run at the model's seed batch size."""

    def rule(device: str, model: str) -> str | None:
        return left_out(device, model, models.get(model).seed_batch_size, skip_reason)

    return rule


def cold_start_left_out(kind: str) -> Callable[[str, str], str | None]:
    """The cold-start classes of ``kind`` (seed batch size)."""
    return at_seed_batch(cold_start_skip_reason(kind))


def precision_memory_skip_reason(kind: str, dtype: str) -> SkipRule:
    """The precision peak-memory rule: the step timings' on the cpu; on a GPU, the full sweep only."""
    timings = precision_skip_reason(kind, dtype)

    def reason(device: str, spec: models.ModelSpec, batch_size: int) -> str | None:
        if device != "cpu" and not selection.full_sweep():
            return outside(f"{kind} precision peak memory", spec, batch_size, device)
        return timings(device, spec, batch_size)

    return reason


def precision_left_out(kind: str, memory: bool = False) -> Callable[[str, str, str], str | None]:
    """The precision classes of ``kind`` (seed batch size), ``memory`` for the peak memory ones.

    A dtype the device lacks is found in ``setup``, by the build's torch.
    """
    rule_for = precision_memory_skip_reason if memory else precision_skip_reason

    def rule(device: str, model: str, dtype: str) -> str | None:
        return left_out(device, model, models.get(model).seed_batch_size, rule_for(kind, dtype))

    return rule


def modern_skip_reason(device: str, spec: models.ModelSpec, batch_size: int) -> str | None:
    """The modern models' step rule: the cpu at batch 1 only (a llama_small training step at
    batch 8 takes half a minute on two cores); a GPU in the full sweep only, at any batch: the
    H100's default already takes 165 of its 180 s (docs/budget.md), and these five rows
    took most of 169 s more there. The GPU default keeps the Llama's prefill and decode."""
    if selection.full_sweep() or (device == "cpu" and batch_size == 1):
        return None
    return outside("modern models'", spec, batch_size, device)


def modern_left_out(device: str, model: str, batch_size: int) -> str | None:
    """ModernTraining and ModernInference."""
    return left_out(device, model, batch_size, modern_skip_reason)


def instruments_left_out(kind: str) -> Callable[[str, str], str | None]:
    """The instrument classes of ``kind`` (seed batch size)."""
    return at_seed_batch(instrument_skip_reason(kind))


def require_device(device: str, left_out_reason: str | None = None) -> None:
    """Skip, with the reason, a combination this run leaves out or whose device is not usable here."""
    if left_out_reason is not None:
        raise SkipNotImplemented(left_out_reason)
    found = devices.availability(device)
    if not found.usable:
        raise SkipNotImplemented(f"{device} is not usable here: {found.reason}")


def require_torch(minimum: tuple[int, int], what: str) -> None:
    """Skip, with the reason, what needs a newer torch than this build's."""
    if precision.torch_version() < minimum:
        needed = ".".join(str(part) for part in minimum)
        raise SkipNotImplemented(f"{what} needs torch {needed} or later; this is {torch.__version__}")


def require(
    kind: str,
    device: str,
    model: str,
    batch_size: int,
    *,
    dtype: str = precision.DEFAULT,
    skip_reason: SkipRule = selection.skip_reason,
) -> models.ModelSpec:
    """Skip, with the reason (asv shows n/a), a combination that cannot or should not run here.

    Checks in order: the model runs at this batch size; the combination is in
    this run's selection; the device is usable; the model's packages import;
    the device supports the dtype with this torch and OS. Builds nothing.
    """
    spec = models.get(model)
    reason = left_out(device, model, batch_size, skip_reason)
    if reason is not None:
        raise SkipNotImplemented(reason)
    require_device(device)
    missing = spec.missing_requirements()
    if missing:
        raise SkipNotImplemented(f"{model} needs {', '.join(missing)}, not importable in this environment")
    reason = precision.unsupported_reason(device, kind, dtype)
    if reason is not None:
        raise SkipNotImplemented(f"{model} {kind} in {dtype} on {device}: {reason}")
    return spec


def prepare(
    kind: str,
    device: str,
    model: str,
    batch_size: int,
    *,
    dtype: str = precision.DEFAULT,
    skip_reason: SkipRule = selection.skip_reason,
    guarded: bool = True,
    compiled: bool = False,
) -> workloads.Workload:
    """Build (once per process) and warm up a workload for an asv ``setup``.

    Turns the reasons a combination cannot run into asv's outcomes: absent
    devices, combinations the registry does not define, missing packages,
    selections, unsupported dtypes and batches that do not fit in memory are
    skipped with the reason (n/a); an op that torch lacks on the device fails
    the combination with the op's name, never a silent skip. ``compiled``
    wraps the model in ``torch.compile`` (mpsbench.measure.compiled). ``guarded``
    (timings) also fails combinations whose numbers would mislead: see
    :func:`guard`. Instruments that report those very facts pass False.
    """
    require(kind, device, model, batch_size, dtype=dtype, skip_reason=skip_reason)
    with OutOfMemorySkips(device, model, batch_size):  # build, copy to the device, warm-up, checks
        try:
            workload, _ = workloads.cached(kind, device, model, batch_size, dtype, compiled)
        except SkipNotImplemented:
            raise
        except NotImplementedError as exc:  # torch has no kernel for an op on this device
            raise RuntimeError(f"{model} on {device}: torch lacks an op: {exc}") from exc
        if guarded:
            guard(workload)
    return workload


class OutOfMemorySkips:
    """A context in which any device's out-of-memory error skips the combination with a one-line reason.

    ``prepare`` holds it over building, copying and warming up; a timed body
    holds it over its steps (a class, not a generator: it costs a timed call
    well under a microsecond).
    """

    def __init__(self, device: str, model: str, batch_size: int) -> None:
        self.device, self.model, self.batch_size = device, model, batch_size

    def __enter__(self) -> OutOfMemorySkips:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, traceback: object) -> None:
        if exc is None or isinstance(exc, SkipNotImplemented) or not devices.is_out_of_memory(exc):
            return
        workloads.forget()
        devices.empty_cache(self.device)
        first_line = command.first_line(exc)
        raise SkipNotImplemented(
            f"{self.model} at batch {self.batch_size} does not fit in {self.device} memory: {first_line}"
        ) from exc


def guard(workload: workloads.Workload) -> None:
    """Fail a combination whose timing would not be an honest device number.

    Ops that fell back to the cpu during warm-up fail it with their names
    (``MPSBENCH_ALLOW_FALLBACK=1`` times it anyway); on a GPU, results that
    disagree with the cpu's fail it with the measured error (checked once
    per process and workload); on any device, one of the input layouts that
    broke before (mpsbench.measure.correctness) computed wrong fails it with the
    pattern's error (checked once per process, device and dtype).
    """
    fallback.refuse(workload.label, workload.fallback_ops)
    correctness.verify(workload.device, workload.dtype)
    if accuracy.needed(workload.device):
        accuracy.verify(workload)


def throughput(workload: workloads.Workload) -> float:
    """Samples per second from the median of several timed calls (never a single one).

    Five calls or a quarter second, whichever is longer: the time_ benchmark is
    the precise measurement; this one restates it in the unit users compare.
    """
    return timing.time_steps(workload, min_calls=5, min_seconds=0.25).samples_per_second


@dataclass(frozen=True)
class MemoryPeaks:
    """Peaks over one step in MiB; None where the device keeps no such counter."""

    allocated: float | None  # live tensors (cuda, mps); cpu: the largest RSS sample over the step
    driver: float | None  # what the driver holds for torch, caches included (mps, cuda)


def memory_peaks(workload: workloads.Workload) -> MemoryPeaks:
    """Sample memory before, inside (after forward, after backward) and after one step."""
    device = workload.device
    devices.synchronize(device)
    sampler = devices.PeakSampler(device)
    sampler.sample()
    workload.step(probe=sampler.sample)
    devices.synchronize(device)
    sampler.sample()  # mps frees late: the driver may still grow while the step finishes
    peak, driver = sampler.peak_bytes(), sampler.driver_peak_bytes()
    return MemoryPeaks(
        None if peak is None else peak / devices.MIB,
        None if driver is None else driver / devices.MIB,
    )


def peak_memory_mib(workload: workloads.Workload) -> float:
    """Peak memory over one step, in MiB; skipped with the reason where the device gives no reading (never 0)."""
    allocated = memory_peaks(workload).allocated
    if allocated is None:
        raise SkipNotImplemented(f"no {workload.device} memory reading: {devices.no_reading_reason(workload.device)}")
    return allocated


def cold_start_code(kind: str, device: str, model: str, batch_size: int) -> tuple[str, str]:
    """An asv ``timeraw_`` body: (statement, setup), run in a fresh process; only the statement is timed.

    The setup imports torch and builds the workload on the device (creating
    the device context and copying the weights): excluded. The statement is
    the first step and a synchronize: kernel selection, Metal shader and
    graph compilation, cuBLAS/cuDNN initialisation and lazy module loading.
    """
    setup = (
        "from mpsbench.measure import suite\n"
        f"first_step = suite.cold_first_step({kind!r}, {device!r}, {model!r}, {batch_size!r})"
    )
    return "first_step()", setup


def cold_first_step(kind: str, device: str, model: str, batch_size: int) -> Callable[[], None]:
    """In a fresh process: build the workload (untimed); return its first step (timed).

    The step runs under the fallback recorder and fails, like a timing does,
    when an op fell back to the cpu (unless ``MPSBENCH_ALLOW_FALLBACK=1``).
    """
    workload = workloads.build(kind, device, model, batch_size)
    devices.synchronize(device)

    def first_step() -> None:
        with fallback.Recorder() as recorder:
            workload.step()
            devices.synchronize(device)
        fallback.refuse(f"{workload.label}, first step", recorder.ops)

    return first_step
