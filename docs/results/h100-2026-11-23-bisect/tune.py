"""Pick the fraction (tenths of the batch) of scripts/make-slowed-wheels' Linear patch that slows one row ~5-8%.

In one process: the suite's own workload (suite.prepare), Linear.forward replaced in turn by the
forward the script would write for each candidate (its own text, patched_forward(tenths)), interleaved passes.
"""
import importlib.machinery
import importlib.util
import json
import statistics
import sys
import time

import torch
import torch.nn.functional as F
from torch import nn

from mpsbench import devices, suite

script, model, batch, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
loader = importlib.machinery.SourceFileLoader("make_slowed_wheels", script)
spec = importlib.util.spec_from_loader("make_slowed_wheels", loader)
msw = importlib.util.module_from_spec(spec)
loader.exec_module(msw)

original = nn.Linear.forward
def variant(tenths):
    if tenths == 0:
        return original
    namespace = {"F": F, "torch": torch}
    exec("def forward(self, input):\n" + msw.patched_forward(tenths), namespace)
    return namespace["forward"]

work = suite.prepare("training", "cuda", model, batch)
candidates = [0, 1, 2, 3]
THRESHOLD = 1.055  # 5% and a margin: compare calls a build slower only when its whole interval is above 1.05
times = {t: [] for t in candidates}
for _ in range(3):
    for t in candidates:
        nn.Linear.forward = variant(t)
        work.run(2)  # warm the new path
        devices.synchronize("cuda")
        per = []
        for _ in range(12):
            devices.synchronize("cuda")
            begin = time.perf_counter()
            work.run(1)
            devices.synchronize("cuda")
            per.append(time.perf_counter() - begin)
        times[t].append(statistics.median(per))
nn.Linear.forward = original
base = statistics.median(times[0])
ratios = {t: statistics.median(times[t]) / base for t in candidates}
chosen = next((t for t in candidates[1:] if ratios[t] >= THRESHOLD), candidates[-1])
result = {"model": model, "batch": batch, "base_ms": base * 1e3, "ms": {t: [x * 1e3 for x in v] for t, v in times.items()},
          "ratios": ratios, "chosen_tenths": chosen, "rule": f"smallest tenths with in-process ratio >= {THRESHOLD}"}
json.dump(result, open(out, "w"), indent=1)
print(json.dumps(result))
