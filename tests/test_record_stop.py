"""Issue 32: a record run stopped at any moment keeps every value it measured, ends every process it started within
seconds, and the next run goes on from the next combination without measuring any twice.

Real asv runs of scripts/bench on this .venv's torch (used in place, nothing installed), stopped while asv measures:
Ctrl-C and SIGTERM to the main command (as a terminal and `timeout` send them), and kill -9 of its process group.
Processes are counted with psutil. A stopped run's measurements are the values it saved: recorded, or
left in its scratch folder for the next run to recover. Its costs lines are not: kill -9 can land after asv
saved a value and before the record's once-a-second poll noted it, so that value has none (the next run
recovers it and rightly does not measure it again). The next run's measurements are its costs lines.
Right after the kill -9, the benchmark in flight is suspended, as a long one would be, so that asv's forkserver
(outside the killed group) is still running when the next run starts, and that run must end it.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest
from tests.test_faults import NEEDS_VENV, bench_checkout, recorded_values

from mpsbench.core import asv, asv_saving
from mpsbench.results import watch

# Six cpu combinations, a few seconds each: a stop lands between two of them or inside one
SELECTION = ["-b", r"^benchmark_models\.Training\.time_step\('cpu', '(mlp|lenet5)', (1|8|32)\)$"]
COUNT = 6
OUTLIVES = 5.0  # seconds a process of the run may outlive it (issue 32)


def _measured(repo: Path) -> list[str]:
    """The combinations measured so far, one entry per measurement (the costs file)."""
    path = watch.trail(repo / ".asv" / "results")
    lines = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    # a combination's line, not a step's start-up nor a publish
    return [line["name"] for line in lines if line.get("event") == "done"]


def _run_stopped(
    repo: Path, env: dict[str, str], log: Path, stop: signal.Signals, group: bool
) -> tuple[float, set[psutil.Process], bool]:
    """scripts/bench, stopped by ``stop`` once asv has measured one combination and started the next.

    Returns how long the last process of the run outlived it (seconds; kill -9: at most OUTLIVES, as asv's forkserver
    may run on until the next run ends it), the processes seen, and whether a benchmark in flight was held
    (:func:`_hold_in_flight`)."""
    with open(log, "w") as out:
        bench = subprocess.Popen(
            ["scripts/bench", *SELECTION, "ALL"],
            cwd=repo,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    seen: set[psutil.Process] = set()
    top = psutil.Process(bench.pid)
    deadline = time.monotonic() + 900
    while not (_measured(repo) and "running" in _running(repo)):
        assert bench.poll() is None, log.read_text()[-3000:]
        assert time.monotonic() < deadline, log.read_text()[-3000:]
        seen |= set(top.children(recursive=True))
        time.sleep(0.2)
    time.sleep(1.0)  # inside the next combination's benchmark process
    seen |= set(top.children(recursive=True))
    servers = [(server, server.parent()) for server in _forkservers(repo)]
    assert any(
        "run_server" in " ".join(p.cmdline()) for p in seen if p.is_running()
    )  # asv's forkserver is up
    if group:
        os.killpg(bench.pid, stop)
    else:  # the main command's own process (scripts/bench execs it)
        os.kill(bench.pid, stop)
    bench.wait(timeout=60)
    held = stop == signal.SIGKILL and _hold_in_flight(servers, seen)
    ended = time.monotonic()
    alive = _alive(seen)
    while alive and time.monotonic() - ended < (OUTLIVES if stop == signal.SIGKILL else 30):
        time.sleep(0.1)
        alive = _alive(alive)
    return (time.monotonic() - ended if alive else 0.0), seen, held


def _forkservers(repo: Path) -> list[psutil.Process]:
    """asv's forkservers, from the scratch runs' events."""
    found = []
    for scratch in (repo / ".asv" / "results.scratch").glob("*"):
        for event in asv_saving.read_events(scratch)[0]:
            with contextlib.suppress(psutil.Error):
                if event.get("event") == "forkserver":
                    found.append(psutil.Process(int(event["pid"])))
    return found


def _hold_in_flight(
    servers: list[tuple[psutil.Process, psutil.Process | None]], seen: set[psutil.Process]
) -> bool:
    """After the kill -9: suspend the benchmark each forkserver still runs (added to ``seen``), as a
    long benchmark would keep it running; whether one was held.

    asv starts its forkserver in a process group of its own, which the kill does not reach. Once its
    benchmark ends, the forkserver's reply to the killed asv fails and it exits by itself: whether the
    next run still found it would be a race between that benchmark and the next run's start-up. Held,
    the forkserver is there for the next run to end (until the benchmark's asv timeout, 30 minutes).
    Suspended only once its parent (asv) is dead: a group with a stopped process that its parent's
    death orphans is sent SIGHUP and SIGCONT by the kernel, which ends both."""
    held = False
    for server, parent in servers:
        with contextlib.suppress(psutil.Error):  # asv gone meanwhile: dead
            while parent is not None and _alive([parent]):
                time.sleep(0.01)
        with contextlib.suppress(psutil.Error):  # it ended meanwhile: nothing to hold
            for process in server.children():
                process.suspend()
                while process.status() not in (psutil.STATUS_STOPPED, psutil.STATUS_ZOMBIE):
                    time.sleep(0.01)
                if process.status() == psutil.STATUS_STOPPED:
                    seen.add(process)
                    held = True
    return held


def _alive(processes: set[psutil.Process] | list[psutil.Process]) -> list[psutil.Process]:
    return [p for p in processes if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]


def _running(repo: Path) -> str:
    """ "running" while a combination has started and not ended, per the events of the current scratch run."""
    for events in (repo / ".asv" / "results.scratch").glob("*/events.jsonl"):
        lines = [json.loads(line) for line in events.read_text().splitlines() if line.strip()]
        if lines and lines[-1]["event"] == "start":
            return "running"
    return ""


@pytest.mark.slow
@NEEDS_VENV
@pytest.mark.parametrize(
    ("stop", "group"),
    [(signal.SIGINT, False), (signal.SIGTERM, False), (signal.SIGKILL, True)],
    ids=["ctrl-c", "sigterm", "kill-9-group"],
)
def test_a_stopped_run_keeps_its_values_ends_its_processes_and_the_next_goes_on(
    tmp_path, stop, group
):
    repo, env = bench_checkout(tmp_path, with_wheel=False)
    seen: set[psutil.Process] = set()
    try:
        _stop_and_go_on(repo, env, tmp_path, stop, group, seen)
    finally:  # leave nothing behind on the test machine, whatever failed
        for process in _alive(seen):
            process.kill()


def _stop_and_go_on(
    repo: Path,
    env: dict[str, str],
    tmp_path: Path,
    stop: signal.Signals,
    group: bool,
    seen: set[psutil.Process],
) -> None:
    results = repo / ".asv" / "results"
    outlived, found, held = _run_stopped(repo, env, tmp_path / "stopped.log", stop, group)
    seen |= found
    said = (tmp_path / "stopped.log").read_text()
    print(
        f"\n{stop.name}{' to the group' if group else ''}: {len(seen)} processes of the run seen, the last one"
        f" outlived it by {outlived:.1f} s"
    )
    assert len(seen) >= 3, seen  # asv, its forkserver and a benchmark process at least
    if stop != signal.SIGKILL:
        assert outlived <= OUTLIVES, f"a process of the run outlived it by {outlived:.1f} s"
        assert f"stopped by {stop.name}" in said and "Traceback" not in said, said[-3000:]
    before = recorded_values(results)
    first = _measured(repo)
    assert first and len(before) >= len(first), (
        first,
        before,
    )  # every value measured before the stop is recorded
    # what asv saved and the stopped run did not merge: the next run recovers it
    saved: dict[tuple[str, str, tuple[str, ...]], str] = {}
    for scratch in (repo / ".asv" / "results.scratch").glob("*/results"):
        saved |= recorded_values(scratch)
    stopped = {asv.combination(name, combo) for (_, name, combo) in before | saved}
    assert set(first) <= stopped, (first, stopped)  # a costs line only for a value saved
    print(
        f"the stopped run saved {len(stopped)} values; its costs lines name {len(first)};"
        f" a benchmark in flight held: {held}"
    )
    # no wall-clock limit: the rerun's work is the small SELECTION, and a loaded machine may take long over it
    done = subprocess.run(
        ["scripts/bench", *SELECTION, "ALL"], cwd=repo, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    after = recorded_values(results)
    for log in (said, done.stderr):  # no value merged twice (it would be a conflict: recorded kept)
        assert "mpsbench record: warning" not in log, log[-3000:]
    assert all(after[key] == value for key, value in before.items())  # kept, byte for byte
    assert all(after.get(key) == value for key, value in saved.items())  # recovered as saved
    again = _measured(repo)[len(first) :]  # the next run's: the costs file only grows
    assert len(first) == len(set(first)) and len(again) == len(set(again)), (first, again)
    assert stopped.isdisjoint(again) and len(stopped) + len(again) == COUNT, (
        sorted(stopped),
        again,
    )  # each combination measured once, none twice: the next run went on from where it stopped
    assert {name for (_, name, combo) in after} == {"benchmark_models.Training.time_step"}
    assert len(after) == COUNT
    assert not _alive(seen), _alive(
        seen
    )  # a forkserver that kill -9 left behind was ended by the next run
    if (
        held
    ):  # a forkserver kept running by a benchmark in flight (else it may have ended by itself)
        assert "ending the asv forkserver a stopped run left running" in done.stderr
