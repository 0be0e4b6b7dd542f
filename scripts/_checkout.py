"""What scripts/calibrate.py and scripts/calibrate_step.py do first: run from this checkout's
sources and under its .venv, from a clone's bare `python3 scripts/...` too."""

from __future__ import annotations

import os
import sys
from pathlib import Path


def use_checkout(script: str) -> Path:
    """Put the checkout (for tools/) and, where mpsbench is not installed, its src/ on the path, here
    and in every child process; where psutil is missing, run ``script`` again under the clone's
    .venv. Returns the checkout's root."""
    root = Path(script).resolve().parents[1]
    src = root / "src"
    sys.path.insert(0, str(root))  # tools/: the calibration lives beside the package, not in it
    try:
        import mpsbench  # noqa: F401  # installed (pip install -e .)
    except ImportError:  # a bare checkout: use its sources
        sys.path.insert(0, str(src))
        os.environ["PYTHONPATH"] = os.pathsep.join(
            filter(None, [str(src), os.environ.get("PYTHONPATH")])
        )
    try:
        import psutil  # noqa: F401  # the suite's dependency a system python3 most often lacks
    except ModuleNotFoundError:
        # scripts/setup installed the dependencies into .venv: run under it. A machine without
        # .venv (the lent GPU's, PYTHONPATH set) has them in its own python3.
        venv = root / ".venv"
        if not (venv / "bin" / "python").is_file() or Path(sys.prefix).resolve() == venv.resolve():
            raise
        os.execv(venv / "bin" / "python", [str(venv / "bin" / "python"), script, *sys.argv[1:]])
    return root
