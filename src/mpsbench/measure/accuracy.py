"""A device's output and loss against a float32 cpu copy's: mps has been silently wrong."""

from __future__ import annotations

import copy
import math
import weakref
from dataclasses import dataclass

from mpsbench.measure import devices, models, tolerances
from mpsbench.measure.optional_torch import F, torch
from mpsbench.measure.workloads import Workload

_TINY = 1e-12  # for an all-zero reference
CHECK_SAMPLES = 4


class AccuracyError(RuntimeError):
    """Results off the cpu's."""


@dataclass(frozen=True)
class Comparison:
    logits_error: float
    loss_error: float
    tolerance: float

    @property
    def error(self) -> float:
        return max(self.logits_error, self.loss_error)

    @property
    def ok(self) -> bool:
        return self.error <= self.tolerance  # False for NaN too


def relative_error(result: torch.Tensor, reference: torch.Tensor) -> float:
    """``max|result - reference| / max|reference|``; infinity if ``result`` is not finite."""
    # mps cannot cast to float64
    result, reference = (tensor.detach().cpu().to(torch.float64) for tensor in (result, reference))
    if result.shape != reference.shape:
        raise AccuracyError(
            f"shape {tuple(result.shape)} differs from the cpu's {tuple(reference.shape)}"
        )
    if not bool(torch.isfinite(result).all()):
        return math.inf
    scale = max(float(reference.abs().max()), _TINY)
    return float((result - reference).abs().max()) / scale


def compare(workload: Workload) -> Comparison:
    samples = min(workload.batch_size, CHECK_SAMPLES)
    logits, loss = workload.evaluate(samples)
    model = getattr(workload.model, "_orig_mod", workload.model)
    reference = copy.deepcopy(model).to("cpu").float().eval()
    batch = models.make_batch(workload.spec, workload.batch_size).head(samples)
    with torch.no_grad():
        expected = workload.spec.forward(reference, batch.inputs)
        expected_loss = F.cross_entropy(expected, batch.target)
    return Comparison(
        logits_error=relative_error(logits, expected),
        loss_error=relative_error(loss, expected_loss),
        tolerance=tolerances.TOLERANCES[workload.dtype],
    )


_compared: weakref.WeakKeyDictionary[Workload, Comparison] = weakref.WeakKeyDictionary()


def verify(workload: Workload) -> Comparison:
    """Once per workload: asv calls setup before each sample."""
    if (found := _compared.get(workload)) is None:
        found = _compared[workload] = compare(workload)
    if not found.ok:
        raise AccuracyError(
            f"{workload.label} disagrees with the cpu: logits error {found.logits_error:.3g},"
            f" loss error {found.loss_error:.3g} (relative), tolerance {found.tolerance:g};"
            " a device computing wrong results is not timed"
        )
    return found


def needed(device: str) -> bool:
    return device in devices.GPU_NAMES
