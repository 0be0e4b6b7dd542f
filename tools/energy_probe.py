"""Why a sub-millisecond row's joules per step move (issue 33): the polling's cost, the board's state, nvidia-smi's view.

    python tools/energy_probe.py OUT/probe-1.json --smi                  # one process, nvidia-smi sampling beside it
    python tools/energy_probe.py /tmp/x.json --device cpu --models mlp   # a smoke run anywhere (no counter: step times)

For each seed workload at its seed batch, after one settle, the windows of ``--plan`` one after the other, each
``KIND@SECONDS``: ``energy`` (energy.measure's polling thread, every counter update and call end kept in the JSON for
estimators computed afterwards), ``clean`` (no counter read at all: the step time the rows time) and ``between`` (the
counter read in the measuring thread after each call). nvidia-smi (``--smi``) samples power.draw, its .average and
.instant where the driver has them, the SM clock and the power state every 100 ms; each window gets the medians of its
samples. One counter read's cost is timed too. Everything lands in one JSON file; the figures are the result (exit 0
when it ran). docs/explanation/instruments.md has what the H100 showed (2026-11-27).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime
import json
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

PLAN = "energy@1,energy@4,energy@1,clean@1"  # the default windows, in order: what, then seconds at least
RAW = ("updates_seen", "call_ends")  # kept in the JSON for estimators computed afterwards, not printed
SMI_FIELDS = ("power.draw", "power.draw.average", "power.draw.instant", "clocks.sm", "clocks.mem", "pstate",
              "temperature.gpu", "utilization.gpu")


def _smi_fields() -> list[str]:
    """The fields this driver answers (an unknown one fails the whole query)."""
    return [name for name in SMI_FIELDS if subprocess.run(
        ["nvidia-smi", f"--query-gpu={name}", "--format=csv,noheader,nounits"], capture_output=True, check=False,
        text=True).returncode == 0]


class Smi:
    def __init__(self) -> None:
        self.fields = _smi_fields()
        self.process = subprocess.Popen(
            ["nvidia-smi", f"--query-gpu=timestamp,{','.join(self.fields)}", "--format=csv,noheader,nounits",
             "-lms", "100"], stdout=subprocess.PIPE, text=True)
        self.samples: list[tuple[float, dict[str, float]]] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            stamp, *values = (part.strip() for part in line.split(","))
            try:
                wall = datetime.datetime.strptime(stamp, "%Y/%m/%d %H:%M:%S.%f").timestamp()
            except ValueError:
                continue
            row = {}
            for name, value in zip(self.fields, values):
                with contextlib.suppress(ValueError):  # "[N/A]" and the like
                    row[name] = float(value.lstrip("P"))
            self.samples.append((wall, row))

    def medians(self, begin: float, end: float) -> dict[str, Any]:
        inside = [row for wall, row in list(self.samples) if begin <= wall <= end]
        found: dict[str, Any] = {"smi_samples": len(inside)}
        for name in self.fields:
            values = [row[name] for row in inside if name in row]
            if values:
                found[f"smi {name}"] = statistics.median(values)
        return found

    def close(self) -> None:
        self.process.terminate()
        self.process.wait(10)


def _calls_for(workload: Any, seconds: float, after: Callable[[], None] = lambda: None) -> tuple[int, float, float]:
    """Calls of the workload's steps, each synchronized then followed by ``after``, for ``seconds``: the steps, the
    time they took, and when they began."""
    steps, sync = workload.spec.steps_per_call, workload.device.synchronize
    sync()
    begin = time.perf_counter()
    calls = 0
    while time.perf_counter() - begin < seconds:
        workload.run(steps)
        sync()
        calls += 1
        after()
    return calls * steps, time.perf_counter() - begin, begin


def _between(workload: Any, found: Any, seconds: float) -> dict[str, Any]:
    """The counter read after each call's synchronize, in this thread: update times known to one call."""
    from mpsbench.measure import energy

    updates = []
    last = [found.joules()]

    def read() -> None:
        value = found.joules()
        if value != last[0]:
            updates.append((time.perf_counter(), value))
            last[0] = value

    steps, took, begin = _calls_for(workload, seconds, read)
    end = begin + took
    reading = energy.reading(found.what, updates, begin, end, steps)
    return dataclasses.asdict(reading)


def _recorded(workload: Any, found: Any, seconds: float) -> dict[str, Any]:
    """energy.measure's window (polling thread, no settle) with every counter update and call end kept."""
    from mpsbench.measure import energy

    steps, sync = workload.spec.steps_per_call, workload.device.synchronize
    poller = energy._Poller(found)
    poller.start()
    try:
        sync()
        begin = time.perf_counter()
        ends: list[float] = []
        while (not ends or ends[-1] - begin < seconds or len(poller.since(begin)) < energy.MIN_UPDATES):
            workload.run(steps)
            sync()
            ends.append(time.perf_counter())
    finally:
        poller.stopping.set()
        poller.join()
    reading = energy.reading(found.what, poller.updates[1:], begin, ends[-1], len(ends) * steps)
    return {**dataclasses.asdict(reading), "begin": begin, "steps_per_call": steps,
            "updates_seen": poller.updates[1:], "call_ends": ends}


def probe(kind: str, device: str, model: str, smi: Smi | None, plan: str = PLAN) -> dict[str, Any]:
    from mpsbench.measure import energy, models, skips, suite

    batch = models.get(model).seed_batch_size
    row: dict[str, Any] = {"model": model, "kind": kind, "batch": batch, "windows": []}
    if kind == "inference" and model not in models.INFERENCE_NAMES:
        row["skipped"] = "no inference of its own"
        return row
    workload = suite.prepare(kind, device, model, batch, guarded=False)
    try:
        found = energy.counter(device)
    except skips.SkipNotImplemented as exc:
        found, row["counter"] = None, str(exc)
    _calls_for(workload, energy.SETTLE_SECONDS)
    for name in [name for name in plan.split(",") if found is not None or name.startswith("clean")]:
        wall = time.time()
        window: dict[str, Any] = {"window": name}
        try:
            seconds = float(name.split("@")[1])
            if name.startswith("clean"):
                steps, took, _ = _calls_for(workload, seconds)
                window.update(steps=steps, seconds=took)
            elif name.startswith("between"):
                window.update(_between(workload, found, seconds))
            else:
                window.update(_recorded(workload, found, seconds))
            window["step_ms"] = 1e3 * window["seconds"] / window["steps"]
        except Exception as exc:  # a window that cannot read is a figure too
            window["failed"] = f"{type(exc).__name__}: {exc}"
        if smi is not None:  # the first 0.3 s left out: power.draw.average is a one-second mean, the state follows
            window.update(smi.medians(wall + 0.3, time.time()))
            if "watts" in window and "smi power.draw" in window:
                window["smi/nvml"] = window["smi power.draw"] / window["watts"]
        row["windows"].append(window)
        print(json.dumps({"model": model, "kind": kind, **{k: v for k, v in window.items() if k not in RAW}}), flush=True)
    if found is not None:  # one read's cost
        begin = time.perf_counter()
        for _ in range(200):
            found.joules()
        row["read_us"] = 1e6 * (time.perf_counter() - begin) / 200
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--models", default="mlp,lenet5,resnet50,bert_base")
    parser.add_argument("--kinds", default="training,inference")
    parser.add_argument("--smi", action="store_true")
    parser.add_argument("--plan", default=PLAN, help=f"windows in order (default {PLAN}; kinds energy, clean, between)")
    args = parser.parse_args()
    from mpsbench.measure import measured

    smi = Smi() if args.smi else None
    rows = []
    try:
        for model in args.models.split(","):
            for kind in args.kinds.split(","):
                try:
                    rows.append(probe(kind, args.device, model, smi, args.plan))
                except Exception as exc:  # a figure too
                    rows.append({"model": model, "kind": kind, "failed": f"{type(exc).__name__}: {exc}"})
                measured.release(args.device)
    finally:
        if smi is not None:
            smi.close()
    args.out.write_text(json.dumps({"date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
                                    "smi_fields": smi.fields if smi else None, "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
