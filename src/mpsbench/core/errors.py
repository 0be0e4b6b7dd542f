"""A user's mistake is one line and exit status 2: the one error class every module's mistakes subclass."""

from __future__ import annotations


class UserError(ValueError):
    """A user's mistake (a bad value, a missing file, a refused action): one line on stderr, exit status 2.

    Every module's own mistakes subclass it, so that every command prints them alike without a list to keep.
    """


def first_line(exc: BaseException) -> str:
    """An error in one line: the first line of its message, or its type's name when it has none.

    Used wherever an exception becomes a recorded reason (a skip, a failure), so that
    a multi-line torch error never spills into asv's output or a results file.
    """
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
