"""A user's mistake: one line and exit status 2."""

from __future__ import annotations

import errno


class UserError(ValueError):
    """A bad value, a missing file, a refused action."""


def first_line(exc: BaseException) -> str:
    """The first line of its message, else its type's name."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


_REMEDIES = {
    errno.ENOSPC: "the disk is full: free space there, or point the suite's folders (asv.conf.json, MPSBENCH_CACHE)"
    " at another disk",
    errno.EDQUOT: "the disk quota is spent: free space there, or use another disk",
    errno.EROFS: "it is on a read-only file system: work in a writable copy, or point the suite's folders elsewhere",
    **dict.fromkeys(
        (errno.EACCES, errno.EPERM),
        "permission denied: make it writable for this user, or work in a copy",
    ),
    errno.ENOENT: "it does not exist: correct the path, or create what is missing",
    errno.ENOTDIR: "a part of the path is a file, not a folder: correct the path",
    errno.EFBIG: "the file would pass this process's file-size limit (ulimit -f): raise the limit",
}


def os_error(exc: OSError) -> str:
    """An OS error in one line: the path, what happened and what to do."""
    where = exc.filename if exc.filename is not None else "a file"
    what = exc.strerror or type(exc).__name__
    remedy = _REMEDIES.get(exc.errno or 0)
    return f"{where}: {what}" + (f"; {remedy}" if remedy else "")
