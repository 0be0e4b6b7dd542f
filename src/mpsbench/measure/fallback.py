"""Which ops fell back from mps to the cpu, from PyTorch's warning."""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Sequence
from typing import Any

from mpsbench.core import settings
from mpsbench.measure.optional_torch import torch

ENABLE_ENV = "PYTORCH_ENABLE_MPS_FALLBACK"  # PyTorch's switch; read at `import torch`
ALLOW_ENV = settings.ALLOW_FALLBACK

# MPSFallback.mm's warning since torch 1.12
WARNING = re.compile(
    r"The operator '(?P<op>[^']+)' is not currently supported on the MPS backend"
    r" and will fall back to run on the CPU"
)


class FallbackError(RuntimeError):
    """Ops fell back to the cpu."""


def enabled() -> bool:
    return os.environ.get(ENABLE_ENV, "").strip() not in ("", "0")


def ops_in(message: str) -> list[str]:
    return [found.group("op") for found in WARNING.finditer(message)]


class Recorder:
    """The ops falling back inside it (autograd's threads' too); other warnings re-emitted once
    per text."""

    def __init__(self) -> None:
        self.ops: list[str] = []
        self._catcher = warnings.catch_warnings(record=True)

    def __enter__(self) -> Recorder:
        self._warned_always = torch.is_warn_always_enabled()
        torch.set_warn_always(True)  # else it warns once per process
        self._log = self._catcher.__enter__()
        warnings.simplefilter("always")
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self._catcher.__exit__(*exc_info)
        torch.set_warn_always(self._warned_always)
        others: dict[str, warnings.WarningMessage] = {}
        for record in self._log:
            if names := ops_in(str(record.message)):
                self.ops = list(dict.fromkeys([*self.ops, *names]))
            else:
                others.setdefault(f"{record.category.__name__}: {record.message}", record)
        for record in others.values():
            warnings.warn_explicit(record.message, record.category, record.filename, record.lineno)


def refuse(what: str, ops: Sequence[str]) -> None:
    if not ops or settings.flag(ALLOW_ENV):
        return
    raise FallbackError(
        f"{what}: {len(ops)} op(s) fell back to the cpu during warm-up ({', '.join(ops)}):"
        f" not a pure device time; set {ALLOW_ENV}=1 to time it anyway"
    )
