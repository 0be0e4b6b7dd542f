"""Issue 33 on a GPU box, unattended: the correctness patterns on cuda, NVML's energy counter, and energy per step.

    python tools/sentinels_h100.py OUT              # one H100: about 5 minutes; every figure lands in OUT
    python tools/sentinels_h100.py OUT --device cpu --models mlp      # a smoke run anywhere (energy skips here)

Runs each part in a fresh process of its own (a crash or a hang costs that part only, within its time limit):

1. ``correctness``: every pattern (issue 21's and the six 2025-2026 reports') in its dtypes on the device, through
   ``correctness.reading`` as the asv rows do: the worst call's relative error against float64 and the largest
   difference between identical calls. ``correctness.json``.
2. ``counter``: NVML's total energy counter polled every millisecond for 3 s of GPU work and 1 s idle: the interval
   between its updates and its smallest step (its resolution). ``counter.json``.
3. ``energy`` twice, in two processes alike: joules per step of the seed models at their seed batch, training and
   inference, as ``TrainingCapacity/InferenceCapacity`` measure it (their figures in their order, then
   ``energy.of_workload``), while ``nvidia-smi`` samples ``power.draw`` every 100 ms in both: its median over the
   energy reading's own window times that window's seconds per step (a separate window compared two step times:
   a host-paced step's moves 15-30% between windows). ``energy-1.json``, ``energy-2.json``.

Then ``summary.md`` and ``summary.json``: each pattern against its tolerance; the two processes' joules per step
(the issue asks within 5%); NVML's joules per step against nvidia-smi's power times step time (within 10%).
The exit status is 0 when every part ran, whatever the figures say: the figures are the result.
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import json
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

SEED_MODELS = ("mlp", "lenet5", "resnet50", "vgg16", "bert_base")
KINDS = ("training", "inference")
PART_LIMIT = {"correctness": 120, "counter": 40, "energy": 150}  # seconds each: the four parts stay within 8 minutes
REPEAT_WITHIN, SMI_WITHIN = 0.05, 0.10  # what the issue asks of the two processes and of nvidia-smi


def _write(out: Path, name: str, data: Any) -> None:
    (out / name).write_text(json.dumps(data, indent=1, default=str) + "\n")


def correctness_part(out: Path, device: str) -> None:
    from mpsbench.measure import correctness, skips, tolerances

    rows = []
    for name, pattern in correctness.PATTERNS.items():
        for dtype in tolerances.dtypes(name):
            row: dict[str, Any] = {"pattern": name, "issue": pattern.issue, "dtype": dtype,
                                   "tolerance": tolerances.TOLERANCES[dtype]}
            begin = time.perf_counter()
            try:
                found = correctness.reading(device, name, dtype)
                row.update(error=found.error, difference=found.difference, within=found.error <= row["tolerance"])
            except skips.SkipNotImplemented as exc:
                row["skipped"] = str(exc)
            except Exception as exc:  # a failed row is a figure too
                row["failed"] = f"{type(exc).__name__}: {exc}".splitlines()[0]
            row["seconds"] = round(time.perf_counter() - begin, 2)
            rows.append(row)
            print(json.dumps(row), flush=True)
    _write(out, "correctness.json", rows)


def counter_part(out: Path, device: str) -> None:
    import torch

    from mpsbench.measure import energy, skips

    try:
        found = energy.counter(device)
    except skips.SkipNotImplemented as exc:
        _write(out, "counter.json", {"skipped": str(exc)})
        return
    busy = torch.randn(8192, 8192, device=device)

    def poll(seconds: float, work: bool) -> list[tuple[float, float]]:
        seen: list[tuple[float, float]] = [(time.perf_counter(), found.joules())]
        stop = threading.Event()

        def loop() -> None:
            while not stop.is_set():
                busy.matmul(busy)
                if device == "cuda":
                    torch.cuda.synchronize()

        worker = threading.Thread(target=loop, daemon=True)
        if work:
            worker.start()
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            value = found.joules()
            if value != seen[-1][1]:
                seen.append((time.perf_counter(), value))
            time.sleep(0.001)
        stop.set()
        if work:
            worker.join()
        return seen

    result: dict[str, Any] = {"counter": found.what}
    for label, seconds, work in (("busy", 3.0, True), ("idle", 1.0, False)):
        seen = poll(seconds, work)
        intervals = [b[0] - a[0] for a, b in itertools.pairwise(seen[1:])]  # seen[0] is the first read, no update
        steps = [b[1] - a[1] for a, b in itertools.pairwise(seen)]
        result[label] = {
            "updates": len(seen) - 1,
            "interval_ms_median": 1e3 * statistics.median(intervals) if intervals else None,
            "interval_ms_min": 1e3 * min(intervals) if intervals else None,
            "interval_ms_max": 1e3 * max(intervals) if intervals else None,
            "smallest_step_mJ": 1e3 * min(steps) if steps else None,
            "watts": (seen[-1][1] - seen[1][1]) / (seen[-1][0] - seen[1][0]) if len(seen) > 2 else None,
        }
    print(json.dumps(result), flush=True)
    _write(out, "counter.json", result)


class Smi:
    """``nvidia-smi`` sampling power.draw (and .instant where the driver has it) every 100 ms in the background."""

    def __init__(self) -> None:
        instant = subprocess.run(["nvidia-smi", "--query-gpu=power.draw.instant", "--format=csv"],
                                 capture_output=True, check=False).returncode == 0
        self.fields = ["power.draw", *(["power.draw.instant"] if instant else [])]
        self.process = subprocess.Popen(
            ["nvidia-smi", f"--query-gpu=timestamp,{','.join(self.fields)}", "--format=csv,noheader,nounits",
             "-lms", "100"], stdout=subprocess.PIPE, text=True)
        self.samples: list[tuple[float, list[float]]] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            stamp, *values = line.split(",")
            try:
                wall = datetime.datetime.strptime(stamp.strip(), "%Y/%m/%d %H:%M:%S.%f").timestamp()
                self.samples.append((wall, [float(value) for value in values]))
            except ValueError:
                continue

    def medians(self, begin: float, end: float) -> dict[str, Any]:
        """Each field's median over the samples between two ``time.time()``s."""
        inside = [values for wall, values in list(self.samples) if begin <= wall <= end]
        found: dict[str, Any] = {"smi_samples": len(inside)}
        for index, name in enumerate(self.fields):
            found[f"smi {name}"] = statistics.median(values[index] for values in inside) if inside else None
        return found

    def close(self) -> None:
        self.process.terminate()
        self.process.wait(10)


def energy_part(out: Path, device: str, models: list[str], run: int, smi: bool) -> None:
    """The capacity rows' figures in their order (peak memory, throughput, then joules per step on the same
    workload), nvidia-smi sampling through the very window the energy reading's steps ran in."""
    from mpsbench.measure import energy, figures, measured, skips
    from mpsbench.measure import models as registry

    sampler = Smi() if smi else None
    rows = []
    try:
        for model in models:
            batch = registry.get(model).seed_batch_size
            for kind in KINDS:
                row: dict[str, Any] = {"model": model, "kind": kind, "batch": batch}
                try:
                    if kind == "inference" and model not in registry.INFERENCE_NAMES:
                        raise skips.SkipNotImplemented(f"{model} has no inference of its own")
                    workload = figures._capacity_workload(kind, device, model, batch)
                    for name, figure in figures.CAPACITY.items():
                        if name != "joules_per_step":
                            row[name] = figure(workload)
                    found = energy.of_workload(workload)  # as track_joules_per_step measures it
                    ended = time.time()
                    row.update(joules_per_step=found.joules_per_step, watts=found.watts, steps=found.steps,
                               seconds=found.seconds, updates=found.updates, counter=energy.counter(device).what)
                    if sampler is not None:  # the window's own samples: power.draw is a 1 s mean of the same steps
                        time.sleep(0.3)  # the window's last sample arrives
                        row.update(sampler.medians(ended - found.seconds, ended))
                        watts = row.get("smi power.draw")
                        row["smi_joules_per_step"] = None if watts is None else watts * found.seconds / found.steps
                except skips.SkipNotImplemented as exc:
                    row["skipped"] = str(exc)
                except Exception as exc:
                    row["failed"] = f"{type(exc).__name__}: {exc}".splitlines()[0]
                rows.append(row)
                print(json.dumps(row), flush=True)
                measured.release(device)
    finally:
        if sampler is not None:
            sampler.close()
    _write(out, f"energy-{run}.json", rows)


def summarize(out: Path) -> dict[str, Any]:
    def load(name: str) -> Any:
        path = out / name
        return json.loads(path.read_text()) if path.is_file() else None

    correctness_rows, first, second = load("correctness.json"), load("energy-1.json"), load("energy-2.json")
    summary: dict[str, Any] = {"counter": load("counter.json"), "correctness": correctness_rows, "energy": []}
    lines = ["# Issue 33 sentinels on this machine", "", f"{datetime.datetime.now().isoformat(timespec='seconds')}", ""]
    lines += ["## Correctness patterns", "", "| pattern | issue | dtype | error | tolerance | within | difference |",
              "|---|---|---|---|---|---|---|"]
    for row in correctness_rows or []:
        error = row.get("error")
        shown = f"{error:.3g}" if error is not None else row.get("skipped") or row.get("failed", "-")
        difference = row.get("difference")
        lines.append(f"| {row['pattern']} | {row['issue']} | {row['dtype']} | {shown} | {row['tolerance']:g} | "
                     f"{row.get('within', '-')} | {'-' if difference is None else f'{difference:.3g}'} |")
    counter = summary["counter"]
    if counter:
        lines += ["", "## NVML's energy counter", "", "```", json.dumps(counter, indent=1), "```"]
    lines += ["", "## Joules per step", "",
              "| model | kind | batch | J/step (1) | J/step (2) | 2/1 | within 5% | smi J/step | smi/NVML | within 10% "
              "| instant/NVML |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    others = {(row["model"], row["kind"]): row for row in second or []}
    for row in first or []:
        other = others.get((row["model"], row["kind"]), {})
        one, two, smi = row.get("joules_per_step"), other.get("joules_per_step"), row.get("smi_joules_per_step")
        repeat = two / one if one and two else None
        against = smi / one if one and smi else None
        # power.draw is a 1 s mean on Ampere and later (it lags a window's first second); .instant does not
        instant = row["smi power.draw.instant"] / row["watts"] if row.get("smi power.draw.instant") else None
        entry = {**row, "second_joules_per_step": two, "repeat_ratio": repeat, "smi_ratio": against,
                 "repeat_within": None if repeat is None else abs(repeat - 1) <= REPEAT_WITHIN,
                 "smi_within": None if against is None else abs(against - 1) <= SMI_WITHIN}
        summary["energy"].append(entry)

        def shown(value: float | None, form: str = ".4g") -> str:
            return "-" if value is None else format(value, form)

        note = row.get("skipped") or row.get("failed")
        lines.append(f"| {row['model']} | {row['kind']} | {row['batch']} | {note or shown(one)} | {shown(two)} | "
                     f"{shown(repeat, '.4f')} | {entry['repeat_within']} | {shown(smi)} | {shown(against, '.4f')} | "
                     f"{entry['smi_within']} | {shown(instant, '.4f')} |")
    (out / "summary.md").write_text("\n".join(lines) + "\n")
    _write(out, "summary.json", summary)
    return summary


def _facts(out: Path) -> None:
    import platform

    facts: dict[str, Any] = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                             "python": platform.python_version(), "command": sys.argv}
    try:
        import torch

        facts["torch"] = torch.__version__
        facts["gpu"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    except ImportError:
        facts["torch"] = None
    smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,power.limit", "--format=csv,noheader"],
                         capture_output=True, text=True, check=False) if _has("nvidia-smi") else None
    facts["nvidia_smi"] = smi.stdout.strip() if smi is not None else "absent"
    _write(out, "machine.json", facts)


def _has(tool: str) -> bool:
    import shutil

    return shutil.which(tool) is not None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("out", type=Path, help="the folder every figure is written to")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--models", default=",".join(SEED_MODELS), help="the energy part's models (seed batch each)")
    parser.add_argument("--part", choices=("correctness", "counter", "energy"), help=argparse.SUPPRESS)
    parser.add_argument("--run", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--smi", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    models = [name for name in args.models.split(",") if name]
    if args.part == "correctness":
        correctness_part(args.out, args.device)
    elif args.part == "counter":
        counter_part(args.out, args.device)
    elif args.part == "energy":
        energy_part(args.out, args.device, models, args.run, args.smi)
    else:
        _facts(args.out)
        base = [sys.executable, str(Path(__file__).resolve()), str(args.out), "--device", args.device,
                "--models", ",".join(models)]
        smi = ["--smi"] if _has("nvidia-smi") else []
        for part, extra in (("correctness", []), ("counter", []), ("energy", ["--run", "1", *smi]),
                            ("energy", ["--run", "2", *smi])):
            begin = time.perf_counter()
            log = args.out / f"{part}{''.join(extra[1:2])}.log"
            print(f"sentinels_h100: {part} {' '.join(extra)} (at most {PART_LIMIT[part]} s) -> {log}", flush=True)
            try:
                with log.open("w") as sink:
                    done = subprocess.run([*base, "--part", part, *extra], stdout=sink, stderr=subprocess.STDOUT,
                                          timeout=PART_LIMIT[part], check=False)
                status = f"exit {done.returncode}"
            except subprocess.TimeoutExpired:
                status = f"stopped after {PART_LIMIT[part]} s"
            print(f"sentinels_h100: {part}: {status} in {time.perf_counter() - begin:.0f} s", flush=True)
        summarize(args.out)
        print((args.out / "summary.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
