"""``asv run``, saving each value when measured."""

from __future__ import annotations

import ast
import contextlib
import contextvars
import copy
import datetime
import itertools
import json
import math
import os
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from mpsbench.core import asv_internals, files
from mpsbench.core.asv import combination

EVENTS = "events.jsonl"


@dataclass
class _Build:
    results: Any
    saved: Any  # as loaded, plus each final combination since
    rounds_left: dict[str, int]
    record_samples: bool
    append: dict[str, bool]  # asv appends the final samples


class Gate(Protocol):
    """Runs around each final-round combination; fields for its event."""

    def before(self, name: str) -> dict[str, Any]: ...

    def after(self) -> dict[str, Any]: ...


_current: contextvars.ContextVar[_Build | None] = contextvars.ContextVar("build", default=None)


def _rounds(benchmark: dict[str, Any], extra: dict[str, Any]) -> int:
    return int(extra.get("rounds", benchmark.get("rounds", 1)))  # as asv's get_rounds


def event(results_dir: Path, **fields: Any) -> None:
    """One write: no reader sees half a line."""
    with open(results_dir.parent / EVENTS, "a") as out:
        out.write(json.dumps({"at": time.time(), **fields}) + "\n")


def read_events(scratch: Path, offset: int = 0) -> tuple[list[dict[str, Any]], int]:
    text, offset = files.tail(scratch / EVENTS, offset)
    events = []
    for line in text.splitlines():
        with contextlib.suppress(ValueError):
            events.append(json.loads(line))
    return [e for e in events if isinstance(e, dict)], offset


def _atomic(save: Any) -> Any:
    def saved(results: Any, result_dir: str) -> None:
        staging = Path(result_dir).parent / f".saving-{os.getpid()}"
        save(results, str(staging))
        for path in staging.rglob("*.json"):
            target = Path(result_dir) / path.relative_to(staging)
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(path, target)

    return saved


def skip_reason(output: str | None) -> str:
    """From asv_runner's ``asv: skipped: <repr>`` line."""
    found = re.search(r"asv: skipped: \w+\((.*)\)\s*$", output or "", re.M)
    if found is None or not found[1]:
        return "no reason given"
    with contextlib.suppress(ValueError, SyntaxError):
        return str(ast.literal_eval(found[1]))
    return found[1]


def _outcome(value: Any) -> str:
    if value is None:
        return "failed"
    return "skipped" if isinstance(value, float) and math.isnan(value) else "value"


def install(results_dir: Path, gate: Gate) -> None:
    runner = asv_internals.runner
    run_benchmarks, run_benchmark, get_spawner = (
        runner.run_benchmarks,
        runner.run_benchmark,
        runner.get_spawner,
    )
    runner.Results.save = _atomic(runner.Results.save)

    def each_build(benchmarks: Any, env: Any, results: Any = None, **options: Any) -> Any:
        extra = dict(options.get("extra_params") or {})
        if options.get("quick"):
            extra["rounds"] = 1
        most = max((_rounds(b, extra) for b in benchmarks.values()), default=1)
        rounds = options.get("run_rounds") or list(range(1, most + 1))
        # asv saves nothing for --python=same; the final round saves
        if results is None or isinstance(env, asv_internals.ExistingEnvironment) or 1 not in rounds:
            return run_benchmarks(benchmarks, env, results=results, **options)
        left = {name: sum(r <= _rounds(b, extra) for r in rounds) for name, b in benchmarks.items()}
        existing = results.get_result_keys(benchmarks) if options.get("append_samples") else set()
        build = _Build(
            results,
            copy.deepcopy(results),
            left,
            bool(options.get("record_samples")),
            {name: name in existing or left[name] > 1 for name in benchmarks},
        )
        token = _current.set(build)
        try:
            return run_benchmarks(benchmarks, env, results=results, **options)
        finally:
            _current.reset(token)

    def each_combination(
        benchmark: dict[str, Any],
        spawner: Any,
        profile: Any,
        selected_idx: Any = None,
        extra_params: Any = None,
        cwd: Any = None,
        prev_result: Any = None,
    ) -> Any:
        build, name = _current.get(), benchmark["name"]
        if build is not None and name in build.rounds_left:
            build.rounds_left[name] -= 1
        params = list(itertools.product(*benchmark["params"]))  # [()] where it has none
        chosen = sorted(range(len(params)) if selected_idx is None else selected_idx)
        if build is None or build.rounds_left.get(name, 1) > 0 or not chosen:
            return run_benchmark(benchmark, spawner, profile, selected_idx, extra_params, cwd)
        parts: dict[int, Any] = {}
        whole: dict[int, Any] = {}  # with earlier rounds' samples
        commit = build.results.commit_hash
        for idx in chosen:
            shown = combination(name, params[idx])
            state = gate.before(shown)
            started = time.monotonic()
            event(results_dir, event="start", name=shown, build=commit, **state)
            parts[idx] = part = run_benchmark(benchmark, spawner, profile, {idx}, extra_params, cwd)
            seconds = time.monotonic() - started
            state = gate.after()
            whole[idx] = _with_earlier(build, benchmark, idx, part)
            build.saved.add_result(
                benchmark,
                _combined(whole, len(params)),
                selected_idx=set(whole),
                started_at=datetime.datetime.now(datetime.timezone.utc),
                duration=seconds,
                record_samples=build.record_samples,
            )
            build.saved.save(str(results_dir))
            outcome = _outcome(part.result[idx])
            event(
                results_dir,
                event="done",
                name=shown,
                build=commit,
                seconds=round(seconds, 3),
                outcome=outcome,
                **({"reason": skip_reason(part.stderr)} if outcome == "skipped" else {}),
                **state,
            )
        return _combined(parts, len(params))

    def spawner_noted(env: Any, benchmark_dir: Any, launch_method: Any) -> Any:
        spawner = get_spawner(env, benchmark_dir, launch_method=launch_method)
        if (server := getattr(spawner, "server_proc", None)) is not None:
            import psutil

            event(  # the next run ends a forkserver a kill leaves
                results_dir,
                event="forkserver",
                pid=server.pid,
                created=psutil.Process(server.pid).create_time(),
            )
        return spawner

    runner.run_benchmarks = asv_internals.run_command.run_benchmarks = each_build
    runner.run_benchmark = each_combination
    runner.get_spawner = spawner_noted


def _with_earlier(build: _Build, benchmark: dict[str, Any], idx: int, part: Any) -> Any:
    if not build.append.get(benchmark["name"]) or part.samples[idx] is None:
        return part
    earlier = build.results.get_result_samples(benchmark["name"], benchmark["params"])[idx]
    samples = list(part.samples)
    samples[idx] = (earlier or []) + samples[idx]
    return part._replace(samples=samples)


def _combined(parts: dict[int, Any], count: int) -> Any:
    def column(name: str, missing: Any) -> list[Any]:
        return [getattr(parts[idx], name)[idx] if idx in parts else missing for idx in range(count)]

    return asv_internals.BenchmarkResult(
        result=column("result", math.nan),
        samples=column("samples", None),
        number=column("number", None),
        errcode=next((part.errcode for part in reversed(parts.values()) if part.errcode), 0),
        stderr="\n\n".join(part.stderr for part in parts.values() if part.stderr),
        profile=asv_internals.combine_profile_data([part.profile for part in parts.values()]),
    )


def main(argv: list[str], gate: Gate) -> None:
    args = asv_internals.make_argparser()[0].parse_args(argv)
    if not getattr(args, "dry_run", True):  # a dry run saves nothing
        path = Path(args.config or "asv.conf.json").resolve()
        results_dir = (path.parent / asv_internals.Config.load(str(path)).results_dir).resolve()
        install(results_dir, gate)
    sys.argv = ["asv", *argv]
    asv_internals.asv_main()
