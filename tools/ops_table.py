"""Print GFLOP/s or GB/s per op on one device, beside the device's published peak where known.

Run it as ``python -m tools.ops_table`` (or ``scripts/ops-table``): it times
every op's forward the way the asv ``track_`` benchmarks do (the median of
several samples of k calls, ``mpsbench.measure.ops``) for the sizes and dtypes asked,
and prints one row per combination. With ``$OUT`` set it also writes
``ops-table.txt`` and ``ops-table.json`` there. Combinations outside this
run's selection (``MPSBENCH_FULL=1`` for all) or that torch refuses are listed
with the reason; an op that fails is listed with its error and makes the exit
status 1.

The peaks are NVIDIA's datasheet figures (dense tensor-core rates: the
datasheets print twice these, "with sparsity"); a float32 op is held against
the FP32 rate, except conv2d while cuDNN may use TF32 (PyTorch's default),
which is held against the TF32 rate; float16/bfloat16 against the FP16/BF16
tensor-core rate; memory-bound ops against the memory bandwidth; copies
against one direction of PCIe 5.0 x16.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from mpsbench.core import errors
from mpsbench.core.text import table as text_table
from mpsbench.measure import devices, ops, selection, suite


@dataclass(frozen=True)
class Peaks:
    """Published peak rates of one GPU model: TFLOP/s and GB/s."""

    fp32: float
    tf32: float  # dense tensor-core rate
    fp16: float  # dense tensor-core rate, float16 and bfloat16 alike
    memory_gbps: float
    host_link_gbps: float  # one direction of the host link
    source: str


_H100_DATASHEET = (
    "NVIDIA H100 Tensor Core GPU datasheet (2023): dense = half the 'with sparsity' figures"
)
# Matched against torch.cuda.get_device_name(): the first key it contains wins.
PEAKS: dict[str, Peaks] = {
    "H100 PCIe": Peaks(51.0, 378.0, 756.0, 2000.0, 64.0, _H100_DATASHEET + ", H100 PCIe"),
    "H100 80GB HBM3": Peaks(67.0, 494.5, 989.5, 3350.0, 64.0, _H100_DATASHEET + ", H100 SXM"),
    "H100": Peaks(
        67.0,
        494.5,
        989.5,
        3350.0,
        64.0,
        _H100_DATASHEET + ", H100 SXM (model not recognised exactly)",
    ),
    "H200": Peaks(
        67.0, 494.5, 989.5, 4800.0, 64.0, "NVIDIA H200 datasheet (2024), H200 SXM, dense"
    ),
}


def peaks_for(device_name: str) -> Peaks | None:
    return next((peaks for key, peaks in PEAKS.items() if key in device_name), None)


def conv_uses_tf32() -> bool:
    return bool(torch.backends.cudnn.allow_tf32)


def matmul_uses_tf32() -> bool:
    return bool(torch.backends.cuda.matmul.allow_tf32)


def peak_of(peaks: Peaks, spec: ops.OpSpec, dtype: str) -> float:
    """The peak, in the op's unit, that one op in one dtype is held against."""
    if spec.name in selection.HOST_DEVICE_COPIES:
        return peaks.host_link_gbps
    if spec.unit == ops.GBPS:
        return peaks.memory_gbps
    if dtype != "float32":
        return peaks.fp16 * 1e3
    tf32 = conv_uses_tf32() if spec.name == "conv2d" else matmul_uses_tf32()
    return (peaks.tf32 if tf32 else peaks.fp32) * 1e3


@dataclass(frozen=True)
class Row:
    op: str
    dtype: str
    size: str
    seconds_per_call: float | None
    throughput: float | None
    unit: str
    percent_of_peak: float | None
    note: str  # why there is no number, or empty


def measure(device: str, spec: ops.OpSpec, dtype: str, size: str, peaks: Peaks | None) -> Row:
    """One combination's row: timed, skipped with the reason, or failed with the error."""
    try:
        reason = selection.op(device, spec.name, dtype, size)  # the op classes' rule
        if reason is not None:
            raise suite.SkipNotImplemented(reason)
        case = ops.prepare(device, spec.name, dtype, size, training=False)
        seconds = ops.median_seconds_per_call(case)
    except NotImplementedError as skipped:  # asv's SkipNotImplemented, with the reason
        return Row(spec.name, dtype, size, None, None, spec.unit, None, f"skipped: {skipped}")
    except Exception as exc:
        ops.forget()
        return Row(
            spec.name, dtype, size, None, None, spec.unit, None, f"failed: {errors.first_line(exc)}"
        )
    value = spec.work_at(size, dtype) / seconds / 1e9
    percent = None if peaks is None else 100.0 * value / peak_of(peaks, spec, dtype)
    return Row(spec.name, dtype, size, seconds, value, spec.unit, percent, "")


def _format(rows: list[Row]) -> str:
    table = [["op", "dtype", "size", "time/call", "throughput", "unit", "% of peak", "note"]]
    for row in rows:
        table.append(
            [
                row.op,
                row.dtype,
                row.size,
                "-" if row.seconds_per_call is None else f"{row.seconds_per_call * 1e6:.1f} us",
                "-" if row.throughput is None else f"{row.throughput:.1f}",
                row.unit,
                "-" if row.percent_of_peak is None else f"{row.percent_of_peak:.1f}",
                row.note,
            ]
        )
    return text_table(table)


def registry_markdown() -> str:
    """The registry as the markdown table docs/reference/ops.md holds (a test keeps the two equal)."""
    lines = [
        "| op | unit | small | medium | large | work of one forward call (s: bytes per element) | backward |",
        "|---|---|---|---|---|---|---|",
    ]
    for spec in ops.REGISTRY.values():
        shapes = [
            ", ".join(f"{key}={value}" for key, value in spec.dims(size).items())
            for size in ops.SIZES
        ]
        backward = "yes" if spec.has_backward else "no"
        lines.append(
            f"| `{spec.name}` | {spec.unit} | {' | '.join(shapes)} | {spec.formula} | {backward} |"
        )
    return "\n".join(lines)


def _default_device() -> devices.Device:
    return devices.usable_gpu() or devices.Device.CPU


def _choices(text: str | None, valid: Sequence[str], what: str) -> list[str]:
    if text is None:
        return list(valid)
    chosen = [item.strip() for item in text.split(",") if item.strip()]
    for item in chosen:
        if item not in valid:
            raise errors.UserError(f"unknown {what} {item!r}; choose from: {', '.join(valid)}")
    return chosen


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m tools.ops_table", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--device", default=None, help="cpu, mps or cuda (default: cuda, else mps, else cpu)"
    )
    parser.add_argument("--ops", default=None, help="comma-separated op names (default all)")
    parser.add_argument(
        "--dtypes",
        default=None,
        help="comma-separated, from float32,float16,bfloat16 (default all)",
    )
    parser.add_argument(
        "--sizes", default=None, help="comma-separated, from small,medium,large (default all)"
    )
    parser.add_argument(
        "--registry", action="store_true", help="print the op registry as markdown and exit"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.registry:
        print(registry_markdown())
        return 0
    try:
        device = _default_device() if args.device is None else devices.get(args.device)
        names = _choices(args.ops, ops.NAMES, "op")
        dtypes = _choices(args.dtypes, ops.DTYPES, "dtype")
        sizes = _choices(args.sizes, ops.SIZES, "size")
    except ValueError as exc:
        print(f"ops-table: error: {exc}", file=sys.stderr)
        return 2
    found = device.availability()
    if not found.usable:
        print(f"ops-table: error: {device} is not usable here: {found.reason}", file=sys.stderr)
        return 2
    described = device.describe()
    peaks = peaks_for(torch.cuda.get_device_name(0)) if device == "cuda" else None
    header = [
        f"device: {described}; torch {torch.__version__}; cpu threads {devices.cpu_threads()}",
        f"date: {datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds')}",
    ]
    if device == "cuda":
        header.append(f"TF32 allowed: matmul {matmul_uses_tf32()}, cuDNN conv {conv_uses_tf32()}")
        header.append(
            f"peaks: {peaks}" if peaks else "peaks: unknown for this GPU model (no % of peak)"
        )
    rows = [
        measure(device, ops.get(name), dtype, size, peaks)
        for name in names
        for dtype in dtypes
        for size in sizes
    ]
    text = "\n".join([*header, "", _format(rows)])
    print(text)
    out = os.environ.get("OUT")
    if out:
        folder = Path(out)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "ops-table.txt").write_text(text + "\n")
        record = {
            "header": header,
            "device": device,
            "peaks": None if peaks is None else asdict(peaks),
            "rows": [asdict(row) for row in rows],
        }
        (folder / "ops-table.json").write_text(json.dumps(record, indent=1) + "\n")
    return 1 if any(row.note.startswith("failed") for row in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
