"""A real slowdown in torch's own code for the regression loop's GPU trials: a module's forward, in eval mode
(inference), also runs a slice of its input (PERCENT of the batch) through the same op, its result dropped.

    python3 tools/gpu/slow_module.py tune MODULE DEVICE MODEL BATCH TARGET  # in one process: smallest percent >= TARGET
    python3 tools/gpu/slow_module.py patch MODULE MODULE_PY PERCENT         # rewrite a copy of the module's source file

MODULE is one of PATCHES: ``linear`` (torch/nn/modules/linear.py's Linear, for transformer rows) or ``conv2d``
(torch/nn/modules/conv.py's Conv2d, for torchvision's CNN rows). ``tune`` swaps the same forward in (compiled from the
text ``patch`` writes) on the suite's own inference workload, in interleaved passes, and prints each percent's step
time and ratio; its last line is the percent chosen.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path
from typing import NamedTuple


class Patch(NamedTuple):
    cls: str  # the class in torch.nn
    path: str  # its source file under torch/
    original: str  # its forward's return, the line the patch precedes
    extra: str  # the added call, on the slice


PATCHES = {
    "linear": Patch(
        "Linear",
        "nn/modules/linear.py",
        "        return F.linear(input, self.weight, self.bias)\n",
        "F.linear({slice}, self.weight)",
    ),
    "conv2d": Patch(
        "Conv2d",
        "nn/modules/conv.py",
        "        return self._conv_forward(input, self.weight, self.bias)\n",
        "self._conv_forward({slice}, self.weight, self.bias)",
    ),
}
PERCENTS = (0, 5, 7, 9, 11, 14)
PASSES, STEPS = 3, 10


def patched(patch: Patch, percent: int) -> str:
    call = patch.extra.format(slice=f"input[: max(1, input.shape[0] * {percent} // 100)]")
    return (
        f"        if not self.training:  # a deliberate {percent}% extra slice in inference\n"
        f"            {call}\n" + patch.original
    )


def patch_file(patch: Patch, source_py: Path, percent: int) -> None:
    """The class's own forward only: conv.py's Conv1d and Conv3d end with the same line."""
    source = source_py.read_text()
    start = source.find(f"\nclass {patch.cls}(")
    at = source.find(patch.original, start)
    following = source.find("\nclass ", start + 1)
    own = source[start : following if following >= 0 else len(source)]
    if start < 0 or patch.original not in own or "a deliberate" in own:
        raise SystemExit(
            f"{source_py}: {patch.cls}'s forward is not torch's own (patched already, or another torch)"
        )
    source_py.write_text(source[:at] + patched(patch, percent) + source[at + len(patch.original) :])


def _forward(patch: Patch, percent: int):  # type: ignore[no-untyped-def]
    import importlib

    module = importlib.import_module("torch." + patch.path.removesuffix(".py").replace("/", "."))
    text = "def forward(self, input):\n" + "".join(
        line[4:] + "\n" for line in patched(patch, percent).splitlines()
    )
    namespace: dict[str, object] = {}
    exec(text, vars(module), namespace)
    return namespace["forward"]


def tune(patch: Patch, device: str, model: str, batch: int, target: float) -> int:
    import torch

    from mpsbench.measure import devices, suite

    workload = suite.prepare("inference", device, model, batch)
    sync = devices.get(device).synchronize
    cls = getattr(torch.nn, patch.cls)
    original = cls.forward
    forwards = {
        percent: (_forward(patch, percent) if percent else original) for percent in PERCENTS
    }
    times: dict[int, list[float]] = {percent: [] for percent in PERCENTS}
    try:
        for _ in range(PASSES):
            for percent, forward in forwards.items():
                cls.forward = forward
                workload.run(2)
                sync()
                started = time.perf_counter()
                workload.run(STEPS)
                sync()
                times[percent].append((time.perf_counter() - started) / STEPS)
    finally:
        cls.forward = original
    base = statistics.median(times[0])
    chosen = None
    for percent in PERCENTS:
        ratio = statistics.median(times[percent]) / base
        print(
            f"{percent:3d}%  {statistics.median(times[percent]) * 1e3:9.3f} ms/step  ratio {ratio:.3f}"
        )
        if chosen is None and ratio >= target:
            chosen = percent
    chosen = chosen if chosen is not None else PERCENTS[-1]
    print(chosen)
    return chosen


if __name__ == "__main__":
    verb, module = sys.argv[1], PATCHES[sys.argv[2]]
    if verb == "tune":
        tune(module, sys.argv[3], sys.argv[4], int(sys.argv[5]), float(sys.argv[6]))
    elif verb == "path":  # the file a build's copy replaces, under torch/
        print(module.path)
    else:
        patch_file(module, Path(sys.argv[3]), int(sys.argv[4]))
