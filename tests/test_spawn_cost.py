"""tools/spawn_cost.py: reading ``python -X importtime`` and refusing a folder that is not a checkout."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from tools import spawn_cost

ROOT = Path(__file__).resolve().parents[1]

# Shaped as python -X importtime writes it: self and cumulative microseconds, the name indented by nesting.
REPORT = """import time: self [us] | cumulative | imported package
import time:      2000 |       2000 |     torch._C
import time:      1000 |       3000 |   torch
import time:       500 |       3500 | mpsbench.measure.models
import time:       250 |        250 |   torchvision.ops
import time:       400 |       4650 | torchvision.models
import time:       300 |        300 |       transformers.activations
import time:       100 |        100 | asv_runner.check
"""


def test_each_heavy_package_counts_its_own_modules_wherever_they_nest():
    found = spawn_cost.imports(REPORT)
    assert found == pytest.approx({"torch": 0.003, "torchvision": 0.00065, "transformers": 0.0003})


def test_a_report_without_them_finds_none():
    assert spawn_cost.imports("import time:       100 |        100 | asv_runner.check\n") == {}


def test_a_folder_that_is_not_a_checkout_is_refused_in_one_line(tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "tools" / "spawn_cost.py"),
            "processes",
            "--checkout",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=ROOT,
    )
    assert done.returncode == 2
    assert (
        done.stderr.strip()
        == f"spawn_cost: {tmp_path} holds no src/ and benchmarks/; pass a checkout of the suite"
    )
