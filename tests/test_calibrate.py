"""Calibration's arithmetic and its timeline; the GPU run itself is scripts/calibrate's (docs/explanation/calibration.md)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tools.calibration import calibrate
from tools.calibration import slowdown as inject

from mpsbench.core import asvconf

ROOT = Path(__file__).resolve().parents[1]


def _value(median, q25=None, q75=None, samples=()):
    return {"median": median, "q25": q25, "q75": q75, "samples": list(samples)}


@pytest.mark.parametrize(
    ("noise", "expected"), [(0.0, 1.02), (0.003, 1.02), (0.0067, 1.03), (0.01, 1.03), (0.02, 1.06)]
)
def test_factor_is_three_times_the_worst_noise_rounded_up_to_a_percent(noise, expected):
    assert calibrate.choose_factor(noise) == pytest.approx(expected)


def test_noise_splits_steps_at_5_ms_and_returns_the_worst_large_change():
    key_large = ("benchmark_models.Training.time_step", ("'cuda'", "'resnet50'", "128"))
    key_small = ("benchmark_models.Training.time_step", ("'cuda'", "'mlp'", "1024"))
    first = {key_large: _value(0.100, 0.099, 0.101), key_small: _value(0.001)}
    second = {key_large: _value(0.101), key_small: _value(0.0011)}
    report = calibrate.Report("cuda", "2.14.1", {})
    worst = calibrate.noise(report, first, second)
    assert worst == pytest.approx(0.01)
    assert report.raw["noise"]["small"] == [pytest.approx(0.1)]
    assert (
        "+1.00%" in report.sections[0] and "2.00%" in report.sections[0]
    )  # change, then IQR/median


def test_timed_seconds_counts_every_step_of_every_sample():
    values = {
        ("benchmark_models.Training.time_step", ("'cpu'", "'mlp'", "8")): _value(
            0.001, samples=[0.001, 0.002]
        ),
        ("benchmark_models.Training.time_step", ("'cpu'", "'resnet50'", "1")): _value(
            0.5, samples=[0.5]
        ),
    }
    steps = calibrate.models.REGISTRY["mlp"].steps_per_call
    assert calibrate.timed_seconds(values) == pytest.approx(0.003 * steps + 0.5)


def test_calibration_timeline_has_the_build_twice_and_once_with_the_injected_slowdown(tmp_path):
    commits = calibrate.calibration_timeline(tmp_path)
    assert set(commits) == {"a", "a2", "b"} and len(set(commits.values())) == 3
    repo = tmp_path / "timeline"
    log = subprocess.run(
        ["git", "-C", str(repo), "log", "--format=%H %ad", "--date=unix", "calib"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\n")
    dates = {line.split()[0]: int(line.split()[1]) for line in log if line}
    assert dates[commits["a"]] < dates[commits["a2"]] < dates[commits["b"]]
    pin_b = subprocess.run(
        ["git", "-C", str(repo), "show", f"{commits['b']}:build.json"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert json.loads(pin_b)["env"] == {
        inject.INJECT_ENV: f"{calibrate.INJECTED_MODEL}:{calibrate.INJECTED_FRACTION}"
    }
    pin_a = subprocess.run(
        ["git", "-C", str(repo), "show", f"{commits['a']}:build.json"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "env" not in json.loads(pin_a)


def test_derived_config_keeps_the_suite_and_the_factor_but_moves_every_folder(tmp_path):
    path = asvconf.load(asvconf.ROOT / asvconf.CONFIG).derive(
        tmp_path, tmp_path / "timeline", ["calib"]
    )
    conf = asvconf.load(path).raw
    assert conf["repo"] == str(tmp_path / "timeline") and conf["branches"] == ["calib"]
    assert all(
        str(conf[key]).startswith(str(tmp_path)) for key in ("env_dir", "results_dir", "html_dir")
    )
    assert "{conf_dir}" not in " ".join(conf["install_command"])
    assert asvconf.load(path).thresholds == asvconf.load(asvconf.ROOT / "asv.conf.json").thresholds


def test_only_rows_marked_slower_count_as_flagged():
    output = """
| Change   | Before [a]   | After [b]   |   Ratio | Benchmark (Parameter)                                   |
|----------|--------------|-------------|---------|---------------------------------------------------------|
| +        | 100±1ms      | 106±1ms     |    1.06 | benchmark_models.Training.time_step('cuda', 'resnet50', 128) |
| -        | 10.0±0.1ms   | 9.0±0.1ms   |    0.9  | benchmark_models.Training.time_step('cuda', 'mlp', 1024) |
|          | 5.00±0.1ms   | 5.01±0.1ms  |    1.00 | benchmark_models.Inference.time_step('cuda', 'resnet50', 1) |
"""
    rows = calibrate.flagged(output)
    assert len(rows) == 1 and "'resnet50', 128" in rows[0] and "Training" in rows[0]


def test_the_calibrations_copy_of_the_suite_installs_the_slowdown_and_the_config_points_at_it(
    tmp_path,
):
    asvconf.load(asvconf.ROOT / asvconf.CONFIG).derive(tmp_path, tmp_path / "timeline", ["calib"])
    copy = calibrate.suite_with_slowdown(tmp_path)
    assert asvconf.load(tmp_path / "asv.conf.json").raw["benchmark_dir"] == str(copy)
    check = (
        "from mpsbench.measure import workloads; unwrapped = workloads.Workload.run.__name__\n"
        "import benchmarks\n"
        "print(unwrapped, workloads.Workload.run.__name__, workloads.Workload.warm_up.__name__)"
    )
    done = subprocess.run(
        [sys.executable, "-c", check],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=900,
        env=dict(os.environ, PYTHONPATH=str(tmp_path)),
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [
        "run",
        "run_and_wait",
        "warm_up_and_measure",
    ]  # the package's own run has no hook


@pytest.mark.parametrize("script", ["calibrate.py", "calibrate_step.py"])
def test_a_python_without_the_dependencies_runs_the_script_again_under_the_clones_venv(
    tmp_path, script
):
    """`scripts/calibrate-step` (python3) runs these through its launcher: from a clone that is .venv's python, which
    has psutil; a python with no .venv beside the scripts (the lent GPU's) runs them itself."""
    (tmp_path / "scripts").mkdir()
    for name in (script, "_checkout.py"):
        shutil.copy(ROOT / "scripts" / name, tmp_path / "scripts" / name)
    venv_python = tmp_path / ".venv" / "bin" / "python"
    venv_python.parent.mkdir(parents=True)
    venv_python.write_text(f'#!/bin/sh\necho "venv python: $*" > {tmp_path / "ran"}\n')
    venv_python.chmod(0o755)
    # -S: no site-packages, so neither psutil nor the installed mpsbench is importable, as in a clone's system python3
    done = subprocess.run(
        [sys.executable, "-S", str(tmp_path / "scripts" / script), "--help"],
        capture_output=True,
        text=True,
        timeout=600,
    )  # a hang guard only
    assert done.returncode == 0, done.stderr
    assert (
        tmp_path / "ran"
    ).read_text() == f"venv python: {tmp_path / 'scripts' / script} --help\n"
