"""A real slowdown in torch's own code for the regression loop's GPU trials: Linear.forward, in eval mode (inference),
also multiplies a slice of its input (PERCENT of the batch) by the weight, its result dropped.

    python3 tools/gpu/slow_linear.py tune DEVICE MODEL BATCH TARGET   # in one process: the smallest percent >= TARGET
    python3 tools/gpu/slow_linear.py patch LINEAR_PY PERCENT          # rewrite a copy of torch/nn/modules/linear.py

``tune`` swaps the same forward in (compiled from the text ``patch`` writes) on the suite's own inference workload, in
interleaved passes, and prints each percent's step time and ratio; its last line is the percent chosen.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

ORIGINAL = "        return F.linear(input, self.weight, self.bias)\n"  # Linear.forward's return (the one such line)
PATCHED = (
    "        if not self.training:  # a deliberate {percent}% extra slice in inference\n"
    "            F.linear(input[: max(1, input.shape[0] * {percent} // 100)], self.weight)\n"
    + ORIGINAL
)
PERCENTS = (0, 5, 7, 9, 11, 14)
PASSES, STEPS = 3, 10


def patch(linear_py: Path, percent: int) -> None:
    source = linear_py.read_text()
    if source.count(ORIGINAL) != 1:
        raise SystemExit(
            f"{linear_py}: Linear's forward is not torch's own (patched already, or another torch)"
        )
    linear_py.write_text(source.replace(ORIGINAL, PATCHED.format(percent=percent)))


def _forward(percent: int):  # type: ignore[no-untyped-def]
    import torch.nn.modules.linear as linear

    text = "def forward(self, input):\n" + "".join(
        line[4:] + "\n" for line in PATCHED.format(percent=percent).splitlines()
    )
    namespace: dict[str, object] = {}
    exec(text, vars(linear), namespace)
    return namespace["forward"]


def tune(device: str, model: str, batch: int, target: float) -> int:
    import torch

    from mpsbench.measure import devices, suite

    workload = suite.prepare("inference", device, model, batch)
    sync = devices.get(device).synchronize
    original = torch.nn.Linear.forward
    forwards = {percent: (_forward(percent) if percent else original) for percent in PERCENTS}
    times: dict[int, list[float]] = {percent: [] for percent in PERCENTS}
    try:
        for _ in range(PASSES):
            for percent, forward in forwards.items():
                torch.nn.Linear.forward = forward  # type: ignore[method-assign]
                workload.run(2)
                sync()
                started = time.perf_counter()
                workload.run(STEPS)
                sync()
                times[percent].append((time.perf_counter() - started) / STEPS)
    finally:
        torch.nn.Linear.forward = original  # type: ignore[method-assign]
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
    if sys.argv[1] == "tune":
        tune(sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5]))
    else:
        patch(Path(sys.argv[2]), int(sys.argv[3]))
