"""torch where it is installed; elsewhere a stand-in that says so at the first use.

The fleet's hosted jobs (resolving, merging, alerting, publishing) have no torch, yet read the model registry's
names and sizes and the device names, which live beside the code that measures. Those modules import torch from
here: without it, importing them works and only what would measure raises ``ModuleNotFoundError`` naming torch.
"""

from __future__ import annotations

from typing import Any


class _Absent:
    """Any attribute of a module that is not installed: an error that names it."""

    def __init__(self, name: str, error: ImportError) -> None:
        self._name, self._error = name, error

    def __getattr__(self, attribute: str) -> Any:
        raise ModuleNotFoundError(
            f"{self._name}.{attribute} needs torch, which is not installed here ({self._error}); "
            "only measuring needs it: pip install torch"
        )


try:
    import torch
    from torch import nn
except ImportError as missing:
    torch = _Absent("torch", missing)  # type: ignore[assignment]
    nn = _Absent("torch.nn", missing)  # type: ignore[assignment]

INSTALLED = not isinstance(torch, _Absent)

__all__ = ["INSTALLED", "nn", "torch"]
