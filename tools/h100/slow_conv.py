"""A real slowdown in torch's own code for the regression loop's trials (issue 31): Conv2d.forward, when training, also
convolves a slice of the batch (PERCENT of it), so a training step of a convolutional model does that much more work.

    python3 tools/h100/slow_conv.py tune DEVICE MODEL BATCH TARGET   # in one process: the smallest percent >= TARGET
    python3 tools/h100/slow_conv.py patch CONV_PY PERCENT            # rewrite a copy of torch/nn/modules/conv.py

``tune`` swaps the same forward in (compiled from the same text ``patch`` writes) on the suite's own workload, in
interleaved passes, and prints each percent's step time and ratio; its last line is the percent chosen, so that the
builds carry a change of about TARGET measured before any compare runs (docs/evidence/gpu-bisect.md).
"""

from __future__ import annotations

import re
import statistics
import sys
import time
from pathlib import Path

ORIGINAL = """    def forward(self, input: Tensor) -> Tensor:
        return self._conv_forward(input, self.weight, self.bias)
"""
# the extra convolution runs without autograd (a detached slice and weight): forward work only, its result dropped
PATCHED = """    def forward(self, input: Tensor) -> Tensor:
        if self.training and torch.is_grad_enabled():  # mpsbench issue 31: a deliberate {percent}% extra slice
            self._conv_forward(input.detach()[: max(1, input.shape[0] * {percent} // 100)], self.weight.detach(), None)
        return self._conv_forward(input, self.weight, self.bias)
"""
PERCENTS = (0, 10, 15, 20, 25, 30, 40)
PASSES, STEPS = 3, 8


def patch(conv_py: Path, percent: int) -> None:
    """Conv2d's forward in ``conv_py`` replaced by PATCHED (Conv1d/Conv3d keep theirs: Conv2d's is the one after
    ``class Conv2d``)."""
    source = conv_py.read_text()
    start = source.index("class Conv2d(")
    end = source.find("\nclass ", start)
    at = source.find(ORIGINAL, start, end if end >= 0 else len(source))
    if at < 0:
        raise SystemExit(f"{conv_py}: Conv2d's forward is not torch's own (patched already, or another torch)")
    conv_py.write_text(source[:at] + PATCHED.format(percent=percent) + source[at + len(ORIGINAL):])


def _forward(percent: int):  # type: ignore[no-untyped-def]
    import torch.nn.modules.conv as conv

    namespace: dict[str, object] = {}
    exec(re.sub(r"^    ", "", PATCHED.format(percent=percent), flags=re.M), vars(conv), namespace)
    return namespace["forward"]


def tune(device: str, model: str, batch: int, target: float) -> int:
    import torch

    from mpsbench.measure import devices, suite

    workload = suite.prepare("training", device, model, batch)
    sync = devices.get(device).synchronize
    original = torch.nn.Conv2d.forward
    forwards = {percent: (_forward(percent) if percent else original) for percent in PERCENTS}
    times: dict[int, list[float]] = {percent: [] for percent in PERCENTS}
    try:
        for _ in range(PASSES):
            for percent, forward in forwards.items():
                torch.nn.Conv2d.forward = forward  # type: ignore[method-assign]
                workload.run(2)  # the new path's kernels chosen before the clock
                sync()
                started = time.perf_counter()
                workload.run(STEPS)
                sync()
                times[percent].append((time.perf_counter() - started) / STEPS)
    finally:
        torch.nn.Conv2d.forward = original  # type: ignore[method-assign]
    base = statistics.median(times[0])
    chosen = None
    for percent in PERCENTS:
        ratio = statistics.median(times[percent]) / base
        print(f"{percent:3d}%  {statistics.median(times[percent]) * 1e3:9.3f} ms/step  ratio {ratio:.3f}")
        if chosen is None and ratio >= target:
            chosen = percent
    chosen = chosen if chosen is not None else PERCENTS[-1]
    print(chosen)
    return chosen


def main(argv: list[str]) -> int:
    if argv[:1] == ["patch"] and len(argv) == 3:
        patch(Path(argv[1]), int(argv[2]))
        return 0
    if argv[:1] == ["tune"] and len(argv) == 5:
        tune(argv[1], argv[2], int(argv[3]), float(argv[4]))
        return 0
    print(__doc__.split("\n\n")[1], file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
