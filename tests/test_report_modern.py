"""The figures page's compile and tokens/s sections, from the H100 run's real asv results (docs/results)."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

from mpsbench import report

RUN = Path(__file__).resolve().parents[1] / "docs" / "results" / "h100-2026-11-23-issue21"


def test_tokens_per_second_is_the_inverse_of_the_decode_time_and_compile_needs_an_eager_twin(tmp_path):
    results = tmp_path / "results"
    shutil.copytree(RUN / "h100-sxm", results / "h100-sxm")
    shutil.copy(RUN / "benchmarks.json", results / "benchmarks.json")
    report.build(results, tmp_path / "out")
    summary = (tmp_path / "out" / "summary.md").read_text()
    recorded = json.loads(next((results / "h100-sxm").glob("cf22*.json")).read_text())
    columns = recorded["result_columns"]
    decode = dict(zip(columns, recorded["results"]["benchmark_modern.LlmDecode.time_decode"]))
    seconds = next(value for value in decode["result"] if value is not None and math.isfinite(value))  # n/a: NaN
    assert f"| h100-sxm | cuda | llama_small | {1 / seconds:.1f} |" in summary
    assert (tmp_path / "out" / "tokens.png").stat().st_size > 0
    # The run compiled only the mlp and timed no eager mlp: no pair to draw, and the page says so.
    assert "No machine has compiled results beside eager ones" in summary
