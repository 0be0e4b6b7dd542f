"""A model, its optimizer and a fixed batch, resident on a device, and its unsynchronized step."""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from mpsbench.core import errors
from mpsbench.measure import devices, fallback, models, precision
from mpsbench.measure.optional_torch import nn, torch

KINDS: tuple[str, ...] = ("training", "inference")


class WorkloadError(ValueError):
    """A failed benchmark, not a user's mistake."""


def resident(device: devices.Device, spec: models.ModelSpec) -> nn.Module:
    device.seed(models.SEED)
    with device.creating():
        return spec.build().to(device)


class Workload:
    def __init__(
        self,
        kind: str,
        device: str,
        spec: models.ModelSpec,
        batch_size: int,
        dtype: str = precision.DEFAULT,
        compiled: bool = False,
    ) -> None:
        self.kind, self.spec, self.batch_size = kind, spec, batch_size
        self.dtype, self.compiled = dtype, compiled
        self.device = devices.get(device)
        self.model = resident(self.device, spec)
        self.batch = models.make_batch(spec, batch_size).to(device)
        if kind == "inference" and precision.is_reduced(dtype):
            self.model.to(precision.dtype_of(dtype))
            self.batch = self.batch.cast(precision.dtype_of(dtype))
        if compiled:
            self.model = torch.compile(self.model)  # type: ignore[assignment]
        self.first_step_seconds: float | None = None
        self.loss_fn = nn.CrossEntropyLoss()
        self.optimizer: torch.optim.Optimizer | None = None
        self.scaler = precision.grad_scaler(device, kind, dtype)
        self.computed_dtype: torch.dtype | None = None
        self.fallback_ops: tuple[str, ...] = ()
        self.model.train(kind == "training")
        if kind == "training":
            trained = self.trained_parameters()
            self.model.requires_grad_(False)
            for parameter in trained:
                parameter.requires_grad_(True)
            self.optimizer = spec.make_optimizer(trained)

    def trained_parameters(self) -> list[nn.Parameter]:
        if self.spec.trainable is None:
            return list(self.model.parameters())
        return self.spec.trainable(self.model)

    @property
    def label(self) -> str:
        compiled = ", compiled" if self.compiled else ""
        return f"{self.spec.name} {self.kind} on {self.device} at batch {self.batch_size} ({self.dtype}{compiled})"

    def step(self, probe: Callable[[], None] | None = None) -> torch.Tensor:
        """The loss (training) or logits (inference); ``probe()`` where memory peaks."""
        if self.optimizer is None:
            with torch.inference_mode():
                logits: torch.Tensor = self.spec.forward(self.model, self.batch.inputs)
            self.computed_dtype = logits.dtype
            if probe is not None:
                probe()
            return logits
        self.optimizer.zero_grad(set_to_none=True)
        with precision.autocast(self.device, self.kind, self.dtype):  # no-op in float32
            logits = self.spec.forward(self.model, self.batch.inputs)
            loss: torch.Tensor = self.loss_fn(logits, self.batch.target)
        self.computed_dtype = logits.dtype
        if probe is not None:
            probe()
        (loss if self.scaler is None else self.scaler.scale(loss)).backward()
        if probe is not None:
            probe()
        if self.scaler is None:
            self.optimizer.step()
        else:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        return loss

    def evaluate(self, samples: int) -> tuple[torch.Tensor, torch.Tensor]:
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.no_grad(), precision.autocast(self.device, self.kind, self.dtype):
                batch = self.batch.head(samples)
                logits: torch.Tensor = self.spec.forward(self.model, batch.inputs)
                loss: torch.Tensor = self.loss_fn(logits.float(), batch.target)
        finally:
            self.model.train(was_training)
        return logits, loss

    def run(self, steps: int) -> None:
        for _ in range(steps):
            self.step()

    def warm_up(self) -> Workload:
        """Two steps, recording cpu fallbacks; fails a wrong output or a non-finite loss."""
        with fallback.Recorder() as recorder:
            self.device.synchronize()
            begin = time.perf_counter()
            self.step()
            self.device.synchronize()
            self.first_step_seconds = time.perf_counter() - begin
            result = self.step()
            self.device.synchronize()
        self.fallback_ops = tuple(recorder.ops)
        if result.device.type != self.device:
            raise WorkloadError(
                f"{self.spec.name} on {self.device} produced its output on {result.device.type}"
            )
        precision.check_computed(self.label, self.dtype, self.computed_dtype)
        if self.kind == "training" and not math.isfinite(float(result.detach().cpu())):
            raise WorkloadError(f"{self.spec.name} on {self.device}: non-finite training loss")
        return self


def build(
    kind: str,
    device: str,
    model: str,
    batch_size: int,
    dtype: str = precision.DEFAULT,
    compiled: bool = False,
) -> Workload:
    errors.one_of("workload kind", kind, KINDS, WorkloadError)
    precision.check_name(dtype)
    spec = models.get(model)
    models.check_batch_size(spec, batch_size)
    if reason := spec.refusal(kind) or spec.unimportable():
        raise WorkloadError(reason)
    return Workload(kind, device, spec, batch_size, dtype, compiled)


_slot: devices.OneSlot[Workload] = devices.OneSlot()
forget = _slot.clear


def cached(
    kind: str,
    device: str,
    model: str,
    batch_size: int,
    dtype: str = precision.DEFAULT,
    compiled: bool = False,
) -> Workload:
    """One per process: asv calls ``setup`` before every sample."""
    key = (kind, device, model, batch_size, dtype, compiled)
    return _slot.get(key, device, lambda: build(*key).warm_up())
