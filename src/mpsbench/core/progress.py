"""Progress lines on stderr, ``mpsbench COMPONENT: message``."""

from __future__ import annotations

import logging
import sys

ROOT = "mpsbench"


class _CurrentStderr(logging.StreamHandler):  # type: ignore[type-arg]
    def emit(self, record: logging.LogRecord) -> None:
        self.stream = sys.stderr  # whatever it is now
        super().emit(record)

    def format(self, record: logging.LogRecord) -> str:
        level = "warning: " if record.levelno >= logging.WARNING else ""
        return f"{ROOT} {record.name.rsplit('.', 1)[-1]}: {level}{record.getMessage()}"


def logger(name: str) -> logging.Logger:
    root = logging.getLogger(ROOT)
    if not root.handlers:
        root.addHandler(_CurrentStderr())
        root.setLevel(logging.INFO)
        root.propagate = False  # else a host's logging prints them twice
    if name == "__main__":
        spec = getattr(sys.modules["__main__"], "__spec__", None)
        name = spec.name if spec is not None else ROOT
    return logging.getLogger(name if name.startswith(f"{ROOT}.") else f"{ROOT}.{name}")
