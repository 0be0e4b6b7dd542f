#!/usr/bin/env python3
"""Calibrate the suite on the GPU present and print the tables (issue #4).

Fidelity (asv against a hand-written loop and CUDA events), noise (two runs of
the same build), sensitivity (asv continuous on an injected 5% slowdown and on
A/A), cost (forkserver and spawn, time outside timed steps) and a per-stage
breakdown of a benchmark process. Runs the real suite through asv against the
torch installed here, so nothing is downloaded: on a Mac it produces the same
tables for mps.

    scripts/calibrate                                   # the first GPU found (cuda, else mps)
    scripts/calibrate --phases breakdown fidelity noise # a part of it
    scripts/calibrate --device cpu --select "time_step\\('cpu', 'mlp', 8\\)"   # a quick try

Writes calibration.md and calibration.json to --out ($OUT when set, else
.asv/calibration). Works from a bare checkout: src/ is put on the path, also
for the processes it starts.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
sys.path.insert(0, str(ROOT))  # tools/: the calibration lives beside the package, not in it
try:
    import mpsbench  # noqa: F401  # installed (pip install -e .)
except ImportError:  # a bare checkout: use its sources, here and in every child process
    sys.path.insert(0, str(SRC))
    os.environ["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(SRC), os.environ.get("PYTHONPATH")])
    )
try:
    import psutil  # noqa: F401  # the suite's dependency a system python3 most often lacks
except ModuleNotFoundError:
    # A clone's `python3 scripts/...` (or the shebang): scripts/setup installed the dependencies into .venv, so run
    # under it. A machine without .venv (the lent GPU's, PYTHONPATH set) has them in its own python3.
    VENV = ROOT / ".venv"
    if not (VENV / "bin" / "python").is_file() or Path(sys.prefix).resolve() == VENV.resolve():
        raise
    os.execv(VENV / "bin" / "python", [str(VENV / "bin" / "python"), __file__, *sys.argv[1:]])

from tools.calibration import calibrate  # noqa: E402

sys.exit(calibrate.main())
