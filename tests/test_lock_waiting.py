"""A lock another process holds: the waiter says why nothing happens yet, once, and goes on when it is free (two compare or
bisect commands in one checkout, discovering in asv's one environment; a merge beside a record run)."""

from __future__ import annotations

import logging
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from mpsbench.context import Suite
from mpsbench.core import asv_internals, files
from mpsbench.measure import preselect
from mpsbench.regressions import fresh

ROOT = Path(__file__).resolve().parents[1]

HOLD = """
import sys
from pathlib import Path
from mpsbench.core import files
with files.lock(Path(sys.argv[1])):
    print("held", flush=True)
    sys.stdin.read()  # until the test closes our stdin
"""


def test_a_second_command_says_it_waits_and_goes_on_once_the_first_leaves(
    tmp_path: Path, caplog
) -> None:
    target = tmp_path / "fresh" / "env"
    target.parent.mkdir()
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(target)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdin is not None
    assert holder.stdout.readline().strip() == "held"
    entered = threading.Event()

    def second() -> None:
        with files.lock(
            target, wait=lambda: logging.getLogger("test").info("waiting for another compare")
        ):
            entered.set()

    with caplog.at_level("INFO"):
        waiter = threading.Thread(target=second)
        waiter.start()
        assert not entered.wait(1.0)  # the other process holds it: this one waits
        holder.stdin.close()
        holder.wait()
        holder.stdout.close()
        waiter.join()
    assert entered.is_set()
    assert [record.getMessage() for record in caplog.records] == ["waiting for another compare"]


def test_a_command_alone_goes_straight_in_and_says_nothing(tmp_path: Path, caplog) -> None:
    target = tmp_path / "env"
    with (
        caplog.at_level("INFO"),
        files.lock(target, wait=lambda: logging.getLogger("test").info("waiting")),
    ):
        pass
    assert caplog.records == []


MAKER = """
import sys
from pathlib import Path
from mpsbench.core import files
with files.lock(Path(sys.argv[1])):
    print("held", flush=True)
    if sys.stdin.read() == "made":  # until the test closes our stdin
        Path(sys.argv[2]).touch()
"""


class _Said(logging.Handler):
    """Records what the session logs; anything it says lets the other session end its discovery."""

    def __init__(self, go_on: Callable[[], None]) -> None:
        super().__init__()
        self.messages: list[str] = []
        self.go_on = go_on

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())
        self.go_on()


@pytest.mark.parametrize(
    ("made_before", "other_ends", "waits", "discovers"),
    [
        (False, "made", True, False),  # bin/python exists while the other installs: wait for it
        (False, "failed", True, True),  # the other's discovery failed: this one's makes it whole
        (True, "made", False, False),  # whole already: no waiting, though the lock is held
    ],
)
def test_a_session_uses_asvs_environment_only_once_a_discovery_made_it_whole(
    tmp_path: Path, monkeypatch, made_before: bool, other_ends: str, waits: bool, discovers: bool
) -> None:
    """asv makes the environment's bin/python first, then installs into it: a second compare or
    bisect waits on the lock of the one making it, and starts nothing on a half-made one."""
    suite = tmp_path / "suite"
    suite.mkdir()
    shutil.copy(ROOT / "asv.conf.json", suite / "asv.conf.json")
    args = fresh.Options(
        "Step.time_work",
        Suite(suite / "asv.conf.json", tmp_path / "manifest.json", tmp_path / "timeline"),
        machine="m",
    )
    chosen = preselect.Row("bench_step.Step.time_work", "bench_step.Step.time_work", None)
    ran: list[list[str]] = []

    def discovery(command: list[str], env: dict[str, str], log: Path | None) -> tuple[str, int]:
        ran.append(command)  # asv's just-discover, its listing written
        (session.scratch / "results").mkdir()
        (session.scratch / "results" / "benchmarks.json").write_text('{"version": 2}\n')
        return "", 0

    monkeypatch.setattr(fresh, "run_logged", discovery)
    with fresh.Session(args, [fresh.Named("exam@n1", "0" * 40)], chosen) as session:
        conf = asv_internals.Config.load(str(session.config))
        (environment,) = asv_internals.get_environments(conf, None, verbose=False)
        python = Path(conf.env_dir, environment.dir_name, "bin", "python")
        python.parent.mkdir(parents=True)
        python.touch()  # the other session's asv has begun the environment
        marker = python.parents[1] / fresh.DISCOVERED
        if made_before:
            marker.touch()
        other = subprocess.Popen(
            [sys.executable, "-c", MAKER, str(session.config.parent / "env"), str(marker)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert other.stdin is not None and other.stdout is not None
        assert other.stdout.readline().strip() == "held"

        def other_ends_its_discovery() -> None:
            assert other.stdin is not None
            if not other.stdin.closed:
                other.stdin.write("made" if other_ends == "made" else "")
                other.stdin.close()

        said = _Said(other_ends_its_discovery)
        fresh.log.addHandler(said)
        try:
            assert session.check_bench("0" * 40) == chosen.name
        finally:
            fresh.log.removeHandler(said)
            other_ends_its_discovery()
            other.wait()
            other.stdout.close()
        waiting = f"waiting for another compare or bisect in {suite}"
        assert said.messages == ([waiting] if waits else [])
        assert [command[command.index("--bench") + 1] for command in ran] == (
            ["just-discover"] if discovers else []
        )
        assert marker.is_file()
