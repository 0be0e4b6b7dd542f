"""Run a command-line parser's chosen function: a user mistake is one line on stderr and exit status 2."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NoReturn


class UserError(ValueError):
    """A user's mistake (a bad value, a missing file, a refused action): one line on stderr, exit status 2.

    Every module's own mistakes subclass it, so that every command prints them alike without a list to keep.
    """


class OneLineParser(argparse.ArgumentParser):
    """argparse with a user's mistake said in one line (no usage block), exit status 2; subcommands inherit it."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def count(text: str) -> int | None:
    """``text`` as a whole number of at least 1 (a count of threads, of nightlies), else None."""
    return int(text) if text.isdigit() and int(text) >= 1 else None


def run(parser: argparse.ArgumentParser, argv: Sequence[str] | None, prog: str = "mpsbench") -> int:
    """Parse ``argv`` and call the chosen ``func``; a :class:`UserError` is one line, exit 2, no traceback."""
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except UserError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2


def first_line(exc: BaseException) -> str:
    """An error in one line: the first line of its message, or its type's name when it has none.

    Used wherever an exception becomes a recorded reason (a skip, a failure), so that
    a multi-line torch error never spills into asv's output or a results file.
    """
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def site_step(module: str, doc: str, config_help: str, argv: Sequence[str] | None,
              step: Callable[[Path, Path], str]) -> int:
    """``python -m MODULE HTML_DIR [--config asv.conf.json]``: one step after ``asv publish``, its line printed."""
    from mpsbench.regressions import factor

    parser = OneLineParser(prog=f"python -m {module}", description=doc.split("\n")[0])
    parser.add_argument("html", type=Path, help="the published html_dir")
    parser.add_argument("--config", type=Path, default=factor.CONFIG, help=config_help)

    def func(args: argparse.Namespace) -> int:
        print(f"mpsbench: {step(args.html, args.config)}")
        return 0

    parser.set_defaults(func=func)
    return run(parser, argv)


def table(rows: Sequence[Sequence[str]], rule: bool = True) -> str:
    """Rows as left-aligned text columns (rows may be short), with a dashed rule under the header if ``rule``."""
    widths = [max(len(row[col]) for row in rows if col < len(row)) for col in range(max(map(len, rows)))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows]
    if rule:
        lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)
