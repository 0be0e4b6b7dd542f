"""torch imported at first use, else a stand-in saying it is missing (a LazyLoader breaks
Python 3.12's submodule imports)."""

from __future__ import annotations

import importlib.util
import sys
from typing import TYPE_CHECKING, Any

INSTALLED = "torch" in sys.modules or importlib.util.find_spec("torch") is not None


class _Lazy:
    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attribute: str) -> Any:
        if not INSTALLED:
            raise ModuleNotFoundError(
                f"{self._name}.{attribute} needs torch, which is not installed here; only"
                " measuring needs it: pip install torch"
            )
        module = sys.modules.get(self._name) or importlib.import_module(self._name)
        return getattr(module, attribute)


def loaded() -> bool:
    return "torch" in sys.modules


if TYPE_CHECKING:
    import torch
    import torch.nn.functional as F
    from torch import nn
else:
    torch, nn, F = _Lazy("torch"), _Lazy("torch.nn"), _Lazy("torch.nn.functional")

__all__ = ["INSTALLED", "F", "loaded", "nn", "torch"]
