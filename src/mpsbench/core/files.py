"""Writing files so that a kill at any moment leaves the old file or the new one, and the one lock writers share.

Standard library only.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

from mpsbench.core.errors import UserError


class LockError(UserError):
    """Another process holds the lock and this one was asked not to wait."""


@contextlib.contextmanager
def temporary(path: Path, content: bytes) -> Iterator[Path]:
    """``content`` written beside ``path`` and flushed to disk, in a file removed on the way out unless renamed."""
    partial = path.parent / f".{path.name}-{uuid.uuid4().hex}.tmp"  # open() gives the umask's mode, unlike mkstemp
    try:
        with open(partial, "xb") as out:
            out.write(content)
            out.flush()
            os.fsync(out.fileno())
        yield partial
    finally:
        partial.unlink(missing_ok=True)


def write(path: Path, content: str | bytes) -> None:
    """Write beside ``path``, then rename over it: a reader or a kill sees the old file or the new one, whole."""
    with temporary(path, content.encode("utf-8") if isinstance(content, str) else content) as partial:
        os.replace(partial, path)


def create(path: Path, content: bytes) -> bool:
    """Write ``path`` unless it exists (checked atomically, never replaced); True if written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with temporary(path, content) as partial:
        try:
            os.link(partial, path)
        except FileExistsError:
            return False
    return True


_held: dict[Path, int] = {}  # locked folder -> how deep this process holds it: the lock is re-entrant within a process


@contextlib.contextmanager
def lock(target: Path, wait: bool = True) -> Iterator[None]:
    """Hold the lock of ``target`` (a results folder, the manifest) for the block: every writer of it takes this one.

    The lock is the folder that holds ``target`` (an flock on it: no lock file, so a refused command leaves nothing
    behind, and a file replaced by rename keeps its lock). Another process waits for it, or with ``wait=False`` gets
    a :class:`LockError`. Re-entrant within a process: a record run that holds it merges under it.
    """
    folder = target.resolve().parent
    while not folder.is_dir():  # a target whose folders do not exist yet: the nearest one that does
        folder = folder.parent
    if folder in _held:
        _held[folder] += 1
        try:
            yield
        finally:
            _held[folder] -= 1
        return
    handle = os.open(folder, os.O_RDONLY)
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            raise LockError(f"another process is writing {target} (it holds the lock on {folder})") from None
        _held[folder] = 1
        try:
            yield
        finally:
            del _held[folder]
    finally:
        os.close(handle)  # closing the last descriptor releases the flock
