"""What a build needs on disk before asv installs it, and what is free where the build cache lives.

The manifest pins no wheel sizes, so the need is, in order: nothing for a build installed in the cache; for one
whose wheels are all stored, their size times the installed-to-wheel ratio; else the figure measured for that
release on this platform (README, "What you get, and what it costs"), or the largest measured there.
"""

from __future__ import annotations

import shutil
import urllib.parse
from pathlib import Path
from typing import Any, NamedTuple

from mpsbench.builds import install_build

GB = 1e9
INSTALLED_PER_WHEEL_BYTE = 9.7 / 5.3  # installed size over wheel size: 2.0.1 and 2.4.1 on Linux, measured
# Installed size in GB (measured from a fresh clone on Linux: docs/evidence/linux-default.md); the wheels kept in the store add
# 1 / INSTALLED_PER_WHEEL_BYTE of it. macOS: 89-182 MB of wheels per set (PyPI's sizes), so about 0.7 GB in all.
MEASURED_INSTALLED_GB: dict[str, dict[str, float]] = {
    "linux": {"1.13.1": 3.4, "2.0.1": 4.5, "2.4.1": 5.2, "2.15.0": 5.6},
    "macos": {"2.15.0": 0.182 * INSTALLED_PER_WHEEL_BYTE},
}


class Need(NamedTuple):
    bytes: int
    how: str  # where the figure comes from
    installed: bool  # already in the cache: asv only switches to it


cache = install_build.cache_root  # MPSBENCH_CACHE, else ~/.cache/mpsbench


def free(folder: Path | None = None) -> int:
    """Bytes free on the disk that holds ``folder`` (default: the build cache), or its nearest existing parent."""
    folder = folder or cache()
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    return shutil.disk_usage(folder).free


def used(folder: Path | None = None) -> int:
    """Bytes the build cache holds now (wheels and installed builds)."""
    folder = folder or cache()
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file() and not path.is_symlink()) \
        if folder.is_dir() else 0


def need(build: dict[str, Any], python: tuple[int, int] | None = None) -> Need:
    """What installing ``build`` (a timeline commit's build.json) into an environment of CPython ``python`` (default
    this interpreter's version) will add to the cache here: each Python has a set of wheels of its own."""
    if build.get("kind") == "existing":
        return Need(0, "a build used in place", True)
    try:
        _, pins = install_build.select_pins(build, python)
    except install_build.InstallError:
        return Need(0, "a build this machine cannot install (it is refused before any download)", True)
    if (install_build.installed_folder(pins) / ".complete").is_file():
        return Need(0, "installed in the cache already", True)
    stored = [cache() / "wheels" / pin["sha256"] / pin["filename"] for pin in pins]
    if all(path.is_file() for path in stored):
        size = sum(path.stat().st_size for path in stored)
        return Need(int(size * INSTALLED_PER_WHEEL_BYTE), "its stored wheels' size x the measured install ratio", False)
    system = "macos" if any("macos" in pin["filename"] for pin in pins) else "linux"
    table = MEASURED_INSTALLED_GB[system]
    version = str(build.get("torch_version", ""))
    installed = table.get(version, max(table.values()))
    how = f"measured for {version} on {system}" if version in table else f"the largest measured on {system}"
    return Need(int(installed * (1 + 1 / INSTALLED_PER_WHEEL_BYTE) * GB), how, False)


def download(build: dict[str, Any], python: tuple[int, int] | None = None) -> tuple[int, tuple[str, ...]]:
    """About how many bytes installing ``build`` fetches here, and from which hosts: its wheels not
    stored in the cache nor found in a local wheelhouse (none for a build installed, used in place
    or refused). Sizes are the stored wheels' where the need is theirs, else the measured install
    over :data:`INSTALLED_PER_WHEEL_BYTE`."""
    if need(build, python).installed:
        return 0, ()
    _, pins = install_build.select_pins(build, python)
    local = install_build._local_wheelhouses()
    fetched = [pin for pin in pins if not (cache() / "wheels" / pin["sha256"] / pin["filename"]).is_file()
               and not pin["url"].startswith("file://")
               and not any((folder / pin["filename"]).is_file() for folder in local)]
    if not fetched:
        return 0, ()
    share = len(fetched) / len(pins)  # the torch wheel is most of a build's bytes: a share of the count understates
    wheels = need(build, python).bytes / (1 + INSTALLED_PER_WHEEL_BYTE)
    size = wheels if any(pin["name"] == "torch" for pin in fetched) else wheels * share
    hosts = {urllib.parse.urlparse(pin["url"]).netloc for pin in fetched}
    if any(pin["name"] in ("torch", "torchvision", "transformers") for pin in fetched):
        hosts.add("pip's index (pypi.org unless configured)")  # asked first for these (install_build._find)
    return int(size), tuple(sorted(hosts))
