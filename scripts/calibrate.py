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

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # scripts/: _checkout beside this file
from _checkout import use_checkout

use_checkout(__file__)

from tools.calibration import calibrate  # noqa: E402

sys.exit(calibrate.main())
