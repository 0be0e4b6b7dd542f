"""torch, executed at its first use where it is installed; elsewhere a stand-in that says so at the first use.

Two kinds of process import the measuring modules without measuring anything:
- The fleet's hosted jobs (resolving, merging, alerting, publishing) have no torch, yet read the model registry's
  names and sizes and the device names, which live beside the code that measures. Without torch, importing works
  and only what would measure raises ``ModuleNotFoundError`` naming torch.
- asv's ``track_`` lookups of a ``setup_cache`` (mpsbench.measure.measured): a process per combination that only
  reads a pickled number. On macOS asv spawns every one of them, and importing torch took 1.4-2 s of each here
  (docs/budget.md, "Spawn against forkserver"): with torch loaded at its first use, a lookup never loads it.

Every module of the package takes torch from here (``from mpsbench.measure.optional_torch import torch``): a
stand-in that imports torch, the ordinary way, at the first attribute read and forwards every read to it. An
earlier version installed ``importlib.util.LazyLoader``'s module as ``torch`` itself; on Python 3.12 (the H100's
3.12.3, torch 2.11) torch's own submodule imports then met the half-executed module (``'_LazyModule' object has no
attribute 'Tensor'``, a RecursionError), so no module object other than torch's own is ever put in sys.modules
here. A read costs one more attribute lookup than ``torch.x`` (well under a microsecond), outside every timed
kernel. Module-level code must still not read an attribute of torch (a type alias, a table of dtypes, a base
class): that would import it at import (tests/test_torch_free.py checks every benchmark module). ``nn`` is
``torch.nn`` read at each use.
"""

from __future__ import annotations

import importlib.util
import sys
from typing import TYPE_CHECKING, Any


class _Absent:
    """Any attribute of a module that is not installed: an error that names it."""

    def __init__(self, name: str, error: str) -> None:
        self._name, self._error = name, error

    def __getattr__(self, attribute: str) -> Any:
        raise ModuleNotFoundError(
            f"{self._name}.{attribute} needs torch, which is not installed here ({self._error}); "
            "only measuring needs it: pip install torch"
        )


class _Module:
    """Module ``name``, imported the ordinary way at the first attribute read and read through at every one after."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attribute: str) -> Any:
        module = sys.modules.get(self._name) or importlib.import_module(self._name)
        return getattr(module, attribute)

    def __repr__(self) -> str:
        return f"<{self._name}, imported at its first use>"


def loaded() -> bool:
    """Whether torch has been imported in this process (False also where torch is absent)."""
    return "torch" in sys.modules


INSTALLED = "torch" in sys.modules or importlib.util.find_spec("torch") is not None
if TYPE_CHECKING:
    import torch
    from torch import nn
elif INSTALLED:
    torch, nn = _Module("torch"), _Module("torch.nn")
else:
    torch, nn = _Absent("torch", "no module named 'torch'"), _Absent("torch.nn", "no module named 'torch'")


def load() -> None:
    """Import torch now (asv's forkserver: before it forks the benchmark processes); nothing if absent."""
    if INSTALLED:
        torch.__version__  # noqa: B018  # the first attribute read imports it

__all__ = ["INSTALLED", "load", "loaded", "nn", "torch"]
