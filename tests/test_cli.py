"""The mpsbench command: listings, a quick run, and one-line errors for bad input."""

from __future__ import annotations

import pytest

from mpsbench import cli
from mpsbench.measure import models


def test_models_lists_every_registered_model(capsys):
    assert cli.main(["models"]) == 0
    out = capsys.readouterr().out
    for name in models.NAMES:
        assert name in out


def test_devices_lists_cpu_as_usable(capsys):
    assert cli.main(["devices"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any(line.split()[:2] == ["cpu", "yes"] for line in lines)
    assert any(line.split()[:1] == ["mps"] for line in lines)


def test_run_prints_a_table_with_ms_per_step_and_samples_per_second(capsys):
    assert cli.main(["run", "mlp", "--batch-size", "8", "--seconds", "0.05"]) == 0
    out = capsys.readouterr().out
    header, _, training, inference = out.splitlines()[:4]
    assert "ms/step" in header and "samples/s" in header
    assert training.split()[:4] == ["training", "mlp", "cpu", "8"]
    assert inference.split()[:4] == ["inference", "mlp", "cpu", "8"]
    assert float(training.split()[4]) > 0


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["run", "alexnet"], "unknown model 'alexnet'; choose one of: mlp, lenet5, resnet50"),
        (["run", "mlp", "--device", "tpu"], "unknown device 'tpu'; choose one of: cpu, mps, cuda"),
        (["run", "mlp", "--batch-size", "3"], "batch size 3 is not run for mlp; choose one of: 1, 8, 32"),
        (["run", "mlp", "--batch-size", "big"], "argument --batch-size: --batch-size must be a whole number of at least 1,"
                                                " got 'big'"),
        (["run", "mlp", "--kind", "eval"], "unknown workload kind 'eval'; choose one of: training, inference"),
        (["run", "mlp", "--device", "mps"], "device mps is not usable here: "),
    ],
)
def test_bad_input_is_one_line_on_stderr_with_status_2(capsys, argv, message):
    assert cli.main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(f"mpsbench: error: {message}")
    assert captured.err.count("\n") == 1


def test_machine_quiet_prints_only_the_name_asv_commands_take(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))  # asv's machine file lives in the home folder
    assert cli.main(["machine", "--quiet", "--name", "ci-box"]) == 0
    assert capsys.readouterr().out == "ci-box\n"
    assert "ci-box" in (tmp_path / ".asv-machine.json").read_text()
