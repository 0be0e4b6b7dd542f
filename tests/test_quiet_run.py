"""The quiet gate in a real record run: scripts/bench on this .venv's torch (used in place, nothing
installed), real asv, real benchmark processes; only the machine's state is a stand-in (a
sitecustomize that every Python of the run loads replaces measure/quiet.py's reader), so that "busy"
and "quiet" do not depend on what else this machine runs.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from tests.test_faults import NEEDS_VENV, bench_checkout, recorded_values

from mpsbench.measure import quiet
from mpsbench.results import held

BUSY_ROW = "benchmark_models.Training.time_step('cpu', 'mlp', 1)"
QUIET_ROW = "benchmark_models.Training.time_step('cpu', 'mlp', 8)"
SELECTION = ["-b", r"^benchmark_models\.Training\.time_step\('cpu', 'mlp', (1|8)\)$"]
# Loaded by every Python of the run: while the gate is about a combination whose name holds
# STAND_IN_BUSY, other processes are said to use 1.5 of the 2 cores; else 0.1 (the record run's
# retry gate included). The real timings' own spread on a loaded test machine is left out of the
# judge (tests/test_quiet.py tests that rule on fixed samples).
STAND_IN = """
import os

if os.environ.get("STAND_IN_BUSY"):
    try:
        from mpsbench.measure import quiet
    except ImportError:  # a Python of the run without mpsbench
        pass
    else:
        current = [""]
        before = quiet.Gate.before

        def noted(self, name):
            current[0] = name
            return before(self, name)

        def read(window=quiet.WINDOW, own=None):
            return quiet.State(2, 1.5 if os.environ["STAND_IN_BUSY"] in current[0] else 0.1, 0.0)

        quiet.Gate.before = noted
        quiet.read = read
        quiet.SPREAD = float("inf")
"""


def _bench(repo: Path, env: dict[str, str], busy: str) -> subprocess.CompletedProcess[str]:
    """scripts/bench of SELECTION, the machine said to be busy around the combinations whose name
    holds ``busy``."""
    return subprocess.run(
        ["scripts/bench", *SELECTION, "ALL"],
        cwd=repo,
        capture_output=True,
        text=True,
        env={**env, "STAND_IN_BUSY": busy, quiet.WAIT: "0"},
    )


def _recorded(results: Path) -> list[str]:
    return sorted(f"{name}({', '.join(combo)})" for _, name, combo in recorded_values(results))


@pytest.mark.slow
@NEEDS_VENV
def test_a_value_measured_on_a_busy_machine_is_held_and_the_next_quiet_run_records_it(tmp_path):
    repo, env = bench_checkout(tmp_path, with_wheel=False)
    (tmp_path / "stand-in").mkdir()
    (tmp_path / "stand-in" / "sitecustomize.py").write_text(STAND_IN)
    env = {**env, "PYTHONPATH": f"{tmp_path / 'stand-in'}:{repo / 'src'}"}
    env.pop(quiet.ACCEPT_BUSY, None)
    results = repo / ".asv" / "results"

    first = _bench(repo, env, busy="'mlp', 1)")
    said = first.stderr
    assert first.returncode == 0, first.stdout[-3000:] + said[-3000:]
    assert _recorded(results) == [QUIET_ROW]  # the quiet one recorded, the busy one not
    lines = [json.loads(line) for line in held.trail(results).read_text().splitlines()]
    # held, measured again in the retry pass (the machine quiet before it), held again: kept aside
    # each time, with why
    assert [(line["name"], line["recorded"], list(line["reasons"])) for line in lines] == [
        (BUSY_ROW, False, ["load"])
    ] * 2
    assert all(line["value"] > 0 and line["before"]["others"] == 1.5 for line in lines)
    assert lines[0]["run"] != lines[1]["run"]
    assert said.count(f"quiet gate: held out of the record, to be measured again: {BUSY_ROW}") == 2
    assert "quiet gate: measuring again the 1 values held in this step" in said
    assert "quiet gate: 1 values held out of the record (load: 1)" in said
    assert "run it when the machine is quieter" in said

    again = _bench(repo, env, busy="nothing")
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert _recorded(results) == [
        BUSY_ROW,
        QUIET_ROW,
    ]  # the next run measured what was held, and recorded it
    assert "held out of the record" not in again.stderr
    assert (
        len(held.trail(results).read_text().splitlines()) == 2
    )  # the held file only grows with holds
