"""Where one round of ``mpsbench compare``/``bisect`` spends its time, per process, term by term.

For one combination and one build, each term is measured in processes of the asv environment's python, run as a
build server runs (this file's ``probe``): a spawned round's interpreter start and imports (median of ``--repeat``
fresh processes), and a forked round's terms in ``--repeat`` children of one warm parent (serve_build.py's MODE fork):
the fork, the device's start, the setup taken apart (model build, ``.to``, warm-up, the guard's patterns and accuracy
check), the samples at SAMPLES and at the session's own ``-a repeat``, and the child's exit after its reply. The table
says which terms each path pays per round:

- asv (one ``asv run --interleave-rounds`` a round, before the build servers): the environment switch, a process
  that imports torch and the suite (forkserver: every module, then a fork), then setup and samples;
- spawn (the cpu, macOS): a new interpreter and its imports, setup and samples;
- fork, before: a child of a warm parent per build: fork, device start, setup, SAMPLES samples, and its exit
  before the reply;
- fork, now: the same with the session's ``-a repeat`` (a second of samples), its exit overlapping the next round.

Then it runs real server rounds of the chosen modes and prints their command-to-reply seconds and samples' share.

    .venv/bin/python tools/process_breakdown.py aa@a1 -b "Inference.time_step\\('cpu', 'lenet5', 32\\)" --mode both
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mpsbench.regressions import fresh, servers

STARTED = time.time()
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

SETUP = [
    "setup: model build",
    "setup: .to + batch",
    "setup: warm-up",
    "setup: guard: patterns",
    "setup: guard: accuracy",
]
IMPORTS = ["interpreter start", "import torch", "import asv_runner", "import the benchmark module"]
SAMPLED, LONG = "samples (do_run, SAMPLES)", "samples (do_run, session's repeat)"
FORKED = ["fork (command to child)", "device start (first allocation)", *SETUP]
PER_ROUND = {  # which terms each path pays in every round
    "asv": ["environment switch", *IMPORTS[:3], "discovery (every module)", *SETUP, SAMPLED],
    "spawn": [*IMPORTS, *SETUP, SAMPLED],
    "fork, before": [*FORKED, SAMPLED, "child's exit (before the reply)"],
    "fork, now": [*FORKED, LONG],
}


def probe(argv: list[str]) -> int:
    """One spawned round, or (MODE fork) a warm parent and REPEAT forked children, each printing its terms as JSON."""
    benchmark_dir, benchmark_id, repeat, launched, mode, children = argv
    from mpsbench.regressions import (
        serve_build,
    )  # standard library only: the servers' own sys.path fix

    serve_build._site_without_switch()
    took: dict[str, float] = {"interpreter start": STARTED - float(launched)}

    def timed(name: str, work: Any) -> Any:
        clock = time.perf_counter()
        value = work()
        took[name] = time.perf_counter() - clock
        return value

    timed("import torch", lambda: __import__("torch"))
    timed("import asv_runner", lambda: __import__("asv_runner.discovery"))
    from asv_runner.discovery import disc_benchmarks, get_benchmark_from_name

    benchmark = timed(
        "import the benchmark module", lambda: get_benchmark_from_name(benchmark_dir, benchmark_id)
    )
    if mode == "spawn":
        timed("discovery (every module)", lambda: list(disc_benchmarks(benchmark_dir, True)))
        _round(benchmark, json.loads(repeat), took)
        print(json.dumps(took))
        return 0
    took.update({f"warm parent: {k}": v for k, v in serve_build._preload().items()})
    import gc

    gc.freeze()
    print(json.dumps(took), flush=True)
    for _ in range(int(children)):
        asked = time.perf_counter()
        read, write = os.pipe()
        child = os.fork()
        if child == 0:
            os.close(read)
            own: dict[str, float] = {"fork (command to child)": time.perf_counter() - asked}
            _round(get_benchmark_from_name(benchmark_dir, benchmark_id), json.loads(repeat), own)
            os.write(write, (json.dumps(own) + "\n").encode())
            os._exit(0)
        os.close(write)
        with os.fdopen(read) as replies:
            line = replies.readline()
        replied = time.perf_counter()
        os.waitpid(child, 0)
        own = json.loads(line)
        own["child's exit (before the reply)"] = time.perf_counter() - replied
        print(json.dumps(own), flush=True)
    return 0


def _round(benchmark: Any, repeat: Any, took: dict[str, float]) -> None:
    """The setup taken apart (suite.prepare's pieces), then asv's own setup and samples, into ``took``."""

    def timed(name: str, work: Any) -> Any:
        clock = time.perf_counter()
        value = work()
        took[name] = time.perf_counter() - clock
        return value

    params = tuple(benchmark._current_params)
    kind = {"Training": "training", "Inference": "inference"}.get(benchmark.name.split(".")[-2])
    device = params[0] if params else "cpu"
    if device in ("cuda", "mps"):
        import torch

        timed("device start (first allocation)", lambda: torch.empty(1, device=device).sum().item())
    if kind is not None and len(params) == 3:  # a model step
        from mpsbench.measure import accuracy, correctness, models, workloads

        _, model, batch_size = params
        timed("setup: model build", lambda: models.get(model).build())
        workload = timed(
            "setup: .to + batch", lambda: workloads.build(kind, device, model, batch_size)
        )
        took["setup: .to + batch"] -= took["setup: model build"]
        timed("setup: warm-up", workload.warm_up)
        timed("setup: guard: patterns", lambda: correctness.verify(device, workload.dtype))
        if accuracy.needed(device):
            timed("setup: guard: accuracy", lambda: accuracy.verify(workload))
        workloads.forget()
    samples = {SAMPLED: repeat[0]} | ({LONG: repeat[1]} if repeat[1] != repeat[0] else {})
    for name, count in samples.items():

        class Attributes:  # asv's -a repeat, as asv_runner's get_benchmark_from_name inserts it
            pass

        Attributes.repeat = tuple(count) if isinstance(count, list) else count  # type: ignore[attr-defined]
        benchmark._attr_sources.insert(0, Attributes)
        timed(f"setup (asv's do_setup, whole) before {name}", benchmark.do_setup)
        result = timed(name, benchmark.do_run)
        took[f"{name}: count"] = len(result.get("samples", [])) if isinstance(result, dict) else 0
        benchmark.do_teardown()
        benchmark._attr_sources.pop(0)


def main(argv: list[str] | None = None) -> int:
    from mpsbench import cli
    from mpsbench.builds import timeline
    from mpsbench.core import asv, errors
    from mpsbench.regressions import compare, fresh, servers

    parser = argparse.ArgumentParser(
        prog="tools/process_breakdown.py", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("build", help="CHANNEL@ID, a timeline hash or a tag")
    parser.add_argument("--repeat", type=int, default=3, help="processes per term (medians shown)")
    parser.add_argument(
        "--mode", choices=("fork", "spawn", "both"), default="both", help="which rounds to probe"
    )
    cli.add_options(parser, cli.COMPARING)
    parsed = parser.parse_args(argv)
    args = cli.filled(fresh.Options, parsed)
    modes = [servers.FORK, servers.SPAWN] if parsed.mode == "both" else [parsed.mode]
    try:
        (build,), chosen = fresh.name_builds([parsed.build], args)
        with fresh.Session(args, [build], chosen) as session:
            combination = session.check_bench(build.commit)
            python = asv.environment_python(session.config)
            reader_build = timeline.Reader(session.timeline).build(build.commit)
            placed = servers.place(
                python, reader_build, session.root / "src", session.scratch, session.env
            )
            benchmark_id = session.benchmark_id
            env = {**session.env, **placed.env, "PYTHONPATH": os.pathsep.join(placed.paths)}
            repeat = json.dumps([fresh.SAMPLES, session.repeat])
            took: dict[str, list[float]] = {}

            def probed(mode: str, children: int) -> None:
                command = [str(python), "-S", __file__, "probe", str(session.benchmarks)]
                done = subprocess.run(
                    [*command, benchmark_id, repeat, repr(time.time()), mode, str(children)],
                    env=env,
                    capture_output=True,
                    text=True,
                )
                lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
                if done.returncode != 0 or not lines:
                    raise errors.UserError(f"the probe failed: {done.stderr.strip()[-800:]}")
                for line in lines:
                    for name, seconds in json.loads(line).items():
                        took.setdefault(name, []).append(seconds)

            if servers.FORK in modes:
                probed(servers.FORK, parsed.repeat)
            if servers.SPAWN in modes:
                for _ in range(parsed.repeat):
                    probed(servers.SPAWN, 1)
                took["environment switch"] = [_switch(python, reader_build, session, parsed.repeat)]
            measured = {
                mode: _server_rounds(python, placed, session, benchmark_id, mode, parsed.repeat)
                for mode in modes
            }
    except errors.UserError as exc:
        print(f"process_breakdown: error: {exc}", file=sys.stderr)
        return 2
    medians = {name: statistics.median(values) for name, values in took.items()}
    print(
        f"{combination}, build {build.name}, {parsed.repeat} processes a term,"
        f" {compare.measured_as(args)}; SAMPLES {fresh.SAMPLES}, the session's repeat {session.repeat}"
    )
    paths = {
        path: terms
        for path, terms in PER_ROUND.items()
        if (servers.FORK if path.startswith("fork") else servers.SPAWN) in modes
    }
    width = max(map(len, medians)) + 2
    print(f"{'term (median s)':<{width}}{'s':>8}  " + "  ".join(f"{path:>13}" for path in paths))
    for name, seconds in medians.items():
        marks = "  ".join(f"{'x' if name in terms else '':>13}" for terms in paths.values())
        print(f"{name:<{width}}{seconds:8.3f}  {marks}")
    sums = {path: sum(medians.get(term, 0.0) for term in terms) for path, terms in paths.items()}
    print(f"{'sum per round':<{width}}{'':8}  " + "  ".join(f"{v:13.2f}" for v in sums.values()))
    shares = [
        medians.get(LONG if path == "fork, now" else SAMPLED, float("nan")) / sums[path]
        for path in paths
    ]
    print(f"{'samples share':<{width}}{'':8}  " + "  ".join(f"{v:13.0%}" for v in shares))
    for mode, (wall, sampled, inside) in measured.items():
        print(
            f"measured {mode} server rounds (median of {parsed.repeat}, the session's repeat):"
            f" {wall:.2f} s command to reply ({inside:.2f} s in the round's own process),"
            f" sampling {sampled:.2f} s: {sampled / wall:.0%} of the reply's wait"
        )
    return 0


def _switch(python: Path, build: dict[str, Any], session: fresh.Session, repeat: int) -> float:
    """asv's environment switch per round (install_build.py's uninstall and install, as asv runs them)."""
    from mpsbench.builds import install_build

    folder = session.scratch / "switch"
    folder.mkdir(exist_ok=True)
    (folder / "build.json").write_text(json.dumps(build))
    installer, env_dir = install_build.__file__, str(python.parents[1])
    commands = [
        [str(python), installer, "uninstall", env_dir],
        [str(python), installer, "install", str(folder), env_dir, str(session.root / "src")],
    ]
    walls = []
    for command in commands * repeat:
        clock = time.perf_counter()
        subprocess.run(command, env=session.env, check=True, capture_output=True)
        walls.append(time.perf_counter() - clock)
    return 2 * statistics.median(walls)


def _server_rounds(
    python: Path,
    placed: servers.Placed,
    session: fresh.Session,
    benchmark_id: str,
    mode: str,
    repeat: int,
) -> tuple[float, float, float]:
    """Real rounds of a build server at the session's repeat: median command-to-reply, sampling, in-process seconds
    (a warm parent started first; a spawned round from its launch)."""
    from mpsbench.regressions import servers

    server = servers.Server(
        python, placed, session.benchmarks, benchmark_id, session.env, session.scratch, mode
    )
    walls, sampled, inside = [], [], []
    try:
        if mode == servers.FORK:
            server.start()
            server.ready()
        for number in range(1, repeat + 1):
            clock = time.perf_counter()
            said = server.round(number, {"repeat": session.repeat}, ahead=False)
            walls.append(time.perf_counter() - clock)
            sampled.append(float(said.get("sampling", 0.0)))
            inside.append(float(said.get("seconds", 0.0)))
    finally:
        server.stop()
    return statistics.median(walls), statistics.median(sampled), statistics.median(inside)


if __name__ == "__main__":
    sys.exit(probe(sys.argv[2:]) if sys.argv[1:2] == ["probe"] else main())
