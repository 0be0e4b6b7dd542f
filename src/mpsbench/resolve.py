"""Turn "torch 2.14.1", "the nightly of 2026-11-20", a wheel file or a wheel URL into a Build.

Each resolver pins, per platform, torch, the torchvision made for it (where
one exists) and a transformers release that supports it, each by file name,
URL and sha256. The upstream ``git_version`` and the build's date are read
from the torch wheel itself (``torch/version.py`` and its timestamp).
"""

from __future__ import annotations

import re
import urllib.parse
from datetime import datetime, timezone
from pathlib import Path

from packaging.version import Version

from mpsbench import install_build, wheels
from mpsbench import manifest as mf

PYPI = "https://pypi.org/simple"
NIGHTLY_INDEXES = (  # PyTorch's nightly indexes: macOS and Linux cpu wheels, Linux CUDA wheels
    "https://download.pytorch.org/whl/nightly/cpu",
    "https://download.pytorch.org/whl/nightly/cu130",
)
PYTHONS = ("cp310", "cp311", "cp312", "cp313")  # interpreters pinned for each build
# The wheel git_version and date are read from, in this order of preference.
_IDENTITY_PLATFORMS = ("linux-x86_64-cuda", "linux-x86_64-cpu", "macos-arm64")


class ResolveError(ValueError):
    """A build that cannot be resolved: the message names the bad value and the choices."""


def torchvision_series(torch_version: str) -> str:
    """The torchvision minor series made for a torch release: 1.13 -> 0.14, 2.14 -> 0.29."""
    match = re.match(r"(\d+)\.(\d+)", torch_version)
    if not match:
        raise ResolveError(f"torch version {torch_version!r} is not MAJOR.MINOR[.PATCH]")
    major, minor = int(match.group(1)), int(match.group(2))
    return f"0.{minor + 1}" if major == 1 else f"0.{minor + 15}"


def default_transformers(torch_version: str) -> str:
    """A transformers release that supports this torch (its own requirement, from its metadata)."""
    major, minor = (int(part) for part in re.findall(r"\d+", torch_version)[:2])
    if (major, minor) >= (2, 5):
        return "5.18.0"  # requires torch >= 2.5
    if (major, minor) >= (2, 2):
        return "4.57.6"  # requires torch >= 2.2
    return "4.36.2"  # before torch 2.2: a release from the torch 1.x/2.0-2.1 era; pass --transformers to choose


def _pin(link: wheels.IndexLink, sha256: str | None = None) -> mf.Pin:
    digest = sha256 or link.sha256
    if not digest:
        raise ResolveError(f"{link.url} carries no sha256 on its index; pass the wheel as a file instead")
    return mf.Pin(link.wheel.name, link.wheel.version, link.wheel.filename, link.url, digest)


def _pythons_ok(wheel: wheels.WheelName, pythons: tuple[str, ...]) -> bool:
    return wheel.python in pythons and wheel.abi == wheel.python


def _by_platform(links: list[wheels.IndexLink], pythons: tuple[str, ...]) -> dict[str, list[mf.Pin]]:
    pins: dict[str, list[mf.Pin]] = {}
    for link in sorted(links, key=lambda item: item.wheel.filename):
        key = wheels.platform_key(link.wheel)
        if key is not None and _pythons_ok(link.wheel, pythons):
            pins.setdefault(key, []).append(_pin(link))
    return pins


def _transformers_pin(version: str | None, index: str) -> mf.Pin | None:
    if version == "none":
        return None
    links = [
        link for link in wheels.project_links(index, "transformers")
        if link.wheel.version == version and link.wheel.platform == "any"
    ]
    if not links:
        raise ResolveError(f"transformers {version} has no wheel on {index}; pass --transformers VERSION or none")
    return _pin(links[0])


def _with_companions(
    torch_pins: dict[str, list[mf.Pin]], vision_pins: dict[str, list[mf.Pin]], extra: mf.Pin | None
) -> dict[str, list[mf.Pin]]:
    """Add each platform's torchvision wheels (same python tag) and the pure-Python pins."""
    merged: dict[str, list[mf.Pin]] = {}
    for key, pins in torch_pins.items():
        pythons = {pin.filename.split("-")[2] for pin in pins}
        vision = [pin for pin in vision_pins.get(key, []) if pin.filename.split("-")[2] in pythons]
        merged[key] = [*pins, *vision, *([extra] if extra else [])]
    return merged


def _identity(pins: dict[str, list[mf.Pin]]) -> wheels.TorchIdentity:
    for key in (*_IDENTITY_PLATFORMS, *sorted(pins)):
        torch_pins = [pin for pin in pins.get(key, []) if pin.name == "torch"]
        if torch_pins:
            preferred = sorted(torch_pins, key=lambda pin: ("cp311" not in pin.filename, pin.filename))[0]
            return wheels.torch_identity(preferred.url)
    raise ResolveError("no torch wheel to read the build's identity from")


def release(
    version: str, index: str = PYPI, pythons: tuple[str, ...] = PYTHONS,
    torchvision: str | None = None, transformers: str | None = None, date: str | None = None,
) -> mf.Build:
    """A PyPI (or other index) release of torch, e.g. ``2.14.1``."""
    if not re.fullmatch(r"\d+\.\d+(\.\d+)?", version):
        raise ResolveError(f"release version {version!r} is not MAJOR.MINOR.PATCH (e.g. 2.14.1)")
    all_torch = wheels.project_links(index, "torch")
    torch_links = [link for link in all_torch if link.wheel.public_version == version]
    if not torch_links:
        known = sorted({link.wheel.public_version for link in all_torch if "dev" not in link.wheel.version},
                       key=Version)  # by version: as strings 2.10 would sort before 2.9
        raise ResolveError(f"torch {version} is not on {index}; recent releases there: {', '.join(known[-8:])}")
    torch_pins = _by_platform(torch_links, pythons)
    if not torch_pins:
        raise ResolveError(f"torch {version} on {index} has no wheel for {', '.join(pythons)} on a tracked platform")
    vision_version = torchvision or _newest_vision(index, torchvision_series(version), version)
    vision_links = [link for link in wheels.project_links(index, "torchvision") if link.wheel.public_version == vision_version]
    extra = _transformers_pin(transformers or default_transformers(version), index)
    pins = _with_companions(torch_pins, _by_platform(vision_links, pythons), extra)
    identity = _identity(pins)
    return mf.Build(
        id=version, torch_version=version, date=date or mf.format_date(identity.built),
        git_version=identity.git_version, kind="release", pins=pins, tag=f"v{version}",
    )


def _newest_vision(index: str, series: str, torch_version: str) -> str:
    """The torchvision release of ``series`` whose patch matches torch's, else the newest of the series."""
    versions = {
        link.wheel.public_version for link in wheels.project_links(index, "torchvision")
        if link.wheel.public_version.startswith(series + ".") and "dev" not in link.wheel.version
    }
    patch = torch_version.split(".")[2] if torch_version.count(".") == 2 else "0"
    if f"{series}.{patch}" in versions:
        return f"{series}.{patch}"
    if not versions:
        return f"{series}.{patch}"  # none on the index: the build pins torch alone
    return max(versions, key=lambda v: tuple(int(p) for p in v.split(".")))


def nightly_dates(indexes: tuple[str, ...]) -> list[str]:
    """Every nightly date (YYYY-MM-DD) with a torch wheel on any of ``indexes``, oldest first."""
    dates = set()
    for index in indexes:
        for link in wheels.project_links(index, "torch"):
            found = re.search(r"\.dev(\d{4})(\d{2})(\d{2})", link.wheel.version)
            if found:
                dates.add("-".join(found.groups()))
    return sorted(dates)


def nightly(
    date: str, indexes: tuple[str, ...] = NIGHTLY_INDEXES, pythons: tuple[str, ...] = PYTHONS,
    transformers: str | None = None, transformers_index: str = PYPI,
) -> mf.Build:
    """The nightly of ``date`` (YYYY-MM-DD) from PyTorch's nightly indexes (configurable)."""
    try:
        datetime.strptime(date, "%Y-%m-%d")
    except ValueError:
        raise ResolveError(f"nightly date {date!r} is not YYYY-MM-DD") from None
    stamp = ".dev" + date.replace("-", "")
    torch_links: list[wheels.IndexLink] = []
    vision_links: list[wheels.IndexLink] = []
    for index in indexes:
        torch_links += [link for link in wheels.project_links(index, "torch") if stamp in link.wheel.version]
        vision_links += [link for link in wheels.project_links(index, "torchvision") if stamp in link.wheel.version]
    torch_pins = _by_platform(torch_links, pythons)
    if not torch_pins:
        near = [d for d in nightly_dates(indexes) if abs((datetime.fromisoformat(d) - datetime.fromisoformat(date)).days) <= 7]
        hint = f"; nightlies within a week: {', '.join(near)}" if near else ""
        raise ResolveError(f"no torch nightly of {date} on {', '.join(indexes)}{hint}")
    version = torch_pins[sorted(torch_pins)[0]][0].version.split("+")[0]
    extra = _transformers_pin(transformers or default_transformers(version), transformers_index)
    pins = _with_companions(torch_pins, _by_platform(vision_links, pythons), extra)
    identity = _identity(pins)
    return mf.Build(
        id=date, torch_version=version, date=mf.format_date(identity.built),
        git_version=identity.git_version, kind="nightly", pins=pins,
    )


def _file_pin(path: Path, sha256: str | None = None) -> mf.Pin:
    if not path.is_file():
        raise ResolveError(f"wheel file {path} does not exist")
    wheel = wheels.parse_wheel_name(path.name)
    actual = wheels.sha256_of(path)
    if sha256 and sha256.lower() != actual:
        raise ResolveError(f"{path.name}: sha256 {actual} does not match the given {sha256}")
    return mf.Pin(wheel.name, wheel.version, wheel.filename, path.resolve().as_uri(), actual)


def _build_id(torch_version: str) -> str:
    return re.sub(r"[^a-z0-9._-]+", "-", torch_version.lower())


def wheel_file(
    path: Path, torchvision: Path | None = None, transformers: str | None = None, index: str = PYPI,
    sha256: str | None = None, build_id: str | None = None, note: str = "",
) -> mf.Build:
    """A torch wheel on disk (a source build, say), with an optional torchvision wheel beside it."""
    torch_pin = _file_pin(path, sha256)
    if torch_pin.name != "torch":
        raise ResolveError(f"{path.name} is a {torch_pin.name} wheel, not a torch wheel")
    key = wheels.platform_key(wheels.parse_wheel_name(path.name))
    if key is None:
        raise ResolveError(f"{path.name} is for a platform the suite does not track; tracked: {', '.join(wheels.PLATFORMS)}")
    identity = wheels.torch_identity(str(path))
    pins = [torch_pin]
    if torchvision is not None:
        pins.append(_file_pin(torchvision))
    extra = _transformers_pin(transformers or default_transformers(identity.version), index)
    if extra:
        pins.append(extra)
    return mf.Build(
        id=build_id or _build_id(identity.version), torch_version=identity.version,
        date=mf.format_date(identity.built), git_version=identity.git_version, kind="wheel-file",
        pins={key: pins}, note=note,
    )


def wheel_url(
    url: str, sha256: str | None = None, transformers: str | None = None, index: str = PYPI,
    build_id: str | None = None, note: str = "",
) -> mf.Build:
    """A torch wheel at a URL: fetched once into the wheel store and checked against ``sha256``."""
    url, _, fragment = url.partition("#")
    if urllib.parse.urlparse(url).scheme not in ("http", "https", "file"):  # a bare path fails later in fetch_wheel
        raise ResolveError(f"{url!r} is not a URL (http://, https:// or file://); for a wheel file use add-wheel")
    digest = sha256 or (fragment[len("sha256="):] if fragment.startswith("sha256=") else None)
    if not digest or not re.fullmatch(r"[0-9a-fA-F]{64}", digest):
        raise ResolveError(f"a wheel URL needs its sha256: pass --sha256 or a URL ending in #sha256=...; got {digest!r}")
    wheel = wheels.parse_wheel_name(url)
    key = wheels.platform_key(wheel)
    if wheel.name != "torch" or key is None:
        raise ResolveError(f"{wheel.filename} is not a torch wheel for a tracked platform ({', '.join(wheels.PLATFORMS)})")
    pin = mf.Pin(wheel.name, wheel.version, wheel.filename, url, digest.lower())
    try:
        stored = install_build.fetch_wheel(vars(pin))  # verifies the checksum before anything is recorded
    except install_build.InstallError as exc:
        raise ResolveError(str(exc)) from None
    identity = wheels.torch_identity(str(stored))
    extra = _transformers_pin(transformers or default_transformers(identity.version), index)
    return mf.Build(
        id=build_id or _build_id(identity.version), torch_version=identity.version,
        date=mf.format_date(identity.built), git_version=identity.git_version, kind="wheel-url",
        pins={key: [pin, *([extra] if extra else [])]}, note=note,
    )


def _read_torch_version(folder: Path) -> tuple[str, str]:
    text = (folder / "torch" / "version.py").read_text()
    version = re.search(r"^__version__\s*=\s*['\"]([^'\"]+)", text, re.M)
    git = re.search(r"^git_version\s*=\s*['\"]([0-9a-fA-F]+|Unknown)['\"]", text, re.M)
    if not version or not git:
        raise ResolveError(f"{folder}/torch/version.py has no __version__ or git_version")
    return version.group(1), git.group(1)


def existing(
    site_packages: Path, build_id: str | None = None, date: str | None = None, env: dict[str, str] | None = None,
    note: str = "",
) -> mf.Build:
    """A torch already installed on this machine, used in place: nothing is downloaded or copied.

    For machines with no network and a preinstalled torch (a CI image, a GPU box),
    and for a developer's own installed build. ``env`` sets environment variables
    in every process of the build's asv environment.
    """
    folder = site_packages.resolve()
    if not (folder / "torch" / "version.py").is_file():
        raise ResolveError(f"{site_packages} holds no installed torch (no torch/version.py)")
    version, git_version = _read_torch_version(folder)
    when = datetime.fromtimestamp((folder / "torch" / "version.py").stat().st_mtime, tz=timezone.utc)
    return mf.Build(
        id=build_id or _build_id(version), torch_version=version, date=date or mf.format_date(when),
        git_version=git_version, kind="existing", pins={}, note=note, site_packages=str(folder), env=dict(env or {}),
    )
