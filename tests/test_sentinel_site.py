"""Issue 33 on the site and in the alert: a correctness row past its tolerance is a regression of its own kind.

Two nightlies measured on the cpu here: the first as this torch computes, the second with a stand-in that puts
pytorch#188438's wrong result (a Linear with bias 20% off) in the kernel's place and a Determinism row that
stopped repeating. Their recorded values go through asv's own Results class, a real ``asv publish``, the judged
Regressions page, ``mpsbench alert`` and the figures page.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from datetime import datetime, timezone
from pathlib import Path

import pytest
from tests import asvresults
from tests.test_alerts import DATES, nightly_build
from tests.test_correctness import _bias_off

from mpsbench.builds import manifest as mf
from mpsbench.builds import timeline
from mpsbench.context import Suite
from mpsbench.core import asvconf
from mpsbench.measure import correctness, energy, tolerances
from mpsbench.regressions import alerts, rule
from mpsbench.results import recorded
from mpsbench.results.recorded import Measured
from mpsbench.site import regressions_page, report

ROOT = Path(__file__).resolve().parents[1]
MACHINE = "mac"
ERROR = "benchmark_patterns.ReportedCorrectness.track_relative_error"
DIFFERENCE = "benchmark_patterns.Determinism.track_largest_difference"
ENERGY = "benchmark_models.TrainingCapacity.track_joules_per_step"
WRONG_ROW = ("cpu", "linear_bias", "float32")
CRASHED_ROW = ("cpu", "linear_broadcast_input", "float32")
PATTERN_PARAMS = ["device", "pattern", "dtype"]


def test_an_error_row_is_judged_by_its_dtypes_tolerance_and_a_difference_row_by_bit_identity():
    def judge(entry, unit, old, new):
        return rule.judge({".*": 0.05}, entry, unit, Measured(old), Measured(new))

    entry = f"{ERROR}('cpu', 'linear_3d_no_bias', 'float16')"
    assert (
        judge(entry, tolerances.ERROR_UNIT, 3e-4, 3e-3).decision is rule.Decision.UNCHANGED
    )  # 10x, within 5e-2
    wrong = judge(entry, tolerances.ERROR_UNIT, 3e-4, 0.06)
    assert (wrong.decision, wrong.label, wrong.threshold) == (
        rule.Decision.WRONG,
        "wrong result",
        0.05,
    )
    assert wrong.regressed and not wrong.slower
    assert judge(entry, tolerances.ERROR_UNIT, 0.06, 3e-4).label == "fixed"
    assert (
        judge(entry, tolerances.ERROR_UNIT, 0.06, 0.6).decision is rule.Decision.UNCHANGED
    )  # still past it
    float32 = f"{ERROR}('cpu', 'linear_bias', 'float32')"
    assert (
        judge(float32, tolerances.ERROR_UNIT, 6e-8, 0.02).decision is rule.Decision.WRONG
    )  # float32's 1e-2
    drift = judge(
        f"{DIFFERENCE}('mps', 'linear_3d_no_bias', 'bfloat16')",
        tolerances.DIFFERENCE_UNIT,
        0.0,
        1e-3,
    )
    assert (drift.decision, drift.label) == (rule.Decision.WRONG, "nondeterministic")
    assert rule.Decision.WRONG.exit_status == 1


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """The two nightlies' results, timeline and config; asv publish and the judged Regressions page."""
    tmp = tmp_path_factory.mktemp("sentinels")
    manifest = mf.Manifest()
    for day in range(2):
        manifest = mf.append(manifest, "nightly", nightly_build(day))
    mf.save(manifest, tmp / "manifest.json")
    commits = [
        timeline.generate(manifest, tmp / "timeline").commits[f"nightly@{date}"]
        for date in DATES[:2]
    ]
    readings = []
    with pytest.MonkeyPatch.context() as monkeypatch:
        for day in range(2):
            correctness.forget()
            if day == 1:
                _bias_off(monkeypatch)
            readings.append(correctness.reading(*WRONG_ROW))
    results, benchmarks = tmp / "results", {}
    for day, reading in enumerate(readings):
        when = int(
            datetime.fromisoformat(f"{DATES[day]}T03:00:00")
            .replace(tzinfo=timezone.utc)
            .timestamp()
            * 1000
        )
        params = [["cpu"], ["linear_bias", "linear_broadcast_input"], ["float32"]]
        benchmarks.update(
            asvresults.write_track(
                results,
                MACHINE,
                commits[day],
                when,
                ERROR,
                PATTERN_PARAMS,
                params,
                tolerances.ERROR_UNIT,
                {WRONG_ROW: reading.error, CRASHED_ROW: None},
            )
        )
        benchmarks.update(
            asvresults.write_track(
                results,
                MACHINE,
                commits[day],
                when,
                DIFFERENCE,
                PATTERN_PARAMS,
                params,
                tolerances.DIFFERENCE_UNIT,
                {WRONG_ROW: [0.0, 2e-3][day]},
            )
        )
        benchmarks.update(
            asvresults.write_track(
                results,
                MACHINE,
                commits[day],
                when,
                ENERGY,
                ["device", "model", "batch_size"],
                [["cuda"], ["mlp"], [1024]],
                energy.UNIT,
                {("cuda", "mlp", 1024): [0.2, 0.25][day]},
            )
        )
    asvresults.write_benchmarks(results, benchmarks)
    config = asvconf.load(ROOT / "asv.conf.json").raw
    config.update(
        repo=str(tmp / "timeline"),
        branches=["nightly"],
        results_dir=str(results),
        html_dir=str(tmp / "html"),
        env_dir=str(tmp / "env"),
        benchmark_dir=str(ROOT / "benchmarks"),
    )
    (tmp / "asv.conf.json").write_text(json.dumps(config))
    done = subprocess.run(
        [sys.executable, "-m", "asv", "publish", "--config", str(tmp / "asv.conf.json")],
        cwd=tmp,
        env=dict(os.environ, HOME=str(tmp)),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    suite = Suite(tmp / "asv.conf.json", tmp / "manifest.json", tmp / "timeline")
    regressions_page.judge_site(
        suite.conf.html,
        suite.conf.results,
        recorded.load(suite.conf.results),
        suite.conf.thresholds,
        suite.reader,
    )
    return tmp, suite, readings


def test_the_stand_in_makes_the_row_jump_past_its_tolerance(run):
    _, _, (clean, wrong) = run
    assert (
        clean.error
        <= tolerances.TOLERANCES["float32"] / 10
        < tolerances.TOLERANCES["float32"]
        < wrong.error
    )


def test_the_regressions_page_keeps_the_wrong_result_as_its_own_kind(run):
    tmp, _, _ = run
    html = tmp / "html"
    judged = json.loads((html / regressions_page.JUDGED).read_text())
    kinds = {j["benchmark"]: (j["verdict"], j["regressed"]) for j in judged}
    assert kinds[f"{ERROR}('cpu', 'linear_bias', 'float32')"] == ("wrong result", True)
    assert kinds[f"{DIFFERENCE}('cpu', 'linear_bias', 'float32')"] == ("nondeterministic", True)
    kept = {
        entry[0] for entry in json.loads((html / "regressions.json").read_text())["regressions"]
    }
    assert f"{ERROR}('cpu', 'linear_bias', 'float32')" in kept
    atom = "{http://www.w3.org/2005/Atom}"
    titles = [
        entry.findtext(f"{atom}title")
        for entry in ET.parse(html / "regressions.xml").getroot().iter(f"{atom}entry")
    ]
    assert f"wrong result: {ERROR}('cpu', 'linear_bias', 'float32') (relative error" in "\n".join(
        titles
    )


def test_the_alert_names_the_wrong_result(run, capsys):
    _, suite, _ = run
    code, text = alerts.check(suite, alerts.Options())
    out = capsys.readouterr().out.splitlines()
    assert code == 1
    assert any(
        line.startswith(f"wrong result  {ERROR}('cpu', 'linear_bias', 'float32') on {MACHINE}")
        and "tolerance 0.01" in line
        for line in out
    ), out
    assert any(
        line.startswith(f"nondeterministic  {DIFFERENCE}('cpu', 'linear_bias', 'float32')")
        for line in out
    )
    assert (
        out[-1] == f"mpsbench alert: REGRESSION: 1 rows slower, 2 wrong on {MACHINE}"
    )  # the energy row: 1.25x
    assert "## Wrong results" in text


def test_the_figures_page_draws_correctness_and_samples_per_joule_by_release(run, tmp_path):
    tmp, suite, (clean, wrong) = run
    report.build(tmp / "results", tmp_path / "out", suite.conf, site=tmp / "html")
    page = (tmp_path / "out" / "summary.html").read_text()
    summary = (tmp_path / "out" / "summary.md").read_text()
    assert "<h2>Correctness by release</h2>" in page
    assert (
        f"| linear_bias float32 on cpu: error | {clean.error:.2g} | **{wrong.error:.2g}** |"
        in summary
    )
    assert f'<td class="n flagged">{wrong.error:.2g}</td>' in page  # red past the tolerance
    assert (
        "| linear_broadcast_input float32 on cpu: error | **failed** | **failed** |" in summary
    )  # a crash: red
    assert "| linear_bias float32 on cpu: difference | 0 | **0.002** |" in summary
    assert (tmp_path / "out" / "samples_per_joule.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (
        "| mac cuda | mlp | training | 5,120 |" in summary
        and "| mac cuda | mlp | training | 4,096 |" in summary
    )
    assert "| wrong result |" in summary  # the latest regressions name their kind
