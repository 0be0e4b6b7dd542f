"""A lock another process holds: the waiter says why nothing happens yet, once, and goes on when it is free (two compare or
bisect commands in one checkout, discovering in asv's one environment; a merge beside a record run)."""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
from pathlib import Path

from mpsbench.core import files

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
