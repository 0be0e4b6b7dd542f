"""This process's memory on every OS: its resident set size now, and its high-water mark.

psutil where importable (asv's environments get it from install_build.py), else
Linux's ``/proc/self/statm``; elsewhere None with :func:`unreadable_reason`,
never 0, which a graph would show as a real figure. Imports no torch.
"""

from __future__ import annotations

import contextlib
import os
import sys


def rss() -> int | None:
    """Bytes of this process resident in memory now; None where neither psutil nor /proc can say."""
    with contextlib.suppress(ImportError):
        import psutil

        return int(psutil.Process().memory_info().rss)
    try:
        with open("/proc/self/statm") as statm:
            pages = int(statm.read().split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return pages * os.sysconf("SC_PAGE_SIZE")


def unreadable_reason() -> str:
    """Why :func:`rss` gives no reading here (asked only after it returned None)."""
    return f"the process's resident memory is unreadable on {sys.platform} without psutil (not importable here)"


def max_rss() -> int | None:
    """This process's largest resident set size so far, in bytes; None where getrusage is absent (Windows)."""
    try:
        import resource
    except ImportError:
        return None
    peak = int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
    return peak if sys.platform == "darwin" else peak * 1024  # bytes on macOS, KiB on Linux
