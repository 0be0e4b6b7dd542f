"""Issue 32: the order of a record run (newest build first, its seed rows first), its estimates and its disk check.

The run itself, stopped and resumed, is tests/test_record_stop.py (slow: real asv).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from mpsbench import cli
from mpsbench.builds import disk, install_build
from mpsbench.context import Suite
from mpsbench.core import asv, asv_saving
from mpsbench.results import record, watch
from mpsbench.results.watch import Step, Watch

SEED = "benchmark_models.Training.time_step('cpu', 'mlp', 8)"
SEED_INFERENCE = "benchmark_models.Inference.time_step('cpu', 'resnet50', 1)"
OTHER = "benchmark_ops.Ops.time_op('cpu', 'matmul', 'float32', 'small')"
TRACK = "benchmark_models.Environment.track_cpu_threads"


def test_the_newest_build_comes_first_its_seed_rows_before_the_rest_then_each_older_build():
    missing = {"new": (OTHER, SEED, TRACK, SEED_INFERENCE), "old": (OTHER, SEED), "older": (SEED,)}
    planned = record.steps(missing)
    assert [(step.commit, step.tier, step.names) for step in planned] == [
        ("new", "first tier", (SEED, SEED_INFERENCE)),
        ("new", "the rest", (OTHER, TRACK)),
        ("old", "every combination", (OTHER, SEED)),  # the first tier is the newest build's only
        ("older", "every combination", (SEED,)),
    ]


def test_a_build_with_only_seed_rows_missing_is_one_step_and_one_with_none_no_step():
    assert record.steps({"new": (SEED,), "old": ()}) == [Step("new", (SEED,), "every combination")]


def test_builds_run_newest_first_by_their_date_whatever_order_the_range_gives(tmp_path):
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    commits = {}
    for name, date in (
        ("b", "2026-02-01T00:00:00Z"),
        ("a", "2026-01-01T00:00:00Z"),
        ("c", "2026-03-01T00:00:00Z"),
    ):
        subprocess.run(
            ["git", "commit", "-q", "--allow-empty", "-m", name],
            cwd=tmp_path,
            check=True,
            env={**env, "GIT_COMMITTER_DATE": date, "GIT_AUTHOR_DATE": date},
        )
        commits[name] = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=tmp_path, capture_output=True, text=True, check=True
        ).stdout.strip()
    given = [commits["a"], commits["c"], commits["b"]]
    assert record.newest_first(tmp_path, given) == [commits["c"], commits["b"], commits["a"]]


def test_estimates_come_from_this_machines_runs_else_from_the_measured_table(tmp_path):
    results = tmp_path / "results"
    watch.add(
        results,
        "box",
        [{"name": SEED, "seconds": 10.0}, {"name": SEED, "seconds": 3.0, "wall": 14.0}],
    )
    watch.add(
        results, "other-box", [{"name": OTHER, "seconds": 999.0}]
    )  # another machine's cost is not ours
    with open(watch.trail(results), "a") as out:
        out.write('{"machine": "box", "name": ')  # a line cut short by a kill is passed over
    found = watch.Costs(results, "box")
    assert found.combination(SEED) == 12.0  # the wall time where known
    assert found.source([SEED]) == watch.WHERE_MEASURED
    # a batch never measured here: its class's median
    assert found.combination("benchmark_models.Training.time_step('cpu', 'mlp', 1)") == 12.0
    # never measured here, nor its class: the table's figure, not scaled by another class's history
    table = watch.MEASURED_SECONDS["cpu"].get(
        watch.group(OTHER), watch.DEVICE_AVERAGE_SECONDS["cpu"]
    )
    assert found.combination(OTHER) == table
    assert found.source([OTHER]) == watch.WHERE_BUDGET
    assert found.source([SEED, OTHER]) == watch.WHERE_BOTH
    cuda = "benchmark_models.Training.time_step('cuda', 'mlp', 1024)"
    assert found.combination(cuda) == watch.MEASURED_SECONDS["cuda"]["benchmark_models.Training"]
    # a step's start-up and a publish: measured figures until this machine has its own
    budget = watch.STEP_START_SECONDS + watch.BUDGET_INSTALL_SECONDS
    assert found.install(installed=False) == budget
    assert found.install(installed=True) == watch.STEP_START_SECONDS
    assert found.publish() == watch.PUBLISH_SECONDS
    watch.add(
        results,
        "box",
        [
            {"event": "begin", "build": "b", "installed": True, "seconds": 21.0},
            {"event": "publish", "seconds": 7.0},
        ],
    )
    learnt = watch.Costs(results, "box")
    assert learnt.install(installed=True) == 21.0 and learnt.publish() == 7.0


def _build(
    cache: Path, version: str, stored: bool, python: tuple[int, int] = sys.version_info[:2]
) -> dict:
    tag = f"cp{python[0]}{python[1]}"
    pins = [
        {
            "name": name,
            "version": version,
            "python": tag,
            "sha256": hashlib.sha256(name.encode()).hexdigest(),
            "filename": f"{name}-{version}-{tag}-{tag}-manylinux_2_28_x86_64.whl",
            "url": f"https://example.org/{name}-{version}.whl",
        }
        for name in ("torch", "torchvision")
    ]
    if stored:
        for pin in pins:
            folder = cache / "wheels" / pin["sha256"]
            folder.mkdir(parents=True)
            (folder / pin["filename"]).write_bytes(b"x" * 1000)
    return {
        "channel": "release",
        "id": version,
        "kind": "release",
        "torch_version": version,
        "pins": {"linux-x86_64-cuda": pins, "linux-x86_64-cpu": pins},
    }


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux wheels")
def test_a_builds_disk_need_says_where_its_figure_comes_from(tmp_path, monkeypatch):
    monkeypatch.setenv("MPSBENCH_CACHE", str(tmp_path))
    measured = disk.facts(_build(tmp_path, "2.4.1", stored=False))
    assert not measured.installed and "measured for 2.4.1" in measured.how
    assert measured.need == pytest.approx(
        5.2 * disk.GB * (1 + 1 / disk.INSTALLED_PER_WHEEL_BYTE), rel=1e-6
    )
    unknown = disk.facts(_build(tmp_path, "9.9.9", stored=False))
    assert "largest measured" in unknown.how and unknown.need > measured.need
    stored = disk.facts(_build(tmp_path, "2.15.0", stored=True))
    assert "stored wheels" in stored.how and stored.need == int(
        2000 * disk.INSTALLED_PER_WHEEL_BYTE
    )
    build = _build(tmp_path / "elsewhere", "2.0.1", stored=False)
    key = hashlib.sha256(
        "".join(sorted(pin["sha256"] for pin in build["pins"]["linux-x86_64-cpu"])).encode()
    )
    (tmp_path / "builds" / key.hexdigest()[:20]).mkdir(parents=True)
    (tmp_path / "builds" / key.hexdigest()[:20] / ".complete").write_text("{}")
    assert disk.facts(build) == disk.Facts(0, "installed in the cache already", True)


def _installed(cache: Path, pins: list[dict]) -> None:
    key = hashlib.sha256("".join(sorted(pin["sha256"] for pin in pins)).encode()).hexdigest()[:20]
    (cache / "builds" / key).mkdir(parents=True)
    (cache / "builds" / key / ".complete").write_text("{}")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux wheels")
def test_a_builds_disk_need_is_for_the_python_of_the_environment_asv_installs_it_into(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("MPSBENCH_CACHE", str(tmp_path))
    other = (
        (3, 10) if sys.version_info[:2] != (3, 10) else (3, 12)
    )  # not the Python that runs mpsbench
    version = f"{other[0]}.{other[1]}"
    run = asv.run_args(("-E", f"virtualenv:{version}", "HASHFILE:hashes.txt"))  # bench.plan's
    assert run.python == other
    assert asv.run_args((f"--python={version}", "ALL")).python == other
    # asv makes its environments of its own Python: this one
    assert asv.run_args(("release^!",)).python is None
    build = _build(tmp_path, "2.15.0", stored=True, python=other)  # pinned for that Python only
    monkeypatch.setattr(record, "builds", lambda conf, run: ["commit"])
    monkeypatch.setattr(Suite, "reader", SimpleNamespace(build=lambda commit: build))
    suite = Suite(config_path=Path(__file__).resolve().parents[1] / "asv.conf.json")
    stored = suite.disk(run).builds["commit"]
    assert "stored wheels" in stored.how and stored.need == int(
        2000 * disk.INSTALLED_PER_WHEEL_BYTE
    )
    assert (stored.installed, stored.download) == (False, 0)  # its wheels are here: no download
    _installed(tmp_path, build["pins"]["linux-x86_64-cpu"])
    assert suite.disk(run) == watch.Disk(
        tmp_path,
        {
            "commit": watch.Build(
                "release@2.15.0 (torch 2.15.0)", 0, "installed in the cache already", True
            )
        },
    )


class _Cache:
    """Stand-ins for the build cache's disk: ``space`` free, ``holds`` used."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, space: int) -> None:
        self.space, self.holds = space, 3 * int(disk.GB)
        monkeypatch.setattr(watch, "free", lambda folder: self.space)
        monkeypatch.setattr(watch, "used", lambda folder: self.holds)


def _disk(needs: dict[str, tuple[int, str, bool]]) -> watch.Disk:
    """Facts of builds ``release@COMMIT``, each with its need; one not installed downloads a
    quarter of it."""
    return watch.Disk(
        Path("/cache"),
        {
            commit: watch.Build(
                f"release@{commit}",
                need,
                how,
                installed,
                *((0, ()) if installed else (int(need / 4), ("files.example.org",))),
            )
            for commit, (need, how, installed) in needs.items()
        },
    )


def test_a_build_that_does_not_fit_is_skipped_in_one_line_and_the_rest_goes_on(
    tmp_path, capsys, monkeypatch
):
    steps = [
        Step("new", (SEED,), "first tier"),
        Step("new", (OTHER,), "the rest"),
        Step("old", (SEED,), "every combination"),
    ]
    _Cache(monkeypatch, int(5 * disk.GB))
    builds = _disk(
        {
            "new": (int(8 * disk.GB), "measured for 2.15.0 on linux", False),
            "old": (int(4 * disk.GB), "measured for 2.4.1 on linux", False),
        },
    )
    watching = Watch(steps, watch.Costs(tmp_path, "box"), builds)
    plan = watching.plan().splitlines()
    assert plan[0].startswith("the run: 2 builds, newest first, 3 combinations")
    assert plan[1].startswith("  disk: about 12.0 GB more in the build cache /cache")
    assert "5.0 GB free there: builds that do not fit are skipped" in plan[1]
    assert (
        plan[2]
        == "  downloads: about 3.0 GB of wheels from files.example.org; retried and resumed where cut"
    )
    # numbered by build, as many numbers as the first line says builds; each build's steps under it
    assert [line.split(".")[0] for line in plan if line.startswith("  ") and line[2].isdigit()] == [
        "  1",
        "  2",
    ]
    assert plan[3] == "  1. release@new; disk: about 8.0 GB (measured for 2.15.0 on linux)"
    assert plan[4].startswith("     first tier: 1 combinations, about ") and plan[5].startswith(
        "     the rest: 1 "
    )
    assert [watching.begin(step) for step in steps] == [False, False, True]
    said = capsys.readouterr().err.splitlines()
    skips = [line for line in said if "skipping" in line]
    assert skips == [
        "mpsbench watch: warning: skipping release@new: installing it needs about 8.0 GB (measured for"
        " 2.15.0 on linux), 5.0 GB is free at /cache; free space there, or set MPSBENCH_CACHE=/path to a"
        " disk with room, and run again"
    ]
    assert watching.total == 1  # what is left to measure


def test_the_running_line_gives_the_cache_as_it_is_after_a_builds_install(
    tmp_path, capsys, monkeypatch
):
    steps = [Step("new", (SEED, OTHER), "first tier")]
    cache = _Cache(monkeypatch, int(50 * disk.GB))
    builds = _disk({"new": (int(8 * disk.GB), "measured for 2.15.0 on linux", False)})
    watching = Watch(steps, watch.Costs(tmp_path, "box"), builds)
    assert watching.begin(steps[0])
    cache.holds = 11 * int(disk.GB)  # asv installed the build before its first combination
    events = [
        {"event": "done", "name": name, "outcome": "value", "seconds": 1.0}
        for name in (SEED, OTHER)
    ]
    (tmp_path / asv_saving.EVENTS).write_text("".join(json.dumps(event) + "\n" for event in events))
    watching.poll(tmp_path)
    lines = [line for line in capsys.readouterr().err.splitlines() if "combinations done" in line]
    assert len(lines) == 2 and all("build cache 11.0 GB, 50.0 GB free" in line for line in lines)


def test_the_plan_says_why_a_build_needs_no_disk_and_skips_one_it_cannot_install_with_why(
    tmp_path, monkeypatch, capsys
):
    """A build whose pins this machine cannot install was planned as "disk: none", then run: asv
    failed on it, once per step, and tried other builds."""
    steps = [Step("new", (SEED,), "every combination"), Step("old", (SEED,), "every combination")]
    why = "build era@2.14.1 pins no torch wheel for cp311 on linux-x86_64-cpu"
    _Cache(monkeypatch, int(50 * disk.GB))
    builds = _disk({"new": (0, "installed in the cache already", True), "old": (0, "", True)})
    builds.builds["old"] = dataclasses.replace(builds.builds["old"], refused=why)
    watching = Watch(steps, watch.Costs(tmp_path, "box"), builds)
    plan = watching.plan()
    assert "disk: none, installed in the cache already" in plan
    assert f"skipped: this machine cannot install it: {why}" in plan
    assert plan.count("every combination: 1 combinations") == 1  # the refused one is not timed
    assert "installed already" not in plan.replace("in the cache already", "")
    assert watching.begin(steps[0]) and not watching.begin(steps[1])
    assert f"this machine cannot install it: {why}" in capsys.readouterr().err


def test_results_record_plans_with_what_the_cache_says_of_each_build_as_bench_does(
    monkeypatch, tmp_path
):
    """Run directly, its plan said "installed already" of every build, an uninstalled era@2.0.1 too."""
    monkeypatch.setenv("HOME", str(tmp_path))  # a machine file that holds the machine named
    (tmp_path / ".asv-machine.json").write_text(
        json.dumps({"version": 1, "box": {"machine": "box"}})
    )
    handed, pythons = [], []
    monkeypatch.setattr(
        record,
        "record",
        lambda conf, machine, run, disk, remeasure: iter(handed.append(disk) or ()),
    )
    monkeypatch.setattr(record, "builds", lambda conf, run: ["c0ffee00c0ffee00"])
    measured = disk.Facts(
        int(8 * disk.GB), "measured for 2.0.1 on linux", False, int(disk.GB), ("a.org",)
    )
    monkeypatch.setattr(
        disk, "facts", lambda build, python=None: pythons.append(python) or measured
    )
    config = Path(__file__).resolve().parents[1] / "asv.conf.json"
    assert (
        cli.main(
            [
                "results",
                "record",
                "--config",
                str(config),
                "--machine",
                "box",
                "--",
                "-E",
                "virtualenv:3.10",
                "release^!",
            ]
        )
        == 0
    )
    assert handed == [
        watch.Disk(
            install_build.cache_root(),
            {
                "c0ffee00c0ffee00": watch.Build(
                    name="c0ffee00",
                    need=int(8 * disk.GB),
                    how="measured for 2.0.1 on linux",
                    installed=False,
                    download=int(disk.GB),
                    hosts=("a.org",),
                )
            },
        )
    ]
    assert pythons == [(3, 10)]  # the Python of the environments asv installs the build into


def test_a_machine_the_machine_file_lacks_is_one_line_before_anything_runs(
    tmp_path, monkeypatch, capsys
):
    """asv said "No information stored about machine" in many lines, exit 3, after the set-up."""
    from mpsbench import cli

    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "asv.conf.json").write_text(
        json.dumps({"version": 1, "repo": "timeline", "results_dir": "results"})
    )
    argv = [
        "results",
        "record",
        "--config",
        "asv.conf.json",
        "--machine",
        "nosuchmachine",
        "--",
        "ALL",
    ]
    assert cli.main(argv) == 2
    machine_file = home / ".asv-machine.json"
    assert capsys.readouterr().err == (
        f"mpsbench: error: no machine 'nosuchmachine' in {machine_file}; machines there:"
        " none (`mpsbench machine --name nosuchmachine` adds this one)\n"
    )
    machine_file.write_text(
        json.dumps({"version": 1, "box": {"machine": "box"}, "lab-2": {"machine": "lab-2"}})
    )
    assert cli.main(argv) == 2
    assert "; machines there: box, lab-2 (`mpsbench machine" in capsys.readouterr().err
    assert sorted(path.name for path in tmp_path.iterdir()) == ["asv.conf.json", "home"]
