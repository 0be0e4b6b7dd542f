"""A build server: the asv environment's python with ONE build on sys.path, running rounds of one combination.

compare and bisect (mpsbench/regressions/servers.py) start one per build. It imports torch and the benchmark's
module once, then runs each round through asv_runner's own code (the steps of its ``run._run``: the benchmark found by
name, its parameter index set, ``do_setup``, ``do_run`` with asv's ``-a`` attributes, ``do_teardown``), so a sample is
timed by asv's own timer, exactly as ``asv run`` times it. What it saves per round: the interpreter, the imports,
asv's CLI and discovery, and the environment switch (install_build.py's uninstall and install).

Run inside the asv environment with the standard library and asv_runner only (like install_build.py: nothing of
mpsbench is imported here), as ``python -S``: the environment's site-packages is added without install_build's
.pth (the build asv switched in last), so the only build on sys.path is the one PYTHONPATH names.

    python -S serve_build.py fork|once BENCHMARK_DIR BENCHMARK_ID TORCH_DIR REPLY_FD PARENT_PID

fork (Linux): each round is a child forked from this process, as asv's forkserver forks one; this process imports
    and never runs a benchmark or touches a device (CUDA must not be initialized before a fork).
once (macOS: fork is unsafe once Metal and Objective-C are loaded, so asv spawns there): the round runs in this
    process, which then exits; every round is a fresh process.

Commands come on stdin, one JSON object a line: ``{"round": N, "params": {asv's -a}, "workdir": DIR}``. Replies go
to REPLY_FD, one JSON line each: first ``{"ready": ...}`` or ``{"error": ...}``, then per round
``{"round": N, "rc": STATUS, "result": asv_runner's result, "seconds": ...}``. Stdout and stderr are the log.
"""

from __future__ import annotations

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

STARTED = time.time()  # the interpreter is up: what came before is its start (servers.py timed the launch)
PTH_NAME = "mpsbench_build.pth"  # install_build.PTH_NAME, by name: the switch a server must not take
DEFAULT_TIMEOUT = 60.0  # asv's default_benchmark_timeout, for a benchmark that sets none
TIMED_OUT = -256  # the status asv's forkserver reports for a benchmark it stopped at its timeout
_PR_SET_PDEATHSIG = 1


def _site_without_switch() -> None:
    """The environment's site-packages and its .pth files (what ``site`` adds), except install_build's switch."""
    venv = os.path.dirname(os.path.dirname(os.path.abspath(sys.executable)))
    if os.path.isfile(os.path.join(venv, "pyvenv.cfg")):  # what site.venv() does, which -S skipped
        sys.prefix = sys.exec_prefix = venv
    # the virtual environment's own scheme: a distribution's default one may differ (Debian's and Ubuntu's Pythons
    # give posix_local, .../local/lib/python3.X/dist-packages, which a venv does not have)
    scheme = "venv" if "venv" in sysconfig.get_scheme_names() else ("nt" if os.name == "nt" else "posix_prefix")
    purelib = sysconfig.get_paths(scheme, vars={"base": sys.prefix, "platbase": sys.exec_prefix})["purelib"]
    known = set(sys.path)
    sys.path.append(purelib)
    known.add(purelib)
    for name in sorted(os.listdir(purelib)):
        if name.endswith(".pth") and name != PTH_NAME:
            site.addpackage(purelib, name, known)


def _die_with(parent: int, signum: int) -> None:
    """End this process when ``parent`` ends, however it ends (kill -9 included): no server outlives compare."""
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signum)
        if os.getppid() != parent:  # it ended before prctl took
            os._exit(1)
        return

    def watch() -> None:  # elsewhere (macOS) no such call: look every 0.2 s (no fork follows in "once" mode)
        while os.getppid() == parent:
            time.sleep(0.2)
        os._exit(1)

    threading.Thread(target=watch, daemon=True).start()


def _say(reply: TextIO, message: dict[str, Any]) -> None:
    reply.write(json.dumps(message) + "\n")
    reply.flush()


def _run_round(args: tuple[str, str, str, str, str], workdir: str) -> int:
    """One round as asv's benchmark process runs it; 0 if it ran, 1 if it raised.

    The steps of asv_runner's own ``run._run`` (its module-private entry point), through its public pieces: the
    benchmark found by name with asv's ``-a`` attributes, its ``setup_cache`` result where it has one, ``do_setup``,
    ``do_run`` (n/a as NaN for a skip), ``do_teardown``; the result written where asv reads it.
    """
    from asv_runner.benchmarks.mark import SkipNotImplemented
    from asv_runner.discovery import get_benchmark_from_name

    benchmark_dir, benchmark_id, params, _profile, result_file = args
    try:
        os.chdir(workdir)
        benchmark = get_benchmark_from_name(benchmark_dir, benchmark_id, extra_params=json.loads(params))
        if benchmark.setup_cache_key is not None:
            with open("cache.pickle", "rb") as handle:
                benchmark.set_cache(pickle.load(handle))
        else:
            benchmark.set_cache(None)
        result: Any = math.nan
        skip = benchmark.do_setup()
        try:
            if not skip:
                try:
                    result = benchmark.do_run()
                except SkipNotImplemented:
                    result = math.nan
        finally:
            benchmark.do_teardown()
        with open(result_file, "w") as handle:
            json.dump(result, handle)
        return 0
    except BaseException:  # reported as asv reports it: the traceback in the log, status 1
        traceback.print_exc()
        return 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()


def _forked(args: tuple[str, str, str, str, str], workdir: str, timeout: float) -> int:
    """The round in a forked child, stopped at ``timeout`` as asv's forkserver stops it (SIGTERM, then SIGKILL)."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            _die_with(os.getppid(), signal.SIGKILL)
            code = _run_round(args, workdir)
        finally:
            os._exit(code)
    deadline, stopping = time.monotonic() + timeout, 0.0
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        now = time.monotonic()
        if now > deadline and not stopping:
            os.kill(pid, signal.SIGTERM)
            stopping = now
        elif stopping and now > stopping + 2:
            os.kill(pid, signal.SIGKILL)
        time.sleep(0.005)
    if stopping:
        return TIMED_OUT
    return os.waitstatus_to_exitcode(status)


def _round(mode: str, benchmark_dir: str, benchmark_id: str, command: dict[str, Any], timeout: float,
           reply: TextIO) -> dict[str, Any]:
    workdir = str(command["workdir"])
    result_file = os.path.join(workdir, "result.json")
    args = (benchmark_dir, benchmark_id, json.dumps(command["params"]), "None", result_file)
    started = time.perf_counter()
    print(f"serve_build: round {command['round']} of {benchmark_id} ({mode})", flush=True)
    if mode == "fork":
        rc = _forked(args, workdir, timeout)
    else:
        def late() -> None:
            _say(reply, {"round": command["round"], "rc": TIMED_OUT, "result": None, "seconds": timeout})
            os._exit(1)

        alarm = threading.Timer(timeout, late)
        alarm.daemon = True
        alarm.start()
        rc = _run_round(args, workdir)
        alarm.cancel()
    try:
        with open(result_file) as handle:
            result = json.load(handle)
    except (OSError, ValueError):
        result = None
    seconds = time.perf_counter() - started
    print(f"serve_build: round {command['round']} ended: status {rc} in {seconds:.2f} s", flush=True)
    return {"round": command["round"], "rc": rc, "result": result, "seconds": seconds}


def main(argv: list[str]) -> int:
    mode, benchmark_dir, benchmark_id, torch_dir, reply_fd, parent = argv
    reply = os.fdopen(int(reply_fd), "w")
    _die_with(int(parent), signal.SIGTERM)
    _site_without_switch()
    clock = time.perf_counter()
    import torch

    imported = {"torch": time.perf_counter() - clock}
    where, version = os.path.abspath(torch.__file__), getattr(torch, "__version__", "?")
    # by the path it was imported through, not the one its links resolve to: a build may be a folder of links to
    # another torch's files (docs/bisect.md, "On the H100"), and is then that folder's build
    if not any(path.startswith(os.path.join(base, "")) for path, base in (
            (where, os.path.abspath(torch_dir)), (os.path.realpath(where), os.path.realpath(torch_dir)))):
        _say(reply, {"error": f"torch {version} was imported from {os.path.dirname(where)}, not from the"
                              f" build's {torch_dir}: refusing to measure it as this build"})
        return 3
    clock = time.perf_counter()
    from asv_runner.discovery import get_benchmark_from_name

    imported["asv_runner"] = time.perf_counter() - clock
    clock = time.perf_counter()
    benchmark = get_benchmark_from_name(benchmark_dir, benchmark_id)  # imports the benchmark's module
    imported["benchmark module"] = time.perf_counter() - clock
    cuda = getattr(torch, "cuda", None)
    if mode == "fork" and cuda is not None and cuda.is_initialized():
        _say(reply, {"error": f"importing {benchmark_id}'s module initialized CUDA: a forked round could not use it"})
        return 3
    timeout = float(benchmark.timeout or DEFAULT_TIMEOUT)
    _say(reply, {"ready": True, "pid": os.getpid(), "torch": version, "torch_file": where,
                 "started": STARTED, "imported": imported, "timeout": timeout})
    for line in sys.stdin:
        _say(reply, _round(mode, benchmark_dir, benchmark_id, json.loads(line), timeout, reply))
        if mode == "once":
            break
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
