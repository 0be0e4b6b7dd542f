"""One process: prepare mlp batch 32 training like the benchmark, take N samples of 20 steps; print ms/step list as JSON."""
import json, sys, time
from mpsbench.measure import suite, devices
n = int(sys.argv[1])
w = suite.prepare("training", "cpu", "mlp", 32)
k = w.spec.steps_per_call
out = []
for _ in range(n):
    t = time.perf_counter(); w.run(k); devices.synchronize("cpu"); out.append((time.perf_counter() - t) / k * 1e3)
print(json.dumps(out))
