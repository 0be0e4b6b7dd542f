"""Profile a few timed steps of one combination inside one build's environment (explain.py runs it).

    python -S profile_step.py BENCHMARK_DIR BENCHMARK_ID TORCH_DIR OUT_JSON STEPS PARENT_PID

It starts as a build server does (serve_build.py: the asv environment's python with the build alone on
sys.path, torch checked to come from the build), runs the combination's own asv ``setup``, warms up, times
steps without the profiler (each call of the timed method ends in the device's synchronize), then profiles
STEPS more with ``torch.profiler`` (input shapes recorded) and writes OUT_JSON: per op and input shapes the
calls and self times over the profiled steps (summed, and one call's median), the kernels where the
profiler sees the device, the step times, and what this build's profiler lacks. Standard library,
asv_runner and torch only: it runs under every supported torch.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import statistics
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

WARM_UP_CALLS = (
    2  # on top of the benchmark's own setup, which warms the suite's workloads up already
)
TIMED_CALLS = (10, 200, 1.0)  # unprofiled calls: at least 10, then more up to 200 or 1 s
STEP_ROW = "ProfilerStep*"  # torch's own row for each profiled step: its self time is what ran outside any op
OUTSIDE_OPS = "(python between ops)"  # the name the table gives STEP_ROW's self time


@dataclass
class Plan:
    """What this build's profiler is asked for on the device, and what it cannot give there."""

    activities: list[
        Any
    ]  # torch.profiler.ProfilerActivity members (empty: the legacy autograd profiler)
    basis: str  # "device" where the profiler times the device's kernels, else "cpu"
    missing: list[str] = field(
        default_factory=list
    )  # said in the table, never replaced by a number
    signposts: Callable[[], Any] | None = (
        None  # torch.mps.profiler's context, where the build has it
    )


def plan(torch: Any, device: str) -> Plan:
    """The profiler's activities for ``device`` under this ``torch``, each feature asked for only where the
    build has it, and what is missing (torch 1.12 to today: ProfilerActivity.CUDA since 1.8.1,
    torch.mps.profiler since 2.1, no ProfilerActivity for mps in any)."""
    profiler = getattr(torch, "profiler", None)
    activity = getattr(profiler, "ProfilerActivity", None)
    if activity is None:
        return Plan(
            [],
            "cpu",
            ["torch.profiler (torch >= 1.8.1): the autograd profiler's cpu times instead"],
        )
    found = Plan([activity.CPU], "cpu")
    if device == "cuda":
        if hasattr(activity, "CUDA") and torch.cuda.is_available():
            found.activities.append(activity.CUDA)
            found.basis = "device"
        else:
            found.missing.append(
                "cuda kernel times: this build's profiler has no CUDA activity here"
            )
    elif device == "mps":
        found.missing.append(
            "mps GPU times: torch's profiler sees the cpu side of each mps op (its encoding),"
            " not the GPU's; the table's times are the cpu's"
        )
        mps_profiler = getattr(getattr(torch, "mps", None), "profiler", None)
        available = getattr(getattr(torch.backends, "mps", None), "is_available", lambda: False)()
        if mps_profiler is not None and hasattr(mps_profiler, "profile") and available:
            found.signposts = lambda: mps_profiler.profile(
                mode="interval", wait_until_completed=False
            )
            found.missing.append(
                "mps kernels: torch.mps.profiler's signposts went to Instruments (os_signpost),"
                " which Python cannot read: record with xctrace to see them"
            )
        else:
            found.missing.append(
                "mps signposts: this build has no torch.mps.profiler (torch >= 2.1 on macOS)"
            )
    return found


def _device_us(event: Any) -> float:
    """An averaged event's self time on the device: ``self_device_time_total`` (torch >= 2.4) or its older name."""
    for name in ("self_device_time_total", "self_cuda_time_total"):
        value = getattr(event, name, None)
        if value is not None:
            return float(value)
    return 0.0


def rows(events: Any) -> list[dict[str, Any]]:
    """The profiler's events grouped by op (or kernel) and input shapes, as JSON rows: the calls, the self
    times summed and the median of one call's (microseconds). A median per call holds where a loaded machine
    descheduled a few calls; the sums say what the profiler saw."""
    grouped: dict[tuple[str, str, str], list[tuple[float, float]]] = {}
    for event in events:
        name = OUTSIDE_OPS if re.fullmatch(r"ProfilerStep(\*|#\d+)", event.name) else event.name
        kind = (
            "kernel"
            if str(getattr(event, "device_type", "CPU")).rpartition(".")[2] != "CPU"
            else "op"
        )
        if kind == "kernel" and (
            name == OUTSIDE_OPS or getattr(event, "is_user_annotation", False)
        ):
            continue  # an annotation's span on the device's timeline (a step, record_function): no kernel
        shapes = getattr(event, "input_shapes", None)
        key = (kind, name, str(shapes) if shapes else "")
        grouped.setdefault(key, []).append((float(event.self_cpu_time_total), _device_us(event)))
    return [
        {
            "name": name,
            "kind": kind,
            "shapes": shapes,
            "calls": len(times),
            "cpu_us": sum(cpu for cpu, _ in times),
            "device_us": sum(device for _, device in times),
            "cpu_us_median": statistics.median(cpu for cpu, _ in times),
            "device_us_median": statistics.median(device for _, device in times),
        }
        for (kind, name, shapes), times in grouped.items()
    ]


def _timed(call: Callable[[], None]) -> list[float]:
    """Wall seconds of unprofiled calls (TIMED_CALLS), each ending where the timed method synchronizes."""
    least, most, seconds = TIMED_CALLS
    times: list[float] = []
    started = time.perf_counter()
    while len(times) < least or (len(times) < most and time.perf_counter() - started < seconds):
        clock = time.perf_counter()
        call()
        times.append(time.perf_counter() - clock)
    return times


def profile(
    torch: Any, call: Callable[[], None], calls: int, found: Plan
) -> tuple[list[dict[str, Any]], list[float]]:
    """``calls`` calls under the profiler after one profiled warm-up call: the rows and each call's seconds."""
    seconds: list[float] = []
    kept: list[Any] = []
    if not found.activities:  # no torch.profiler: the autograd profiler, every call kept
        with torch.autograd.profiler.profile(record_shapes=True) as legacy:
            for _ in range(calls):
                clock = time.perf_counter()
                call()
                seconds.append(time.perf_counter() - clock)
        return rows(legacy.function_events), seconds
    schedule = torch.profiler.schedule(wait=0, warmup=1, active=calls, repeat=1)
    with contextlib.ExitStack() as stack:
        if found.signposts is not None:
            stack.enter_context(found.signposts())
        profiler = stack.enter_context(
            torch.profiler.profile(
                activities=found.activities,
                record_shapes=True,
                schedule=schedule,
                on_trace_ready=lambda done: kept.append(list(done.events())),
            )
        )
        for number in range(calls + 1):
            clock = time.perf_counter()
            call()
            if number:  # the warm-up call is not one of the profiled ones
                seconds.append(time.perf_counter() - clock)
            profiler.step()
    if not kept:
        raise RuntimeError("the profiler handed back no events for the profiled steps")
    return rows(kept[-1]), seconds


def _checked_torch(torch_dir: str) -> Any:
    import torch

    where = os.path.abspath(torch.__file__)
    # by the path it was imported through or the one its links resolve to, as serve_build checks it
    if not any(
        path.startswith(os.path.join(base, ""))
        for path, base in (
            (where, os.path.abspath(torch_dir)),
            (os.path.realpath(where), os.path.realpath(torch_dir)),
        )
    ):
        raise RuntimeError(
            f"torch was imported from {os.path.dirname(where)}, not from the build's {torch_dir}"
        )
    return torch


def measure(benchmark_dir: str, benchmark_id: str, torch_dir: str, calls: int) -> dict[str, Any]:
    """The combination's setup, warm-up, unprofiled and profiled calls, teardown: what OUT_JSON holds."""
    torch = _checked_torch(torch_dir)
    from mpsbench.core.asv_internals import get_benchmark_from_name

    benchmark = get_benchmark_from_name(benchmark_dir, benchmark_id)
    if hasattr(benchmark, "set_cache"):  # asv_runner >= 0.3 keeps the setup_cache apart; none here
        benchmark.set_cache(None)
    params = tuple(
        benchmark._current_params
    )  # asv_runner's own: the combination's parameter values
    names = list(getattr(benchmark, "param_names", []))
    device = str(params[names.index("device")]) if "device" in names else "cpu"
    if benchmark.do_setup():
        raise RuntimeError(f"{benchmark_id} skips here (its setup said n/a)")
    try:

        def call() -> None:
            benchmark.func(*params)

        # what one asv sample divides its clock by: the suite's StepTimer's steps a call (a model's steps, an
        # op's calls), read from the timer asv itself reads after setup; 1 for a plain timer
        steps = getattr(benchmark.timer, "steps_per_call", 1)
        steps = steps if isinstance(steps, int) and steps > 0 else 1
        for _ in range(WARM_UP_CALLS):
            call()
        timed = _timed(call)
        found = plan(torch, device)
        profiled, seconds = profile(torch, call, calls, found)
    finally:
        benchmark.do_teardown()
    return {
        "torch": getattr(torch, "__version__", "?"),
        "device": device,
        "steps_per_call": steps,
        # a call's seconds as compare reads a process: its fastest call (contention only ever adds time)
        "calls": calls,
        "call_seconds": min(timed),
        "call_seconds_median": statistics.median(timed),
        "timed_calls": len(timed),
        "profiled_call_seconds": min(seconds),
        "basis": found.basis,
        "missing": found.missing,
        "rows": profiled,
    }


def main(argv: list[str]) -> int:
    benchmark_dir, benchmark_id, torch_dir, out_json, calls, parent = argv
    from mpsbench.regressions import (
        serve_build,
    )  # PYTHONPATH holds the suite's src: its helpers, not copies

    serve_build._die_with(int(parent))
    serve_build._site_without_switch()
    try:
        said: dict[str, Any] = measure(benchmark_dir, benchmark_id, torch_dir, int(calls))
    except BaseException as exc:  # the reason, in one line for explain; the traceback in the log
        traceback.print_exc()
        said = {"error": f"{type(exc).__name__}: {exc}".splitlines()[0]}
    with open(out_json, "w") as handle:
        json.dump(said, handle)
    return 0 if "error" not in said else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
