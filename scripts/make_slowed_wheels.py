#!/usr/bin/env python3
"""Write copies of a real torch wheel with a real change to torch's own Python code (issue #23, #31).

Two changes, each real work of the same kind as the layer's own whose result is thrown away (outputs and
gradients unchanged):

- ``linear`` (``torch/nn/modules/linear.py``): while a Linear layer runs with autograd recording (training), its
  forward also multiplies a slice of its input by the weight. Inference takes the unchanged path, so only
  training steps get slower, by the share of the step that slice costs: on the mlp the whole batch adds about
  one forward's matmuls to a step (~1.3x), three tenths of it about a tenth (~1.1x).
- ``pool`` (``torch/nn/modules/pooling.py``): every MaxPool2d forward (training and inference) pools its input
  once more. On lenet5's training step at batch 128 on this 2-core VM (one thread, torch 2.14.1, in-process,
  2026-11-27) that is 1.17x; a second extra pool would be 1.58x.

The identical copies change only the version label, so each is a distinct build (its own sha256 and install)
running the same code. Each copy gets a local version label (``2.13.0+cpu.slow13``), the RECORD hashes of the
files that changed, and a ``torch/version.py`` timestamp a minute later per variant, so the builds sort on a
channel in the order written here. Deterministic: the same input wheel always gives byte-identical copies.

    scripts/make-slowed-wheels /opt/wheels/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl OUTDIR
    scripts/make-slowed-wheels WHEEL OUTDIR --variants same slow13   # a subset

The copies are then builds like any wheel (docs/how-to/add-a-build.md), e.g.
``mpsbench build add-wheel OUTDIR/torch-2.13.0+cpu.slow13-*.whl --channel exam --id s1``.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import re
import sys
import zipfile
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

LINEAR = "torch/nn/modules/linear.py"
ORIGINAL = "        return F.linear(input, self.weight, self.bias)\n"
POOLING = "torch/nn/modules/pooling.py"
POOL_ORIGINAL = "        return F.max_pool2d(\n            input,\n"


def patched_forward(tenths: int) -> str:
    """Linear.forward's return, after an extra product over ``tenths`` of the batch while training."""
    return (
        "        if self.training and torch.is_grad_enabled():\n"
        f"            extra = input.detach()[: max(1, input.shape[0] * {tenths} // 10)]\n"
        "            F.linear(extra, self.weight.detach())\n" + ORIGINAL
    )


def pooled_forward(times: int) -> str:
    """MaxPool2d.forward's return, after pooling the input ``times`` more times (only MaxPool2d's forward matches)."""
    return (
        f"        for _ in range({times}):\n"
        "            F.max_pool2d(input.detach(), self.kernel_size, self.stride, self.padding, self.dilation,\n"
        "                         ceil_mode=self.ceil_mode)\n" + POOL_ORIGINAL
    )


@dataclass(frozen=True)
class Change:
    """One variant's edit: the file, its one line(s) to replace, what replaces them, and in words."""

    path: str
    original: str
    replacement: str
    what: str


def _linear(tenths: int, share: str) -> Change:
    return Change(
        LINEAR, ORIGINAL, patched_forward(tenths), f"extra matmul over {share} in training"
    )


def _pool(times: int) -> Change:
    return Change(
        POOLING,
        POOL_ORIGINAL,
        pooled_forward(times),
        f"{times} extra max-pool per MaxPool2d forward",
    )


# What each variant changes (None: only the version label); ids are the order of their build dates.
VARIANTS: dict[str, Change | None] = {
    "same": None,
    "slow13": _linear(10, "the whole batch"),
    "slow13b": _linear(
        10, "the whole batch"
    ),  # a second slow build after the first, as in a real regression
    "slow11": _linear(3, "three tenths of the batch"),
    # issue 31's loaded trials: another change on another row, an eight-build line (five same, three slow)
    "same2": None,
    "same3": None,
    "same4": None,
    "pool": _pool(1),
    "poolb": _pool(1),
    "poolc": _pool(1),
}


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def write_variant(source: Path, outdir: Path, variant: str, order: int) -> Path:
    """Write one copy of ``source`` and return its path."""
    match = re.match(r"torch-([^-]+)-(.+)\.whl$", source.name)
    if not match:
        raise SystemExit(f"make-slowed-wheels: {source.name} is not a torch wheel file name")
    version, tags = match.groups()
    new_version = f"{version}.{variant}" if "+" in version else f"{version}+{variant}"
    old_info, new_info = f"torch-{version}.dist-info/", f"torch-{new_version}.dist-info/"
    target = outdir / f"torch-{new_version}-{tags}.whl"
    change = VARIANTS[variant]
    changed: dict[str, bytes] = {}
    with zipfile.ZipFile(source) as wheel:
        if change is not None:
            code = wheel.read(change.path).decode()
            if code.count(change.original) != 1:
                raise SystemExit(
                    f"make-slowed-wheels: {change.path} has no single {change.original.strip()!r} to change"
                )
            changed[change.path] = code.replace(change.original, change.replacement).encode()
        text = wheel.read("torch/version.py").decode()
        changed["torch/version.py"] = text.replace(
            f"__version__ = '{version}'", f"__version__ = '{new_version}'"
        ).encode()
        metadata = wheel.read(old_info + "METADATA").decode()
        changed[new_info + "METADATA"] = metadata.replace(
            f"Version: {version}\n", f"Version: {new_version}\n", 1
        ).encode()
        record_lines = []
        for line in wheel.read(old_info + "RECORD").decode().splitlines():
            path = line.split(",")[0]
            if path.startswith(old_info):
                path = new_info + path[len(old_info) :]
            if path in changed:
                line = f"{path},{_record_hash(changed[path])},{len(changed[path])}"
            elif path.startswith(new_info):
                line = path + line[line.index(",") :]
            record_lines.append(line)
        changed[new_info + "RECORD"] = ("\n".join(record_lines) + "\n").encode()
        partial = target.with_suffix(".partial")
        with zipfile.ZipFile(
            partial, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1
        ) as out:
            for info in wheel.infolist():
                name = (
                    new_info + info.filename[len(old_info) :]
                    if info.filename.startswith(old_info)
                    else info.filename
                )
                when = info.date_time
                if (
                    name == "torch/version.py"
                ):  # the build date mpsbench reads: one minute later per variant
                    when = (datetime(*when) + timedelta(minutes=order)).timetuple()[:6]
                entry = zipfile.ZipInfo(name, date_time=when)
                entry.external_attr = info.external_attr
                entry.compress_type = zipfile.ZIP_DEFLATED
                data = changed[name] if name in changed else wheel.read(info)
                out.writestr(entry, data, compresslevel=1)
    partial.replace(target)
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("wheel", type=Path)
    parser.add_argument("outdir", type=Path)
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    args = parser.parse_args(argv)
    if not args.wheel.is_file():
        print(f"make-slowed-wheels: no wheel {args.wheel}", file=sys.stderr)
        return 2
    args.outdir.mkdir(parents=True, exist_ok=True)
    for variant in args.variants:
        path = write_variant(args.wheel, args.outdir, variant, list(VARIANTS).index(variant) + 1)
        change = VARIANTS[variant]
        what = change.what if change else "version label only"
        print(f"{path}  ({what})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
