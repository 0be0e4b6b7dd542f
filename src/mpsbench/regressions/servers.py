"""compare's and bisect's build servers, one a build."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from mpsbench.builds import install_build
from mpsbench.core import asv, errors
from mpsbench.regressions import serve_build

TIMED_OUT, SPAWN, FORK = serve_build.TIMED_OUT, serve_build.SPAWN, serve_build.FORK


@dataclass(frozen=True)
class Placed:
    build: str
    paths: list[str]
    torch_dir: str
    env: dict[str, str]


def place(
    python: Path, build: dict[str, Any], suite_src: Path, scratch: Path, env: dict[str, str]
) -> Placed:
    """``build`` (a build.json) installed once, and placed."""
    folder = Path(tempfile.mkdtemp(prefix="build-", dir=scratch))
    (folder / "build.json").write_text(json.dumps(build))
    command = [str(python), install_build.__file__, "paths", str(folder), str(suite_src)]
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip().splitlines() or [f"exit {done.returncode}"]
        name = f"{build.get('channel')}@{build.get('id')}"
        raise errors.UserError(f"cannot place build {name}: {said[-1]}")
    found = json.loads(done.stdout.strip().splitlines()[-1])
    return Placed(found["build"], found["paths"], found["torch_dir"], found["env"])


class Server:
    """start, ready, then round after round, stop."""

    def __init__(
        self,
        python: Path,
        placed: Placed,
        benchmark_dir: Path,
        benchmark_id: str,
        env: dict[str, str],
        scratch: Path,
        mode: str = SPAWN,
    ) -> None:
        self.placed, self.scratch, self.mode = placed, scratch, mode
        self.command = [
            str(python),
            "-S",
            serve_build.__file__,
            str(benchmark_dir),
            benchmark_id,
            placed.torch_dir,
            mode,
        ]
        # asv empties PYTHONPATH: here it holds the build's entries
        self.env = {**env, **placed.env, "PYTHONPATH": os.pathsep.join(placed.paths)}
        self.log = scratch / f"server-{placed.build.replace('@', '-')}.log"
        self.process: subprocess.Popen[bytes] | None = None
        self.replies: IO[str] | None = None
        self.is_ready = False

    def start(self) -> None:
        read, write = os.pipe()
        with open(self.log, "a") as sink:
            self.process = subprocess.Popen(
                [*self.command, str(write), str(os.getpid())],
                stdin=subprocess.PIPE,
                stdout=sink,
                stderr=subprocess.STDOUT,
                env=self.env,
                pass_fds=(write,),
            )
        os.close(write)
        self.replies = os.fdopen(read)
        self.is_ready = False

    def _ended(self, before: str) -> errors.UserError:
        return errors.UserError(
            f"the server of {self.placed.build} ended before {before}: {self.tail()}"
        )

    def _reply(self, waiting_for: str) -> dict[str, Any]:
        assert self.replies is not None
        if not (line := self.replies.readline()):
            raise self._ended(waiting_for)
        said: dict[str, Any] = json.loads(line)
        if "error" in said:
            raise errors.UserError(f"the server of {self.placed.build} refused: {said['error']}")
        return said

    def ready(self) -> dict[str, Any]:
        said = self._reply("it was ready")
        self.is_ready = True
        return said

    def round(self, number: int, params: dict[str, Any], ahead: bool = True) -> dict[str, Any]:
        """Round ``number`` with asv's ``-a`` ``params``; spawned, ``ahead`` starts the next process."""
        if self.process is None:
            self.start()
        if not self.is_ready:
            self.ready()
        assert self.process is not None and self.process.stdin is not None
        workdir = tempfile.mkdtemp(prefix=f"round{number}-", dir=self.scratch)
        try:
            self.process.stdin.write(
                json.dumps({"round": number, "params": params, "workdir": workdir}).encode() + b"\n"
            )
            self.process.stdin.flush()
        except BrokenPipeError:
            raise self._ended(f"round {number}") from None
        said = self._reply(f"round {number} ended")
        if self.mode == SPAWN:
            self.stop()
            if ahead:
                self.start()
        return said

    def tail(self) -> str:
        text = self.log.read_text(errors="replace").splitlines() if self.log.is_file() else []
        return " | ".join([line for line in text if line.strip()][-3:]) or "no output"

    def stop(self) -> None:
        if self.process is not None:
            if self.process.stdin is not None:
                self.process.stdin.close()
            if self.process.poll() is None:
                asv.stop(self.process)
            self.process = None
        if self.replies is not None:
            self.replies.close()
            self.replies = None
