"""Writing files so that a kill at any moment leaves the old file or the new one, the one lock writers share, and the
one way a folder or file is deleted: only after :func:`check_owned` found that it holds nothing the command must keep."""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import os
import re
import shutil
import sys
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from mpsbench.core.errors import UserError


@dataclass(frozen=True)
class Kept:
    """A folder no command may replace or delete as a by-product (the results, the config's folder, the repository).

    ``nothing_inside``: a folder of recorded data, whose content only its own writers change: another command's
    output may not sit inside it either (a site published into the results folder would delete them on the next
    publish)."""

    what: str  # said in the refusal: "the results folder"
    path: Path
    nothing_inside: bool = False


def _within(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def check_owned(target: Path, kept: Sequence[Kept], role: str | None = None) -> None:
    """UserError, naming both, where ``target`` is, holds, or (for a ``nothing_inside`` folder) sits inside a
    kept folder (``role`` names ``target`` in it: "html_dir .asv/html of asv.conf.json"). Paths are compared
    resolved, symbolic links followed: a link to the results is the results."""
    mine = target.resolve()
    found = []
    for folder in kept:
        theirs = folder.path.resolve()
        if mine == theirs:
            found.append((0, "is", folder))
        elif _within(theirs, mine):
            found.append((1, "holds", folder))
        elif folder.nothing_inside and _within(mine, theirs):
            found.append((2, "sits inside", folder))
    if found:
        _, relation, folder = min(found, key=lambda item: item[0])
        raise UserError(
            f"{role or f'the folder {target}'} {relation} {folder.what} {folder.path}: it would be"
            f" replaced or deleted; choose a folder of its own, outside {folder.what}"
        )


def remove(path: Path, kept: Sequence[Kept]) -> None:
    """Delete ``path`` (a folder with everything in it, or a file) after :func:`check_owned`: every deletion of a
    folder a user sees goes through here."""
    check_owned(path, kept, f"the folder to delete, {path},")
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


@contextlib.contextmanager
def temporary(path: Path, content: bytes) -> Iterator[Path]:
    """``content`` written beside ``path`` and flushed to disk, in a file removed on the way out unless renamed."""
    partial = (
        path.parent / f".{path.name}-{uuid.uuid4().hex}.tmp"
    )  # open() gives the umask's mode, unlike mkstemp
    created = False  # a read-only file system refuses even the unlink of a file never made (EROFS)
    try:
        try:
            with open(partial, "xb") as out:
                created = True
                out.write(content)
                out.flush()
                os.fsync(out.fileno())
        except (
            OSError
        ) as exc:  # a full or read-only disk: named by the file meant, not its temporary
            raise type(exc)(exc.errno, exc.strerror, str(path)) from None
        yield partial
    finally:
        if created:
            partial.unlink(missing_ok=True)


def write(path: Path, content: str | bytes) -> None:
    """Write beside ``path``, then rename over it: a reader or a kill sees the old file or the new one, whole."""
    with temporary(
        path, content.encode("utf-8") if isinstance(content, str) else content
    ) as partial:
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


_held: dict[
    Path, int
] = {}  # locked folder -> how deep this process holds it: the lock is re-entrant within a process


@contextlib.contextmanager
def lock(
    target: Path, wait: bool = True, waiting: Callable[[], None] | None = None
) -> Iterator[None]:
    """Hold the lock of ``target`` (a results folder, the manifest) for the block: every writer of it takes this one.

    The lock is the folder that holds ``target`` (an flock on it: no lock file, so a refused command leaves nothing
    behind, and a file replaced by rename keeps its lock). Another process waits for it (calling ``waiting`` first,
    to say why nothing happens yet, only if it must wait), or with ``wait=False`` gets a :class:`UserError`.
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
                fcntl.flock(
                    handle, fcntl.LOCK_EX | (0 if wait and waiting is None else fcntl.LOCK_NB)
                )
            except BlockingIOError:
                if not wait or waiting is None:
                    raise UserError(
                        f"another process is writing {target} (it holds the lock on {folder})"
                    ) from None
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
_RENAME_EXCHANGE = (
    2  # Linux renameat2 flag (linux/fs.h); macOS renamex_np's RENAME_SWAP has the same value
)


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
    return bool(
        done == 0
    )  # a file system without the call (EINVAL, ENOSYS): the caller's two renames instead


def replace_folder(new: Path, target: Path, kept: Sequence[Kept] = ()) -> None:
    """Put the folder ``new`` at ``target`` and delete what was there: a reader sees the old folder or the new one.

    Swapped in one step where the OS can; elsewhere two renames leave ``target`` absent for an instant. ``new``
    must be on ``target``'s file system (a folder beside it). ``target`` is checked against ``kept`` first.
    """
    check_owned(target, kept)
    if not target.exists():
        os.rename(new, target)
    elif _exchange(new, target):
        remove(new, kept)  # which now holds the old folder
    else:
        old = new.with_name(f"{new.name}.old")
        os.rename(target, old)
        os.rename(new, target)
        remove(old, kept)


_TEMPORARY = re.compile(
    r"\..+-[0-9a-f]{32}\.tmp"
)  # temporary's names: no other file is taken for one


def orphans(folder: Path) -> list[Path]:
    """The temporary files :func:`temporary` leaves when its process is killed before the rename, in ``folder``
    and the folders right under it (a results folder's machines)."""
    found = [*folder.glob(".*.tmp"), *folder.glob("*/.*.tmp")] if folder.is_dir() else []
    return [path for path in found if _TEMPORARY.fullmatch(path.name)]


def clean_orphans(folder: Path) -> list[Path]:
    """Delete :func:`orphans` of ``folder``, under its lock (no writer is between write and rename then); the
    deleted paths. Every file a writer renamed into place is whole, so nothing recorded goes."""
    found = orphans(folder)
    for leftover in found:
        leftover.unlink(missing_ok=True)
    return found
