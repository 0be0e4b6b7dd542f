"""Driving asv: run arguments, combination names, stopping all it started."""

from __future__ import annotations

import ast
import contextlib
import io
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from mpsbench.core import asv_internals, ranges, settings
from mpsbench.core.errors import UserError

BENCHMARKS = "benchmarks.json"


def combination(benchmark: str, params: Sequence[str] = ()) -> str:
    return f"{benchmark}({', '.join(params)})" if params else benchmark


def param_values(params: Sequence[str]) -> list[Any]:
    return [ast.literal_eval(text) for text in params]


def matching(names: Iterable[str], patterns: Sequence[str]) -> list[str]:
    """As asv's ``-b`` selects."""
    try:
        compiled = [re.compile(pattern) for pattern in patterns]
    except re.error as exc:
        raise UserError(f"-b {exc.pattern!r} is not a regular expression: {exc}") from None
    return [name for name in names if any(pattern.search(name) for pattern in compiled)]


def pattern(names: Sequence[str]) -> str:
    """A ``-b`` pattern for exactly ``names``."""
    return "^(?:" + "|".join(re.escape(name) for name in names) + ")$"


def _value_change(parsed: Any) -> str | None:
    if parsed.quick:
        return "--quick would record single-sample values as results"
    for name, value in (parsed.attribute or {}).items():
        if name == "cpu_affinity":
            return "--cpu-affinity pins the benchmark to some cores, not the whole machine"
        if name != "timeout":  # the one -a that keeps a value's meaning
            return f"-a {name}={value} overrides how the benchmark samples, unlike its history"
    if parsed.set_commit_hash:
        return f"--set-commit-hash {parsed.set_commit_hash} files the values under another build"
    for spec in [*(parsed.env_spec or []), *([f":{parsed.python}"] if parsed.python else [])]:
        if spec.split(":", 1)[0] == "existing" or spec.split(":", 1)[-1] == "same":
            return f"-E {spec} times the torch installed here, not the build filed under"
    return None


@dataclass(frozen=True)
class RunArgs:
    bench: list[str]
    range: str | None  # None: each branch's newest
    rest: list[str]
    environment: str  # from -E TYPE:PYTHON, else "*"
    python: tuple[int, int] | None  # its X.Y; None: asv's own Python
    dry_run: bool
    changes_values: str | None  # why its values would not be history

    def before(self, *options: str) -> RunArgs:
        """A later option wins in asv."""
        return replace(self, rest=[*options, *self.rest])


_TAKES_VALUE = ("-b", "--bench", "--config", "--machine")  # mpsbench sets these


def run_args(args: Sequence[str]) -> RunArgs:
    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said):
            parsed = asv_internals.make_argparser()[0].parse_args(["run", *args])
    except SystemExit:
        reason = (said.getvalue().strip().splitlines() or ["?"])[-1]
        raise UserError(f"asv run options {' '.join(map(shlex.quote, args))}: {reason}") from None
    position = max((i for i, arg in enumerate(args) if arg == parsed.range), default=None)
    rest: list[str] = []
    words = iter(enumerate(args))
    for i, arg in words:
        if arg in _TAKES_VALUE:
            next(words, None)
        elif (
            i != position and arg != "-k" and not arg.startswith((*_TAKES_VALUE, "--skip-existing"))
        ):
            rest.append(arg)
    kinds = [spec.split(":", 1) for spec in parsed.env_spec or [] if ":" in spec]
    python = re.fullmatch(r"(\d+)\.(\d+)", kinds[0][1]) if kinds else None
    return RunArgs(
        list(parsed.bench or []),
        parsed.range,
        rest,
        f"{kinds[0][0]}-py{kinds[0][1]}" if kinds else "*",
        (int(python[1]), int(python[2])) if python else None,
        bool(parsed.dry_run),
        _value_change(parsed),
    )


def scratch(parent: Path) -> Path:
    folder = parent / f"{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{os.getpid()}"
    folder.mkdir(parents=True)
    return folder


def run_command(
    config: Path,
    machine: str,
    options: Sequence[str],
    commits: Sequence[str],
    hashfile: Path,
    saving: str = "asv",
) -> list[str]:
    return [
        sys.executable,
        "-m",
        saving,
        "run",
        "--config",
        str(config),
        "--machine",
        machine,
        *options,
        write_hashfile(hashfile, commits),
    ]


# asv's discovery installs each branch's newest: refused unless listed
RUN_BUILDS = "MPSBENCH_RUN_BUILDS"


def only(hashfile: Path) -> dict[str, str]:
    kept = {k: v for k, v in os.environ.items() if k not in settings.INTERNAL}
    return {**kept, RUN_BUILDS: str(hashfile)}


def publish(config: Path, options: Sequence[str]) -> None:
    command = [sys.executable, "-m", "asv", "publish", "--config", str(config), *options]
    if status := subprocess.run(command).returncode:
        raise UserError(
            f"asv publish --config {config} exited with status {status} (its reason above)"
        )


def environment_python(config: Path) -> Path:
    conf = asv_internals.Config.load(str(config))
    environments = asv_internals.get_environments(conf, None, verbose=False)
    found = [Path(conf.env_dir, env.dir_name, "bin", "python") for env in environments]
    made = [python for python in found if python.is_file()]
    if len(made) != 1:
        raise UserError(
            f"{config}: expected the one asv environment an asv run made, found {len(made)} of"
            f" {len(found)} ({', '.join(str(python.parents[1]) for python in found)})"
        )
    return made[0]


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Stopped(Exception):
    """Raised once a signal's asv processes ended."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"stopped by {signal.Signals(signum).name}")
        self.status = 128 + signum


def _descendants(processes: Iterable[Any]) -> set[Any]:
    import psutil

    found = set()
    for process in processes:
        with contextlib.suppress(psutil.Error):
            found.update(process.children(recursive=True))
    return found


def end(processes: Iterable[Any]) -> None:
    """Kills by pid: asv's processes lead groups of their own."""
    import psutil

    alive = {process for process in processes if process.is_running()}
    for _ in range(5):
        for process in alive:
            with contextlib.suppress(psutil.Error):
                process.suspend()
        if not (more := _descendants(alive) - alive):
            break
        alive |= more
    sockets = [_forkserver_folder(process) for process in alive]
    for process in alive:
        with contextlib.suppress(psutil.Error):
            process.kill()
    psutil.wait_procs(list(alive), timeout=5)
    for folder in filter(None, sockets):  # asv removes it only when it ends normally
        shutil.rmtree(folder, ignore_errors=True)


def _forkserver_folder(process: Any) -> Path | None:
    import psutil

    with contextlib.suppress(psutil.Error):
        command = process.cmdline()
        if "run_server" in command[:-1]:
            folder = Path(command[-1]).parent
            return folder if folder.name.startswith("asv-forkserver-") else None
    return None


def stop(running: subprocess.Popen[bytes]) -> None:
    import psutil

    with contextlib.suppress(psutil.NoSuchProcess):
        end([psutil.Process(running.pid)])
    running.wait()


def _raise_stopped(signum: int, frame: object) -> None:
    raise Stopped(signum)


def supervise(
    command: Sequence[str],
    cwd: Path,
    env: Mapping[str, str],
    tick: Callable[[], None],
    output: Path,
) -> int:
    """Ticks each second and at the end; a signal or an error ends all it started."""
    import psutil

    previous = {signum: signal.signal(signum, _raise_stopped) for signum in STOP_SIGNALS}
    seen: set[Any] = set()
    running: subprocess.Popen[bytes] | None = None
    try:
        with open(output, "ab") as out:
            running = subprocess.Popen(
                command, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT
            )
        seen.add(me := psutil.Process(running.pid))
        while True:
            seen |= _descendants([me])
            with contextlib.suppress(subprocess.TimeoutExpired):
                status = running.wait(timeout=1)
                break
            tick()
        end(seen)  # a forkserver asv left behind
        tick()
        return status
    except BaseException:
        for signum in STOP_SIGNALS:  # a second Ctrl-C must not interrupt stopping
            signal.signal(signum, signal.SIG_IGN)
        if running is not None:
            end(seen)
            running.wait()
        raise
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def write_hashfile(path: Path, commits: Iterable[str]) -> str:
    """asv run's range of exactly ``commits``, written one a line to ``path``."""
    path.write_text("".join(f"{commit}\n" for commit in commits))
    return f"{ranges.HASHFILE}{path}"
