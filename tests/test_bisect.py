"""asv find over a stand-in timeline: a tiny 'torch' whose later builds are slower.

Needs no real torch: each build is a small wheel whose module sets a delay; the
benchmark sleeps that long. asv installs each build through the suite's real
install command, and `asv find` must name the build that introduced the slowdown.
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest
from tests import fakes
from tools import verdict_simulation as simulation

from mpsbench.builds import machine, resolve, timeline
from mpsbench.builds import manifest as mf
from mpsbench.regressions import bisection, fresh, verdict

ROOT = Path(__file__).resolve().parents[1]
DELAYS = [0.002, 0.002, 0.002, 0.006, 0.006, 0.006]  # build 4 (index 3) is the regression


@pytest.mark.slow
def test_asv_find_names_the_build_that_made_it_slower(tmp_path):
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    manifest = mf.Manifest()
    for number, delay in enumerate(DELAYS, start=1):
        folder = tmp_path / "wheels" / str(number)
        folder.mkdir(parents=True)
        wheel = fakes.make_wheel(
            folder,
            "torch",
            f"2.15.0.dev2026110{number}+cpu",
            python=tag,
            git_version=f"{number:040d}",
            built=datetime(2026, 11, number, 3),
            module=f"DELAY = {delay}\n",
        )
        build = resolve.wheel_file(wheel, transformers="none", build_id=f"2026-11-0{number}")
        manifest = mf.append(manifest, "nightly", build)
    generated = timeline.generate(manifest, tmp_path / "timeline")

    bench = tmp_path / "benchmarks"
    bench.mkdir()
    (bench / "__init__.py").write_text("")
    (bench / "bench_fake.py").write_text(
        "import time\nimport torch\n\n\ndef time_work():\n    time.sleep(torch.DELAY)\n\n\ntime_work.version = '1'\n"
        "time_work.repeat = (5, 10, 5.0)\n"
    )
    installer = ROOT / "src" / "mpsbench" / "builds" / "install_build.py"
    conf = {
        "version": 1,
        "project": "fake",
        "repo": str(tmp_path / "timeline"),
        "branches": ["nightly"],
        "environment_type": "virtualenv",
        "benchmark_dir": "benchmarks",
        "env_dir": "env",
        "results_dir": "results",
        "html_dir": "html",
        "build_command": [],
        "install_command": [f"python {installer} install {{build_dir}} {{env_dir}} {ROOT / 'src'}"],
        "uninstall_command": [f"return-code=any python {installer} uninstall {{env_dir}}"],
    }
    (tmp_path / "asv.conf.json").write_text(json.dumps(conf))
    home = tmp_path / "home"
    home.mkdir()
    env = dict(
        os.environ,
        HOME=str(home),
        MPSBENCH_CACHE=str(tmp_path / "cache"),
        MPSBENCH_PLATFORM="linux-x86_64-cpu",
    )
    env.pop("PIP_FIND_LINKS", None)
    subprocess.run(
        [sys.executable, "-c", "from mpsbench.builds import machine; machine.write('fake')"],
        env=env,
        check=True,
    )
    assert machine.default_name(machine.describe())  # the facts are readable here

    first, last = generated.commits["nightly@2026-11-01"], generated.commits["nightly@2026-11-06"]
    done = subprocess.run(
        [sys.executable, "-m", "asv", "find", "--machine", "fake", f"{first}..{last}", "time_work"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    found = re.search(r"Greatest regression found: ([0-9a-f]{8})", done.stdout)
    assert found, done.stdout
    assert generated.commits["nightly@2026-11-04"].startswith(found.group(1))


# --- the search's order and its outcomes, over drawn process times (tools/verdict_simulation.py's stand-in Session)
def _search(
    draw: str, slowdown: dict[str, float], seed: int = 0
) -> tuple[bisection.Search, bisection.Unresolved | None]:
    line = [name for name in slowdown if name != "GOOD"]
    session = simulation.Drawn(simulation.DISTRIBUTIONS[draw], slowdown, random.Random(seed))
    named = {name: fresh.Named(name, name) for name in slowdown}
    state = bisection.Search(line)
    return state, bisection.search(session, named["GOOD"], named[line[-1]], named, state)  # type: ignore[arg-type]


def test_a_step_measures_the_candidates_that_make_the_search_cheapest():
    names = [f"c{index}" for index in range(1, 13)]
    assert [bisection.probes(names[:count]) for count in range(1, 5)] == [
        names[:count] for count in range(1, 5)
    ]
    assert bisection.probes(names[:5]) == ["c3"]  # the middle: true bisection
    assert bisection.probes(names[:6]) == ["c2", "c4"]  # thirds
    assert bisection.probes(names) == ["c3", "c6", "c9"]  # quarters


def test_every_place_of_the_change_is_found_with_fewer_processes_than_four_candidates_a_pass():
    # an 8-build line on the quiet GPU (6 builds between GOOD and BAD), a 6.5% change starting at each place in turn
    cost, previous = [], []
    for first_bad in range(7):
        slowdown, between = simulation.changed_line(first_bad, 1.065)
        state, unresolved = _search("h100", slowdown, seed=first_bad)
        assert unresolved is None and state.between[state.high] == between[first_bad]
        assert state.low == first_bad - 1  # the build before it was judged good (or is GOOD)
        cost.append(state.processes)
        named, processes = simulation.previous_bisect(
            simulation.DISTRIBUTIONS["h100"], 1.065, first_bad, first_bad
        )
        assert named == between[first_bad]
        previous.append(processes)
    assert sum(cost) < sum(previous), (cost, previous)
    assert max(cost) <= 40, (
        cost
    )  # two steps of four builds at the first look (5 rounds) at the most


def test_a_bad_that_is_not_slower_is_a_result_exit_1():
    state, unresolved = _search("h100", {"GOOD": 1.0, "c1": 1.0, "BAD": 1.0})
    assert unresolved is not None and unresolved.status == bisection.NOT_SLOWER == 1
    assert (
        "BAD is not slower than GOOD (unchanged:" in unresolved.reason
        and "name a BAD" in unresolved.reason
    )
    assert state.processes in {
        3 * look for look in verdict.schedule() if look < verdict.MIN_ROUNDS
    }  # decided at an early look


def test_undecided_endpoints_and_candidates_are_exit_3_with_what_to_change():
    # a 6.5% change on the busy cpu at one thread: too close to the factor for 20 rounds
    _, unresolved = _search("cpu-threads1", {"GOOD": 1.0, "BAD": 1.065})
    assert unresolved is not None and unresolved.status == bisection.UNDECIDED == 3
    assert unresolved.reason.startswith("BAD is not confirmed slower than GOOD: undecided:")
    assert "--max-rounds" in unresolved.reason
    # a candidate the factor from each endpoint: neither slower than GOOD nor BAD slower than it
    _, unresolved = _search("h100", {"GOOD": 1.0, "c1": 1.05, "BAD": 1.05 * 1.05})
    assert unresolved is not None and unresolved.status == 3
    assert (
        unresolved.reason.startswith("undecided at c1: against GOOD")
        and "--max-rounds" in unresolved.reason
    )
