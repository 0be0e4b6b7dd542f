"""Calibrate the suite on the GPU present: fidelity, noise, sensitivity and cost (issue #4).

    scripts/calibrate [--device cuda|mps] [--workdir DIR] [--phases ...]

Runs the real suite through asv in virtual environments whose build is the torch
already installed here (``mpsbench build add-existing``: nothing is downloaded),
against a calibration timeline of three commits: A and A2 (the same build
twice) and B (the same build with a 5% slowdown of one model injected,
tools/calibration/slowdown.py). Then:

- fidelity: for each model at its seed batch size, asv's median step time on
  commit A against a hand-written loop in fresh processes (warm-up, then timed
  calls with a synchronize before each clock read; CUDA events as a second
  opinion), and an asv-like loop in the same process. Small models are timed
  in calls of ``steps_per_call`` steps in both, as the suite does.
- noise: the default selection on A and on A2, compared benchmark by benchmark,
  and the spread within a run (interquartile range over the median).
- sensitivity: ``asv continuous`` A→A2 must flag nothing, A2→B must flag the
  injected model, at the factor chosen from the noise.
- cost: wall time of the default selection under forkserver and spawn, and the
  share of it spent outside timed steps.

Prints Markdown tables and writes them, with the raw numbers, to --out.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from mpsbench.builds import machine, resolve, timeline
from mpsbench.builds import manifest as mf
from mpsbench.core import asvconf
from mpsbench.measure import devices, models, selection
from mpsbench.results import recorded
from tools.calibration import slowdown

PHASES = ("fidelity", "noise", "sensitivity", "cost", "breakdown")
INJECTED_MODEL = "resnet50"
INJECTED_FRACTION = 0.05
SEED_CASES = [("training", name) for name in models.NAMES] + [
    ("inference", name) for name in models.INFERENCE_NAMES
]
TIME_BENCH = {
    "training": "benchmark_models.Training.time_step",
    "inference": "benchmark_models.Inference.time_step",
}


@dataclass
class Report:
    device: str
    torch_version: str
    machine: dict[str, Any]
    sections: list[str] = field(default_factory=list)
    raw: dict[str, Any] = field(default_factory=dict)

    def add(self, title: str, header: list[str], rows: list[list[str]], note: str = "") -> None:
        lines = [f"### {title}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
        if note:
            lines += ["", note]
        text = "\n".join(lines) + "\n"
        self.sections.append(text)
        print(text, flush=True)


# --- the calibration timeline ----------------------------------------------------------


def calibration_timeline(workdir: Path) -> dict[str, str]:
    """Commits A, A2 (the installed torch, twice) and B (with the injected slowdown)."""
    import torch

    site = Path(torch.__file__).resolve().parents[1]
    base = resolve.existing(site, build_id="a")
    start = base.when()
    builds = [
        base,
        resolve.existing(site, build_id="a2", date=mf.format_date(start + timedelta(minutes=1))),
        resolve.existing(
            site,
            build_id="b",
            date=mf.format_date(start + timedelta(minutes=2)),
            env={slowdown.INJECT_ENV: f"{INJECTED_MODEL}:{INJECTED_FRACTION}"},
        ),
    ]
    manifest = mf.Manifest()
    for build in builds:
        manifest = mf.append(manifest, "calib", build)
    generated = timeline.generate(manifest, workdir / "timeline", force=True)
    return {build.id: generated.commits[f"calib@{build.id}"] for build in builds}


def suite_with_slowdown(workdir: Path) -> Path:
    """The calibration's copy of the suite, whose package installs the slowdown (the suite has no hook for it).

    Same module and class names, so the same benchmark ids; asv.conf.json in
    ``workdir`` (AsvConf.derive) is pointed at it.
    """
    target = workdir / "benchmarks"
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(
        asvconf.ROOT / "benchmarks", target, ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copy2(Path(slowdown.__file__), target / "_slowdown.py")
    with open(target / "__init__.py", "a") as init:
        init.write(
            "\nfrom . import _slowdown  # calibration only: build B's injected slowdown\n\n_slowdown.install()\n"
        )
    config = workdir / "asv.conf.json"
    conf = json.loads(config.read_text())
    conf["benchmark_dir"] = str(target)
    config.write_text(json.dumps(conf, indent=4) + "\n")
    return target


class Asv:
    """Runs asv in the calibration folder, logging everything, timing each call."""

    def __init__(self, workdir: Path, machine_name: str) -> None:
        self.workdir = workdir
        self.machine = machine_name
        self.log = open(workdir / "asv.log", "a")  # noqa: SIM115 - kept open for the whole calibration
        self.env = dict(os.environ)
        self.env.pop("MPSBENCH_FULL", None)

    def __call__(self, *args: str, check: bool = True) -> tuple[int, float, str]:
        command = [sys.executable, "-m", "asv", *args]
        print("$ asv " + " ".join(args), flush=True)
        started = time.perf_counter()
        self.log.write(f"$ asv {' '.join(args)}\n")
        self.log.flush()
        # asv's output goes to the log as it comes, so a run stopped by a time limit leaves its progress behind
        process = subprocess.Popen(
            command,
            cwd=self.workdir,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        assert process.stdout is not None
        lines = []
        for line in process.stdout:
            lines.append(line)
            self.log.write(f"[{time.perf_counter() - started:7.1f}] {line}")
            self.log.flush()
        code = process.wait()
        seconds = time.perf_counter() - started
        output = "".join(lines)
        self.log.write(f"[exit {code}, {seconds:.1f} s]\n")
        self.log.flush()
        if check and code not in (0, 2):  # 2: some benchmark failed, recorded
            raise RuntimeError(f"asv {args[0]} failed ({code}): {output[-3000:]}")
        return code, seconds, output

    def run(self, commit: str, *selection: str, launch: str = "forkserver") -> float:
        """Run the selection on one commit; reuse results already in the workdir (a calibration resumed)."""
        walls_file = self.workdir / "walls.json"
        walls = json.loads(walls_file.read_text()) if walls_file.is_file() else {}
        key = f"{commit} {launch} {' '.join(selection)}"
        if key in walls and list(
            (self.workdir / "results" / self.machine).glob(f"{commit[:8]}-*.json")
        ):
            print(f"reusing the results of {commit[:8]} ({launch}, {walls[key]:.0f} s)", flush=True)
            return float(walls[key])
        _, seconds, _ = self(
            "run",
            "--machine",
            self.machine,
            "--launch-method",
            launch,
            "--record-samples",
            *selection,
            f"{commit}^!",
        )
        walls[key] = seconds
        walls_file.write_text(json.dumps(walls, indent=1))
        return seconds


# --- reading asv's results --------------------------------------------------------------


def load_results(workdir: Path, machine_name: str, commit: str) -> Any:
    folder = workdir / "results" / machine_name
    files = sorted(folder.glob(f"{commit[:8]}-*.json"))
    if not files:
        raise RuntimeError(f"no asv results for {commit[:8]} in {folder}")
    return recorded.read(files[-1])


def time_values(results: Any) -> dict[tuple[str, tuple[str, ...]], dict[str, Any]]:
    """Every timed value: (benchmark, params) -> median, q25, q75, samples."""
    import itertools

    values = {}
    for name in results.get_all_result_keys():
        if ".time_" not in name:
            continue
        params = results.get_result_params(name)
        combos = list(itertools.product(*params)) if params else [()]
        medians = results.get_result_value(name, params)
        stats = results.get_result_stats(name, params)
        samples = results.get_result_samples(name, params)
        for index, combo in enumerate(combos):
            if medians[index] is None or math.isnan(medians[index]) or stats[index] is None:
                continue  # skipped (n/a) or failed: nothing was timed
            values[(name, tuple(str(p) for p in combo))] = {
                "median": medians[index],
                "q25": stats[index].get("q_25"),
                "q75": stats[index].get("q_75"),
                "samples": samples[index] or [],
            }
    return values


def _param(value: str) -> str:
    return repr(value)


def _key(kind: str, device: str, model: str, batch: int) -> tuple[str, tuple[str, ...]]:
    return TIME_BENCH[kind], (_param(device), _param(model), str(batch))


# --- phases ------------------------------------------------------------------------------


# A minimal hand-written loop, run in a fresh interpreter per process as asv
# runs each benchmark: warm-up, then timed calls with a synchronize before each
# clock read (and CUDA events as a second opinion). In the same process and on
# the same workload, "asv-like" repeats what asv_runner does per sample (setup
# again, which finds the cached workload; gc off; the clock around the body,
# which ends with the synchronize): if the two agree in one process, a
# difference from asv's own number comes from the process, not the timing.
_HAND_LOOP = """
import gc, json, statistics, sys, time
kind, device, model, batch, calls = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
from mpsbench.measure import devices, suite
workload = suite.prepare(kind, device, model, batch)  # build, warm-up and checks, as asv's setup
steps = workload.spec.steps_per_call
def hand():
    out = []
    for _ in range(calls):
        devices.get(device).synchronize()
        begin = time.perf_counter()
        workload.run(steps)
        devices.get(device).synchronize()
        out.append((time.perf_counter() - begin) / steps)
    return statistics.median(out)
def asv_like():
    out = []
    for _ in range(calls):
        suite.prepare(kind, device, model, batch)
        gc.disable()
        begin = time.perf_counter()
        workload.run(steps)
        devices.get(device).synchronize()
        out.append((time.perf_counter() - begin) / steps)
        gc.enable()
    return statistics.median(out)
def events():
    import torch
    out = []
    for _ in range(calls):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        workload.run(steps)
        end.record()
        end.synchronize()
        out.append(start.elapsed_time(end) / 1000 / steps)
    return statistics.median(out)
found = {"hand": [], "asv_like": [], "events": []}
for _ in range(2):  # interleaved, so that a drift shows as a difference between the two passes
    found["hand"].append(hand())
    found["asv_like"].append(asv_like())
    if device == "cuda":
        found["events"].append(events())
print(json.dumps(found))
"""
# Sub-millisecond models depend most on where their process runs: time them in several.
HAND_PROCESSES_SMALL = 3
HAND_PROCESSES_LARGE = 1
HAND_CALLS = 50


@dataclass(frozen=True)
class HandTiming:
    """Seconds per step from fresh-process hand loops: medians over processes, and their spread."""

    clock: float
    events: float | None
    asv_like: float
    per_process: list[float]

    @property
    def process_spread(self) -> float:
        return (max(self.per_process) - min(self.per_process)) / self.clock


def hand_loop(kind: str, device: str, model: str, batch: int) -> HandTiming:
    """The reference: a hand-written loop in fresh processes (several for sub-millisecond models)."""
    processes = (
        HAND_PROCESSES_SMALL if models.get(model).steps_per_call > 1 else HAND_PROCESSES_LARGE
    )
    clocks: list[float] = []
    asv_like: list[float] = []
    events: list[float] = []
    for _ in range(processes):
        done = subprocess.run(
            [sys.executable, "-c", _HAND_LOOP, kind, device, model, str(batch), str(HAND_CALLS)],
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise RuntimeError(
                f"hand loop for {model} {kind} failed: {done.stderr.strip().splitlines()[-1:]}"
            )
        found = json.loads(done.stdout.strip().splitlines()[-1])
        clocks.append(statistics.median(found["hand"]))
        asv_like.append(statistics.median(found["asv_like"]))
        events.extend(found["events"])
    return HandTiming(
        statistics.median(clocks),
        statistics.median(events) if events else None,
        statistics.median(asv_like),
        clocks,
    )


def fidelity(report: Report, asv_values: dict[Any, dict[str, Any]], device: str) -> None:
    rows = []
    worst = 0.0
    for kind, name in SEED_CASES:
        batch = models.get(name).seed_batch_size
        measured = asv_values.get(_key(kind, device, name, batch))
        if measured is None:
            rows.append([kind, name, str(batch), "n/a", "", "", "", "", "", ""])
            continue
        hand = hand_loop(kind, device, name, batch)
        ratio = measured["median"] / hand.clock
        worst = max(worst, abs(ratio - 1))
        print(
            f"fidelity: {kind} {name}: asv {measured['median'] * 1e3:.3f} ms, hand {hand.clock * 1e3:.3f} ms"
            f" (processes {[round(c * 1e3, 3) for c in hand.per_process]}), asv-like {hand.asv_like * 1e3:.3f} ms",
            flush=True,
        )
        rows.append(
            [
                kind,
                name,
                str(batch),
                f"{measured['median'] * 1e3:.3f}",
                f"{hand.clock * 1e3:.3f}",
                f"{hand.process_spread * 100:.1f}%",
                f"{hand.asv_like * 1e3:.3f}",
                f"{hand.events * 1e3:.3f}" if hand.events else "-",
                f"{ratio:.3f}",
                f"{measured['median'] / hand.events:.3f}" if hand.events else "-",
            ]
        )
        report.raw.setdefault("fidelity", []).append(
            {
                "kind": kind,
                "model": name,
                "batch": batch,
                "asv": measured["median"],
                "clock": hand.clock,
                "events": hand.events,
                "asv_like": hand.asv_like,
                "per_process": hand.per_process,
            }
        )
    report.add(
        "Fidelity: asv's median against a hand-written loop (ms per step)",
        [
            "workload",
            "model",
            "batch",
            "asv",
            "hand loop",
            "spread over processes",
            "asv-like in that process",
            "CUDA events",
            "asv/loop",
            "asv/events",
        ],
        rows,
        f"Largest deviation of asv/loop from 1: {worst:.3f} (goal: within 0.02). The hand loop runs in fresh"
        f" processes ({HAND_PROCESSES_SMALL} for sub-millisecond models, {HAND_PROCESSES_LARGE} otherwise),"
        f" {HAND_CALLS} calls twice each; 'asv-like' re-runs setup before each call and turns gc off, as asv does.",
    )


def spread(values: dict[Any, dict[str, Any]]) -> dict[Any, float]:
    """Within-run spread: interquartile range over the median."""
    return {
        key: (v["q75"] - v["q25"]) / v["median"]
        for key, v in values.items()
        if v["q25"] is not None
    }


def noise(
    report: Report, first: dict[Any, dict[str, Any]], second: dict[Any, dict[str, Any]]
) -> float:
    rows = []
    large: list[float] = []
    small: list[float] = []
    within = spread(first)
    for key in sorted(set(first) & set(second)):
        a, b = first[key]["median"], second[key]["median"]
        change = b / a - 1
        (large if a > 5e-3 else small).append(abs(change))
        rows.append(
            [
                key[0].split(".", 1)[1],
                ", ".join(key[1]),
                f"{a * 1e3:.3f}",
                f"{b * 1e3:.3f}",
                f"{change * 100:+.2f}%",
                f"{within.get(key, math.nan) * 100:.2f}%",
            ]
        )
    report.raw["noise"] = {"large": large, "small": small}

    def summary(changes: list[float]) -> str:
        if not changes:
            return "none"
        return f"median {statistics.median(changes) * 100:.2f}%, max {max(changes) * 100:.2f}% over {len(changes)}"

    report.add(
        "Noise: two full runs of the same build (A and A2)",
        ["benchmark", "params", "A ms", "A2 ms", "A2/A - 1", "IQR/median in A"],
        rows,
        f"Run-to-run change, steps over 5 ms: {summary(large)}; steps under 5 ms: {summary(small)}.",
    )
    return max(large) if large else 0.0


def choose_factor(max_noise: float) -> float:
    """The smallest factor at 1.01 steps that is at least three times the worst noise, at least 1.02."""
    return max(1.02, math.ceil((1 + 3 * max_noise) * 100) / 100)


def flagged(output: str) -> list[str]:
    """The rows asv compare/continuous marks as slower beyond the factor: '| +' in asv 0.6's table."""
    return [line.strip() for line in output.splitlines() if re.match(r"\|\s*\+\s*\|", line.strip())]


def sensitivity(
    report: Report, run: Asv, commits: dict[str, str], device: str, factor: float
) -> None:
    """A/A over the whole selection from the two recorded runs, then asv continuous on a subset.

    continuous re-runs both sides, so it runs on the injected model and one
    small model only (both training and inference), to keep the device time low.
    """
    rows = []
    _, seconds, out = run(
        "compare", "--machine", run.machine, "--factor", f"{factor}", commits["a"], commits["a2"]
    )
    rows.append(
        [
            "A/A, whole selection (asv compare)",
            "-",
            str(len(flagged(out))),
            "<br>".join(flagged(out)) or "-",
            f"{seconds:.0f} s",
        ]
    )
    selection = ["-b", rf"time_step\('{device}', '(mlp|{INJECTED_MODEL})'"]
    for label, old, new in (
        ("A/A (asv continuous)", commits["a"], commits["a2"]),
        (f"A2/B, {INJECTED_FRACTION:.0%} injected (asv continuous)", commits["a2"], commits["b"]),
    ):
        code, seconds, out = run(
            "continuous",
            "--machine",
            run.machine,
            "--launch-method",
            "forkserver",
            "--factor",
            f"{factor}",
            *selection,
            old,
            new,
            check=False,
        )
        rows.append(
            [
                label,
                str(code),
                str(len(flagged(out))),
                "<br>".join(flagged(out)) or "-",
                f"{seconds:.0f} s",
            ]
        )
    report.raw["sensitivity"] = rows
    report.add(
        f"Sensitivity at factor {factor}",
        ["comparison", "exit", "flagged", "rows", "took"],
        rows,
        f"B injects a {INJECTED_FRACTION:.0%} slowdown into every {INJECTED_MODEL} step (MPSBENCH_INJECT_SLOWDOWN);"
        " asv continuous exits 1 when it flags a slowdown.",
    )


def timed_seconds(values: dict[Any, dict[str, Any]]) -> float:
    """Seconds spent inside timed calls: every recorded sample times steps_per_call steps."""
    total = 0.0
    for (_, params), value in values.items():
        model = params[1].strip("'") if len(params) > 1 else ""
        steps = models.REGISTRY[model].steps_per_call if model in models.REGISTRY else 1
        total += sum(value["samples"]) * steps
    return total


def cost(report: Report, timings: dict[str, tuple[float, float]]) -> None:
    rows = [
        [launch, f"{wall:.0f} s", f"{timed:.0f} s", f"{(1 - timed / wall) * 100:.0f}%"]
        for launch, (wall, timed) in timings.items()
    ]
    report.add(
        "Cost: the default selection for one build",
        ["launch method", "wall", "in timed calls", "outside"],
        rows,
        "'in timed calls' counts the recorded samples of time_ benchmarks; everything else (process start,"
        " imports, model builds, warm-ups, track_ benchmarks' own timing) counts as outside.",
    )


# What one benchmark process spends before its first timed call, stage by stage,
# measured in a fresh interpreter as asv's spawn starts one (forkserver saves
# only the first stage).
_BREAKDOWN = """
import json, sys, time
clock = time.perf_counter()
stages = {}
def stage(name):
    global clock
    now = time.perf_counter(); stages[name] = now - clock; clock = now
kind, device, model, batch = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
from mpsbench.measure import accuracy, devices, models, timing, workloads
spec = models.get(model)
spec.unimportable()  # imports torchvision / transformers where the model needs them
stage("imports")
devices.get(device).synchronize()
stage("device init")
workload = workloads.build(kind, device, model, batch)
devices.get(device).synchronize()
stage("build and copy")
workload.warm_up()
stage("warm-up")
if accuracy.needed(device):
    accuracy.compare(workload)
stage("accuracy check")
stages["one step"] = timing.time_steps(workload, min_calls=10, min_seconds=0).seconds_per_step
print(json.dumps(stages))
"""


def breakdown(report: Report, device: str) -> None:
    rows = []
    for kind, name in SEED_CASES:
        batch = models.get(name).seed_batch_size
        done = subprocess.run(
            [sys.executable, "-c", _BREAKDOWN, kind, device, name, str(batch)],
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            rows.append(
                [kind, name, str(batch), "failed: " + done.stderr.strip().splitlines()[-1][:120]]
            )
            continue
        stages = json.loads(done.stdout.strip().splitlines()[-1])
        print(
            f"breakdown: {kind} {name} {batch}: "
            + ", ".join(f"{k} {v:.3f} s" for k, v in stages.items()),
            flush=True,
        )
        report.raw.setdefault("breakdown", []).append(
            {"kind": kind, "model": name, "batch": batch, **stages}
        )
        rows.append([kind, name, str(batch)] + [f"{stages[key] * 1e3:.0f}" for key in stages])
    header = [
        "workload",
        "model",
        "batch",
        "imports",
        "device init",
        "build and copy",
        "warm-up",
        "accuracy check",
        "one step",
    ]
    report.add("Breakdown: what a fresh benchmark process spends before timing (ms)", header, rows)


# --- main ------------------------------------------------------------------------------------


def first_gpu() -> str:
    gpu = devices.usable_gpu()
    if gpu is not None:
        return gpu
    raise SystemExit(
        "mpsbench calibrate: no usable GPU (cuda or mps) here; pass --device cpu to calibrate the cpu"
    )


def main(argv: list[str] | None = None) -> int:
    import torch

    parser = argparse.ArgumentParser(prog="scripts/calibrate", description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=devices.NAMES, default=None)
    parser.add_argument("--workdir", type=Path, default=Path(".asv/calibration"))
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", ".asv/calibration")))
    parser.add_argument("--phases", nargs="+", choices=PHASES, default=list(PHASES))
    parser.add_argument(
        "--factor", type=float, help="use this factor instead of choosing one from the noise"
    )
    parser.add_argument(
        "--select", help="an asv -b regex in place of the default selection (for a quick try)"
    )
    parser.add_argument(
        "--whole-suite",
        action="store_true",
        help="time every benchmark module's default selection (default: benchmark_models only)",
    )
    args = parser.parse_args(argv)
    device = args.device or first_gpu()
    workdir = args.workdir.resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    args.out.mkdir(parents=True, exist_ok=True)
    name, facts = machine.write(f"calib-{device}")
    report = Report(device, torch.__version__, facts)
    header = (
        f"# Calibration on {device}: torch {torch.__version__}, {facts['chip']}, {facts['os']},"
        f" {time.strftime('%Y-%m-%d')}\n\nCommand: `scripts/calibrate --device {device}"
        f" --phases {' '.join(args.phases)}`\n\n"
    )

    def save() -> None:  # after every phase, so that a run stopped early keeps what it measured
        (args.out / "calibration.md").write_text(header + "\n".join(report.sections))
        (args.out / "calibration.json").write_text(json.dumps(report.raw, indent=1, default=str))

    if "breakdown" in args.phases:
        breakdown(report, device)
        save()
    if set(args.phases) - {"breakdown"}:
        run_suite_phases(args, report, device, workdir, name, save)
    return 0


def run_suite_phases(
    args: argparse.Namespace,
    report: Report,
    device: str,
    workdir: Path,
    name: str,
    save: Callable[[], None],
) -> None:
    """Fidelity, noise, cost and sensitivity: each needs real asv runs of the calibration timeline."""
    commits = calibration_timeline(workdir)
    asvconf.load(asvconf.ROOT / asvconf.CONFIG).derive(workdir, workdir / "timeline", ["calib"])
    suite_with_slowdown(workdir)
    run = Asv(workdir, name)
    # Only this device: the track_ classes' setup_cache would otherwise also measure every cpu combination.
    run.env[selection.DEVICES_ENV] = device
    modules = "" if args.whole_suite else r"benchmark_models\."
    device_filter = ["-b", args.select or rf"{modules}.*\('{device}'"]
    timings: dict[str, tuple[float, float]] = {}

    wall = run.run(commits["a"], *device_filter)
    first = time_values(load_results(workdir, name, commits["a"]))
    timings["forkserver"] = (wall, timed_seconds(first))
    print(f"default selection, forkserver: {wall:.0f} s", flush=True)
    if "fidelity" in args.phases:
        fidelity(report, first, device)
        save()
    factor = args.factor or 1.05
    if "noise" in args.phases or "sensitivity" in args.phases:
        run.run(commits["a2"], *device_filter)
        second = time_values(load_results(workdir, name, commits["a2"]))
        factor = args.factor or choose_factor(noise(report, first, second))
        save()
    if "cost" in args.phases:
        wall = run.run(commits["b"], *device_filter, launch="spawn")
        timings["spawn"] = (
            wall,
            timed_seconds(time_values(load_results(workdir, name, commits["b"]))),
        )
        cost(report, timings)
        save()
    if "sensitivity" in args.phases:
        sensitivity(report, run, commits, device, factor)
    report.raw["factor"] = factor
    save()
    print(f"suggested regression factor: {factor}")


if __name__ == "__main__":
    sys.exit(main())
