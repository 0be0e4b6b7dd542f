"""The figures page's compile and tokens/s sections, from the H100 runs' real asv results (tests/data/recorded)."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

from tests import asvresults

from mpsbench.site import figures, report, throughput

RUN = asvresults.RECORDED / "h100-2026-11-23-issue21"


def test_tokens_per_second_is_the_inverse_of_the_decode_time_and_compile_needs_an_eager_twin(
    tmp_path,
):
    results = tmp_path / "results"
    shutil.copytree(RUN / "h100-sxm", results / "h100-sxm")
    shutil.copy(RUN / "benchmarks.json", results / "benchmarks.json")
    report.build(results, tmp_path / "out")
    summary = (tmp_path / "out" / "summary.md").read_text()
    recorded = json.loads(next((results / "h100-sxm").glob("cf22*.json")).read_text())
    columns = recorded["result_columns"]
    decode = dict(zip(columns, recorded["results"]["benchmark_modern.LlmDecode.time_decode"]))
    seconds = next(
        value for value in decode["result"] if value is not None and math.isfinite(value)
    )  # n/a: NaN
    assert f"| h100-sxm | cuda | llama_small | {1 / seconds:.1f} |" in summary
    assert (tmp_path / "out" / "tokens.png").stat().st_size > 0
    # The run compiled only the mlp and timed no eager mlp: no pair to draw, and the page says so.
    assert "No machine has compiled results beside eager ones" in summary


def test_rows_that_benchmarks_json_does_not_describe_are_left_out_not_a_traceback(tmp_path):
    # asv publish leaves out a benchmark missing from benchmarks.json (an older suite's): so does the report,
    # which read such rows without param names and failed with KeyError: 'device'.
    results = tmp_path / "results"
    shutil.copytree(RUN / "h100-sxm", results / "h100-sxm")
    described = json.loads((RUN / "benchmarks.json").read_text())
    kept = {
        name: entry
        for name, entry in described.items()
        if not name.startswith("benchmark_compile.")
    }
    assert len(kept) < len(described)  # the run recorded compiled rows
    (results / "benchmarks.json").write_text(json.dumps(kept))
    report.build(results, tmp_path / "out")
    summary = (tmp_path / "out" / "summary.md").read_text()
    assert "No machine has compiled results beside eager ones" in summary
    assert "| h100-sxm | cuda | llama_small |" in summary  # the described rows are still read


def test_the_compile_figure_draws_each_pair_with_its_speedup(tmp_path):
    found = [
        throughput.Pair("h100", "training", "cuda", "resnet50", 0.0718, 0.0463, 59.2),
        throughput.Pair("h100", "inference", "cuda", "mlp", 0.0001, 0.000385, 4.1),
    ]
    assert [round(p.speedup, 2) for p in found] == [
        1.55,
        0.26,
    ]  # eager over compiled: below 1 is slower compiled
    figures.compile_pairs(found, tmp_path / "compile.png")
    assert (tmp_path / "compile.png").stat().st_size > 0


def test_the_report_command_draws_the_compile_pairs_of_the_asv_run_on_the_h100(tmp_path):
    # Run as the command, in a process of its own: the compile and tokens sections must still be recognised.
    import subprocess
    import sys

    run = asvresults.RECORDED / "h100-2026-11-23-issue21-asv"
    done = subprocess.run(
        [
            str(Path(sys.executable).with_name("mpsbench")),
            "report",
            str(run),
            str(tmp_path / "out"),
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    summary = (tmp_path / "out" / "summary.md").read_text()
    # eager Training.time_step('cuda', 'resnet50', 128) 72.01 ms, compiled 45.84 ms, compile 47.6 s (asv, 2026-11-23)
    assert "| calib-cuda | cuda | training | resnet50 | 72.01 | 45.84 | 1.57x | 47.6 |" in summary
    assert "| calib-cuda | cuda | llama_small | 74.3 |" in summary
