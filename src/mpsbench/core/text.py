"""Argument types and tables."""

from __future__ import annotations

import argparse
import itertools
import math
from collections.abc import Callable, Sequence
from typing import Any

from mpsbench.core.errors import UserError


def number(
    kind: Callable[[str], float], least: float, what: str, most: float = math.inf
) -> Callable[[str], Any]:

    def parse(value: str) -> float:
        try:
            found = kind(value)
        except ValueError:
            found = math.nan
        if not (math.isfinite(found) and least <= found <= most):
            bound = f" and at most {most:g}" if most < math.inf else ""
            raise argparse.ArgumentTypeError(
                f"{what} must be a {'whole ' if kind is int else ''}number of at least"
                f" {least:g}{bound}, got {value!r}"
            )
        return found

    return parse


def checked(check: Callable[[str], Any]) -> Callable[[str], Any]:
    """An argparse type refusing with ``check``'s UserError."""

    def parse(value: str) -> Any:
        try:
            return check(value)
        except UserError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return parse


def table(rows: Sequence[Sequence[str]], rule: bool = True) -> str:
    widths = [max(map(len, column)) for column in itertools.zip_longest(*rows, fillvalue="")]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows
    ]
    if rule:
        lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)
