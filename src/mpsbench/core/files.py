"""Atomic writes, a folder's lock, and deletion sparing kept folders."""

from __future__ import annotations

import collections
import contextlib
import ctypes
import fcntl
import os
import re
import shutil
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from mpsbench.core.errors import UserError


@dataclass(frozen=True)
class Kept:
    """A folder no command may replace or delete in passing."""

    what: str
    path: Path
    nothing_inside: bool = False  # no other command's output may sit inside


def check_owned(target: Path, kept: Sequence[Kept], role: str | None = None) -> None:
    """Refuses a ``target`` that is, holds or sits inside a kept folder."""
    mine = target.resolve()  # a link to the results is the results
    found = []
    for folder in kept:
        theirs = folder.path.resolve()
        if mine == theirs:
            found.append((0, "is", folder))
        elif theirs.is_relative_to(mine):
            found.append((1, "holds", folder))
        elif folder.nothing_inside and mine.is_relative_to(theirs):
            found.append((2, "sits inside", folder))
    if found:
        _, relation, folder = min(found, key=lambda item: item[0])
        raise UserError(
            f"{role or f'the folder {target}'} {relation} {folder.what} {folder.path}: it would be"
            f" replaced or deleted; choose a folder of its own, outside {folder.what}"
        )


def remove(path: Path, kept: Sequence[Kept]) -> None:
    check_owned(path, kept, f"the folder to delete, {path},")
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


@contextlib.contextmanager
def temporary(path: Path, content: bytes) -> Iterator[Path]:
    """``content`` flushed beside ``path``; gone unless renamed."""
    partial = path.parent / f".{path.name}-{uuid.uuid4().hex}.tmp"  # umask's mode, unlike mkstemp
    created = False  # a read-only file system refuses to unlink a missing file
    try:
        try:
            with open(partial, "xb") as out:
                created = True
                out.write(content)
                out.flush()
                os.fsync(out.fileno())
        except OSError as exc:
            raise type(exc)(exc.errno, exc.strerror, str(path)) from None
        yield partial
    finally:
        if created:
            partial.unlink(missing_ok=True)


def tail(path: Path, offset: int) -> tuple[bytes, int]:
    """Whole lines after byte ``offset``; the new offset."""
    try:
        with open(path, "rb") as handle:
            handle.seek(offset)
            text = handle.read()
    except OSError:
        return b"", offset
    whole = text[: text.rfind(b"\n") + 1]  # a line still being written waits
    return whole, offset + len(whole)


def write(path: Path, content: str | bytes) -> None:
    data = content.encode("utf-8") if isinstance(content, str) else content
    with temporary(path, data) as partial:
        os.replace(partial, path)


def create(path: Path, content: bytes) -> bool:
    """Atomically, unless ``path`` exists; True if written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with temporary(path, content) as partial:
        try:
            os.link(partial, path)
        except FileExistsError:
            return False
    return True


_held: collections.Counter[Path] = collections.Counter()


@contextlib.contextmanager
def lock(target: Path, wait: bool | Callable[[], None] = True) -> Iterator[None]:
    """An flock on ``target``'s folder, re-entrant; ``wait``: False refuses, a callable runs first."""
    folder = target.resolve().parent
    while not folder.is_dir():
        folder = folder.parent
    with contextlib.ExitStack() as held:
        if not _held[folder]:
            handle = os.open(folder, os.O_RDONLY)
            held.callback(os.close, handle)  # releasing the flock
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | (0 if wait is True else fcntl.LOCK_NB))
            except BlockingIOError:
                if not callable(wait):
                    raise UserError(
                        f"another process is writing {target} (it holds the lock on {folder})"
                    ) from None
                wait()
                fcntl.flock(handle, fcntl.LOCK_EX)
        _held[folder] += 1
        held.callback(_held.subtract, [folder])
        yield


_AT_FDCWD = -100
_RENAME_EXCHANGE = 2  # linux/fs.h; macOS's RENAME_SWAP too


def _exchange(first: Path, second: Path) -> bool:
    libc = ctypes.CDLL(None, use_errno=True)
    old, new = map(os.fsencode, (first, second))
    if hasattr(libc, "renameat2"):  # glibc 2.28+
        done = libc.renameat2(_AT_FDCWD, old, _AT_FDCWD, new, _RENAME_EXCHANGE)
    elif hasattr(libc, "renamex_np"):  # macOS
        done = libc.renamex_np(old, new, _RENAME_EXCHANGE)
    else:
        return False
    return bool(done == 0)  # EINVAL, ENOSYS: the file system lacks it


def replace_folder(new: Path, target: Path, kept: Sequence[Kept] = ()) -> None:
    """``new`` at ``target``, in one swap where the OS can."""
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


_TEMPORARY = re.compile(r"\..+-[0-9a-f]{32}\.tmp")


def orphans(folder: Path) -> list[Path]:
    found = [*folder.glob(".*.tmp"), *folder.glob("*/.*.tmp")] if folder.is_dir() else []
    return [path for path in found if _TEMPORARY.fullmatch(path.name)]


def clean_orphans(folder: Path) -> list[Path]:
    """Under the folder's lock: no writer is mid-rename."""
    for leftover in (found := orphans(folder)):
        leftover.unlink(missing_ok=True)
    return found
