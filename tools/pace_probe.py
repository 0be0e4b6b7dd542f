"""Why a host-paced step's time differs from one process to the next (issue 33): the core its launching thread runs on?

    python tools/pace_probe.py OUT/cores.json --mode cores    # one process: the main thread pinned to each core in turn
    python tools/pace_probe.py OUT/free-1.json --mode free    # one process, unpinned: which core each window ran on
    python tools/pace_probe.py OUT/host.json --mode host      # no torch: the pure-Python loop on each core in turn
    python tools/pace_probe.py /tmp/x.json --device cpu --models mlp --mode cores   # a smoke run anywhere

The sub-millisecond seed workloads (mlp and lenet5, their seed batch) launch kernels faster than the GPU runs them
out, so the launching thread sets their pace. ``cores`` pins that thread alone (``os.sched_setaffinity`` of the
calling thread: torch's own threads and the rest keep every core) to each core in turn, two rounds, and times the
steps there, with a pure-Python loop beside them that knows nothing of torch. ``free`` leaves the thread where the
scheduler puts it and records, for each window, its step time, the share of it the thread spent launching (before each
synchronize: near 1 where the host sets the pace) and the core the thread was on at the window's end; ``--dtype
float16`` trains in mixed precision as the precision rows do. Windows have no counter read. ``host`` imports no torch
and runs no GPU work: for ``--seconds`` it moves the thread to the next core every loop (``--stay``: keeps it on one)
and records the loop's time, with the machine's steal time (``/proc/stat``: time the hypervisor gave this VM's cores
to someone else) once a second. Everything lands in one JSON file; the figures are the result (exit 0 when it ran).
docs/explanation/instruments.md has what the H100 showed (2026-11-27).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

WORKLOADS = ("inference", "training")


def current_core() -> int:
    """The core the calling thread last ran on (field 39 of /proc/thread-self/stat)."""
    stat = Path(f"/proc/self/task/{threading.get_native_id()}/stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[36])


def python_ms() -> float:
    """A fixed pure-Python loop's time: the core's speed for an interpreter, torch aside."""
    begin = time.perf_counter()
    table: dict[int, int] = {}
    for index in range(20_000):
        table[index & 255] = table.get(index & 255, 0) + index
    return 1e3 * (time.perf_counter() - begin)


def step_ms(workload: Any, seconds: float) -> float:
    return timed(workload, seconds)["step_ms"]


def timed(workload: Any, seconds: float) -> dict[str, float]:
    """A window's ms a step, and the share of it the launching thread spent before each synchronize (near 1: the
    host sets the pace; near 0: the device does)."""
    steps, sync = workload.spec.steps_per_call, workload.device.synchronize
    sync()
    begin, calls, launching = time.perf_counter(), 0, 0.0
    while time.perf_counter() - begin < seconds:
        call = time.perf_counter()
        workload.run(steps)
        launching += time.perf_counter() - call
        sync()
        calls += 1
    took = time.perf_counter() - begin
    return {"step_ms": 1e3 * took / (calls * steps), "launch_share": launching / took}


def on_cores(workload: Any, cores: list[int], rounds: int, seconds: float) -> list[dict[str, Any]]:
    found = []
    everywhere = os.sched_getaffinity(0)
    try:
        for round_ in range(rounds):
            for core in cores:
                os.sched_setaffinity(0, {core})
                step_ms(workload, seconds / 4)  # the caches of this core warm
                found.append({"round": round_, "core": core, "step_ms": step_ms(workload, seconds),
                              "python_ms": min(python_ms() for _ in range(3)), "ran_on": current_core()})
    finally:
        os.sched_setaffinity(0, everywhere)
    return found


def free(workload: Any, windows: int, seconds: float) -> list[dict[str, Any]]:
    return [{"window": index, **timed(workload, seconds), "core": current_core(), "python_ms": python_ms()}
            for index in range(windows)]


def steal_ticks() -> int:
    return int(Path("/proc/stat").read_text().split("\n", 1)[0].split()[8])


def host(seconds: float, stay: bool) -> dict[str, Any]:
    everywhere = os.sched_getaffinity(0)
    cores = [current_core()] if stay else sorted(everywhere)
    loops: list[dict[str, Any]] = []
    steal: list[dict[str, int]] = []
    begin = time.perf_counter()
    last_second, last_steal = 0, steal_ticks()
    try:
        while time.perf_counter() - begin < seconds:
            core = cores[len(loops) % len(cores)]
            os.sched_setaffinity(0, {core})
            loops.append({"at": time.perf_counter() - begin, "core": core, "python_ms": python_ms()})
            if int(loops[-1]["at"]) > last_second:
                now = steal_ticks()
                steal.append({"second": last_second, "steal_ticks": now - last_steal})
                last_second, last_steal = int(loops[-1]["at"]), now
    finally:
        os.sched_setaffinity(0, everywhere)
    return {"loops": loops, "steal": steal, "ticks_per_second": os.sysconf("SC_CLK_TCK")}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--mode", choices=("cores", "free", "host"), required=True)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--models", default="mlp,lenet5")
    parser.add_argument("--dtype", default="float32", help="float16 and bfloat16 train in mixed precision")
    parser.add_argument("--kinds", default=",".join(WORKLOADS))
    parser.add_argument("--stay", action="store_true", help="host: keep the thread on the core it starts on")
    parser.add_argument("--seconds", type=float, default=0.3, help="a window's length")
    parser.add_argument("--windows", type=int, default=8, help="free: windows per workload")
    args = parser.parse_args()
    if args.mode == "host":
        found = host(args.seconds, args.stay)
        times = sorted(loop["python_ms"] for loop in found["loops"])
        print(f"host: {len(times)} loops, python ms {times[0]:.2f}-{times[-1]:.2f}, median {statistics.median(times):.2f};"
              f" steal ticks {sum(entry['steal_ticks'] for entry in found['steal'])}", flush=True)
        args.out.write_text(json.dumps({"date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
                                        "mode": "host", "load": os.getloadavg(), **found}, indent=1) + "\n")
        return 0
    from mpsbench.measure import models, suite

    cores = sorted(os.sched_getaffinity(0))
    rows = []
    for model in args.models.split(","):
        for kind in args.kinds.split(","):
            workload = suite.prepare(kind, args.device, model, models.get(model).seed_batch_size, dtype=args.dtype,
                                     guarded=False)
            step_ms(workload, 0.5)  # settle
            row: dict[str, Any] = {"model": model, "kind": kind, "dtype": args.dtype}
            if args.mode == "cores":
                row["cores"] = on_cores(workload, cores, 2, args.seconds)
            else:
                row["windows"] = free(workload, args.windows, args.seconds)
            step_times = [entry["step_ms"] for entry in row.get("cores", row.get("windows", []))]
            shares = [entry["launch_share"] for entry in row.get("windows", [])] or [float("nan")]
            print(f"{model} {kind} {args.dtype}: launch share {statistics.median(shares):.2f}, step ms"
                  f" {min(step_times):.3f}-{max(step_times):.3f}, median {statistics.median(step_times):.3f}", flush=True)
            rows.append(row)
    args.out.write_text(json.dumps({"date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
                                    "mode": args.mode, "cores": cores, "load": os.getloadavg(), "rows": rows},
                                   indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
