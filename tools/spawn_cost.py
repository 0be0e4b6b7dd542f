#!/usr/bin/env python3
"""What asv's spawn launch method (every macOS run) costs against forkserver, measured on this machine (issue 32).

asv starts one process per benchmark combination. Under forkserver (Linux) each is forked from a server that
imported the suite once; under spawn (macOS: Metal is not fork-safe) each is a fresh interpreter that imports
asv_runner, the benchmark module and whatever that imports. A Linux machine can run spawn too, as a proxy for the
Mac's process model; it is not a Mac figure (docs/explanation/processes.md, "Spawn against forkserver").

    tools/spawn_cost.py processes [--checkout DIR ...] [--repeat N]
        asv's own spawned command (benchmark.py run) for one process of each kind, and its discovery (one per asv
        run under either launch method), each checkout in turn, N rounds interleaved: seconds per process, and
        seconds of it importing torch, torchvision and transformers.
    tools/spawn_cost.py runs -b REGEX [-b REGEX ...] [--checkout DIR ...] [--repeat N]
        `asv run --python=same` of the default's combinations that a REGEX finds (preselected, as scripts/bench
        runs them) under spawn and under forkserver, each checkout, interleaved: wall seconds.
    tools/spawn_cost.py default [--checkout DIR ...] [--launch-method spawn]
        Each checkout's own default selection (its `mpsbench preselect`, as its scripts/bench runs it), whole, under
        each launch method asked for: wall seconds, and how many combinations asv reported as failed.
    tools/spawn_cost.py count
        The processes of this machine's default selection (mpsbench preselect) per family, lookups apart.

A checkout is a folder holding src/ and benchmarks/ (this one by default; `git archive REV | tar -x -C DIR` gives
an earlier one). Each line gives the load average beside its figure: this machine is shared.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import asv

from mpsbench.core import asv as asv_names
from mpsbench.measure import preselect

ROOT = Path(__file__).resolve().parents[1]
BENCHMARK_SCRIPT = (
    Path(asv.__file__).parent / "benchmark.py"
)  # what asv's Spawner runs for every process
DISCOVER = "discover"  # benchmark.py's mode that imports every benchmark module and lists the suite
# One process of each kind: a setup_cache lookup, a facts row, a measuring process (build, warm-up, 10+ samples).
# ("benchmark_patterns.Correctness.track_relative_error-0" is ('cpu', its first pattern, 'float32').)
PROCESSES = {
    "lookup": (
        "benchmark_patterns.Correctness.track_relative_error-0",
        "benchmark_patterns.Correctness.track_relative_error",
    ),
    "facts": ("benchmark_host.Host.track_on_battery", None),
    "measuring": ("benchmark_models.Inference.time_step-0", None),  # ('cpu', 'mlp', 1)
    "discovery": (
        DISCOVER,
        None,
    ),  # once per asv run under either launch method, forkserver included
}
HEAVY = ("torch", "torchvision", "transformers")
LAUNCH_METHODS = ("spawn", "forkserver")


def _load() -> str:
    return f"load {os.getloadavg()[0]:.1f}"


def _env(checkout: Path) -> dict[str, str]:
    """This environment with ``checkout``'s package first on the path of every benchmark process.

    asv's benchmark.py takes PYTHONPATH's folders off ``sys.path`` and puts ASV_PYTHONPATH's first (asv 0.6.6).
    """
    return {**os.environ, "ASV_PYTHONPATH": str(checkout / "src")}


def imports(importtime: str) -> dict[str, float]:
    """Seconds spent executing each HEAVY package's own modules, from ``python -X importtime``'s report.

    The sum of every module's self time, by its top-level package: the cumulative column nests a package under
    whichever module imported it first (transformers' lazy modules scatter it), the self column does not.
    """
    found: dict[str, float] = collections.defaultdict(float)
    for line in importtime.splitlines():
        match = re.match(r"import time:\s+(\d+) \|\s+\d+ \|\s*(\S+)$", line)
        if match and match.group(2).split(".")[0] in HEAVY:
            found[match.group(2).split(".")[0]] += int(match.group(1)) / 1e6
    return found


def _process(
    checkout: Path, benchmark: str, cache_of: str | None, folder: Path
) -> tuple[float, dict[str, float]]:
    """One spawned benchmark process as asv starts it: wall seconds and its heavy imports."""
    env, benchmarks = _env(checkout), str(checkout / "benchmarks")
    if (
        cache_of is not None and not (folder / "cache.pickle").exists()
    ):  # a lookup reads its setup_cache's file
        subprocess.run(
            [sys.executable, str(BENCHMARK_SCRIPT), "setup_cache", benchmarks, cache_of, "{}"],
            cwd=folder,
            env=env,
            check=True,
            capture_output=True,
        )
    mode = (
        [DISCOVER, benchmarks]
        if benchmark == DISCOVER
        else ["run", benchmarks, benchmark, "{}", "None"]
    )
    began = time.perf_counter()
    done = subprocess.run(
        [
            sys.executable,
            "-X",
            "importtime",
            str(BENCHMARK_SCRIPT),
            *mode,
            str(folder / "result.json"),
        ],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
    )
    seconds = time.perf_counter() - began
    if done.returncode != 0:
        raise SystemExit(f"{benchmark} failed in {checkout}: {done.stderr[-2000:]}")
    return seconds, imports(done.stderr)


def processes(checkouts: list[Path], repeat: int, kinds: list[str]) -> None:
    folders = {
        (checkout, kind): Path(tempfile.mkdtemp(prefix="spawn-cost-"))
        for checkout in checkouts
        for kind in kinds
    }
    seconds: dict[tuple[Path, str], list[float]] = collections.defaultdict(list)
    for round_ in range(repeat):
        for kind in kinds:
            benchmark, cache_of = PROCESSES[kind]
            for (
                checkout
            ) in checkouts:  # interleaved: each checkout sees the same load, round by round
                wall, heavy = _process(checkout, benchmark, cache_of, folders[checkout, kind])
                seconds[checkout, kind].append(wall)
                imported = ", ".join(
                    f"{name} {value:.2f}" for name, value in heavy.items()
                ) or "none of " + "/".join(HEAVY)
                print(
                    f"round {round_ + 1} {kind:9} {checkout}: {wall:.2f} s (imports: {imported}) [{_load()}]",
                    flush=True,
                )
    for (checkout, kind), walls in seconds.items():
        print(f"median {kind:9} {checkout}: {statistics.median(walls):.2f} s over {len(walls)}")


def _asv_run(checkout: Path, method: str, pattern: str, label: str) -> None:
    """One `asv run --python=same` of ``pattern`` in ``checkout``: its wall seconds, exit and failed count."""
    machine = os.environ.get(
        "MPSBENCH_PROBE_MACHINE", "spawn-probe"
    )  # asv machine --yes --machine spawn-probe first
    command = [
        sys.executable,
        "-m",
        "asv",
        "run",
        "--python=same",
        "--machine",
        machine,
        "--launch-method",
        method,
        "-b",
        pattern,
    ]
    before = _load()
    began = time.perf_counter()
    done = subprocess.Popen(
        command, cwd=checkout, env=_env(checkout), stdout=subprocess.PIPE, text=True
    )
    failed = 0
    assert done.stdout is not None  # stdout=PIPE
    for line in done.stdout:  # asv's own lines still reach the terminal, as they come
        sys.stdout.write(line)
        failed += "failed" in line
    code = done.wait()
    wall = time.perf_counter() - began
    print(
        f"{label} {method:10} {checkout}: {wall:.1f} s, exit {code}, {failed} failed lines "
        f"[{before}, then {_load()}]",
        flush=True,
    )


def runs(checkouts: list[Path], bench: list[str], repeat: int, methods: list[str]) -> None:
    """The default's combinations that one of ``bench`` finds, named exactly (as scripts/bench passes them)."""
    names = preselect.selected(
        preselect.combinations(preselect.discover(ROOT / "benchmarks")), bench
    )
    print(f"{len(names)} combinations of this machine's default: {', '.join(names)}", flush=True)
    _interleaved(dict.fromkeys(checkouts, asv_names.pattern(names)), repeat, methods, "round")


def _interleaved(patterns: dict[Path, str], repeat: int, methods: list[str], label: str) -> None:
    """Each checkout's ``pattern`` under each launch method, round after round, so drift falls on all alike."""
    for round_ in range(repeat):
        for method in methods:
            for checkout, pattern in patterns.items():
                _asv_run(checkout, method, pattern, f"{label} {round_ + 1}")


def _own_default(checkout: Path) -> str:
    """The -b pattern of ``checkout``'s own default selection on this machine, from its own `mpsbench preselect`."""
    command = [
        sys.executable,
        "-c",
        "import sys; from mpsbench.cli import main; sys.exit(main())",
        "preselect",
    ]
    done = subprocess.run(
        command,
        cwd=checkout,
        env={**os.environ, "PYTHONPATH": str(checkout / "src")},
        capture_output=True,
        text=True,
        check=True,
    )
    print(f"{checkout}: {done.stderr.strip().splitlines()[-1]}", flush=True)
    return done.stdout.strip()


def default(checkouts: list[Path], repeat: int, methods: list[str]) -> None:
    """Each checkout's whole default, as its own preselect chose it: the selection changed with the suite."""
    _interleaved(
        {checkout: _own_default(checkout) for checkout in checkouts},
        repeat,
        methods,
        "default round",
    )


def count() -> None:
    found = preselect.combinations(preselect.discover(ROOT / "benchmarks"))
    runs_here = [combination.name for combination in found if combination.reason is None]
    lookups = {
        benchmark.name
        for benchmark in preselect.discover(ROOT / "benchmarks")
        if benchmark.setup_cache_key is not None
    }
    families: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for name in runs_here:
        benchmark = name.split("(")[0]
        families[benchmark.split(".")[0]]["lookup" if benchmark in lookups else "measuring"] += 1
    for family, kinds in sorted(families.items()):
        print(f"{family:24} {kinds['measuring']:4} measuring  {kinds['lookup']:4} lookups")
    print(
        f"{'all':24} {sum(k['measuring'] for k in families.values()):4} measuring  "
        f"{sum(k['lookup'] for k in families.values()):4} lookups  (+1 process per setup_cache)"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=("processes", "runs", "default", "count"))
    parser.add_argument(
        "--checkout",
        type=Path,
        action="append",
        help="a folder with src/ and benchmarks/ (repeatable)",
    )
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--kind", action="append", choices=list(PROCESSES), help="processes: only these kinds"
    )
    parser.add_argument(
        "-b",
        "--bench",
        action="append",
        help="runs: a regex of the default's combinations (repeatable)",
    )
    parser.add_argument(
        "--launch-method",
        action="append",
        choices=LAUNCH_METHODS,
        help="runs, default: only this launch method (repeatable; both unless given)",
    )
    args = parser.parse_args()
    checkouts = [path.resolve() for path in args.checkout or [ROOT]]
    for checkout in checkouts:
        if not (checkout / "benchmarks").is_dir() or not (checkout / "src").is_dir():
            parser.exit(
                2,
                f"spawn_cost: {checkout} holds no src/ and benchmarks/; pass a checkout of the suite\n",
            )
    if args.what == "processes":
        processes(checkouts, args.repeat, args.kind or list(PROCESSES))
    elif args.what == "runs":
        if not args.bench:
            parser.exit(2, "spawn_cost: runs needs -b REGEX (the combinations to run)\n")
        runs(checkouts, args.bench, args.repeat, args.launch_method or list(LAUNCH_METHODS))
    elif args.what == "default":
        default(checkouts, args.repeat, args.launch_method or list(LAUNCH_METHODS))
    else:
        count()
    return 0


if __name__ == "__main__":
    sys.exit(main())
