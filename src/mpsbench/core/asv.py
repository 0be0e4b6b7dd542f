"""The one way mpsbench drives asv: names of combinations as ``-b`` sees them, ``asv run``'s arguments, its command
lines, its scratch folders, stopping it with everything it started, and the benchmarks.json it writes. asv itself is
imported where it is used: the suite's environment holds it, asv's benchmark environments do not."""

from __future__ import annotations

import ast
import contextlib
import datetime
import io
import os
import re
import shlex
import signal
import subprocess
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from mpsbench.core import asv_internals, settings
from mpsbench.core.errors import UserError

BENCHMARKS = "benchmarks.json"  # what asv run writes beside the machines' folders: every benchmark's params and unit
# asv run options mpsbench decides itself (what to run, where results go)
OWN_OPTIONS = (
    "--config",
    "--machine",
    "--skip-existing-successful",
    "--skip-existing-failed",
    "--skip-existing-commits",
    "--skip-existing",
    "-k",
)


class AsvError(UserError):
    """asv arguments or files mpsbench cannot use; caught by timeline.bad_range: asv says why."""


def combination(benchmark: str, params: Sequence[str] = ()) -> str:
    """``name(p1, p2)``, each param its repr: as asv names a combination and ``-b`` matches it."""
    return f"{benchmark}({', '.join(params)})" if params else benchmark


def param_values(params: Sequence[str]) -> list[Any]:
    """asv keeps each param as its repr."""
    return [ast.literal_eval(text) for text in params]


def matching(names: Iterable[str], patterns: Sequence[str]) -> list[str]:
    """The names any of ``patterns`` finds, as asv's ``-b`` finds them (``re.search``)."""
    try:
        compiled = [re.compile(pattern) for pattern in patterns]
    except re.error as exc:
        raise AsvError(f"-b {exc.pattern!r} is not a regular expression: {exc}") from None
    return [name for name in names if any(pattern.search(name) for pattern in compiled)]


def pattern(names: Sequence[str]) -> str:
    """One anchored pattern that finds exactly ``names`` under asv's ``re.search``."""
    return "^(?:" + "|".join(re.escape(name) for name in names) + ")$"


# asv run -a attributes that leave what a value means as it is: when a benchmark is given up, not how it is sampled
SAFE_ATTRIBUTES = ("timeout",)


def _value_changes(parsed: Any) -> tuple[str, ...]:
    """Each option of a parsed ``asv run`` that changes what a recorded value means, with why, in one line each: a
    run with any of them is no history (record refuses it, unless --dry-run saves nothing)."""
    found = ["--quick would record single-sample values as results"] if parsed.quick else []
    for name, value in (parsed.attribute or {}).items():
        if name == "cpu_affinity":
            found.append(
                "--cpu-affinity pins the benchmark to some cores: a cpu row's value is then no longer the"
                " machine's"
            )
        elif name not in SAFE_ATTRIBUTES:
            found.append(
                f"-a {name}={value} overrides how the benchmark samples (its {name}): the value is no longer"
                " one of its history"
            )
    if parsed.set_commit_hash:
        found.append(
            f"--set-commit-hash {parsed.set_commit_hash} files the values under a build that did not make"
            " them"
        )
    same = [
        spec
        for spec in [*(parsed.env_spec or []), *(f":{p}" for p in [parsed.python] if p)]
        if spec.split(":", 1)[0] == "existing" or spec.split(":", 1)[-1] == "same"
    ]
    if same:
        found.append(
            f"-E {same[0]} times the torch installed here, not the build each value is filed under"
        )
    return tuple(found)


@dataclass(frozen=True)
class RunArgs:
    """An ``asv run`` command line taken apart: what it selects, over which builds, and the rest as given."""

    bench: list[str]  # the -b patterns
    range: (
        str | None
    )  # ALL, HASHFILE:path, a range of the timeline, or None (each branch's newest build)
    rest: list[str]  # every other option, minus OWN_OPTIONS
    environment: (
        str  # the results files' environment part that -E TYPE:PYTHON makes asv write, else "*"
    )
    quick: bool
    dry_run: bool
    # the options that change what a recorded value means (--quick, -a repeat=1, --set-commit-hash, ...), why each
    changes_values: tuple[str, ...] = ()

    def before(self, *options: str) -> RunArgs:
        """The same run with ``options`` first among the rest (one given again later wins, as in
        asv's parser): what parsing them in front of the arguments gives, without parsing again."""
        return replace(self, rest=[*options, *self.rest])


def run_args(args: Sequence[str]) -> RunArgs:
    """``asv run``'s arguments, parsed by asv's own parser; its refusal in one line."""
    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said):
            parsed = asv_internals.make_argparser()[0].parse_args(["run", *args])
    except SystemExit:
        reason = (said.getvalue().strip().splitlines() or ["?"])[-1]
        raise AsvError(f"asv run options {' '.join(map(shlex.quote, args))}: {reason}") from None
    position = max((i for i, arg in enumerate(args) if arg == parsed.range), default=None)
    rest: list[str] = []
    words = iter(enumerate(args))
    for i, arg in words:
        if arg in ("-b", "--bench", "--config", "--machine"):
            next(words, None)  # its value
        elif (
            i != position
            and not arg.startswith("-b")
            and arg.split("=", 1)[0] not in ("--bench", *OWN_OPTIONS)
        ):
            rest.append(arg)
    kinds = [spec.split(":", 1) for spec in parsed.env_spec or [] if ":" in spec]
    environment = f"{kinds[0][0]}-py{kinds[0][1]}" if kinds else "*"
    return RunArgs(
        list(parsed.bench or []),
        parsed.range,
        rest,
        environment,
        bool(parsed.quick),
        bool(parsed.dry_run),
        _value_changes(parsed),
    )


def scratch(parent: Path) -> Path:
    """A new folder for one asv run's results, named by the time and this process."""
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%S")
    folder = parent / f"{stamp}-{os.getpid()}"
    folder.mkdir(parents=True)
    return folder


def run_command(
    config: Path,
    machine: str,
    options: Sequence[str],
    commits: Sequence[str],
    hashfile: Path,
    saving: str | None = None,
) -> list[str]:
    """``asv run`` of ``config`` on ``machine`` over exactly ``commits`` (written to ``hashfile``, in that order);
    ``saving``: the module whose main runs it with each combination's value saved as it is measured
    (:mod:`mpsbench.core.asv_saving`, or one that runs it with more around each combination)."""
    hashfile.write_text("".join(f"{commit}\n" for commit in commits))
    runner = ["-m", saving] if saving else ["-m", "asv"]
    return [
        sys.executable,
        *runner,
        "run",
        "--config",
        str(config),
        "--machine",
        machine,
        *options,
        f"HASHFILE:{hashfile}",
    ]


# The builds one asv run may install (its HASHFILE of timeline hashes): when one is refused, asv's discovery installs
# every branch's newest instead (asv 0.6.6, Benchmarks._disc_benchmarks); with this set, builds/install_build.py (asv's
# install command, standard library only: it reads this name, not imports it) refuses any other before a byte downloads.
RUN_BUILDS = "MPSBENCH_RUN_BUILDS"


def only(hashfile: Path) -> dict[str, str]:
    """This process's environment for an asv run that may install only the builds in ``hashfile``, without the
    settings mpsbench sets for its own processes (core/settings.py's internal ones): a recording run never reads
    them from the user's environment."""
    return {**settings.without_internal(os.environ), RUN_BUILDS: str(hashfile)}


def publish(config: Path, options: Sequence[str] = ()) -> None:
    """``asv publish`` of ``config``'s results into its html_dir."""
    done = subprocess.run(
        [sys.executable, "-m", "asv", "publish", "--config", str(config), *options], check=False
    )
    if done.returncode != 0:
        raise AsvError(
            f"asv publish --config {config} exited with status {done.returncode} (its reason above)"
        )


def environment_python(config: Path) -> Path:
    """The python of the benchmark environment an ``asv run`` of ``config`` (no matrix) made, as asv names it."""
    conf = asv_internals.Config.load(str(config))
    environments = asv_internals.get_environments(conf, None, verbose=False)
    found: list[Path] = [
        Path(conf.env_dir) / env.dir_name / "bin" / "python" for env in environments
    ]
    made = [python for python in found if python.is_file()]
    if len(made) != 1:
        raise AsvError(
            f"{config}: expected the one asv environment an asv run made, found {len(made)} of"
            f" {len(found)} ({', '.join(str(python.parents[1]) for python in found)})"
        )
    return made[0]


STOP_SIGNALS = (
    signal.SIGINT,
    signal.SIGTERM,
    signal.SIGHUP,
)  # Ctrl-C, `timeout` and kill, a closed terminal


class Stopped(Exception):
    """A signal stopped the command, its asv processes ended; cli.main exits with its status."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"stopped by {signal.Signals(signum).name}")
        self.status = 128 + signum  # the shell's status for a process ended by that signal


def _descendants(processes: Iterable[Any]) -> set[Any]:
    import psutil

    found = set()
    for process in processes:
        with contextlib.suppress(psutil.Error):
            found.update(process.children(recursive=True))
    return found


def end(processes: Iterable[Any]) -> None:
    """End ``processes`` and everything under them, each by its pid, within seconds.

    asv starts each benchmark process and its forkserver (``benchmark.py run_server``) in a process group of their
    own, so no group signal reaches all of them, and one whose parent died first is no longer anyone's child: every
    process is stopped first (SIGSTOP: none can start another), those started meanwhile found, then all killed.
    """
    import psutil

    alive = {process for process in processes if process.is_running()}
    for _ in range(5):
        for process in alive:
            with contextlib.suppress(psutil.Error):
                process.suspend()
        more = _descendants(alive) - alive
        if not more:
            break
        alive |= more
    for process in alive:
        with contextlib.suppress(psutil.Error):
            process.kill()
    psutil.wait_procs(list(alive), timeout=5)


def stop(running: subprocess.Popen[bytes]) -> None:
    """Stop a process mpsbench started (asv, a build server) and what it started (asv's forkserver, a benchmark
    process), each by its pid."""
    import psutil

    with contextlib.suppress(psutil.NoSuchProcess):
        end([psutil.Process(running.pid)])
    running.wait()


def _raise_stopped(signum: int, frame: object) -> None:
    raise Stopped(signum)


def supervise(
    command: Sequence[str],
    cwd: Path | None,
    env: Mapping[str, str] | None,
    tick: Callable[[], None],
    every: float = 1.0,
    output: Path | None = None,
) -> int:
    """Run an asv command line, calling ``tick`` every ``every`` seconds and once at the end; its exit status.
    ``output``: a file asv's own lines (stdout and stderr) are appended to instead of this terminal, so that the
    caller's one line a combination is all the terminal shows.

    Ctrl-C, SIGTERM or SIGHUP to this process (or an exception from ``tick``) ends asv and every process it started
    (:func:`end`: the ones seen at any tick too, in case asv died before them) and raises :class:`Stopped` (or the
    exception). In the main thread only, where Python runs signal handlers.
    """
    import psutil

    previous = {signum: signal.signal(signum, _raise_stopped) for signum in STOP_SIGNALS}
    seen: set[Any] = set()
    running: subprocess.Popen[bytes] | None = None
    try:
        with open(output, "ab") if output is not None else contextlib.nullcontext() as out:
            running = subprocess.Popen(
                command,
                cwd=cwd,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT if out is not None else None,
            )
        me = psutil.Process(running.pid)
        seen.add(me)
        while True:
            seen |= _descendants([me])
            try:
                status = running.wait(timeout=every)
            except subprocess.TimeoutExpired:
                tick()
                continue
            end(seen)  # a forkserver left behind by an asv that ended on its own
            tick()
            return status
    except BaseException:
        for signum in STOP_SIGNALS:  # a second Ctrl-C does not interrupt the stopping
            signal.signal(signum, signal.SIG_IGN)
        if running is not None:
            end(seen)  # asv and, found again there, all it started since the last tick
            running.wait()
        raise
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
