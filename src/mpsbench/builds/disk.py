"""What installing a build needs on disk and downloads."""

from __future__ import annotations

import urllib.parse
from typing import Any, NamedTuple

from mpsbench.builds import install_build

GB = 1e9
# measured (docs/evidence/linux-default.md)
INSTALLED_PER_WHEEL_BYTE = 9.7 / 5.3
MEASURED_INSTALLED_GB: dict[str, dict[str, float]] = {
    "linux": {"1.13.1": 3.4, "2.0.1": 4.5, "2.4.1": 5.2, "2.15.0": 5.6},
    "macos": {"2.15.0": 0.182 * INSTALLED_PER_WHEEL_BYTE},
}


class Facts(NamedTuple):
    need: int  # bytes its install adds to the build cache
    how: str  # how the need is known
    installed: bool  # asv only switches to it
    download: int = 0  # bytes
    hosts: tuple[str, ...] = ()
    refused: str = ""  # why this machine cannot install it


def facts(build: dict[str, Any], python: tuple[int, int] | None = None) -> Facts:
    """What installing a build.json adds here, and about the bytes it downloads and from which
    hosts."""
    if build.get("kind") == "existing":
        return Facts(0, "a build used in place", True)
    try:
        _, pins = install_build.select_pins(build, python)
    except install_build.InstallError as exc:
        return Facts(0, "a build this machine cannot install", True, refused=str(exc))
    if (install_build.installed_folder(pins) / ".complete").is_file():
        return Facts(0, "installed in the cache already", True)
    stored = [install_build.stored_wheel(pin) for pin in pins]
    if all(path.is_file() for path in stored):
        size = sum(path.stat().st_size for path in stored) * INSTALLED_PER_WHEEL_BYTE
        return Facts(int(size), "its stored wheels' size x the measured install ratio", False)
    system = "macos" if any("macos" in pin["filename"] for pin in pins) else "linux"
    table = MEASURED_INSTALLED_GB[system]
    version = str(build.get("torch_version", ""))
    if version in table:
        installed, how = table[version], f"measured for {version} on {system}"
    else:
        installed, how = max(table.values()), f"the largest measured on {system}"
    need = int(installed * (1 + 1 / INSTALLED_PER_WHEEL_BYTE) * GB)
    local = install_build._local_wheelhouses()
    fetched = [
        pin
        for pin, path in zip(pins, stored, strict=True)
        if not path.is_file()
        and not pin["url"].startswith("file://")
        and not any((folder / pin["filename"]).is_file() for folder in local)
    ]
    if not fetched:
        return Facts(need, how, False)
    size = need / (1 + INSTALLED_PER_WHEEL_BYTE)
    if not any(pin["name"] == "torch" for pin in fetched):  # torch is most of the bytes
        size *= len(fetched) / len(pins)
    hosts = {urllib.parse.urlparse(pin["url"]).netloc for pin in fetched}
    if any(pin["name"] in install_build.PIP_FETCHES for pin in fetched):
        hosts.add("pip's index (pypi.org unless configured)")
    return Facts(need, how, False, int(size), tuple(sorted(hosts)))
