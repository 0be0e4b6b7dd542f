"""Which combinations the default ``asv run`` times, and the switch for the full sweep.

The params of every benchmark class are fixed (they never change with the
hardware, the torch version or the environment); the default selection is
applied in ``setup``, which skips the combinations outside it with a reason.
The budget this keeps to is measured in docs/budget.md.
"""

from __future__ import annotations

import os

from mpsbench.measure.models import ModelSpec

FULL_SWEEP_ENV = "MPSBENCH_FULL"  # set to 1: every device at every batch size
# A comma-separated list of devices to run (default: every device): a CUDA box's
# nightly can leave its cpu out, a calibration can time one device. asv passes the
# environment through to every benchmark process, setup_cache included.
DEVICES_ENV = "MPSBENCH_DEVICES"
CPU_BATCH_SIZES = (1, 8, 32)  # latency and mid sizes, beside each model's seed size
CPU_LARGE_BATCH_SIZES = (1, 8)  # a large model's cpu step at batch 128 takes about a minute
# On a GPU a benchmark process costs seconds before its first timed step (device
# context, warm-up, accuracy check: docs/performance.md), more than its steps, and
# one GPU's default has 3 minutes (docs/budget.md): the default keeps the seeds'
# batch sizes, the full sweep the rest. Batch 1 on a GPU is launch-bound and moved
# 2-44% between runs on the H100, too much for a 5% regression factor to gate.
GPU_BATCH_SIZES: tuple[int, ...] = ()


def full_sweep() -> bool:
    return os.environ.get(FULL_SWEEP_ENV, "") not in ("", "0")


def selected_devices() -> tuple[str, ...] | None:
    """The devices named in MPSBENCH_DEVICES, or None (every device); exits on an unknown name."""
    from mpsbench.measure import devices  # here, not at the top: devices imports torch

    value = os.environ.get(DEVICES_ENV, "").strip()
    if not value:
        return None
    names = tuple(name.strip() for name in value.split(",") if name.strip())
    for name in names:
        devices.check_name(name)
    return names


def device_reason(device: str) -> str | None:
    """Why ``device`` is left out of this run, or None if it runs.

    MPSBENCH_DEVICES, when set, names the devices. Unset, every device runs,
    except the cpu on a machine that has a GPU: there the GPU is what the run
    is for, and the cpu's default (14 minutes of a 2-core machine, minutes on
    a workstation) would take several times the GPU's 3-minute budget
    (docs/budget.md). Naming it (``MPSBENCH_DEVICES=mps,cpu``) adds it.
    """
    from mpsbench.measure import devices  # here, not at the top: devices imports torch

    names = selected_devices()
    if names is not None:
        return None if device in names else f"{device} is not in {DEVICES_ENV}={','.join(names)}"
    if device == "cpu":
        accelerators = devices.accelerators_present()
        if accelerators:
            return (
                f"the cpu is left out by default on a machine with {' and '.join(accelerators)};"
                f" set {DEVICES_ENV}={','.join(accelerators)},cpu to time it too"
            )
    return None


def family_reason(device: str, family: str, default_devices: tuple[str, ...], why: str) -> str | None:
    """Why ``device`` is left out of one family of rows: device_reason, or the family's default devices.

    A family whose rows run by default on ``default_devices`` only runs on the
    others in the full sweep (MPSBENCH_FULL=1); ``why`` says why in the skip message.
    """
    reason = device_reason(device)
    if reason is None and device not in default_devices and not full_sweep():
        return f"{family} on {device} is full sweep only ({why}); set {FULL_SWEEP_ENV}=1 to run it"
    return reason


def in_default_selection(device: str, spec: ModelSpec, batch_size: int) -> bool:
    """True for the combinations the default run times.

    GPUs run the model's seed batch size; the cpu runs the small sizes and the
    seed size, except that the large models run on the cpu at their smallest
    sizes only.
    """
    if device != "cpu":
        return batch_size in GPU_BATCH_SIZES or batch_size == spec.seed_batch_size
    if spec.large:
        return batch_size in CPU_LARGE_BATCH_SIZES
    return batch_size in CPU_BATCH_SIZES or batch_size == spec.seed_batch_size


def skip_reason(device: str, spec: ModelSpec, batch_size: int) -> str | None:
    """Why this combination is left out of this run, or None if it runs."""
    excluded = device_reason(device)
    if excluded is not None:
        return excluded
    if full_sweep() or in_default_selection(device, spec, batch_size):
        return None
    return (
        f"{spec.name} at batch {batch_size} on {device} is outside the default selection;"
        f" set {FULL_SWEEP_ENV}=1 for the full sweep"
    )
