"""The report reproduces known ratios from synthetic results written through asv's own classes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace

import pytest
from tests import asvresults, fakes

from mpsbench import cli
from mpsbench.builds.timeline import Reader
from mpsbench.core import asvconf
from mpsbench.core.document import Link
from mpsbench.core.errors import UserError
from mpsbench.regressions import rule
from mpsbench.results import recorded
from mpsbench.site import figures, regressions_page, report, throughput
from mpsbench.site.throughput import Step

ASV = [sys.executable, "-m", "asv"]
ROOT = Path(__file__).resolve().parents[1]
DEVICES = ["cpu", "mps", "cuda"]
MODELS = ["mlp", "resnet50", "vgg16"]
BATCHES = [1, 8, 64, 128, 1024]
GIT_VERSIONS = ["a" * 40, "b" * 40, "c" * 40]  # the PyTorch commit of each build

# (machine, build index) -> {(kind, metric, device, model, batch): value}; build 2 is the newest.
# Step times in seconds; throughputs in samples/s.
MEASURED = {
    ("m1max", 0): {
        ("training", "time_step", "mps", "mlp", 1024): 0.08,
        ("training", "time_step", "cpu", "mlp", 1024): 0.79,
    },
    ("m1max", 1): {
        ("training", "time_step", "mps", "mlp", 1024): 0.08,
        ("training", "time_step", "cpu", "mlp", 1024): 0.79,
        ("inference", "time_step", "cpu", "mlp", 1024): 0.25,
    },
    ("m1max", 2): {
        (
            "training",
            "time_step",
            "mps",
            "mlp",
            1024,
        ): 0.10,  # 1.25x slower than build 1: a regression
        (
            "training",
            "time_step",
            "cpu",
            "mlp",
            1024,
        ): 0.80,  # speedup 8.0; 1.013x build 1: within 1.05
        ("training", "time_step", "cpu", "mlp", 1): 0.002,
        ("inference", "time_step", "mps", "mlp", 1024): 0.05,
        ("inference", "time_step", "cpu", "mlp", 1024): 0.20,  # speedup 4.0; 0.8x build 1: faster
        # resnet50: cpu only at small batches, so the speedup falls back to cpu's largest (8)
        ("training", "time_step", "mps", "resnet50", 128): 2.0,  # 64 samples/s
        ("training", "time_step", "cpu", "resnet50", 8): 4.0,  # 2 samples/s: speedup 32
        ("training", "time_step", "cpu", "resnet50", 1): 1.0,
    },
    ("rtx3080", 2): {
        ("training", "time_step", "cuda", "mlp", 1024): 0.02,
        ("training", "time_step", "cpu", "mlp", 1024): 0.50,  # speedup 25
        # throughput only, no step time: across machines reads it as it is
        ("training", "track_throughput", "cuda", "vgg16", 64): 300.0,
    },
}


def _timeline(path: Path) -> list[str]:
    """A timeline repository: three nightly builds, each build.json naming its PyTorch git_version."""
    fakes.timeline_repo(path)
    return [
        fakes.timeline_commit(
            path, f"2.{day}.0", version, f"2026-0{day}-01T00:00:00Z", kind="nightly"
        )
        for day, version in enumerate(GIT_VERSIONS, start=1)
    ]


def _write_results(results_dir: Path, commits: list[str]) -> None:
    """Results files for MEASURED, through asv's Results class, plus the benchmarks.json asv run writes."""
    benchmarks = {}
    for (machine, index), values in MEASURED.items():
        date_ms = 1767225600000 + index * 31 * 86400 * 1000
        benchmarks.update(
            asvresults.write_results(
                results_dir, machine, commits[index], date_ms, values, DEVICES, MODELS, BATCHES
            )
        )
    asvresults.write_benchmarks(results_dir, benchmarks)


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    """A results directory, its timeline repository and an asv.conf.json naming both."""
    tmp = tmp_path_factory.mktemp("report")
    commits = _timeline(tmp / "timeline")
    _write_results(tmp / "results", commits)
    config = asvconf.load(ROOT / "asv.conf.json").raw
    config.update(
        repo="timeline",
        branches=["release"],
        results_dir="results",
        html_dir="html",
        env_dir="env",
        benchmark_dir=str(ROOT / "benchmarks"),
    )
    (tmp / "asv.conf.json").write_text(json.dumps(config))
    return tmp, commits


@pytest.fixture(scope="module")
def loaded(suite):
    tmp, _ = suite
    return throughput.load(tmp / "results")


def test_newest_finds_benchmarks_json_names_in_loaded_and_in_each_pythons_results(suite):
    tmp, _ = suite
    step = "benchmark_models.Training.time_step"
    newest = throughput.load(tmp / "results").newest({step})
    assert len(newest[step]) == 8  # 6 rows on m1max, 2 on rtx3080
    assert newest[step][("m1max", "mps", "mlp", 1024)] == 0.10  # its newest build's
    points = throughput.by_release(
        recorded.load_each_python(tmp / "results"),
        Reader(tmp / "timeline"),
        lambda results, machine, _: [(machine, "", "", len(results.newest({step})[step]))],
    )
    assert [p.ratio for p in points] == [8, 8, 8, 8]  # m1max's three builds, rtx3080's one


def test_newest_leaves_out_a_recorded_benchmark_that_benchmarks_json_does_not_describe(
    suite, tmp_path
):
    tmp, _ = suite
    step, inference = "benchmark_models.Training.time_step", "benchmark_models.Inference.time_step"
    shutil.copytree(tmp / "results", tmp_path / "results")
    described = tmp_path / "results" / "benchmarks.json"
    entries = json.loads(described.read_text())
    del entries[step]
    described.write_text(json.dumps(entries))
    newest = throughput.load(tmp_path / "results").newest({step, inference})
    assert newest[step] == {}  # recorded, but not described
    assert len(newest[inference]) == 2  # m1max's newest build; none on rtx3080


def test_speedups_are_throughput_ratios_at_the_seed_batch_with_a_marked_fallback(loaded):
    found = {(s.machine, s.kind, s.model, s.device): s for s in throughput.speedups(loaded)}
    assert {key: s.ratio for key, s in found.items()} == pytest.approx(
        {
            ("m1max", "training", "mlp", "mps"): 8.0,
            ("m1max", "inference", "mlp", "mps"): 4.0,
            ("m1max", "training", "resnet50", "mps"): 32.0,
            ("rtx3080", "training", "mlp", "cuda"): 25.0,
        }
    )
    resnet = found[("m1max", "training", "resnet50", "mps")]
    assert (resnet.gpu.step.batch, resnet.gpu.step.seed) == (128, True)
    assert (resnet.cpu.step.batch, resnet.cpu.step.seed) == (
        8,
        False,
    )  # cpu's largest, not the seed's 128


def test_across_machines_uses_each_machines_newest_build_and_reads_track_throughput(loaded, suite):
    _, commits = suite
    points = {
        (p.machine, p.step.kind, p.step.model, p.step.device): p
        for p in throughput.across_machines(loaded)
    }
    assert points[("m1max", "training", "mlp", "mps")].samples_per_second == pytest.approx(
        1024 / 0.10
    )
    assert points[("m1max", "training", "mlp", "mps")].commit == commits[2]
    assert points[("rtx3080", "training", "mlp", "cuda")].samples_per_second == pytest.approx(
        1024 / 0.02
    )
    assert points[("rtx3080", "training", "vgg16", "cuda")].samples_per_second == pytest.approx(
        300.0
    )


def test_batch_curves_list_every_batch_of_the_newest_build(loaded):
    curves = throughput.batch_curves(loaded)
    assert dict(curves[("mlp", "training", "m1max", "cpu")]) == pytest.approx(
        {1: 1 / 0.002, 1024: 1024 / 0.80}
    )
    assert dict(curves[("resnet50", "training", "m1max", "cpu")]) == pytest.approx({1: 1.0, 8: 2.0})


def test_build_over_build_compares_the_newest_two_builds_against_the_factor(loaded, suite):
    tmp, commits = suite
    rules = asvconf.load(
        tmp / "asv.conf.json"
    ).thresholds  # the report's rule, with the factor 1.05
    changes = {
        (c.machine, c.step): c for c in throughput.build_changes(loaded, Reader(tmp / "timeline"))
    }
    assert set(changes) == {  # only what both builds measured; rtx3080 has one build
        ("m1max", Step("training", "mlp", "mps", 1024)),
        ("m1max", Step("training", "mlp", "cpu", 1024)),
        ("m1max", Step("inference", "mlp", "cpu", 1024)),
    }
    ratios = {
        workload: (
            c.ratio,
            rule.judge(
                rules,
                c.row.entry,
                "seconds",
                loaded.recorded.get(machine, c.old, c.row),
                loaded.recorded.get(machine, c.new, c.row),
            ).label,
        )
        for (machine, workload), c in changes.items()
    }
    assert ratios[Step("training", "mlp", "mps", 1024)] == (pytest.approx(1.25), "slower")
    assert ratios[Step("training", "mlp", "cpu", 1024)] == (pytest.approx(0.80 / 0.79), "unchanged")
    assert ratios[Step("inference", "mlp", "cpu", 1024)] == (pytest.approx(0.8), "faster")
    assert {(c.old, c.new) for c in changes.values()} == {(commits[1], commits[2])}


def test_build_over_build_compares_with_the_build_before_on_the_newest_builds_channel_not_by_date(
    tmp_path,
):
    repo = fakes.timeline_repo(tmp_path / "timeline")
    first, newest = (
        fakes.timeline_commit(repo, version, GIT_VERSIONS[0], date)
        for version, date in (("2.1.0", "2026-01-01T00:00:00Z"), ("2.3.0", "2026-03-01T00:00:00Z"))
    )
    fakes.git(repo, "checkout", "-q", "--orphan", "nightly")
    nightly = fakes.timeline_commit(
        repo, "2.2.0", GIT_VERSIONS[1], "2026-02-01T00:00:00Z", kind="nightly", channel="nightly"
    )
    workload = ("training", "time_step", "cpu", "mlp", 1024)
    benchmarks = {}
    for month, (commit, seconds) in enumerate(((first, 0.10), (nightly, 0.20), (newest, 0.12))):
        benchmarks.update(
            asvresults.write_results(
                tmp_path / "results",
                "m",
                commit,
                1767225600000 + month * 31 * 86400000,
                {workload: seconds},
                ["cpu"],
                ["mlp"],
                [1024],
            )
        )
    asvresults.write_benchmarks(tmp_path / "results", benchmarks)
    results = throughput.load(tmp_path / "results")
    assert results.builds("m")[-2] == nightly  # by date, the nightly came before the newest release
    [change] = throughput.build_changes(results, Reader(repo))
    assert (change.old, change.new, change.ratio) == (first, newest, pytest.approx(1.2))
    assert (
        throughput.build_changes(results, Reader(None)) == []
    )  # no timeline: no channel, no build before


@pytest.fixture(scope="module")
def published(suite):
    """asv publish over the synthetic results: asv's own regressions.json and index.json."""
    tmp, _ = suite
    done = subprocess.run(
        [*ASV, "publish", "--config", str(tmp / "asv.conf.json")],
        cwd=tmp,
        env=dict(os.environ, HOME=str(tmp)),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return tmp / "html"


def test_regressions_name_the_pytorch_commit_range_from_each_builds_git_version(suite, published):
    tmp, commits = suite
    found = regressions_page.latest(published, Reader(asvconf.load(tmp / "asv.conf.json").repo))
    mps = [
        r
        for r in found
        if r["benchmark"] == "benchmark_models.Training.time_step('mps', 'mlp', 1024)"
    ]
    assert len(mps) == 1, found
    assert rule.change_ratio(mps[0]["before"], mps[0]["after"]) == pytest.approx(1.25)
    assert (mps[0]["old"], mps[0]["new"]) == (commits[1], commits[2])


def test_a_lone_bar_or_group_keeps_the_width_it_has_among_several(tmp_path):
    def point(device: str, samples_per_second: float) -> throughput.Point:
        return throughput.Point("m", "c", Step("training", "mlp", device, 1024), samples_per_second)

    speedup = figures.speedup(
        "mlp",
        [throughput.Speedup("m", "training", "mlp", "mps", point("mps", 8.0), point("cpu", 1.0))],
        tmp_path / "speedup.png",
    )
    machines = figures.machines("mlp", [point("mps", 8.0)], tmp_path / "machines.png")
    training = machines.axes[0]  # the lone bar's chart; the inference chart beside it has none
    assert (
        speedup.axes[0].get_xlim() == training.get_xlim() == pytest.approx((-0.6, 2.6))
    )  # room for three


def test_the_pytorch_column_is_the_range_the_one_shared_commit_or_unknown():
    a, b = "a" * 40, "b" * 40
    builds = SimpleNamespace(git_version={"t1": a, "t2": b, "t3": b, "t4": None}.get)
    upstream = "https://github.com/pytorch/pytorch"
    assert report.pytorch_range(builds, "t1", "t2") == Link(
        f"{a[:12]}...{b[:12]}", f"{upstream}/compare/{a}...{b}"
    )
    assert report.pytorch_range(builds, "t2", "t3") == Link(
        f"{b[:12]} (both builds)", f"{upstream}/commit/{b}"
    )
    assert (
        report.pytorch_range(builds, None, "t2") == "git_version unknown"
    )  # a channel's first build: no range
    assert (
        report.pytorch_range(builds, "t1", "t4")
        == report.pytorch_range(builds, "t4", "t2")
        == "git_version unknown"
    )


def test_the_report_writes_figures_and_a_summary_with_the_numbers(
    suite, published, tmp_path, capsys
):
    tmp, _ = suite
    out = tmp_path / "mpsbench"
    code = cli.main(
        [
            "report",
            str(tmp / "results"),
            str(out),
            "--config",
            str(tmp / "asv.conf.json"),
            "--site",
            str(published),
        ]
    )
    assert code == 0
    for name in (
        "speedup_mlp",
        "speedup_resnet50",
        "machines_mlp",
        "machines_vgg16",
        "batches_mlp",
    ):
        assert (out / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
    summary = (out / "summary.md").read_text()
    for number in ("8.00x", "4.00x", "32.00x", "25.00x", "**1.250**", "**slower**", "**faster**"):
        assert number in summary, number
    assert "| bs 128 | bs 8* |" in summary
    compare = f"https://github.com/pytorch/pytorch/compare/{GIT_VERSIONS[1]}...{GIT_VERSIONS[2]}"
    assert compare in summary
    page = (out / "summary.html").read_text()
    assert '<tr class="slower">' in page and '<td class="n">1.250</td>' in page
    assert f'href="{compare}"' in page
    upstream = (
        "https://github.com/pytorch/pytorch/compare/",
        "https://github.com/pytorch/pytorch/commit/",
    )
    assert "http" not in page.replace(compare, "").replace(upstream[0], "").replace(upstream[1], "")
    progress = capsys.readouterr().err
    assert "mpsbench report: writing" in progress


def test_a_missing_results_directory_is_one_line_and_exit_2(tmp_path, capsys):
    assert cli.main(["report", str(tmp_path / "nope"), str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == f"mpsbench: error: results directory {tmp_path / 'nope'} does not exist"


def test_the_folder_above_results_is_one_line_and_exit_2_with_nothing_written(tmp_path, capsys):
    # A recorded run's folder (results/ beneath it): asv finds the files, but without benchmarks.json their rows
    # have no param names, which once crashed the compile section with a KeyError.
    run = tmp_path / "run"
    values = {("training", "time_step", "cpu", "mlp", 8): 0.009}
    asvresults.write_benchmarks(
        run / "results",
        asvresults.write_results(run / "results", "m", "1" * 40, 0, values, ["cpu"], ["mlp"], [8]),
    )
    assert cli.main(["report", str(run), str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert (
        err[-1].startswith(f"mpsbench: error: {run} holds no benchmarks.json")
        and "results directory" in err[-1]
    )
    assert not (tmp_path / "out").exists()


def test_the_factor_is_one_plus_the_rows_threshold_of_asv_conf(tmp_path, capsys):
    config = tmp_path / "asv.conf.json"
    config.write_text(
        '{\n  // a comment, as asv allows\n  "regressions_thresholds": {".*": 0.2, "x": 0.5},\n}\n'
    )
    assert cli.main(["factor", "--config", str(config)]) == 0
    assert cli.main(["factor", "--config", str(config), "-b", "xyz"]) == 0
    assert capsys.readouterr().out.split() == ["1.2", "1.5"]
    config.write_text('{"version": 1}')
    assert rule.factor(asvconf.load(config).thresholds) == pytest.approx(
        1 + rule.ASV_DEFAULT_THRESHOLD
    )
    assert rule.factor(asvconf.load(ROOT / "asv.conf.json").thresholds) > 1


def test_a_bad_threshold_is_one_line_naming_it(tmp_path, capsys):
    config = tmp_path / "asv.conf.json"
    config.write_text('{"regressions_thresholds": {".*": "five percent"}}')
    with pytest.raises(
        UserError,
        match=r"regressions_thresholds\['\.\*'\] must be a fraction >= 0, "
        r"got 'five percent'",
    ):
        rule.factor(asvconf.load(config).thresholds)
    assert cli.main(["factor", "--config", str(config)]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_speedup_by_release_draws_each_python_along_the_dates_and_links_each_release(tmp_path):
    repo = tmp_path / "timeline"
    repo.mkdir()
    fakes.git(repo, "init", "-q", "-b", "era")
    commits = [
        fakes.timeline_commit(repo, version, "d" * 40, f"{date}T00:00:00Z")
        for version, date in (
            ("1.12.1", "2022-08-05"),
            ("2.2.2", "2024-03-27"),
            ("2.15.0", "2026-11-01"),
        )
    ]
    results_dir, benchmarks = tmp_path / "results", {}
    # (build, python) -> mps step time; cpu takes 1.0 s, so the speedup is 1 / mps
    mps = {(0, "3.10"): 0.5, (1, "3.10"): 0.25, (1, "3.12"): 0.25, (2, "3.12"): 0.2}
    for (index, python), seconds in mps.items():
        values = {
            ("training", "time_step", "mps", "mlp", 1024): seconds,
            ("training", "time_step", "cpu", "mlp", 1024): 1.0,
        }
        date_ms = int(
            datetime.fromisoformat(("2022-08-05", "2024-03-27", "2026-11-01")[index]).timestamp()
            * 1000
        )
        benchmarks.update(
            asvresults.write_results(
                results_dir,
                "m2",
                commits[index],
                date_ms,
                values,
                DEVICES,
                MODELS,
                BATCHES,
                python=python,
            )
        )
    asvresults.write_benchmarks(results_dir, benchmarks)
    points = throughput.speedup_by_release(recorded.load_each_python(results_dir), Reader(repo))
    assert [
        (p.python, p.torch_version, round(p.ratio, 6))
        for p in sorted(points, key=lambda p: (p.python, p.date_ms))
    ] == [
        ("3.10", "1.12.1", 2.0),
        ("3.10", "2.2.2", 4.0),
        ("3.12", "2.2.2", 4.0),
        ("3.12", "2.15.0", 5.0),
    ]
    assert points[0].link == "https://github.com/pytorch/pytorch/releases/tag/v1.12.1"
    config = (
        tmp_path / "asv.conf.json"
    )  # the report finds the timeline through asv.conf.json's repo
    config.write_text(json.dumps({"repo": "timeline", "regressions_thresholds": {".*": 0.05}}))
    report.build(results_dir, tmp_path / "out", asvconf.load(config))
    assert (tmp_path / "out" / "speedup_by_release.png").stat().st_size > 0
    assert (
        'href="https://github.com/pytorch/pytorch/releases/tag/v2.15.0"'
        in (tmp_path / "out" / "summary.html").read_text()
    )
