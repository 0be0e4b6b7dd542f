"""Where one round of ``mpsbench compare``/``bisect`` spends its time, per process, before and after the build servers.

For one combination and one build, each term is measured in fresh processes of the asv environment's python
(median of ``--repeat``): the interpreter's start, the imports, asv's discovery of every module, the environment
switch (install_build.py's uninstall and install, as asv runs them), the setup taken apart (tools/breakdown_probe.py)
and the samples. The table says which terms each path pays per round:

- today (one ``asv run --interleave-rounds``): every round switches the build, and starts a process that imports
  torch and the suite (forkserver: every module, then a fork; spawn: the one module), then setup and samples;
- servers: fork (a warm parent per build, serve_build.py's MODE fork: cuda) pays only the fork, setup and samples
  per round, the imports once per command and build; spawn (the cpu, macOS) pays the interpreter and imports per
  round, never asv's CLI, discovery or switch.

Then it runs real server rounds of both modes (servers.FORK: rounds forked from one warm parent; servers.SPAWN: a
process a round, launch to reply) and prints their measured seconds beside the sums.

    .venv/bin/python -m tools.process_breakdown aa@a1 -b "Inference.time_step\\('cpu', 'lenet5', 32\\)" --threads 1
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
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mpsbench.regressions import fresh, servers

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

PROBE = Path(__file__).with_name("breakdown_probe.py")
PER_ROUND = {  # which terms each path pays in every round, by the probe's names (and "environment switch")
    "today, fork": [
        "environment switch",
        "interpreter start",
        "import torch",
        "import asv_runner",
        "discovery (every module)",
        "setup (asv's do_setup, whole)",
        "samples (asv's do_run)",
    ],
    "today, spawn": [
        "environment switch",
        "interpreter start",
        "import torch",
        "import asv_runner",
        "import the benchmark module",
        "setup (asv's do_setup, whole)",
        "samples (asv's do_run)",
    ],
    "servers, fork": ["setup (asv's do_setup, whole)", "samples (asv's do_run)"],
    "servers, spawn": [
        "interpreter start",
        "import torch",
        "import asv_runner",
        "import the benchmark module",
        "setup (asv's do_setup, whole)",
        "samples (asv's do_run)",
    ],
}


def _median_seconds(command: list[str], env: dict[str, str], repeat: int) -> float:
    walls = []
    for _ in range(repeat):
        clock = time.perf_counter()
        subprocess.run(command, env=env, check=True, capture_output=True)
        walls.append(time.perf_counter() - clock)
    return statistics.median(walls)


def main(argv: list[str] | None = None) -> int:
    from mpsbench import cli
    from mpsbench.builds import timeline
    from mpsbench.core import asv, errors
    from mpsbench.regressions import compare, fresh, servers

    parser = argparse.ArgumentParser(
        prog="tools/process_breakdown.py", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("build", help="CHANNEL@ID, a timeline hash or a tag")
    parser.add_argument(
        "--repeat", type=int, default=3, help="processes per term (the median is shown)"
    )
    cli.fresh_arguments(parser, bisecting=False)
    parsed = parser.parse_args(argv)
    args = cli.fresh_options(parsed)
    try:
        compare.check(args)
        _, _, (build,) = fresh.name_builds([parsed.build], args.manifest, args.timeline)
        with fresh.Session(args, [build]) as session:
            combination = session.check_bench(build.commit)
            python = asv.environment_python(session.config)
            reader_build = timeline.Reader(session.timeline).build(build.commit)
            placed = servers.place(
                python, reader_build, session.root / "src", session.scratch, session.env
            )
            benchmark_id = (
                f"{session.key}-{session.index}" if session.index >= 0 else str(session.key)
            )
            env = {**session.env, **placed.env, "PYTHONPATH": os.pathsep.join(placed.paths)}
            took: dict[str, list[float]] = {}
            for _ in range(parsed.repeat):
                done = subprocess.run(
                    [
                        str(python),
                        "-S",
                        str(PROBE),
                        str(session.benchmarks),
                        benchmark_id,
                        str(fresh.SAMPLES),
                        repr(time.time()),
                    ],
                    env=env,
                    capture_output=True,
                    text=True,
                )
                if done.returncode != 0:
                    raise errors.UserError(
                        f"the probe failed: {(done.stderr or done.stdout).strip().splitlines()[-1:]}"
                    )
                for name, seconds in json.loads(done.stdout.strip().splitlines()[-1])[
                    "took"
                ].items():
                    took.setdefault(name, []).append(seconds)
            folder = session.scratch / "switch"
            folder.mkdir()
            (folder / "build.json").write_text(json.dumps(reader_build))
            installer, env_dir = str(servers.INSTALLER), str(python.parents[1])
            took["environment switch"] = [
                _median_seconds(
                    [str(python), installer, "uninstall", env_dir], session.env, parsed.repeat
                )
                + _median_seconds(
                    [
                        str(python),
                        installer,
                        "install",
                        str(folder),
                        env_dir,
                        str(session.root / "src"),
                    ],
                    session.env,
                    parsed.repeat,
                )
            ]
            took["bare interpreter (python -S -c pass)"] = [
                _median_seconds([str(python), "-S", "-c", "pass"], session.env, parsed.repeat)
            ]
            measured = {
                mode: _server_rounds(python, placed, session, benchmark_id, mode, parsed.repeat)
                for mode in (servers.FORK, servers.SPAWN)
            }
    except errors.UserError as exc:
        print(f"process_breakdown: error: {exc}", file=sys.stderr)
        return 2
    medians = {name: statistics.median(values) for name, values in took.items()}
    print(
        f"{combination}, build {build.name}, {parsed.repeat} processes a term,"
        f" {compare.measured_as(args)}"
    )
    width = max(map(len, medians)) + 2
    print(
        f"{'term (median s)':<{width}}{'s':>8}  " + "  ".join(f"{path:>15}" for path in PER_ROUND)
    )
    for name, seconds in medians.items():
        marks = "  ".join(f"{'x' if name in terms else '':>15}" for terms in PER_ROUND.values())
        print(f"{name:<{width}}{seconds:8.3f}  {marks}")
    sums = {
        path: sum(medians.get(term, 0.0) for term in terms) for path, terms in PER_ROUND.items()
    }
    print(
        f"{'sum per round':<{width}}{'':8}  "
        + "  ".join(f"{value:15.2f}" for value in sums.values())
    )
    samples = medians.get("samples (asv's do_run)", float("nan"))
    print(
        f"{'samples share':<{width}}{'':8}  "
        + "  ".join(f"{samples / value:15.0%}" for value in sums.values())
    )
    print(
        f"measured server rounds (s, median of {parsed.repeat}): fork {measured[servers.FORK]:.2f} (command to"
        f" reply, the warm parent started before), spawn {measured[servers.SPAWN]:.2f} (launch to reply)"
    )
    return 0


def _server_rounds(
    python: Path,
    placed: servers.Placed,
    session: fresh.Session,
    benchmark_id: str,
    mode: str,
    repeat: int,
) -> float:
    """Real rounds of a build server: forked rounds after the warm parent's imports, spawned ones launch to reply."""
    from mpsbench.regressions import fresh, servers

    server = servers.Server(
        python, placed, session.benchmarks, benchmark_id, session.env, session.scratch, mode
    )
    walls = []
    try:
        if mode == servers.FORK:
            server.start()
            server.ready()
        for number in range(1, repeat + 1):
            clock = time.perf_counter()
            server.round(number, {"repeat": fresh.SAMPLES}, ahead=False)
            walls.append(time.perf_counter() - clock)
    finally:
        server.stop()
    return statistics.median(walls)


if __name__ == "__main__":
    sys.exit(main())
