"""A user's mistake: one line and exit status 2.

UserError is the one class of them, but where a caller tells one apart: RecordedError (a results
file asv cannot read: skipped or reported), SiteAssetError and Unreachable (a CDN refuses: the
site keeps its links). install_build's InstallError is none, as that file imports no mpsbench;
the command line prints it as one.
"""

from __future__ import annotations

import errno
from collections.abc import Collection


class UserError(ValueError):
    """A bad value, a missing file, a refused action."""


def one_of(
    what: str, name: str, choices: Collection[str], error: type[Exception] = UserError
) -> str:
    """``name``, or ``error`` naming it and the choices."""
    if name not in choices:
        raise error(f"unknown {what} {name!r}; choose one of: {', '.join(choices)}")
    return name


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


_REMEDIES = {  # after the OS's own words
    errno.ENOSPC: "free space there, or move the suite's folders (asv.conf.json, MPSBENCH_CACHE)"
    " to another disk",
    errno.EDQUOT: "free space there, or use another disk",
    errno.EROFS: "work in a writable copy, or move the suite's folders elsewhere",
    **dict.fromkeys(
        (errno.EACCES, errno.EPERM), "make it writable for this user, or work in a copy"
    ),
    errno.ENOENT: "correct the path, or create what is missing",
    errno.ENOTDIR: "a part of the path is a file: correct the path",
    errno.EFBIG: "raise this process's file-size limit (ulimit -f)",
}


def os_error(exc: OSError) -> str:
    where = exc.filename if exc.filename is not None else "a file"
    remedy = _REMEDIES.get(exc.errno or 0)
    return f"{where}: {exc.strerror or type(exc).__name__}" + (f"; {remedy}" if remedy else "")
