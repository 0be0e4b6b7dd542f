"""Build servers (mpsbench/regressions/servers.py, serve_build.py): real processes over stand-in torch folders.

The fast tests start a server of this interpreter (it holds asv_runner) with a stand-in torch on PYTHONPATH and a
tiny benchmark folder; the slow ones run `mpsbench compare` over test_compare.py's stand-in builds: a kill -9 of
compare must take every server with it, and asv's spawn (macOS's launch method) must still measure right.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from tests.test_compare import BENCH, ROOT, _mpsbench
from tests.test_compare import project as project  # the module's fixture, shared (re-exported)

from mpsbench.builds import install_build, resolve, timeline
from mpsbench.builds import manifest as mf
from mpsbench.core import asv as core_asv
from mpsbench.core import asvconf, settings
from mpsbench.core.errors import UserError
from mpsbench.regressions import fresh, serve_build, servers, verdict
from mpsbench.results import recorded

BENCHMARK = """\
import os
import time

import torch


class Step:
    params = ([1, 2],)
    param_names = ["n"]
    timeout = 5

    def setup(self, n):
        if n == 2 and os.environ.get("SKIP_TWO"):
            raise NotImplementedError("two is skipped here")

    def time_sleep(self, n):
        time.sleep(torch.DELAY * n)

    def time_hang(self, n):
        time.sleep(60)

    def time_crash(self, n):
        os._exit(7)  # native code dying: no traceback, no result, no reply
"""


def _folder(base: Path, name: str, delay: float) -> Path:
    """A folder holding a stand-in torch module (what a build's cached install dir holds)."""
    (base / name / "torch").mkdir(parents=True)
    (base / name / "torch" / "__init__.py").write_text(
        f"__version__ = '0.0+{name}'\nDELAY = {delay}\n"
    )
    return base / name


def _server(
    tmp_path: Path,
    torch_from: Path,
    expected: Path,
    benchmark_id: str = "bench_step.Step.time_sleep-0",
    env: dict[str, str] | None = None,
    mode: str = servers.SPAWN,
) -> servers.Server:
    bench = tmp_path / "benchmarks"
    if not bench.is_dir():
        (bench / "bench_step.py").parent.mkdir()
        (bench / "__init__.py").write_text("")
        (bench / "bench_step.py").write_text(BENCHMARK)
    placed = servers.Placed("exam@x", [str(torch_from)], str(expected / "torch"), {})
    return servers.Server(
        Path(sys.executable),
        placed,
        bench,
        benchmark_id,
        dict(os.environ, **(env or {})),
        tmp_path,
        mode,
    )


def test_a_server_runs_each_round_as_asv_does_in_a_fresh_process(tmp_path):
    folder = _folder(tmp_path, "a", 0.002)
    server = _server(tmp_path, folder, folder)
    try:
        server.start()
        ready = server.ready()
        assert ready["torch"] == "0.0+a" and ready["torch_file"].startswith(str(folder))
        assert ready["timeout"] == 5  # the benchmark's own timeout, as asv reads it
        said = [server.round(number, {"repeat": 7}) for number in (1, 2)]
    finally:
        server.stop()
    assert [s["rc"] for s in said] == [0, 0]
    assert all(
        len(s["result"]["samples"]) == 7 for s in said
    )  # asv's -a repeat reached asv_runner's timer
    assert all(
        min(s["result"]["samples"]) > 0.0015 for s in said
    )  # the stand-in build's 2 ms sleep was timed
    assert server.log.read_text().count(" ended: status 0 in ") == 2


def test_a_warm_parent_imports_once_and_forks_a_fresh_child_a_round(tmp_path):
    folder = _folder(tmp_path, "a", 0.002)
    server = _server(tmp_path, folder, folder, mode=servers.FORK)
    try:
        server.start()
        ready = server.ready()
        parent = server.process
        assert ready["mode"] == servers.FORK and ready["torch"] == "0.0+a"
        said = [server.round(number, {"repeat": 7}) for number in (1, 2, 3)]
        assert (
            server.process is parent and parent.poll() is None
        )  # the parent stays for the next round
        children = psutil.Process(parent.pid).children()
    finally:
        server.stop()
    pids = [s["pid"] for s in said]
    # a child's exit overlaps the next round, and the parent reaps it before its next fork: the last may be ending
    assert {child.pid for child in children} <= {pids[-1]}
    assert [s["rc"] for s in said] == [0, 0, 0]
    assert (
        len(set(pids)) == 3 and ready["pid"] not in pids
    )  # a child of its own a round, never the parent
    assert all(s["forked"] >= 0 for s in said)
    assert all(
        len(s["result"]["samples"]) == 7 and min(s["result"]["samples"]) > 0.0015 for s in said
    )
    assert server.log.read_text().count(" ended: status 0 in ") == 3


def test_a_forked_round_that_hangs_or_dies_says_so_and_the_parent_serves_on(tmp_path):
    folder = _folder(tmp_path, "a", 0.002)
    hangs = _server(tmp_path, folder, folder, "bench_step.Step.time_hang-0", mode=servers.FORK)
    dies = _server(tmp_path, folder, folder, "bench_step.Step.time_crash-0", mode=servers.FORK)
    try:
        for server in (hangs, dies):
            server.start()
            server.ready()
        late = hangs.round(1, {"repeat": 3})
        assert (late["rc"], late["result"], late["seconds"]) == (servers.TIMED_OUT, None, 5.0)
        for number in (1, 2):  # a child's crash costs its round only
            crashed = dies.round(number, {"repeat": 3})
            assert crashed["rc"] == serve_build.NO_REPLY and os.WEXITSTATUS(crashed["status"]) == 7
        assert dies.process is not None and dies.process.poll() is None
    finally:
        hangs.stop()
        dies.stop()


@pytest.mark.parametrize(
    ("device", "env", "platform", "made"),
    [
        ("cuda", {}, "linux", servers.FORK),
        ("cpu", {}, "linux", servers.SPAWN),
        ("mps", {}, "darwin", servers.SPAWN),
        (None, {}, "linux", servers.SPAWN),
        ("cpu", {fresh.ROUND_PROCESS: "fork"}, "linux", servers.FORK),
        ("cuda", {fresh.ROUND_PROCESS: "spawn"}, "linux", servers.SPAWN),
        ("cuda", {}, "darwin", servers.SPAWN),
    ],
)
def test_each_device_gets_the_round_process_its_a_a_chose(monkeypatch, device, env, platform, made):
    monkeypatch.setattr(sys, "platform", platform)
    assert fresh.round_process(device, env) == made


@pytest.mark.parametrize(
    ("value", "platform", "says"),
    [
        ("forks", "linux", "MPSBENCH_ROUND_PROCESS='forks': give fork or spawn"),
        ("fork", "darwin", "this platform (darwin) runs every round spawned"),
    ],
)
def test_a_bad_round_process_is_refused_in_one_line(monkeypatch, value, platform, says):
    monkeypatch.setattr(sys, "platform", platform)
    with pytest.raises(UserError, match=re.escape(says)):
        fresh.round_process("cuda", {fresh.ROUND_PROCESS: value})


def test_a_server_refuses_a_build_whose_torch_comes_from_elsewhere(tmp_path):
    wrong, expected = _folder(tmp_path, "a", 0.002), _folder(tmp_path, "b", 0.002)
    server = _server(tmp_path, wrong, expected)
    try:
        server.start()
        with pytest.raises(
            UserError,
            match=r"was imported from .*/a/torch, not from the build's .*/b/torch",
        ):
            server.ready()
    finally:
        server.stop()


def test_a_round_that_skips_or_hangs_says_so(tmp_path):
    folder = _folder(tmp_path, "a", 0.002)
    skipped = _server(
        tmp_path, folder, folder, "bench_step.Step.time_sleep-1", env={"SKIP_TWO": "1"}
    )
    hangs = _server(tmp_path, folder, folder, "bench_step.Step.time_hang-0")
    try:
        for server in (skipped, hangs):
            server.start()
            server.ready()
        said = skipped.round(1, {"repeat": 3})
        assert said["rc"] == 0 and said["result"] != said["result"]  # NaN: asv's n/a
        # stopped at the benchmark's own 5 s, not its 60 s sleep's end
        assert hangs.round(1, {"repeat": 3}) == {
            "round": 1,
            "rc": servers.TIMED_OUT,
            "result": None,
            "seconds": 5.0,
        }
    finally:
        skipped.stop()
        hangs.stop()


def test_the_server_skips_the_switch_file_by_install_builds_name():
    assert serve_build.PTH_NAME == install_build.PTH_NAME


def test_the_switch_and_the_servers_put_the_same_paths_first(tmp_path, monkeypatch):
    """install_build's .pth and `paths` (what a server's PYTHONPATH holds) come from one function."""
    site = tmp_path / "site"
    site.mkdir()
    (tmp_path / "env").mkdir()
    folder = _folder(tmp_path, "existing", 0.0)
    (tmp_path / "build").mkdir()
    (tmp_path / "build" / "build.json").write_text(
        json.dumps(
            {
                "channel": "local",
                "id": "x",
                "kind": "existing",
                "site_packages": str(folder),
                "torch_version": "0.0",
                "env": {"MPSBENCH_X": "1"},
            }
        )
    )
    monkeypatch.setattr(install_build, "_site_packages", lambda: site)
    monkeypatch.setattr(install_build, "ensure_suite_needs", lambda key: "")
    install_build.install(tmp_path / "build", tmp_path / "env", ROOT / "src")
    placed = install_build.paths(tmp_path / "build", ROOT / "src")
    pth = (site / install_build.PTH_NAME).read_text().splitlines()
    assert pth[:2] == placed["paths"] == [str(folder), str(ROOT / "src")]
    assert placed["env"] == {"MPSBENCH_X": "1"} and placed["torch_dir"] == str(
        folder.resolve() / "torch"
    )


def _servers_of(project: Path) -> list[int]:
    return [
        proc.info["pid"]
        for proc in psutil.process_iter(["pid", "cmdline"])
        if any("serve_build.py" in part for part in proc.info["cmdline"] or [])
        and any(str(project) in part for part in proc.info["cmdline"] or [])
    ]


@pytest.mark.slow
def test_kill_9_of_compare_takes_every_server_and_round_with_it_within_5_s(project, tmp_path):
    env = dict(
        os.environ,
        HOME=str(project / "home"),
        MPSBENCH_CACHE=str(project / "cache"),
        PYTHONUNBUFFERED="1",
        MPSBENCH_PLATFORM="linux-x86_64-cpu",
        TMPDIR=str(tmp_path),
    )
    env.pop("PIP_FIND_LINKS", None)
    running = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mpsbench.cli",
            "compare",
            "exam@n1",
            "exam@s1",
            "-b",
            BENCH,
            "--min-rounds",
            "40",
            "--max-rounds",
            "40",
            "--suite-root",
            str(project / "suite"),
        ],
        cwd=project,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert running.stdout is not None
    seen = []
    for line in running.stdout:
        seen.append(line)
        if ": round 2/" in line:  # compare's progress line (stderr, merged here)
            break
    assert len(_servers_of(project)) == 2, "".join(seen)
    running.kill()
    running.wait()
    running.stdout.close()
    deadline = time.monotonic() + 5
    while _servers_of(project) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _servers_of(project), "a build server outlived compare's kill -9 by more than 5 s"


@pytest.mark.slow
def test_under_spawn_every_round_is_a_fresh_process_and_still_right(project, tmp_path):
    """macOS's launch method, here: asv.conf.json's linux entry set to spawn in a copy of the stand-in suite."""
    suite = tmp_path / "suite"
    shutil.copytree(project / "suite", suite, symlinks=True)
    conf = (
        (suite / "asv.conf.json")
        .read_text()
        .replace('{"linux": "forkserver"}', '{"linux": "spawn"}')
    )
    (suite / "asv.conf.json").write_text(conf)
    log = tmp_path / "compare.log"
    done = _mpsbench(
        project,
        "compare",
        "exam@n2",
        "exam@s1",
        "-b",
        BENCH,
        "--min-rounds",
        "4",
        "--max-rounds",
        "4",
        "--log",
        str(log),
        suite=suite,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "verdict: slower" in done.stdout
    # one server command per build, each round in a process of its own (the log keeps what each ran)
    text = log.read_text()
    assert text.count("serve_build.py ") == 2, text
    processes = int(
        re.search(r"over (\d+) processes", done.stdout).group(1)
    )  # the look that decided
    assert text.count("serve_build: round ") == 2 * 2 * processes, (
        text
    )  # each round begun and ended


def test_forked_rounds_from_one_warm_parent_a_build_still_measure_right(project, tmp_path):
    log = tmp_path / "compare.log"
    done = _mpsbench(
        project,
        "compare",
        "exam@n2",
        "exam@s1",
        "-b",
        BENCH,
        "--min-rounds",
        "4",
        "--max-rounds",
        "4",
        "--log",
        str(log),
        extra={fresh.ROUND_PROCESS: "fork"},
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "verdict: slower" in done.stdout
    text = log.read_text()
    # one warm parent a build for every round (its command once), each round begun and ended in a child
    assert text.count("serve_build.py ") == 2 and text.count(" fork\n") == 2, text
    processes = int(
        re.search(r"over (\d+) processes", done.stdout).group(1)
    )  # the look that decided
    assert len(re.findall(r"serve_build: round \d+ (?:of|ended)", text)) == 2 * 2 * processes, text


ROW = "Inference.time_step\\('cpu', 'lenet5', 32\\)"  # a cheap real row: 20 steps a timed call as asv run records it
SINGLE = 200  # compare's samples of one step in a process of this row (fresh.REPEAT_A_SECOND: 200 or 1 s)


@pytest.fixture(scope="module")
def real(tmp_path_factory):
    """A project of two builds of this environment's own torch (existing builds: nothing installed) and the real suite."""
    torch = pytest.importorskip("torch")
    base = tmp_path_factory.mktemp("real")
    manifest = mf.Manifest()
    for number, build_id in enumerate(("a1", "a2"), start=1):
        build = resolve.existing(
            Path(torch.__file__).parents[1], build_id=build_id, date=f"2026-11-0{number}T03:00:00Z"
        )
        manifest = mf.append(manifest, "aa", build)
    mf.save(manifest, base / "builds" / "manifest.json")
    timeline.generate(manifest, base / ".asv" / "timeline")
    suite = base / "suite"
    suite.mkdir()
    shutil.copy(ROOT / "asv.conf.json", suite / "asv.conf.json")
    for name in ("src", "benchmarks"):
        (suite / name).symlink_to(ROOT / name)
    (base / ".asv" / "results").mkdir()
    (base / "home").mkdir()
    return base


def _process_fastest(results: Path, machine: str, key: str, index: int, per: int) -> list[float]:
    """Each asv process's fastest sample, from asv's own results files (``per`` samples a process, appended)."""
    samples: list[float] = []
    for path in (results / machine).glob("*-*.json"):
        entry = recorded.read(path, machine)
        params = entry.get_result_params(key)
        samples.extend(entry.get_result_samples(key, params)[index] or [])
    return [min(samples[start : start + per]) for start in range(0, len(samples), per)]


@pytest.mark.slow
def test_the_servers_time_a_real_row_as_asv_run_does(real, tmp_path):
    """The new path and asv's own `asv run` (its forkserver, its env switch) agree within 10% on a real cpu row.

    compare times a cpu row one step a sample (settings.SINGLE_STEPS), so asv run is given the same setting and
    SINGLE samples a process here: what is checked is the path (timer, setup, process), not the sampling. Each path's
    fast mode (verdict.fast_mode: the processes within 1.5x of its fastest, what the rule judges) of its
    per-process fastest samples, 8 processes a path (4 rounds of two identical builds), one torch thread, run one
    after the other; a timer or a setup that differed would move one path, not the other. Not medians: on a busy
    machine contention only adds time, to whichever path it happens to meet (medians 2.64 against 1.97 ms at load
    8, the fastest processes 1.74 against 1.85 ms).
    """
    done = _mpsbench(
        real,
        "compare",
        "aa@a1",
        "aa@a2",
        "-b",
        ROW,
        "--threads",
        "1",
        "--min-rounds",
        "6",  # above verdict.MIN_ROUNDS: no early look, which may decide at round 3
        "--max-rounds",
        "6",
    )
    assert done.returncode in (0, 3), done.stdout + done.stderr
    rounds = [
        line.split(": round ", 1)[1] for line in done.stderr.splitlines() if ": round " in line
    ]
    ours = [
        float(part.split()[1]) / 1e3
        for line in rounds
        for part in line.split(": ", 1)[1].split(";")[0].split(", ")
    ]
    # the first 4 rounds, as asv's run below (an undecided pair goes on past --max-rounds)
    assert len(ours) >= 12, done.stdout
    ours = ours[:8]
    taken = [
        int(line.split(" processes (")[1].split()[0])
        for line in done.stdout.splitlines()
        if " processes (" in line
    ]
    assert len(taken) == 2 and all(count > 10 * 4 for count in taken), (
        done.stdout
    )  # one step a sample: over 10 each
    machine = done.stdout.split("machine ")[1].split(",")[0]
    commits = timeline.compute(
        mf.load(real / "builds" / "manifest.json"), real / ".asv" / "timeline"
    ).commits
    config = asvconf.load(real / "suite" / "asv.conf.json").derive(
        real / "suite" / ".asv" / "fresh", real / ".asv" / "timeline", ["aa"], tmp_path / "results"
    )
    hashes = tmp_path / "hashes"
    command = core_asv.run_command(
        config,
        machine,
        [
            "--bench",
            ROW,
            "--record-samples",
            "--interleave-rounds",
            "-a",
            "rounds=4",
            "-a",
            f"repeat={SINGLE}",
        ],
        [commits["aa@a1"], commits["aa@a2"]],
        hashes,
    )
    env = dict(
        os.environ,
        HOME=str(real / "home"),
        OMP_NUM_THREADS="1",
        MPSBENCH_PLATFORM="linux-x86_64-cpu",
        **{settings.SINGLE_STEPS: "1"},
    )
    ran = subprocess.run(
        command,
        cwd=real,
        env={**env, core_asv.RUN_BUILDS: str(hashes)},
        capture_output=True,
        text=True,
    )
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-2000:]
    from benchmarks.benchmark_models import Inference

    index = list(itertools.product(*Inference.params)).index(("cpu", "lenet5", 32))
    theirs = _process_fastest(
        tmp_path / "results", machine, "benchmark_models.Inference.time_step", index, SINGLE
    )
    assert len(theirs) == 8, theirs
    ratio = verdict.fast_mode(ours) / verdict.fast_mode(theirs)
    assert 0.9 < ratio < 1.1, (
        f"servers {verdict.fast_mode(ours) * 1e3:.3f} ms against asv run"
        f" {verdict.fast_mode(theirs) * 1e3:.3f} ms: {ours} {theirs}"
    )
