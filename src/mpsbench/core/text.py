"""Text a person types or reads: whole-number counts given on a command line, and tables."""

from __future__ import annotations

from collections.abc import Sequence


def count(text: str) -> int | None:
    """``text`` as a whole number of at least 1 (a count of threads, of nightlies), else None."""
    return int(text) if text.isdigit() and int(text) >= 1 else None


def table(rows: Sequence[Sequence[str]], rule: bool = True) -> str:
    """Rows as left-aligned text columns (rows may be short), with a dashed rule under the header if ``rule``."""
    widths = [max(len(row[col]) for row in rows if col < len(row)) for col in range(max(map(len, rows)))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows]
    if rule:
        lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)
