"""torch, executed at its first use where it is installed; elsewhere a stand-in that says so at the first use.

Two kinds of process import the measuring modules without measuring anything:
- The fleet's hosted jobs (resolving, merging, alerting, publishing) have no torch, yet read the model registry's
  names and sizes and the device names, which live beside the code that measures. Without torch, importing works
  and only what would measure raises ``ModuleNotFoundError`` naming torch.
- asv's ``track_`` lookups of a ``setup_cache`` (mpsbench.measure.measured): a process per combination that only
  reads a pickled number. On macOS asv spawns every one of them, and importing torch took 1.4-2 s of each here
  (docs/budget.md, "Spawn against forkserver"): with torch loaded at its first use, a lookup never loads it.

Every module of the package takes torch from here (``from mpsbench.measure.optional_torch import torch``), so
the first of them installs the lazily executed module before any other ``import torch`` runs. ``importlib.util
.LazyLoader`` executes torch's ``__init__`` at the first attribute read and then turns the module into an ordinary
one, so a timed step reads ``torch.x`` at full speed. Module-level code must therefore not read an attribute
of torch (a type alias, a table of dtypes, a base class): that would load it at import again
(tests/test_torch_free.py checks every benchmark module). ``nn`` is ``torch.nn`` read at each use.
"""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType
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


class _Nn:
    """``torch.nn``, looked up at each use: ``from torch import nn`` would load torch at import."""

    def __getattr__(self, attribute: str) -> Any:
        return getattr(torch.nn, attribute)


def _lazy(name: str) -> ModuleType | None:
    """Module ``name``, executed at its first attribute read; the module itself if already imported; None if absent."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        return None
    spec.loader = importlib.util.LazyLoader(spec.loader)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def loaded() -> bool:
    """Whether torch's ``__init__`` has run in this process (False also where torch is absent)."""
    module = sys.modules.get("torch")
    return module is not None and type(module) is ModuleType


_found = _lazy("torch")
INSTALLED = _found is not None  # no isinstance() here: reading a lazy module's __class__ executes it
if TYPE_CHECKING:
    import torch
    from torch import nn
elif INSTALLED:
    torch, nn = _found, _Nn()
else:
    torch, nn = _Absent("torch", "no module named 'torch'"), _Absent("torch.nn", "no module named 'torch'")


def load() -> None:
    """Run torch's ``__init__`` now (asv's forkserver: before it forks the benchmark processes); nothing if absent."""
    if INSTALLED:
        torch.__version__  # noqa: B018  # the first attribute read executes the module

__all__ = ["INSTALLED", "load", "loaded", "nn", "torch"]
