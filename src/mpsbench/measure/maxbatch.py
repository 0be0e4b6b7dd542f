"""The largest power-of-two batch whose training or inference step fits in a device's memory."""

from __future__ import annotations

import gc
import os
import resource
import time
from collections.abc import Callable
from dataclasses import dataclass

from mpsbench.core import errors, progress
from mpsbench.measure import devices, isolated, models, skips, suite, workloads

CEILING = 4096
MODELS: tuple[str, ...] = ("resnet50", "vgg16", "bert_base", "bert_base_frozen")
CPU_MEMORY_BUDGET = 2 * 1024**3  # beyond batch 1; larger batches take minutes a cpu step
STEPS_PER_TRY = {"training": 2, "inference": 1}  # training peaks once optimizer state exists

log = progress.logger(__name__)


@dataclass(frozen=True)
class Search:
    largest: int  # 0: not even batch 1
    tried: tuple[int, ...]
    error: str | None  # None at the ceiling


def search(
    step: Callable[[int], None],
    release: Callable[[], None],
    ceiling: int = CEILING,
    what: str = "the search",
) -> Search:
    """Doubles the batch from 1 until ``step`` runs out of memory or passes ``ceiling``."""
    tried: list[int] = []
    error, fits, batch_size = None, 0, 1
    while error is None and batch_size <= ceiling:
        tried.append(batch_size)
        began = time.perf_counter()
        try:
            step(batch_size)
        except Exception as exc:
            if not devices.is_out_of_memory(exc):
                raise
            error = errors.first_line(exc)
        gc.collect()  # the failed try's frames form cycles with its tensors
        release()
        outcome = "fits" if error is None else "does not fit"
        log.info("%s: batch %d %s (%.1f s)", what, batch_size, outcome, time.perf_counter() - began)
        if error is None:
            fits, batch_size = batch_size, batch_size * 2
    return Search(fits, tuple(tried), error)


class SizedStep:
    """One model, stepped at each batch the search asks; a try frees only batch and gradients."""

    def __init__(self, kind: str, device: str, model: str) -> None:
        self.kind, self.device, self.spec = kind, devices.get(device), models.get(model)
        self.workload: workloads.Workload | None = None

    def __call__(self, batch_size: int) -> None:
        if (workload := self.workload) is None:  # built inside the search: its OOM is a size
            workload = self.workload = workloads.build(
                self.kind, self.device, self.spec.name, self.spec.batch_sizes[0]
            )
        workload.batch = models.make_batch(self.spec, batch_size).to(self.device)
        workload.batch_size = batch_size
        workload.run(STEPS_PER_TRY[self.kind])
        self.device.synchronize()  # an asynchronous device reports its failure here

    def release(self) -> None:
        if (workload := self.workload) is not None:
            workload.batch = models.make_batch(self.spec, 1)  # on the host
            if workload.optimizer is not None:
                workload.optimizer.zero_grad(set_to_none=True)
        gc.collect()
        self.device.empty_cache()

    def close(self) -> None:
        self.workload = None
        self.release()


def _search(kind: str, device: str, model: str, ceiling: int, budget: int | None) -> Search:
    # a budget limits the address space to batch 1's plus the budget
    step = SizedStep(kind, device, model)
    try:
        if budget is not None:
            step(1)
            step.release()
            import psutil

            limit = psutil.Process().memory_info().vms + budget
            resource.setrlimit(
                resource.RLIMIT_AS, (limit, resource.getrlimit(resource.RLIMIT_AS)[1])
            )
        return search(step, step.release, ceiling, f"{model} {kind} on {device}")
    finally:
        step.close()


def require(device: str, model: str, kind: str) -> None:
    suite.require(kind, device, model)
    if device == "cpu" and not os.path.exists("/proc/self/status"):
        raise skips.SkipNotImplemented(
            "the cpu search needs Linux's RLIMIT_AS and /proc: elsewhere memory runs out silently"
        )


def measure(
    device: str, model: str, kind: str, ceiling: int = CEILING, budget: int = CPU_MEMORY_BUDGET
) -> Search:
    """The cpu's search runs in a child under ``budget``, whose death fails only the search."""
    if device != "cpu":
        return _search(kind, device, model, ceiling, None)
    try:
        return isolated.call(_search, kind, device, model, ceiling, budget)
    except isolated.ChildDied as exc:
        raise RuntimeError(
            f"the cpu search for {model} {kind} died under a {budget / 2**30:.1f} GiB budget: {exc}"
        ) from exc
