"""Cold start: the first step, timed in a fresh process; and a real asv run of the issue-6 classes."""

from __future__ import annotations

import dataclasses
import math
import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from benchmarks import benchmark_coldstart
from tests import asvresults

from mpsbench.measure import fallback, models, selection, suite

ROOT = Path(__file__).resolve().parents[1]


def test_the_first_step_runs_in_a_fresh_interpreter_with_only_the_statement_timed():
    """What asv's ``timeraw_`` does with the pair: a new interpreter runs the setup, then times the statement once."""
    statement, setup = benchmark_coldstart.TrainingColdStart().timeraw_first_step("cpu", "mlp")
    code = f"import timeit\nprint(timeit.timeit({statement!r}, {setup!r}, number=1))"
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT / "src")),
    )
    assert done.returncode == 0, done.stderr
    seconds = float(done.stdout.strip())
    assert math.isfinite(seconds)
    assert seconds > 0


def test_only_the_step_is_timed_the_build_is_setup():
    statement, setup = benchmark_coldstart.InferenceColdStart().timeraw_first_step("cpu", "lenet5")
    assert statement == "first_step()"
    assert "suite.cold_first_step('inference', 'cpu', 'lenet5', 128)" in setup


def test_the_classes_run_the_seed_batch_size():
    _, setup = benchmark_coldstart.TrainingColdStart().timeraw_first_step("cpu", "resnet50")
    assert "'resnet50', 128)" in setup  # Apple's ResNet50 chart batch


def _falling_back_mlp(monkeypatch):
    mlp = models.get("mlp")

    def forward(model, inputs):
        warnings.warn(
            "The operator 'aten::_embedding_bag' is not currently supported on the MPS backend and will fall"
            " back to run on the CPU. This may have performance implications.",
            UserWarning,
            stacklevel=2,
        )
        return mlp.forward(model, inputs)

    monkeypatch.setitem(models.REGISTRY, "mlp", dataclasses.replace(mlp, forward=forward))


def test_a_first_step_that_falls_back_fails_unless_allowed(monkeypatch):
    _falling_back_mlp(monkeypatch)
    monkeypatch.delenv(fallback.ALLOW_ENV, raising=False)
    first_step = suite.cold_first_step("training", "cpu", "mlp", 8)
    with pytest.raises(
        fallback.FallbackError, match=r"first step: 1 op\(s\) fell back .*aten::_embedding_bag"
    ):
        first_step()
    monkeypatch.setenv(fallback.ALLOW_ENV, "1")
    suite.cold_first_step("training", "cpu", "mlp", 8)()


def test_large_models_on_the_cpu_are_outside_the_default_selection(monkeypatch):
    monkeypatch.delenv(selection.FULL_SWEEP_ENV, raising=False)
    with pytest.raises(
        suite.SkipNotImplemented, match="vgg16 at batch 64 on cpu is outside the default cold start"
    ):
        benchmark_coldstart.InferenceColdStart().setup("cpu", "vgg16")
    benchmark_coldstart.InferenceColdStart().setup("cpu", "lenet5")  # small: runs


# --- a real asv run --------------------------------------------------------------------


@pytest.fixture(scope="module")
def asv_run(tmp_path_factory):
    return asvresults.suite_asv(
        tmp_path_factory.mktemp("asv"),
        PYTORCH_ENABLE_MPS_FALLBACK="1",
        **{fallback.ALLOW_ENV: None},
    )


def _cell(output: str, benchmark: str, device: str, model: str) -> str:
    """asv's printed value for (device, model) of a benchmark, in either of asv's table layouts."""
    start = output.index(benchmark)
    end = output.find("\n[", start + len(benchmark) + 200)
    lines = [line.split() for line in output[start : end if end > 0 else None].splitlines()]
    for cells in lines:  # one row per combination: "cpu  lenet5  207±0ms"
        if cells[:2] == [device, model] and len(cells) >= 3:
            return cells[2]
    header = next(
        cells for cells in lines if cells[:1] == ["device"]
    )  # devices down, models across
    row = next(cells for cells in lines if cells[:1] == [device])
    return row[header.index(model)]


@pytest.mark.slow
def test_asv_runs_the_instruments_cold_start_and_precision_on_cpu(asv_run):
    selection_args = [
        "-b",
        r"TrainingColdStart.timeraw_first_step\('cpu', 'lenet5'\)",
        "-b",
        r"InferenceInstruments.track_(fallback_ops|leak)\('cpu', 'lenet5'\)",
        "-b",
        r"InferencePrecision.time_step\('cpu', 'lenet5', 'float32'\)",
        "-b",
        r"Environment.track_mps_fallback_enabled",
    ]
    done = asv_run(
        "run",
        "--python=same",
        "--quick",
        "--dry-run",
        "--show-stderr",
        "--launch-method",
        "forkserver",
        *selection_args,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    cold = _cell(output, "TrainingColdStart.timeraw_first_step", "cpu", "lenet5")
    assert re.fullmatch(r"[\d.]+(±[\d.]+)?(μs|us|ms|s)", cold), cold
    assert _cell(output, "InferenceInstruments.track_fallback_ops", "cpu", "lenet5") == "0"
    assert abs(float(_cell(output, "InferenceInstruments.track_leak", "cpu", "lenet5"))) < 25
    # lenet5 is outside the default precision selection on the cpu: n/a with the reason, not a failure
    assert "outside the default precision selection" in output
    assert re.search(r"Environment.track_mps_fallback_enabled\s+1\b", output), output
