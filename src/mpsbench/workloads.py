"""Workloads: a model, its optimizer and a fixed batch, resident on a device.

A training step is exactly: zero the gradients, forward, loss, backward,
optimizer step. An inference step is a forward pass in eval mode under
``torch.inference_mode()``. Neither synchronizes the device: the caller does,
once, before it reads a clock.
"""

from __future__ import annotations

import math
from typing import Callable

import torch
from torch import nn

from mpsbench import devices, models

KINDS: tuple[str, ...] = ("training", "inference")

Probe = Callable[[], None]  # called where memory is highest inside a step


class WorkloadError(ValueError):
    """A workload that cannot be built as asked (unknown kind, missing package)."""


class Workload:
    """One model on one device with one batch, stepped for training or inference."""

    def __init__(self, kind: str, device: str, spec: models.ModelSpec, batch_size: int) -> None:
        self.kind = kind
        self.device = device
        self.spec = spec
        self.batch_size = batch_size
        devices.seed(device, models.SEED)
        self.model = spec.build().to(device)
        self.batch = models.make_batch(spec, batch_size).to(device)
        self.loss_fn = nn.CrossEntropyLoss()
        self.optimizer: torch.optim.Optimizer | None = None
        if kind == "training":
            self.model.train()
            trained = self.trained_parameters()
            for parameter in self.model.parameters():
                parameter.requires_grad_(False)
            for parameter in trained:
                parameter.requires_grad_(True)
            self.optimizer = spec.make_optimizer(trained)
        else:
            self.model.eval()

    def trained_parameters(self) -> list[nn.Parameter]:
        if self.spec.trainable is None:
            return list(self.model.parameters())
        return self.spec.trainable(self.model)

    @property
    def samples_per_step(self) -> int:
        return self.batch_size

    def step(self, probe: Probe | None = None) -> torch.Tensor:
        """Run one step; returns the loss (training) or the logits (inference)."""
        if self.optimizer is None:
            with torch.inference_mode():
                logits: torch.Tensor = self.spec.forward(self.model, self.batch.inputs)
            if probe is not None:
                probe()
            return logits
        self.optimizer.zero_grad(set_to_none=True)
        logits = self.spec.forward(self.model, self.batch.inputs)
        loss: torch.Tensor = self.loss_fn(logits, self.batch.target)
        if probe is not None:
            probe()  # activations are alive: the forward peak
        loss.backward()  # type: ignore[no-untyped-call]  # torch leaves it unannotated
        if probe is not None:
            probe()  # gradients are alive: the backward peak
        self.optimizer.step()
        return loss

    def run(self, steps: int) -> None:
        """Run ``steps`` steps back to back, without synchronizing."""
        for _ in range(steps):
            self.step()

    def warm_up(self, steps: int = 2) -> None:
        """Run steps until kernels are chosen, shaders compiled and optimizer state exists.

        Also checks what every later step relies on: the output lives on the
        asked device (no silent move to the cpu) and the loss is finite.
        """
        for _ in range(steps):
            result = self.step()
        devices.synchronize(self.device)
        if result.device.type != self.device:
            raise WorkloadError(
                f"{self.spec.name} on {self.device} produced its output on {result.device.type}"
            )
        if self.kind == "training" and not math.isfinite(float(result.detach().cpu())):
            raise WorkloadError(f"{self.spec.name} on {self.device}: non-finite training loss")


def check_kind(kind: str) -> str:
    if kind not in KINDS:
        raise WorkloadError(f"unknown workload kind {kind!r}; choose one of: {', '.join(KINDS)}")
    return kind


def build(kind: str, device: str, model: str, batch_size: int) -> Workload:
    """Validate every argument, then build the workload (one-line errors on bad input)."""
    check_kind(kind)
    devices.check_name(device)
    spec = models.get(model)
    models.check_batch_size(spec, batch_size)
    if kind == "inference" and model not in models.INFERENCE_NAMES:
        raise WorkloadError(f"{model} differs from its base model in training only; time its inference as bert_base")
    missing = spec.missing_requirements()
    if missing:
        raise WorkloadError(f"{model} needs {', '.join(missing)}, which this environment cannot import")
    return Workload(kind, device, spec, batch_size)


_cache: dict[tuple[str, str, str, int], Workload] = {}


def cached(kind: str, device: str, model: str, batch_size: int) -> tuple[Workload, bool]:
    """The workload for these arguments, built once per process and warmed up.

    asv calls ``setup`` again before every sample; caching keeps that repeat
    cheap. Only one workload is kept, so that a process never holds two
    models' memory. Returns the workload and whether it was built just now.
    """
    key = (kind, device, model, batch_size)
    if key in _cache:
        return _cache[key], False
    _cache.clear()
    devices.empty_cache(device)
    workload = build(kind, device, model, batch_size)
    workload.warm_up()
    _cache[key] = workload
    return workload, True


def forget() -> None:
    """Drop the cached workload and its memory (after an out-of-memory error, say)."""
    _cache.clear()
