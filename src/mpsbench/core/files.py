"""Writing files so that a kill at any moment leaves the old file or the new one, and the one lock writers share."""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import os
import shutil
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

from mpsbench.core.errors import UserError


class LockError(UserError):
    """Another process holds the lock and this one was asked not to wait."""


@contextlib.contextmanager
def temporary(path: Path, content: bytes) -> Iterator[Path]:
    """``content`` written beside ``path`` and flushed to disk, in a file removed on the way out unless renamed."""
    partial = path.parent / f".{path.name}-{uuid.uuid4().hex}.tmp"  # open() gives the umask's mode, unlike mkstemp
    created = False  # a read-only file system refuses even the unlink of a file never made (EROFS)
    try:
        try:
            with open(partial, "xb") as out:
                created = True
                out.write(content)
                out.flush()
                os.fsync(out.fileno())
        except OSError as exc:  # a full or read-only disk: named by the file meant, not its temporary
            raise type(exc)(exc.errno, exc.strerror, str(path)) from None
        yield partial
    finally:
        if created:
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
def lock(target: Path, wait: bool = True, waiting: Callable[[], None] | None = None) -> Iterator[None]:
    """Hold the lock of ``target`` (a results folder, the manifest) for the block: every writer of it takes this one.

    The lock is the folder that holds ``target`` (an flock on it: no lock file, so a refused command leaves nothing
    behind, and a file replaced by rename keeps its lock). Another process waits for it (calling ``waiting`` first,
    to say why nothing happens yet, only if it must wait), or with ``wait=False`` gets a :class:`LockError`.
    Re-entrant within a process: a record run that holds it merges under it.
    """
    folder = target.resolve().parent
    while not folder.is_dir():  # a target whose folders do not exist yet: the nearest one that does
        folder = folder.parent
    with contextlib.ExitStack() as held:
        if folder not in _held:
            handle = os.open(folder, os.O_RDONLY)
            held.callback(os.close, handle)  # closing the last descriptor releases the flock
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | (0 if wait and waiting is None else fcntl.LOCK_NB))
            except BlockingIOError:
                if not wait or waiting is None:
                    raise LockError(f"another process is writing {target} (it holds the lock on {folder})") from None
                waiting()
                fcntl.flock(handle, fcntl.LOCK_EX)
        _held[folder] = _held.get(folder, 0) + 1
        try:
            yield
        finally:
            _held[folder] -= 1
            if not _held[folder]:
                del _held[folder]


_AT_FDCWD = -100  # renameat2's "relative to the working directory"
_RENAME_EXCHANGE = 2  # Linux renameat2 flag (linux/fs.h); macOS renamex_np's RENAME_SWAP has the same value


def _exchange(first: Path, second: Path) -> bool:
    """Swap two paths in one step where the OS can (Linux renameat2, macOS renamex_np); False where it cannot."""
    libc = ctypes.CDLL(None, use_errno=True)
    paths = (os.fsencode(first), os.fsencode(second))
    if sys.platform.startswith("linux") and hasattr(libc, "renameat2"):  # glibc 2.28+
        done = libc.renameat2(_AT_FDCWD, paths[0], _AT_FDCWD, paths[1], _RENAME_EXCHANGE)
    elif sys.platform == "darwin" and hasattr(libc, "renamex_np"):
        done = libc.renamex_np(paths[0], paths[1], _RENAME_EXCHANGE)
    else:
        return False
    return bool(done == 0)  # a file system without the call (EINVAL, ENOSYS): the caller's two renames instead


def replace_folder(new: Path, target: Path) -> None:
    """Put the folder ``new`` at ``target`` and delete what was there: a reader sees the old folder or the new one.

    Swapped in one step where the OS can; elsewhere two renames leave ``target`` absent for an instant. ``new``
    must be on ``target``'s file system (a folder beside it).
    """
    if not target.exists():
        os.rename(new, target)
    elif _exchange(new, target):
        shutil.rmtree(new)  # which now holds the old folder
    else:
        old = new.with_name(f"{new.name}.old")
        os.rename(target, old)
        os.rename(new, target)
        shutil.rmtree(old)
