"""torch where it is installed, imported at its first use; elsewhere a stand-in that says so at the first use.

The fleet's hosted jobs (resolving, merging, alerting, publishing) have no torch, yet read the model registry's
names and sizes and the device names, which live beside the code that measures. Those modules import torch from
here: without it, importing them works and only what would measure raises ``ModuleNotFoundError`` naming torch.
With it, torch (1.5 s on the 2-core VM) is still imported only when something reads an attribute of it, so that
``mpsbench --help`` and every command that only names models and devices start without it.
"""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType
from typing import TYPE_CHECKING, Any


class _Lazy:
    """A module imported at the first attribute read; a missing one raises an error that names it there."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._module: ModuleType | None = None

    def __getattr__(self, attribute: str) -> Any:
        if self._module is None:
            try:
                self._module = importlib.import_module(self._name)
            except ImportError as error:
                raise ModuleNotFoundError(
                    f"{self._name}.{attribute} needs torch, which is not installed here ({error}); "
                    "only measuring needs it: pip install torch"
                ) from None
        return getattr(self._module, attribute)


# Whether torch can be imported, found without importing it (its import is what _Lazy defers).
INSTALLED = importlib.util.find_spec("torch") is not None

if TYPE_CHECKING:
    import torch
    from torch import nn
else:
    torch = _Lazy("torch")
    nn = _Lazy("torch.nn")

__all__ = ["INSTALLED", "nn", "torch"]
