"""Alerts on synthetic results with a known slowdown: named with its machine, ratio and PyTorch range; A/A is quiet."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest
from tests import asvresults

from mpsbench import alerts, cli, timeline
from mpsbench import manifest as mf

DATES = ["2026-11-20", "2026-11-21", "2026-11-22"]
GITS = ["a" * 40, "b" * 40, "c" * 40]  # the PyTorch commit of each nightly
DEVICES, MODELS, BATCHES = ["cpu", "mps"], ["mlp", "resnet50"], [8, 128]
SLOW = ("training", "time_step", "mps", "resnet50", 128)
STEADY = ("training", "time_step", "cpu", "mlp", 8)


def nightly_build(day: int) -> mf.Build:
    """The nightly of DATES[day], pinned by a stand-in wheel (never installed here)."""
    version = f"2.15.0.dev{DATES[day].replace('-', '')}"
    pin = mf.Pin("torch", version, f"torch-{version}-cp311-cp311-manylinux_2_28_x86_64.whl",
                 "https://example.invalid/torch.whl", "0" * 64)
    return mf.Build(id=DATES[day], torch_version=version, date=f"{DATES[day]}T03:00:00Z", git_version=GITS[day],
                    kind="nightly", pins={"linux-x86_64-cpu": [pin]})


@pytest.fixture
def fleet(tmp_path):
    """Three nightlies; m1 got 20% slower on the newest, m2 did not change, m3 (no newest build) got slower earlier."""
    manifest = mf.Manifest()
    for day in range(3):
        manifest = mf.append(manifest, "nightly", nightly_build(day))
    mf.save(manifest, tmp_path / "manifest.json")
    generated = timeline.generate(manifest, tmp_path / "timeline")
    commits = [generated.commits[f"nightly@{date}"] for date in DATES]
    measured = {
        ("m1", 1): {SLOW: 0.100, STEADY: 0.0100}, ("m1", 2): {SLOW: 0.120, STEADY: 0.0101},
        ("m2", 1): {SLOW: 0.050, STEADY: 0.0100}, ("m2", 2): {SLOW: 0.050, STEADY: 0.0100},
        ("m3", 0): {SLOW: 0.100}, ("m3", 1): {SLOW: 0.200},
    }
    results = tmp_path / "results"
    for (machine, day), values in measured.items():
        when = int(datetime.fromisoformat(f"{DATES[day]}T03:00:00").replace(tzinfo=timezone.utc).timestamp() * 1000)
        benchmarks = asvresults.write_results(results, machine, commits[day], when, values, DEVICES, MODELS, BATCHES)
    asvresults.write_benchmarks(results, benchmarks)
    config = tmp_path / "asv.conf.json"
    config.write_text(json.dumps({"results_dir": str(results), "regressions_thresholds": {".*": 0.05}}))
    paths = ["--config", str(config), "--manifest", str(tmp_path / "manifest.json"), "--timeline", str(tmp_path / "timeline")]
    return tmp_path, manifest, paths


RANGE = (f"nightly@2026-11-21 (torch 2.15.0.dev20261121, git {GITS[1][:12]}) -> nightly@2026-11-22 (torch"
         f" 2.15.0.dev20261122, git {GITS[2][:12]}): https://github.com/pytorch/pytorch/compare/{GITS[1]}...{GITS[2]}")


def test_a_20_percent_slowdown_on_the_newest_build_is_named_with_machine_ratio_and_pytorch_range(fleet):
    tmp, manifest, _ = fleet
    found = alerts.find(tmp / "results", 1.05, manifest, tmp / "timeline", build="nightly@2026-11-22")
    assert [(a.change.machine, a.benchmark, a.params) for a in found] == [
        ("m1", "benchmark_models.Training.time_step", "('mps', 'resnet50', 128)")]
    assert found[0].change.ratio == pytest.approx(1.2)
    assert found[0].upstream == RANGE
    everywhere = alerts.find(tmp / "results", 1.05, manifest, tmp / "timeline")  # without --build: m3's older jump too
    assert [(a.change.machine, round(a.change.ratio, 3)) for a in everywhere] == [("m3", 2.0), ("m1", 1.2)]


def test_the_command_exits_1_with_one_line_per_slowdown_and_a_markdown_summary(fleet, capsys):
    tmp, _, paths = fleet
    summary = tmp / "alert.md"
    assert cli.main(["alert", *paths, "--build", "nightly@2026-11-22", "--summary", str(summary)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out == [
        f"slower 1.200x  benchmark_models.Training.time_step('mps', 'resnet50', 128) on m1: 100 -> 120 ms per step; {RANGE}",
        "mpsbench alert: REGRESSION: 1 workloads slower than 1.05x on m1",
    ]
    text = summary.read_text()
    assert "# mpsbench: the newest build is slower" in text
    assert "| **m1** | **benchmark_models.Training.time_step** | **('mps', 'resnet50', 128)** | **100** | **120** |" in text
    assert f"https://github.com/pytorch/pytorch/compare/{GITS[1]}...{GITS[2]}" in text


def test_a_a_results_and_other_machines_raise_no_alert(fleet, capsys):
    tmp, _, paths = fleet
    summary = tmp / "alert.md"
    assert cli.main(["alert", *paths, "--machine", "m2", "--summary", str(summary)]) == 0
    assert capsys.readouterr().out.startswith("mpsbench alert: nothing slower than 1.05x")
    assert "No workload is slower than the regression factor 1.05" in summary.read_text()
    # m3's slowdown was on an older build: not tonight's news
    assert cli.main(["alert", *paths, "--machine", "m3", "--build", "nightly@2026-11-22"]) == 0


def test_a_missing_results_directory_or_unknown_build_is_one_line_and_exit_2(fleet, capsys):
    tmp, _, paths = fleet
    assert cli.main(["alert", *paths, "--results", str(tmp / "nope")]) == 2
    assert capsys.readouterr().err == f"mpsbench: error: results directory {tmp / 'nope'} does not exist\n"
    assert cli.main(["alert", *paths, "--build", "nightly@2026-12-01"]) == 2
    assert capsys.readouterr().err.startswith("mpsbench: error: no build '2026-12-01' on channel nightly")
