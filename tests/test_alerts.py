"""Alerts on synthetic results with realistic noise: a real slowdown is named; identical builds never alert.

Results are written through asv's own Results class from samples (asv computes
the median and the statistics it records, as ``asv run`` does). Four nightlies
n1 n2 s1 s2, where s1 and s2 carry a real 1.3x slowdown of one row.
"""

from __future__ import annotations

import hashlib
import json
import random
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest
from tests import asvresults

from mpsbench import cli
from mpsbench.builds import manifest as mf
from mpsbench.builds import timeline
from mpsbench.context import Suite
from mpsbench.regressions import alerts, rule
from mpsbench.results import recorded

DATES = ["2026-11-20", "2026-11-21", "2026-11-22", "2026-11-23"]  # n1 n2 s1 s2
GITS = ["a" * 40, "b" * 40, "c" * 40, "d" * 40]  # the PyTorch commit of each nightly
DEVICES, MODELS, BATCHES = ["cpu", "mps"], ["mlp", "resnet50"], [1, 8, 128]
SLOW = ("training", "time_step", "mps", "resnet50", 128)
STEADY = ("training", "time_step", "cpu", "mlp", 8)
TINY = ("inference", "time_step", "cpu", "mlp", 1)
SAMPLES = 10  # what the step classes' sample budget gives a gating row


def noisy(seed: int, centre: float, spread: float = 0.02, count: int = SAMPLES) -> list[float]:
    """Step times as a machine records them: normal noise around ``centre`` (relative ``spread``)."""
    rng = random.Random(seed)
    return [centre * (1 + rng.gauss(0, spread)) for _ in range(count)]


def nightly_build(day: int) -> mf.Build:
    """The nightly of DATES[day], pinned by a stand-in wheel (never installed here)."""
    version = f"2.15.0.dev{DATES[day].replace('-', '')}"
    pin = mf.Pin(
        "torch",
        version,
        f"torch-{version}-cp311-cp311-manylinux_2_28_x86_64.whl",
        "https://example.invalid/torch.whl",
        "0" * 64,
    )
    return mf.Build(
        id=DATES[day],
        torch_version=version,
        date=f"{DATES[day]}T03:00:00Z",
        git_version=GITS[day],
        kind="nightly",
        pins={"linux-x86_64-cpu": [pin]},
    )


def _measured(machine: str, day: int) -> dict[tuple[str, str, str, str, int], list[float]]:
    seed = int(hashlib.sha256(f"{machine}{day}".encode()).hexdigest()[:8], 16)
    if machine == "m1":  # the slowdown: 100 ms -> 130 ms from s1 on, a steady row beside it
        return {SLOW: noisy(seed, 0.130 if day >= 2 else 0.100), STEADY: noisy(seed + 1, 0.010)}
    if (
        machine == "m2"
    ):  # identical builds, one night on a loaded machine: a tiny op's median at 3.75x
        if day == 3:
            loaded = [2e-5 * x for x in (0.9, 1.0, 1.0, 1.1, 3.7, 3.8, 3.9, 4.5, 6.0, 9.0)]
            return {TINY: loaded, STEADY: noisy(seed + 1, 0.0101)}
        return {TINY: noisy(seed, 2e-5, 0.01), STEADY: noisy(seed + 1, 0.010)}
    # m3: identical builds whose newest run landed 1.40x higher, tight within itself (one process per side):
    # the recorded statistics cannot tell this from a slowdown; only a fresh interleaved compare can
    return {STEADY: noisy(seed, 0.014 if day == 3 else 0.010, 0.005)}


def _when(day: int) -> int:
    """The nightly's run, in asv's milliseconds."""
    return int(
        datetime.fromisoformat(f"{DATES[day]}T03:00:00").replace(tzinfo=timezone.utc).timestamp()
        * 1000
    )


@pytest.fixture
def fleet(tmp_path):
    manifest = mf.Manifest()
    for day in range(len(DATES)):
        manifest = mf.append(manifest, "nightly", nightly_build(day))
    mf.save(manifest, tmp_path / "manifest.json")
    generated = timeline.generate(manifest, tmp_path / "timeline")
    commits = [generated.commits[f"nightly@{date}"] for date in DATES]
    results = tmp_path / "results"
    for machine in ("m1", "m2", "m3"):
        for day in range(len(DATES)):
            benchmarks = asvresults.write_results(
                results,
                machine,
                commits[day],
                _when(day),
                {},
                DEVICES,
                MODELS,
                BATCHES,
                samples=_measured(machine, day),
            )
    asvresults.write_benchmarks(results, benchmarks)
    config = tmp_path / "asv.conf.json"
    config.write_text(
        json.dumps({"results_dir": str(results), "regressions_thresholds": {".*": 0.05}})
    )
    paths = [
        "--config",
        str(config),
        "--manifest",
        str(tmp_path / "manifest.json"),
        "--timeline",
        str(tmp_path / "timeline"),
    ]
    suite = Suite(config, tmp_path / "manifest.json", tmp_path / "timeline")
    return tmp_path, manifest, commits, suite, paths


def _find(fleet, machine: str) -> list[alerts.Alert]:
    return alerts.find(fleet[3], alerts.Options((machine,)))


def test_a_slowdown_that_persists_is_named_against_the_last_build_not_flagged(fleet):
    _, _, commits, _, _ = fleet
    found = _find(fleet, "m1")
    # s2 is as slow as s1 (nothing against the build before), but slower than n2, the last build not flagged
    assert [(a.row.benchmark, a.params, a.old, a.new, a.against) for a in found] == [
        (
            "benchmark_models.Training.time_step",
            "('mps', 'resnet50', 128)",
            commits[1],
            commits[3],
            alerts.LAST_GOOD,
        )
    ]
    assert found[0].judgement.ratio == pytest.approx(1.3, rel=0.05)
    assert f"https://github.com/pytorch/pytorch/compare/{GITS[1]}...{GITS[3]}" in found[0].upstream


def test_identical_builds_with_a_noisy_median_raise_nothing(fleet):
    assert _find(fleet, "m2") == []
    tmp, _, commits, suite, _ = fleet
    found = recorded.load(tmp / "results")
    row = recorded.Row("benchmark_models.Inference.time_step", ("'cpu'", "'mlp'", "1"))
    old, new = found.get("m2", commits[2], row), found.get("m2", commits[3], row)
    assert (
        old is not None and new is not None and new.value / old.value > 3
    )  # the bare medians would alarm
    assert rule.judge(suite.conf.thresholds, row.entry, "seconds", old, new).label == "noisy"


def test_confirm_raises_only_what_a_fresh_compare_agrees_with(fleet, capsys):
    commits, suite = fleet[2], fleet[3]
    recorded_only = alerts.find(suite, alerts.Options(("m3",)))
    assert [a.machine for a in recorded_only] == [
        "m3"
    ]  # tight 1.40x: the recorded numbers alone alarm
    asked = []

    def compare(old: str, new: str, bench: str) -> int:
        asked.append((old, new, bench))
        # a real slowdown measures slower again; the identical pair measures unchanged
        return (
            rule.Decision.SLOWER.exit_status
            if old == commits[1]
            else rule.Decision.UNCHANGED.exit_status
        )

    status, text = alerts.check(suite, alerts.Options(), compare=compare)
    assert status == 1
    assert sorted(asked) == [
        (
            commits[1],
            commits[3],
            r"^benchmark_models\.Training\.time_step\('mps',\ 'resnet50',\ 128\)$",
        ),
        (commits[2], commits[3], r"^benchmark_models\.Training\.time_step\('cpu',\ 'mlp',\ 8\)$"),
    ]
    out = capsys.readouterr().out
    assert "[confirmed]" in out and "[not confirmed]" in out
    assert out.splitlines()[-1] == "mpsbench alert: REGRESSION: 1 rows slower on m1"
    assert "Not confirmed by a fresh compare" in text


def test_confirm_keeps_an_alert_compare_cannot_measure_and_confirms_the_others(fleet, capsys):
    tmp, _, commits, suite, _ = fleet
    results, memory = tmp / "results", "benchmark_models.TrainingCapacity.track_peak_memory"
    for day, mib in enumerate(
        (900.0, 900.0, 900.0, 1400.0)
    ):  # the step's peak memory grew on s2 (no statistics)
        entry = asvresults.write_track(
            results,
            "m1",
            commits[day],
            _when(day),
            memory,
            asvresults.PARAM_NAMES,
            [["mps"], ["resnet50"], [128]],
            "MiB",
            {("mps", "resnet50", 128): mib},
        )
    asvresults.write_benchmarks(
        results, {**json.loads((results / "benchmarks.json").read_text()), **entry}
    )
    asked = []

    def compare(old: str, new: str, bench: str) -> int:
        asked.append(bench)
        # compare measures only time_ rows: on any other it refuses in one line, exit 2
        return 2 if "track_" in bench else rule.Decision.SLOWER.exit_status

    status, text = alerts.check(suite, alerts.Options(("m1",)), compare=compare)
    assert status == 1
    assert asked == [r"^benchmark_models\.Training\.time_step\('mps',\ 'resnet50',\ 128\)$"]
    out = capsys.readouterr().out.splitlines()
    assert out[0] == (
        f"mpsbench alert: not confirming {memory}('mps', 'resnet50', 128) on m1: mpsbench compare"
        " re-measures only timed rows (time_*), and this one returns a value (MiB); kept as recorded"
    )
    assert any(
        line.startswith(f"slower 1.556x  {memory}") and not line.count("[") for line in out
    )  # as recorded
    assert out[-1] == "mpsbench alert: REGRESSION: 2 rows slower on m1"
    assert (
        "; 1 of them confirmed by a fresh `mpsbench compare`, the others kept as recorded" in text
    )


def test_an_undecided_or_unchanged_compare_keeps_the_exit_status_0(fleet, capsys):
    suite = fleet[3]
    for answer in (rule.Decision.UNCHANGED.exit_status, rule.Decision.UNDECIDED.exit_status):
        status, _ = alerts.check(
            suite, alerts.Options(("m3",)), compare=lambda old, new, bench, answer=answer: answer
        )
        assert status == 0
    out = capsys.readouterr().out
    assert "[undecided]" in out and "nothing slower" in out


def test_the_command_exits_1_with_one_line_per_slowdown_and_a_markdown_summary(fleet, capsys):
    tmp, _, _, _, paths = fleet
    summary = tmp / "alert.md"
    assert (
        cli.main(
            [
                "alert",
                *paths,
                "--machine",
                "m1",
                "--build",
                "nightly@2026-11-23",
                "--summary",
                str(summary),
            ]
        )
        == 1
    )
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 2 and out[0].startswith("slower 1.")
    assert "benchmark_models.Training.time_step('mps', 'resnet50', 128) on m1" in out[0]
    assert out[1] == "mpsbench alert: REGRESSION: 1 rows slower on m1"
    text = summary.read_text()
    assert "# mpsbench: the newest build is slower" in text
    assert f"https://github.com/pytorch/pytorch/compare/{GITS[1]}...{GITS[3]}" in text


def _checksums(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def test_alert_confirm_leaves_the_recorded_results_untouched(fleet, monkeypatch):
    tmp, _, _, _, paths = fleet
    before = _checksums(tmp / "results")
    asked = []

    def compare_command(suite, machine):
        asked.append((suite.manifest_path, suite.timeline_path, machine))
        return lambda old, new, bench: rule.Decision.SLOWER.exit_status

    monkeypatch.setattr(alerts, "compare_command", compare_command)
    assert cli.main(["alert", *paths, "--confirm", "--machine", "m1"]) == 1
    assert asked == [
        (tmp / "manifest.json", tmp / "timeline", "m1")
    ]  # the same builds, measured on this machine
    assert _checksums(tmp / "results") == before


def test_a_machine_the_results_lack_is_one_line_and_exit_2_and_no_summary_is_written(fleet, capsys):
    """alert --machine nosuch said "nothing slower": a misspelt machine in CI would never raise an alert."""
    tmp, _, _, _, paths = fleet
    summary = tmp / "summary.md"
    assert (
        cli.main(
            ["alert", *paths, "--machine", "m1", "--machine", "nosuch", "--summary", str(summary)]
        )
        == 2
    )
    assert capsys.readouterr().err == (
        f"mpsbench: error: no machine 'nosuch' in {tmp / 'results'}; machines there: m1, m2, m3\n"
    )
    assert not summary.exists()


def test_a_missing_empty_or_corrupt_results_directory_is_one_line_and_exit_2(fleet, capsys):
    tmp, _, commits, _, paths = fleet
    assert cli.main(["alert", *paths, "--build", "nightly@2026-12-01"]) == 2
    assert capsys.readouterr().err.startswith(
        "mpsbench: error: no build '2026-12-01' on channel nightly"
    )
    assert cli.main(["alert", *paths, "--confirm", "--machine", "m1", "--machine", "m2"]) == 2
    assert capsys.readouterr().err == (
        "mpsbench: error: --confirm measures on this machine: give at most one"
        " --machine, this machine's name\n"
    )
    assert cli.main(["alert", *paths, "--results", str(tmp / "nope")]) == 2
    assert (
        capsys.readouterr().err
        == f"mpsbench: error: results directory {tmp / 'nope'} does not exist\n"
    )
    (tmp / "empty").mkdir()
    assert cli.main(["alert", *paths, "--results", str(tmp / "empty")]) == 2
    assert (
        capsys.readouterr().err
        == f"mpsbench: error: results directory {tmp / 'empty'} holds no asv results files\n"
    )
    corrupt = next((tmp / "results" / "m2").glob(f"{commits[3][:8]}-*.json"))
    corrupt.write_text(corrupt.read_text()[:100])
    assert cli.main(["alert", *paths]) == 2
    err = capsys.readouterr().err
    assert (
        err.startswith(f"mpsbench: error: results file {corrupt} cannot be read")
        and err.count("\n") == 1
    )
    # the site, like asv publish, goes on without it and says so
    assert recorded.load(tmp / "results", strict=False).files == 3 * len(DATES) - 1
    assert capsys.readouterr().err.startswith(
        f"mpsbench recorded: warning: results file {corrupt} cannot be read"
    )


def test_the_confirming_compare_is_the_mpsbench_command_on_the_same_builds_and_machine(
    tmp_path, monkeypatch
):
    ran = []

    def run(command, check):
        assert Path(command[0]).is_file(), command[0]  # what the OS runs is there
        ran.append(command)
        return subprocess.CompletedProcess(command, rule.Decision.UNDECIDED.exit_status)

    # an interpreter with no mpsbench console script beside it (pip --user, --target, conda)
    python = tmp_path / "elsewhere" / "python"
    python.parent.mkdir()
    python.symlink_to(sys.executable)
    monkeypatch.setattr(sys, "executable", str(python))
    monkeypatch.setattr(alerts.subprocess, "run", run)
    compare = alerts.compare_command(
        Suite(tmp_path / "asv.conf.json", tmp_path / "manifest.json", tmp_path / "timeline"), "m1"
    )
    assert compare("a" * 40, "b" * 40, "^x$") == rule.Decision.UNDECIDED.exit_status
    assert ran == [
        [
            str(python),
            "-m",
            "mpsbench.cli",
            "compare",
            "a" * 40,
            "b" * 40,
            "-b",
            "^x$",
            "--manifest",
            str(tmp_path / "manifest.json"),
            "--timeline",
            str(tmp_path / "timeline"),
            "--machine",
            "m1",
        ]
    ]


def test_the_newest_build_is_judged_within_its_own_channel_not_by_date(tmp_path):
    # a release dated between two nightlies runs 0.7x their step time: another line, not a slowdown of the nightly
    manifest = mf.append(
        mf.append(mf.Manifest(), "nightly", nightly_build(0)), "nightly", nightly_build(3)
    )
    release = mf.Build(
        id="2.14.1",
        torch_version="2.14.1",
        date="2026-11-22T03:00:00Z",
        git_version="e" * 40,
        kind="release",
        pins=nightly_build(2).pins,
    )
    manifest = mf.append(manifest, "release", release)
    generated = timeline.generate(manifest, tmp_path / "timeline")
    runs = [
        ("nightly@2026-11-20", DATES[0], 0.100),
        ("release@2.14.1", DATES[2], 0.070),
        ("nightly@2026-11-23", DATES[3], 0.100),
    ]
    for index, (name, date, centre) in enumerate(runs):
        when = int(
            datetime.fromisoformat(f"{date}T03:00:00").replace(tzinfo=timezone.utc).timestamp()
            * 1000
        )
        benchmarks = asvresults.write_results(
            tmp_path / "results",
            "m4",
            generated.commits[name],
            when,
            {},
            DEVICES,
            MODELS,
            BATCHES,
            samples={STEADY: noisy(index, centre)},
        )
    asvresults.write_benchmarks(tmp_path / "results", benchmarks)
    found = recorded.load(tmp_path / "results")
    assert (
        found.builds("m4")[1] == generated.commits["release@2.14.1"]
    )  # by date, the release is the build before
    mf.save(manifest, tmp_path / "manifest.json")
    (tmp_path / "asv.conf.json").write_text(
        json.dumps({"results_dir": "results", "regressions_thresholds": {".*": 0.05}})
    )
    assert (
        alerts.find(
            Suite(tmp_path / "asv.conf.json", tmp_path / "manifest.json", tmp_path / "timeline"),
            alerts.Options(),
        )
        == []
    )
