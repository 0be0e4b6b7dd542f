"""A build server: the asv environment's python with ONE build on sys.path, running one round of one combination.

compare and bisect (servers.py) start one per build. It imports torch and the benchmark's module,
then runs a round through asv_runner's own code (the steps of its ``run._run``), so a sample is timed
by asv's own timer, exactly as ``asv run`` times it, without asv's CLI, discovery and environment
switch (docs/explanation/the-rule.md, "How they measure"). It runs inside the asv environment under
every supported torch with the standard library and asv_runner only, as ``python -S``: site-packages
is added without install_build's .pth (the build asv switched in last), so the only build on
sys.path is the one PYTHONPATH names.

    python -S serve_build.py BENCHMARK_DIR BENCHMARK_ID TORCH_DIR MODE REPLY_FD PARENT_PID

MODE ``spawn``: the process runs one round and ends (servers.py starts a new one a round). MODE ``fork``: a warm
parent. It also imports the models' optional packages (torchvision, transformers: measure.models.PRELOADED), freezes
them for the collector, and then forks a child per round, before any device is touched (docs/explanation/loop.md):
CUDA, MPS and OpenMP pools start in the child, which runs the round and ends.

Each command comes on stdin as one JSON line, ``{"round": N, "params": {asv's -a}, "workdir": DIR}``. Replies go to
REPLY_FD, one JSON line each: ``{"ready": ...}`` or ``{"error": ...}``, then per round ``{"round": N, "rc": STATUS,
"result": asv_runner's result, "seconds": ...}`` (a forked round adds ``"forked"``: the seconds from the command to the
child's first line). Stdout and stderr are the log.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import json
import math
import os
import pickle
import signal
import site
import sys
import sysconfig
import threading
import time
import traceback
from typing import Any, TextIO

STARTED = (
    time.time()
)  # the interpreter is up: the ready reply's "started", less the launch time, is its start
PTH_NAME = (
    "mpsbench_build.pth"  # install_build.PTH_NAME, by name: the switch a server must not take
)
DEFAULT_TIMEOUT = 60.0  # asv's default_benchmark_timeout, for a benchmark that sets none
TIMED_OUT = -256  # the status asv's forkserver reports for a benchmark it stopped at its timeout
SPAWN, FORK = (
    "spawn",
    "fork",
)  # MODE: a process a round, or a warm parent that forks a child a round
MODES = (SPAWN, FORK)
# a forked child that ended without a reply (a crash in native code): the parent reports its wait status instead
NO_REPLY = -257
_PR_SET_PDEATHSIG = 1
_ENDING: list[int] = []  # forked children that replied, reaped before the next fork


def _site_without_switch() -> None:
    """The environment's site-packages and its .pth files (what ``site`` adds), except install_build's switch."""
    venv = os.path.dirname(os.path.dirname(os.path.abspath(sys.executable)))
    if os.path.isfile(os.path.join(venv, "pyvenv.cfg")):  # what site.venv() does, which -S skipped
        sys.prefix = sys.exec_prefix = venv
    # the virtual environment's own scheme: a distribution's default one may differ (Debian's and Ubuntu's Pythons
    # give posix_local, .../local/lib/python3.X/dist-packages, which a venv does not have)
    scheme = (
        "venv"
        if "venv" in sysconfig.get_scheme_names()
        else ("nt" if os.name == "nt" else "posix_prefix")
    )
    purelib = sysconfig.get_paths(scheme, vars={"base": sys.prefix, "platbase": sys.exec_prefix})[
        "purelib"
    ]
    known = set(sys.path)
    sys.path.append(purelib)
    known.add(purelib)
    for name in sorted(os.listdir(purelib)):
        if name.endswith(".pth") and name != PTH_NAME:
            site.addpackage(purelib, name, known)


def _die_with(parent: int) -> None:
    """End this process when ``parent`` ends, however it ends (kill -9 included): no server outlives compare."""
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:  # it ended before prctl took
            os._exit(1)
        return

    def watch() -> None:  # elsewhere (macOS) no such call: look every 0.2 s
        while os.getppid() == parent:
            time.sleep(0.2)
        os._exit(1)

    threading.Thread(target=watch, daemon=True).start()


def _say(reply: TextIO, message: dict[str, Any]) -> None:
    reply.write(json.dumps(message) + "\n")
    reply.flush()


def _run_round(
    benchmark_dir: str, benchmark_id: str, params: dict[str, Any], result_file: str
) -> tuple[int, float]:
    """One round as asv's benchmark process runs it (asv_runner's module-private ``run._run``, through its public
    pieces; a skip is n/a, NaN); the result written where asv reads it. 0 if it ran, 1 if it raised; and the seconds
    asv's timing loop took (its samples, with its own warm-up calls), 0 where it did not run."""
    sampling = 0.0
    from asv_runner.benchmarks.mark import SkipNotImplemented
    from asv_runner.discovery import get_benchmark_from_name

    try:
        os.chdir(os.path.dirname(result_file))  # asv runs each round in a folder of its own
        benchmark = get_benchmark_from_name(benchmark_dir, benchmark_id, extra_params=params)
        if benchmark.setup_cache_key is not None:
            with open("cache.pickle", "rb") as handle:
                benchmark.set_cache(pickle.load(handle))
        else:
            benchmark.set_cache(None)
        result: Any = math.nan
        skip = benchmark.do_setup()
        try:
            if not skip:
                clock = time.perf_counter()
                with contextlib.suppress(SkipNotImplemented):
                    result = benchmark.do_run()
                sampling = time.perf_counter() - clock
        finally:
            benchmark.do_teardown()
        with open(result_file, "w") as handle:
            json.dump(result, handle)
        return 0, sampling
    except BaseException:  # reported as asv reports it: the traceback in the log, status 1
        traceback.print_exc()
        return 1, sampling
    finally:
        sys.stdout.flush()
        sys.stderr.flush()


def _round(
    benchmark_dir: str, benchmark_id: str, command: dict[str, Any], timeout: float, reply: TextIO
) -> dict[str, Any]:
    result_file = os.path.join(command["workdir"], "result.json")
    started = (
        time.perf_counter()
    )  # in a forked child: the same clock as its parent's (CLOCK_MONOTONIC)
    print(f"serve_build: round {command['round']} of {benchmark_id}", flush=True)

    def late() -> None:
        _say(
            reply, {"round": command["round"], "rc": TIMED_OUT, "result": None, "seconds": timeout}
        )
        os._exit(1)

    alarm = threading.Timer(timeout, late)
    alarm.daemon = True
    alarm.start()
    rc, sampling = _run_round(benchmark_dir, benchmark_id, command["params"], result_file)
    alarm.cancel()
    try:
        with open(result_file) as handle:
            result = json.load(handle)
    except (OSError, ValueError):
        result = None
    seconds = time.perf_counter() - started
    print(
        f"serve_build: round {command['round']} ended: status {rc} in {seconds:.2f} s (sampling {sampling:.2f} s)",
        flush=True,
    )
    return {
        "round": command["round"],
        "rc": rc,
        "result": result,
        "seconds": seconds,
        "sampling": sampling,
        "pid": os.getpid(),
        "began": started,
    }


def _preload() -> dict[str, float]:
    """A warm parent's imports beyond the benchmark's module: the models' optional packages, each timed (absent ones,
    or ones this torch cannot import, are left to the round, which then skips with the model's own reason)."""
    timed: dict[str, float] = {}
    try:
        packages = importlib.import_module("mpsbench.measure.models").PRELOADED
    except Exception:  # a suite without the list: the round imports what it needs
        return timed
    for package in packages:
        clock = time.perf_counter()
        try:
            importlib.import_module(package)
        except Exception:
            continue
        timed[package] = time.perf_counter() - clock
    return timed


def _touched_device(torch: Any) -> str | None:
    """Why this process must not fork a round: a device runtime it has started (None when it started none)."""
    cuda = getattr(torch, "cuda", None)
    if cuda is not None and getattr(cuda, "is_initialized", lambda: False)():
        return "CUDA is initialized in the warm parent"
    mps = getattr(getattr(torch, "backends", None), "mps", None)
    if sys.platform == "darwin" and mps is not None:
        return "a process on macOS that may have loaded Metal must not fork"
    return None


def _forked_round(
    benchmark_dir: str, benchmark_id: str, command: dict[str, Any], timeout: float, parent: int
) -> dict[str, Any]:
    """Fork a child that runs one round and ends; the child's reply (or NO_REPLY with its wait status)."""
    for pid in _ENDING:  # the children that replied before have ended by now (the other builds' rounds ran)
        os.waitpid(pid, 0)
    _ENDING.clear()
    asked = time.perf_counter()
    read, write = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    child = os.fork()
    if (
        child == 0
    ):  # the child: it alone touches the device; it ends with its parent, as the parent does with compare
        status = 1
        try:
            os.close(read)
            _die_with(parent)
            with os.fdopen(write, "w") as own:
                said = _round(benchmark_dir, benchmark_id, command, timeout, own)
                said["forked"] = said.pop("began") - asked
                _say(own, said)
            status = 0
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(status)
    os.close(write)
    with os.fdopen(read) as replies:
        line = replies.readline()
    if line:  # its exit (a device context's teardown) overlaps the next build's setup, not this reply
        _ENDING.append(child)
        print(f"serve_build: round {command['round']} replied in {time.perf_counter() - asked:.2f} s", flush=True)
        reply: dict[str, Any] = json.loads(line)
        return reply
    _, status = os.waitpid(child, 0)
    return {
            "round": command["round"],
            "rc": NO_REPLY,
            "result": None,
            "seconds": time.perf_counter() - asked,
        "status": status,
    }


def main(argv: list[str]) -> int:
    benchmark_dir, benchmark_id, torch_dir, mode, reply_fd, parent = argv
    reply = os.fdopen(int(reply_fd), "w")
    _die_with(int(parent))
    _site_without_switch()
    if mode not in MODES:
        _say(reply, {"error": f"unknown mode {mode!r}: {' or '.join(MODES)}"})
        return 2
    clock = time.perf_counter()
    import torch

    imported = {"torch": time.perf_counter() - clock}
    where, version = os.path.abspath(torch.__file__), getattr(torch, "__version__", "?")
    # by the path it was imported through, not the one its links resolve to: a build may be a folder of links to
    # another torch's files (a slowed build: docs/explanation/the-rule.md), and is then that folder's build
    if not any(
        path.startswith(os.path.join(base, ""))
        for path, base in (
            (where, os.path.abspath(torch_dir)),
            (os.path.realpath(where), os.path.realpath(torch_dir)),
        )
    ):
        _say(
            reply,
            {
                "error": f"torch {version} was imported from {os.path.dirname(where)}, not from the"
                f" build's {torch_dir}: refusing to measure it as this build"
            },
        )
        return 3
    clock = time.perf_counter()
    from asv_runner.discovery import get_benchmark_from_name

    imported["asv_runner"] = time.perf_counter() - clock
    clock = time.perf_counter()
    benchmark = get_benchmark_from_name(
        benchmark_dir, benchmark_id
    )  # imports the benchmark's module
    imported["benchmark module"] = time.perf_counter() - clock
    timeout = float(benchmark.timeout or DEFAULT_TIMEOUT)
    if mode == FORK:
        imported.update(_preload())
        refused = _touched_device(torch)
        if refused is not None:
            _say(reply, {"error": f"cannot fork rounds: {refused}"})
            return 3
        # the imported modules' objects go to the collector's permanent generation: a child's collections no longer
        # walk them or copy their pages (docs/explanation/budget.md, "The forked lookup's collections")
        gc.freeze()
    _say(
        reply,
        {
            "ready": True,
            "pid": os.getpid(),
            "torch": version,
            "torch_file": where,
            "mode": mode,
            "started": STARTED,
            "imported": imported,
            "timeout": timeout,
        },
    )
    if mode == SPAWN:
        line = sys.stdin.readline()
        if line:
            said = _round(benchmark_dir, benchmark_id, json.loads(line), timeout, reply)
            said.pop("began")
            _say(reply, said)
        return 0
    for line in sys.stdin:  # until compare closes the pipe
        _say(
            reply,
            _forked_round(benchmark_dir, benchmark_id, json.loads(line), timeout, os.getpid()),
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
