"""This tree's ops table against another commit's, in one process on the cpu: each op's median time per call, the
two tables' cases timed in interleaved rounds, printed as new/old (median and range over the rounds).

Checks that an edit of src/mpsbench/measure/ops.py leaves what the op rows time alone (docs/explanation/budget.md).

    .venv/bin/python -m tools.op_table_against 3debd51 add,mul,gelu,index_select --rounds 15
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from types import ModuleType

import torch

from mpsbench.measure import ops, timing

ROOT = Path(__file__).resolve().parents[1]


def _old_table(rev: str, folder: Path) -> ModuleType:
    source = subprocess.run(["git", "show", f"{rev}:src/mpsbench/measure/ops.py"], cwd=ROOT, check=True,
                            capture_output=True, text=True).stdout
    path = folder / "ops_old.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("mpsbench.measure.ops_old", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("rev", help="the commit whose ops table is the baseline")
    parser.add_argument("ops", help="comma-separated op names")
    parser.add_argument("--size", default="small", choices=ops.SIZES)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as folder:
        old = _old_table(args.rev, Path(folder))
        for name in args.ops.split(","):
            for training in (False, True) if ops.get(name).has_backward else (False,):
                cases = {"old": old.OpCase(old.get(name), "cpu", "float32", args.size, training),
                         "new": ops.OpCase(ops.get(name), "cpu", "float32", args.size, training)}
                for case in cases.values():
                    case.warm_up(20)
                ratios = []
                for _ in range(args.rounds):
                    seconds = {label: timing.median_seconds(case.run, "cpu", case.calls_per_sample, 5, 0.05)[0]
                               for label, case in cases.items()}
                    ratios.append(seconds["new"] / seconds["old"])
                print(f"{name:16s} {'forward+backward' if training else 'forward':16s} old {seconds['old'] * 1e6:8.2f} us"
                      f"  new/old {statistics.median(ratios):.4f} [{min(ratios):.3f}, {max(ratios):.3f}]", flush=True)


if __name__ == "__main__":
    main()
