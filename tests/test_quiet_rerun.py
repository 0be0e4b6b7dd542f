"""A record run's terminal holds its own lines only (asv's go to a log file: no n/a tables of other devices, nothing
interleaved), and a re-run with nothing new to do starts no asv process and does not publish the site again.

Real runs of scripts/bench on this .venv's torch, used in place (tests/test_faults.py's checkout)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from tests.test_faults import NEEDS_VENV, bench_checkout

from mpsbench.results import record

SELECTION = ["-b", r"^benchmark_models\.Training\.time_step\('cpu', 'mlp', (1|8)\)$"]


def _bench(repo: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["scripts/bench", *SELECTION, "ALL"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )  # a hang guard of the project's size, not a speed limit


@pytest.mark.slow
@NEEDS_VENV
def test_a_run_prints_one_line_a_combination_and_a_rerun_with_nothing_new_starts_no_asv(tmp_path):
    repo, env = bench_checkout(tmp_path, with_wheel=False)
    first = _bench(repo, env)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    said = first.stdout + first.stderr
    asv_log = record.asv_log(repo / ".asv" / "results")
    assert "Creating environments" in asv_log.read_text()  # asv ran, into its log
    assert (
        not re.search(r"\bn/a\b", said) and "··" not in said and "Creating environments" not in said
    ), said
    done = [line for line in said.splitlines() if "combinations done" in line]
    assert len(done) == 2 and all(
        line.startswith("mpsbench watch: build 1 of 1, ") for line in done
    )
    site = repo / ".asv" / "html" / "index.html"
    published = site.stat().st_mtime_ns
    size = asv_log.stat().st_size

    again = _bench(repo, env)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    said = again.stdout + again.stderr
    assert (
        "nothing to run" in said
        and "is up to date: nothing recorded since it was published" in said
    ), said
    assert asv_log.stat().st_size == size  # no asv run wrote a line
    assert site.stat().st_mtime_ns == published  # not published again
