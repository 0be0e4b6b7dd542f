"""``python -S profile_step.py BENCHMARK_DIR BENCHMARK_ID TORCH_DIR OUT_JSON STEPS PARENT_PID``:
explain's profile of one combination in one build."""

from __future__ import annotations

import contextlib
import functools
import json
import re
import statistics
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mpsbench.regressions import serve_build  # PYTHONPATH holds the suite's src

WARM_UP_CALLS = 2  # the benchmark's setup warms up already
TIMED_CALLS = (10, 200, 1.0)  # at least 10, then up to 200 or 1 s
OUTSIDE_OPS = "(python between ops)"  # torch's ProfilerStep self time


@dataclass
class Plan:
    activities: list[Any]  # empty: the legacy autograd profiler
    basis: str  # "device" or "cpu"
    missing: list[str] = field(default_factory=list)
    signposts: Callable[[], Any] = contextlib.nullcontext


def plan(torch: Any, device: str) -> Plan:
    """The profiler's activities for ``device``, where the build has them."""
    activity = getattr(getattr(torch, "profiler", None), "ProfilerActivity", None)
    if activity is None:
        return Plan(
            [],
            "cpu",
            ["torch.profiler (torch >= 1.8.1): the autograd profiler's cpu times instead"],
        )
    found = Plan([activity.CPU], "cpu")
    if device == "cuda" and hasattr(activity, "CUDA") and torch.cuda.is_available():
        found.activities.append(activity.CUDA)
        found.basis = "device"
    elif device == "cuda":
        found.missing.append("cuda kernel times: no CUDA profiling in this build here")
    elif device == "mps":
        found.missing.append("mps GPU times: torch's profiler times an mps op's cpu side only")
        signposts = getattr(getattr(getattr(torch, "mps", None), "profiler", None), "profile", None)
        if signposts is not None and torch.backends.mps.is_available():
            found.signposts = lambda: signposts(mode="interval", wait_until_completed=False)
            found.missing.append(
                "mps kernels: torch.mps.profiler's signposts go to Instruments (record with xctrace)"
            )
        else:
            found.missing.append(
                "mps signposts: this build has no torch.mps.profiler (torch >= 2.1 on macOS)"
            )
    return found


def _device_us(event: Any) -> float:
    for name in ("self_device_time_total", "self_cuda_time_total"):  # torch < 2.4: cuda
        if (value := getattr(event, name, None)) is not None:
            return float(value)
    return 0.0


def rows(events: Any) -> list[dict[str, Any]]:
    """Per op (or kernel) and input shapes: calls, self microseconds summed and their median
    (robust to descheduling)."""
    grouped: dict[tuple[str, str, str], tuple[list[float], list[float]]] = {}
    for event in events:
        name = OUTSIDE_OPS if re.fullmatch(r"ProfilerStep(\*|#\d+)", event.name) else event.name
        on_cpu = str(getattr(event, "device_type", "CPU")).rpartition(".")[2] == "CPU"
        if not on_cpu and (name == OUTSIDE_OPS or getattr(event, "is_user_annotation", False)):
            continue  # an annotation's span on the device, not a kernel
        shapes = getattr(event, "input_shapes", None)
        cpu, device = grouped.setdefault(
            ("op" if on_cpu else "kernel", name, str(shapes) if shapes else ""), ([], [])
        )
        cpu.append(float(event.self_cpu_time_total))
        device.append(_device_us(event))
    return [
        {
            "name": name,
            "kind": kind,
            "shapes": shapes,
            "calls": len(cpu),
            "cpu_us": sum(cpu),
            "device_us": sum(device),
            "cpu_us_median": statistics.median(cpu),
            "device_us_median": statistics.median(device),
        }
        for (kind, name, shapes), (cpu, device) in grouped.items()
    ]


def _seconds(call: Callable[[], None]) -> float:
    clock = time.perf_counter()
    call()
    return time.perf_counter() - clock


def profile(
    torch: Any, call: Callable[[], None], calls: int, found: Plan
) -> tuple[list[dict[str, Any]], list[float]]:
    """Rows of ``calls`` profiled calls after a warm-up, and each call's seconds."""
    if not found.activities:
        with torch.autograd.profiler.profile(record_shapes=True) as legacy:
            seconds = [_seconds(call) for _ in range(calls)]
        return rows(legacy.function_events), seconds
    kept: list[Any] = []
    with (
        found.signposts(),
        torch.profiler.profile(
            activities=found.activities,
            record_shapes=True,
            schedule=torch.profiler.schedule(wait=0, warmup=1, active=calls, repeat=1),
            on_trace_ready=lambda done: kept.append(list(done.events())),
        ) as profiler,
    ):
        seconds = []
        for _ in range(calls + 1):
            seconds.append(_seconds(call))
            profiler.step()
    if not kept:
        raise RuntimeError("the profiler handed back no events for the profiled steps")
    return rows(kept[-1]), seconds[1:]  # less the warm-up call


def measure(benchmark_dir: str, benchmark_id: str, torch_dir: str, calls: int) -> dict[str, Any]:
    """OUT_JSON: the combination's timed and profiled calls."""
    torch = serve_build.torch_from(torch_dir)
    from mpsbench.core.asv_internals import get_benchmark_from_name

    benchmark = get_benchmark_from_name(benchmark_dir, benchmark_id)
    if hasattr(benchmark, "set_cache"):  # asv_runner >= 0.3
        benchmark.set_cache(None)
    params = tuple(benchmark._current_params)  # private: no public way
    device = str(dict(zip(getattr(benchmark, "param_names", []), params)).get("device", "cpu"))
    if benchmark.do_setup():
        raise RuntimeError(f"{benchmark_id} skips here (its setup said n/a)")
    call = functools.partial(benchmark.func, *params)
    try:
        # StepTimer's k: asv divides a sample's clock by it, so a call's seconds / k is one step
        steps = getattr(benchmark.timer, "steps_per_call", 1)
        for _ in range(WARM_UP_CALLS):
            call()
        least, most, seconds = TIMED_CALLS
        timed: list[float] = []
        started = time.perf_counter()
        while len(timed) < least or (len(timed) < most and time.perf_counter() - started < seconds):
            timed.append(_seconds(call))
        found = plan(torch, device)
        profiled, seconds_each = profile(torch, call, calls, found)
    finally:
        benchmark.do_teardown()
    return {
        "torch": getattr(torch, "__version__", "?"),
        "device": device,
        "steps_per_call": steps,
        "calls": calls,
        "call_seconds": min(timed),  # contention only adds time
        "timed_calls": len(timed),
        "profiled_call_seconds": min(seconds_each),
        "basis": found.basis,
        "missing": found.missing,
        "rows": profiled,
    }


def main(argv: list[str]) -> int:
    benchmark_dir, benchmark_id, torch_dir, out_json, calls, parent = argv
    serve_build._die_with(int(parent))
    serve_build._site_without_switch()
    try:
        said: dict[str, Any] = measure(benchmark_dir, benchmark_id, torch_dir, int(calls))
    except BaseException as exc:  # one line for explain, the traceback for the log
        traceback.print_exc()
        said = {"error": f"{type(exc).__name__}: {exc}".splitlines()[0]}
    with open(out_json, "w") as handle:
        json.dump(said, handle)
    return 1 if "error" in said else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
