"""torch is executed at its first use (mpsbench.measure.optional_torch): a spawned track_ lookup never loads it.

Each check runs in a fresh interpreter, as asv's spawn launch method starts a benchmark process.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MODULES = sorted(path.stem for path in (ROOT / "benchmarks").glob("benchmark_*.py"))


def _fresh(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_benchmark_modules_import_without_executing_torch():
    """asv's discovery imports every module, and a spawned lookup imports its own: neither loads torch."""
    code = (
        "import importlib\nfrom mpsbench.measure import optional_torch\n"
        f"for name in {MODULES!r}:\n"
        "    importlib.import_module('benchmarks.' + name)\n"
        "    print(name, optional_torch.loaded())\n"
    )
    loaded = dict(line.split() for line in _fresh(code).splitlines())
    assert loaded == dict.fromkeys(MODULES, "False")


@pytest.mark.parametrize("module", MODULES)
def test_each_module_alone_leaves_torch_unloaded(module):
    assert (
        _fresh(
            f"import benchmarks.{module}\nfrom mpsbench.measure import optional_torch\n"
            "print(optional_torch.loaded())"
        )
        == "False"
    )


def test_a_capacity_lookup_reads_its_figure_without_torch():
    code = (
        "from benchmarks import benchmark_models as bm\nfrom mpsbench.measure import measured, optional_torch\n"
        "table = measured.Table({('cpu', 'mlp', 8): {'throughput': measured.Outcome(value=123.0)}})\n"
        "print(bm.TrainingCapacity().track_throughput({'training': table}, 'cpu', 'mlp', 8),"
        " optional_torch.loaded())"
    )
    assert _fresh(code) == "123.0 False"


def test_an_op_throughput_lookup_reads_its_figure_without_torch():
    code = (
        "from benchmarks import benchmark_ops as bo\nfrom mpsbench.measure import measured, optional_torch\n"
        "key = ('cpu', 'add', 'float32', 'small')\n"
        "table = measured.Table({key: {'throughput': measured.Outcome(value=7.5)}})\n"
        "bench = bo.MemoryBoundOps()\nbench.setup({'MemoryBoundOps': table}, *key)\n"
        "print(bench.track_gbps({'MemoryBoundOps': table}, *key), optional_torch.loaded())"
    )
    assert _fresh(code) == "7.5 False"


def test_the_first_attribute_imports_torch_and_reads_through_to_it():
    code = (
        "from mpsbench.measure import optional_torch\nimport sys\n"
        "before = optional_torch.loaded()\nzeros = optional_torch.torch.zeros(2)\n"
        "print(before, optional_torch.loaded(), type(sys.modules['torch']).__name__,"
        " optional_torch.torch.Tensor is sys.modules['torch'].Tensor,"
        " optional_torch.nn.Linear is sys.modules['torch'].nn.Linear)"
    )
    assert _fresh(code) == "False True module True True"


def test_a_submodule_imported_first_finds_torch_whole():
    """Python 3.12 broke the LazyLoader version here: ``from torch.utils.data import ...`` before any attribute read."""
    code = (
        "from mpsbench.measure import optional_torch\nfrom torch.utils.data import DataLoader\n"
        "print(optional_torch.torch.utils.data.DataLoader is DataLoader, optional_torch.torch.cuda.is_available())"
    )
    assert _fresh(code) == "True False"


def test_asvs_forkserver_loads_torch_before_it_forks():
    """The server preloads torch: a forked benchmark process must not import it alone."""
    code = (
        "import sys, types\nsys.modules['asv_runner.server'] = types.ModuleType('asv_runner.server')\n"
        "sys.argv[1:] = [{mode!r}, 'benchmarks']\n"
        "import benchmarks\nfrom mpsbench.measure import optional_torch\n"
        "print(optional_torch.loaded(), 'transformers' in sys.modules)"
    )
    assert _fresh(code.format(mode="run_server")) == "True True"
    assert (
        _fresh(code.format(mode="run")) == "False False"
    )  # a spawned process: asv's benchmark.py run
