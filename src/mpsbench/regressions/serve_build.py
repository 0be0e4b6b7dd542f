"""``python -S serve_build.py BENCHMARK_DIR BENCHMARK_ID TORCH_DIR MODE REPLY_FD PARENT_PID``: one
build's rounds of one combination, spawned or forked (docs/explanation/loop.md)."""

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

PTH_NAME = "mpsbench_build.pth"  # install_build's switch, which a server must not take
DEFAULT_TIMEOUT = 60.0  # asv's default_benchmark_timeout
TIMED_OUT = -256  # asv's status for a timed-out benchmark
NO_REPLY = -257
SPAWN, FORK = "spawn", "fork"
_ENDING: list[int] = []  # replied children, reaped before the next fork


def _site_without_switch() -> None:
    venv = os.path.dirname(os.path.dirname(os.path.abspath(sys.executable)))
    if os.path.isfile(os.path.join(venv, "pyvenv.cfg")):  # site.venv()'s work, which -S skipped
        sys.prefix = sys.exec_prefix = venv
    # Debian's default scheme, posix_local, is not a venv's
    scheme = "venv" if "venv" in sysconfig.get_scheme_names() else "posix_prefix"
    purelib = sysconfig.get_path(
        "purelib", scheme, {"base": sys.prefix, "platbase": sys.exec_prefix}
    )
    sys.path.append(purelib)
    known = set(sys.path)
    for name in sorted(os.listdir(purelib)):
        if name.endswith(".pth") and name != PTH_NAME:
            site.addpackage(purelib, name, known)


def _die_with(parent: int) -> None:
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:  # ended before prctl took
            os._exit(1)
        return

    def watch() -> None:  # macOS has no prctl
        while os.getppid() == parent:
            time.sleep(0.2)
        os._exit(1)

    threading.Thread(target=watch, daemon=True).start()


def torch_from(torch_dir: str) -> Any:
    """torch, or RuntimeError if it is not imported from ``torch_dir``."""
    import torch

    where = os.path.abspath(torch.__file__)
    if not any(
        resolve(where).startswith(os.path.join(resolve(torch_dir), ""))
        for resolve in (os.path.abspath, os.path.realpath)
    ):
        raise RuntimeError(
            f"torch {getattr(torch, '__version__', '?')} was imported from"
            f" {os.path.dirname(where)}, not from the build's {torch_dir}"
        )
    return torch


def _flush() -> None:
    sys.stdout.flush()
    sys.stderr.flush()


def _say(reply: TextIO, message: dict[str, Any]) -> None:
    print(json.dumps(message), file=reply, flush=True)


def _round(
    dir_: str,
    bench_id: str,
    command: dict[str, Any],
    timeout: float,
    reply: TextIO,
    asked: float | None = None,
) -> dict[str, Any]:
    """One round as asv_runner's private ``run._run`` runs it, stopped at ``timeout``."""
    from asv_runner.benchmarks.mark import SkipNotImplemented
    from asv_runner.discovery import get_benchmark_from_name

    number, started = command["round"], time.perf_counter()
    print(f"serve_build: round {number} of {bench_id}", flush=True)

    def late() -> None:
        _say(reply, {"round": number, "rc": TIMED_OUT, "result": None, "seconds": timeout})
        os._exit(1)

    alarm = threading.Timer(timeout, late)
    alarm.daemon = True
    alarm.start()
    rc, result, sampling = 1, None, 0.0
    try:
        os.chdir(command["workdir"])
        benchmark = get_benchmark_from_name(dir_, bench_id, extra_params=command["params"])
        if benchmark.setup_cache_key is None:
            benchmark.set_cache(None)
        else:
            with open("cache.pickle", "rb") as handle:
                benchmark.set_cache(pickle.load(handle))
        result = math.nan
        try:
            if not benchmark.do_setup():
                clock = time.perf_counter()
                with contextlib.suppress(SkipNotImplemented):
                    result = benchmark.do_run()
                sampling = time.perf_counter() - clock
        finally:
            benchmark.do_teardown()
        rc, result = 0, json.loads(json.dumps(result))
    except BaseException:
        traceback.print_exc()
        result = None
    _flush()
    alarm.cancel()
    seconds = time.perf_counter() - started
    print(
        f"serve_build: round {number} ended: status {rc} in {seconds:.2f} s"
        f" (sampling {sampling:.2f} s)"
    )
    said = {
        "round": number,
        "rc": rc,
        "result": result,
        "seconds": seconds,
        "sampling": sampling,
        "pid": os.getpid(),
    }
    if asked is not None:
        said["forked"] = started - asked
    return said


def _preload() -> dict[str, float]:
    timed: dict[str, float] = {}
    with contextlib.suppress(Exception):
        for package in importlib.import_module("mpsbench.measure.models").PRELOADED:
            clock = time.perf_counter()
            with contextlib.suppress(Exception):
                importlib.import_module(package)
                timed[package] = time.perf_counter() - clock
    return timed


def _forked_round(
    dir_: str, bench_id: str, command: dict[str, Any], timeout: float
) -> dict[str, Any]:
    for pid in _ENDING:
        os.waitpid(pid, 0)
    _ENDING.clear()
    asked, parent = time.perf_counter(), os.getpid()
    read, write = os.pipe()
    _flush()
    child = os.fork()
    if child == 0:
        status = 1
        try:
            os.close(read)
            _die_with(parent)
            with os.fdopen(write, "w") as own:
                _say(own, _round(dir_, bench_id, command, timeout, own, asked))
            status = 0
        finally:
            _flush()
            os._exit(status)
    os.close(write)
    with os.fdopen(read) as replies:
        line = replies.readline()
    waited = time.perf_counter() - asked
    if not line:
        status = os.waitpid(child, 0)[1]
        return {"round": command["round"], "rc": NO_REPLY, "seconds": waited, "status": status}
    # reaped later: its exit overlaps the next build's setup
    _ENDING.append(child)
    print(f"serve_build: round {command['round']} replied in {waited:.2f} s", flush=True)
    return dict(json.loads(line))


def main(argv: list[str]) -> int:
    dir_, bench_id, torch_dir, mode, reply_fd, parent = argv
    reply = os.fdopen(int(reply_fd), "w")
    _die_with(int(parent))
    _site_without_switch()
    try:
        torch = torch_from(torch_dir)
    except RuntimeError as exc:
        _say(reply, {"error": f"{exc}: refusing to measure it as this build"})
        return 3
    from asv_runner.discovery import get_benchmark_from_name

    benchmark = get_benchmark_from_name(dir_, bench_id)
    timeout = float(benchmark.timeout or DEFAULT_TIMEOUT)
    if mode == FORK:
        _preload()
        cuda = getattr(torch, "cuda", None)
        if cuda is not None and cuda.is_initialized():  # a forked child cannot use it
            _say(reply, {"error": "cannot fork rounds: CUDA is initialized in the warm parent"})
            return 3
        gc.freeze()  # children's collections neither walk nor copy the imports
    _say(
        reply,
        {
            "ready": True,
            "pid": os.getpid(),
            "torch": getattr(torch, "__version__", "?"),
            "torch_file": os.path.abspath(torch.__file__),
            "mode": mode,
            "timeout": timeout,
        },
    )
    for line in sys.stdin:
        if mode == SPAWN:
            _say(reply, _round(dir_, bench_id, json.loads(line), timeout, reply))
            return 0
        _say(reply, _forked_round(dir_, bench_id, json.loads(line), timeout))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
