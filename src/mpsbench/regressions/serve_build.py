"""A build server: the asv environment's python with ONE build on sys.path, running rounds of one combination
through asv_runner's own steps, without asv's CLI, discovery or environment switch. Standard library and asv_runner
only, as ``python -S``: install_build's .pth is skipped, so the only build is the one PYTHONPATH names.

    python -S serve_build.py BENCHMARK_DIR BENCHMARK_ID TORCH_DIR MODE REPLY_FD PARENT_PID

MODE ``spawn`` runs one round and ends; ``fork`` is a warm parent that forks a child a round before any device is
touched (docs/explanation/loop.md). Commands come on stdin, replies go to REPLY_FD: a JSON line each.
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

PTH_NAME = "mpsbench_build.pth"  # install_build.PTH_NAME: the switch a server must not take
DEFAULT_TIMEOUT = 60.0  # asv's default_benchmark_timeout
TIMED_OUT = -256  # the status asv's forkserver reports for a benchmark stopped at its timeout
NO_REPLY = (
    -257
)  # a forked child that ended without a reply (native code): its wait status comes instead
SPAWN, FORK = MODES = ("spawn", "fork")
_ENDING: list[int] = []  # forked children that replied, reaped before the next fork


def _site_without_switch() -> None:
    """The environment's site-packages and .pth files, except install_build's switch."""
    venv = os.path.dirname(os.path.dirname(os.path.abspath(sys.executable)))
    if os.path.isfile(os.path.join(venv, "pyvenv.cfg")):  # what site.venv() does, which -S skipped
        sys.prefix = sys.exec_prefix = venv
    # a venv's own scheme: Debian's default, posix_local, is not a venv's
    names = sysconfig.get_scheme_names()
    scheme = "venv" if "venv" in names else ("nt" if os.name == "nt" else "posix_prefix")
    paths = sysconfig.get_paths(scheme, vars={"base": sys.prefix, "platbase": sys.exec_prefix})
    purelib = paths["purelib"]
    known = set(sys.path) | {purelib}
    sys.path.append(purelib)
    for name in sorted(os.listdir(purelib)):
        if name.endswith(".pth") and name != PTH_NAME:
            site.addpackage(purelib, name, known)


def _die_with(parent: int) -> None:
    """End this process when ``parent`` ends, however it ends: no server outlives compare."""
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:  # it ended before prctl took
            os._exit(1)
        return

    def watch() -> None:  # macOS has no such call
        while os.getppid() == parent:
            time.sleep(0.2)
        os._exit(1)

    threading.Thread(target=watch, daemon=True).start()


def _say(reply: TextIO, message: dict[str, Any]) -> None:
    reply.write(json.dumps(message) + "\n")
    reply.flush()


def _run_round(dir_: str, bench_id: str, command: dict[str, Any]) -> tuple[int, Any, float]:
    """One round as asv_runner's private ``run._run`` runs it: 0 and the result if it ran, 1 and None if it raised
    (the traceback in the log, as asv reports it); and the seconds of asv's timing loop."""
    from asv_runner.benchmarks.mark import SkipNotImplemented
    from asv_runner.discovery import get_benchmark_from_name

    sampling = 0.0
    try:
        os.chdir(command["workdir"])
        benchmark = get_benchmark_from_name(dir_, bench_id, extra_params=command["params"])
        cache = None
        if benchmark.setup_cache_key is not None:
            with open("cache.pickle", "rb") as handle:
                cache = pickle.load(handle)
        benchmark.set_cache(cache)
        result: Any = math.nan
        try:
            if not benchmark.do_setup():
                clock = time.perf_counter()
                with contextlib.suppress(SkipNotImplemented):
                    result = benchmark.do_run()
                sampling = time.perf_counter() - clock
        finally:
            benchmark.do_teardown()
        return 0, json.loads(json.dumps(result)), sampling
    except BaseException:
        traceback.print_exc()
        return 1, None, sampling
    finally:
        sys.stdout.flush()
        sys.stderr.flush()


def _round(
    dir_: str,
    bench_id: str,
    command: dict[str, Any],
    timeout: float,
    reply: TextIO,
    asked: float | None = None,
) -> dict[str, Any]:
    """One round's reply; a forked one's (``asked``: when it was forked) says how long the fork took."""
    number = command["round"]
    started = time.perf_counter()
    print(f"serve_build: round {number} of {bench_id}", flush=True)

    def late() -> None:
        _say(reply, {"round": number, "rc": TIMED_OUT, "result": None, "seconds": timeout})
        os._exit(1)

    alarm = threading.Timer(timeout, late)
    alarm.daemon = True
    alarm.start()
    rc, result, sampling = _run_round(dir_, bench_id, command)
    alarm.cancel()
    seconds = time.perf_counter() - started
    print(
        f"serve_build: round {number} ended: status {rc} in {seconds:.2f} s (sampling {sampling:.2f} s)"
    )
    said = {"round": number, "rc": rc, "result": result, "seconds": seconds, "sampling": sampling}
    return said | {"pid": os.getpid()} | ({} if asked is None else {"forked": started - asked})


def _preload() -> dict[str, float]:
    """A warm parent's imports of the models' packages, timed."""
    timed: dict[str, float] = {}
    try:
        packages = importlib.import_module("mpsbench.measure.models").PRELOADED
    except Exception:
        return timed
    for package in packages:
        clock = time.perf_counter()
        with contextlib.suppress(Exception):
            importlib.import_module(package)
            timed[package] = time.perf_counter() - clock
    return timed


def _forked_round(
    dir_: str, bench_id: str, command: dict[str, Any], timeout: float, parent: int
) -> dict[str, Any]:
    """A child that runs one round and ends; its reply (or NO_REPLY with its wait status)."""
    for pid in _ENDING:  # ended while the other builds' rounds ran
        os.waitpid(pid, 0)
    _ENDING.clear()
    asked = time.perf_counter()
    read, write = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    child = os.fork()
    if child == 0:  # it alone touches the device
        status = 1
        try:
            os.close(read)
            _die_with(parent)
            with os.fdopen(write, "w") as own:
                _say(own, _round(dir_, bench_id, command, timeout, own, asked))
            status = 0
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(status)
    os.close(write)
    with os.fdopen(read) as replies:
        line = replies.readline()
    waited = time.perf_counter() - asked
    if not line:
        status = os.waitpid(child, 0)[1]
        return {"round": command["round"], "rc": NO_REPLY, "seconds": waited, "status": status}
    # its exit (a device context's teardown) overlaps the next build's setup, not this reply
    _ENDING.append(child)
    print(f"serve_build: round {command['round']} replied in {waited:.2f} s", flush=True)
    reply: dict[str, Any] = json.loads(line)
    return reply


def main(argv: list[str]) -> int:
    dir_, bench_id, torch_dir, mode, reply_fd, parent = argv
    reply = os.fdopen(int(reply_fd), "w")
    _die_with(int(parent))
    _site_without_switch()
    if mode not in MODES:
        _say(reply, {"error": f"unknown mode {mode!r}: {' or '.join(MODES)}"})
        return 2
    import torch

    where, version = os.path.abspath(torch.__file__), getattr(torch, "__version__", "?")
    # as imported or as its links resolve: a build may be a folder of links
    pairs = (
        (where, os.path.abspath(torch_dir)),
        (os.path.realpath(where), os.path.realpath(torch_dir)),
    )
    if not any(path.startswith(os.path.join(base, "")) for path, base in pairs):
        said = f"torch {version} was imported from {os.path.dirname(where)}, not from the build's {torch_dir}"
        _say(reply, {"error": f"{said}: refusing to measure it as this build"})
        return 3
    from asv_runner.discovery import get_benchmark_from_name

    benchmark = get_benchmark_from_name(dir_, bench_id)  # imports the benchmark's module
    timeout = float(benchmark.timeout or DEFAULT_TIMEOUT)
    if mode == FORK:
        _preload()
        cuda = getattr(torch, "cuda", None)
        if cuda is not None and cuda.is_initialized():  # the context belongs in the child
            _say(reply, {"error": "cannot fork rounds: CUDA is initialized in the warm parent"})
            return 3
        gc.freeze()  # a child's collections neither walk nor copy the imported objects
    ready = {"ready": True, "pid": os.getpid(), "torch": version, "torch_file": where}
    _say(reply, ready | {"mode": mode, "timeout": timeout})
    if mode == SPAWN:
        line = sys.stdin.readline()
        if line:
            _say(reply, _round(dir_, bench_id, json.loads(line), timeout, reply))
        return 0
    for line in sys.stdin:  # until compare closes the pipe
        _say(reply, _forked_round(dir_, bench_id, json.loads(line), timeout, os.getpid()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
