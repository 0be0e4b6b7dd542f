"""A Build from a release, nightly, wheel file or URL, or installed torch; wheels pinned by URL
and sha256."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import packaging.tags
from packaging.utils import canonicalize_version
from packaging.version import Version

from mpsbench.builds import install_build, wheels
from mpsbench.builds import manifest as mf
from mpsbench.core.errors import UserError

PYPI = "https://pypi.org/simple"
NIGHTLY_INDEXES = (
    "https://download.pytorch.org/whl/nightly/cpu",
    "https://download.pytorch.org/whl/nightly/cu130",
)
PYTHONS = ("cp310", "cp311", "cp312", "cp313")
# whose torch wheel gives a build its git_version and date, by preference
_IDENTITY_PLATFORMS = ("linux-x86_64-cuda", "linux-x86_64-cpu", "macos-arm64")
# (torch below, first transformers too new), unsaid by the metadata: 4.50 imports torch.compiler
# (2.1+), 5.14 DTensor (2.5+)
TRANSFORMERS_CAPS: tuple[tuple[tuple[int, int], str], ...] = (((2, 1), "4.50"), ((2, 5), "5.14"))
_MANYLINUX = (
    *(f"manylinux_2_{minor}_x86_64" for minor in range(28, 4, -1)),
    *(f"manylinux{year}_x86_64" for year in ("2014", "2010", "1")),
)
PLATFORM_TAGS: dict[str, tuple[str, ...]] = {
    "macos-arm64": tuple(packaging.tags.mac_platforms((14, 0), "arm64")),
    "linux-x86_64-cuda": _MANYLINUX,
    "linux-x86_64-cpu": (*_MANYLINUX, "linux_x86_64"),
}
# the only PIP_ settings kept: the others change what pip finds
_PIP_KEPT = ("PIP_CERT", "PIP_DEFAULT_TIMEOUT", "PIP_CACHE_DIR", "PIP_NO_CACHE_DIR")
NIGHTLY_STAMP = re.compile(r"\.dev(\d{4})(\d{2})(\d{2})")

Pythons = tuple[str, ...] | Mapping[str, tuple[str, ...]]  # or per platform


def torchvision_series(torch_version: str) -> str:
    """The torchvision series of a torch release (2.14 -> 0.29): old macOS ones pin no torch."""
    major, minor = Version(torch_version).release[:2]
    return f"0.{minor + 1}" if major == 1 else f"0.{minor + 15}"


def transformers_cap(torch_version: str) -> str | None:
    release = Version(torch_version).release[:2]
    return next((cap for below, cap in TRANSFORMERS_CAPS if release < below), None)


def requirements(
    torch_version: str, torchvision: str | None = None, transformers: str | None = None
) -> list[str]:
    """What pip resolves a build from (``torchvision`` may be ``none``)."""
    wanted = [f"torch=={torch_version}"]
    if torchvision != "none":
        wanted.append(f"torchvision=={torchvision or torchvision_series(torch_version) + '.*'}")
    if transformers is None:
        cap = transformers_cap(torch_version)
        wanted.append(f"transformers[torch]{'<' + cap if cap else ''}")
    elif transformers != "none":
        wanted.append(f"transformers[torch]=={transformers}")
    if Version(torch_version).release[:2] < (2, 3):  # built on numpy 1, unsaid
        wanted.append("numpy<2")
    return wanted


def pip_set(
    wanted: list[str], platform: str, python: str, index: str = PYPI, extra: tuple[str, ...] = ()
) -> list[mf.Pin]:
    """The wheels pip picks for ``wanted``, without downloading them."""
    if not re.fullmatch(r"cp3\d+", python):
        raise UserError(f"python tag {python!r} is not cpython 3 (e.g. cp312)")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_") or k in _PIP_KEPT}
    env["PIP_CONFIG_FILE"] = os.devnull  # no local mirrors in the pins
    with tempfile.TemporaryDirectory(prefix="mpsbench-resolve-") as scratch:
        report = Path(scratch) / "report.json"
        command = [
            *(sys.executable, "-m", "mpsbench.builds.pip_target", platform, python, "install"),
            *("--dry-run", "--ignore-installed", "--quiet", "--disable-pip-version-check"),
            *("--target", str(Path(scratch) / "target"), "--report", str(report)),
            *("--only-binary=:all:", "--implementation", "cp", "--abi", python),
            *("--python-version", f"3.{python[3:]}", "--index-url", wheels.index_uri(index)),
            *(f"--extra-index-url={wheels.index_uri(url)}" for url in extra),
            *(f"--platform={tag}" for tag in PLATFORM_TAGS[platform]),
            *wanted,
        ]
        done = subprocess.run(command, capture_output=True, text=True, env=env)
        if done.returncode != 0:
            why = (done.stderr.strip().splitlines() or ["no output"])[-1]
            raise UserError(f"pip cannot resolve {' '.join(wanted)} for {platform} {python}: {why}")
        installs = [item["download_info"] for item in json.loads(report.read_text())["install"]]
    pins = []
    for info in installs:
        archive = info.get("archive_info", {})
        digest = archive.get("hashes", {}).get("sha256")
        if not (digest := digest or archive.get("hash", "").partition("sha256=")[2]):
            raise UserError(
                f"{info['url']} carries no sha256 on its index; pass the wheel as a file instead"
            )
        wheel = wheels.parse_wheel_name(info["url"])
        pins.append(mf.Pin(wheel.name, wheel.version, wheel.filename, info["url"], digest, python))
    return sorted(pins, key=lambda pin: pin.filename)


def check_set(
    pins: list[mf.Pin], platform: str, python: str, index: str = PYPI, extra: tuple[str, ...] = ()
) -> list[str]:
    """Problems pip finds with a pinned set."""
    pinned = {pin.name: pin for pin in pins}
    problems = []
    for found in pip_set([f"{p.name}=={p.version}" for p in pins], platform, python, index, extra):
        pin = pinned.get(found.name)
        if pin is None:
            problems.append(f"needs {found.name} {found.version}, which the set does not pin")
        elif (pin.filename, pin.sha256) != (found.filename, found.sha256):
            problems.append(
                f"{pin.filename} sha256 {pin.sha256[:12]}: the index serves {found.filename}"
                f" sha256 {found.sha256[:12]}"
            )
    return problems


def _combos(found: list[wheels.WheelName], pythons: Pythons) -> dict[tuple[str, str], str]:
    combos = {}
    for wheel in found:
        key = wheels.platform_key(wheel)
        wanted = pythons if isinstance(pythons, tuple) else pythons.get(key or "", ())
        if key in PLATFORM_TAGS and wheel.python in wanted:
            combos[(key, wheel.python)] = wheel.version
    return combos


def _resolved(
    wanted: dict[tuple[str, str], list[str]], index: str, extra: tuple[str, ...] = ()
) -> dict[str, list[mf.Pin]]:
    pins: dict[str, list[mf.Pin]] = {}
    for (platform, python), lines in sorted(wanted.items()):
        pins.setdefault(platform, []).extend(pip_set(lines, platform, python, index, extra))
    return pins


def _build(pins: dict[str, list[mf.Pin]], date: str | None = None, **fields: Any) -> mf.Build:
    platform = next(key for key in _IDENTITY_PLATFORMS if key in pins)
    wheel = min(
        (pin for pin in pins[platform] if pin.name == "torch"),
        key=lambda pin: ("cp311" not in pin.filename, pin.filename),
    )
    identity = wheels.torch_identity(wheel.url)
    return mf.Build(
        torch_version=wheel.version.split("+")[0],
        date=date or mf.format_date(identity.built),
        git_version=identity.git_version,
        pins=pins,
        **fields,
    )


def release(
    version: str,
    index: str = PYPI,
    pythons: Pythons = PYTHONS,
    torchvision: str | None = None,
    transformers: str | None = None,
    date: str | None = None,
) -> mf.Build:
    """A torch release with pip's choice of its neighbours."""
    if not re.fullmatch(r"\d+\.\d+(\.\d+)?", version):
        raise UserError(f"release version {version!r} is not MAJOR.MINOR.PATCH (e.g. 2.14.1)")
    all_torch = wheels.project_wheels(index, "torch")
    combos = _combos([w for w in all_torch if w.public_version == version], pythons)
    if not combos:
        if any(w.public_version == version for w in all_torch):
            raise UserError(
                f"torch {version} on {index} has no wheel for {pythons} on a tracked platform"
            )
        known = {w.public_version for w in all_torch if not Version(w.version).is_prerelease}
        recent = ", ".join(sorted(known, key=Version)[-8:])
        raise UserError(f"torch {version} is not on {index}; recent releases there: {recent}")
    series = torchvision_series(version) + "."
    with_vision = _combos(
        [w for w in wheels.project_wheels(index, "torchvision") if w.version.startswith(series)],
        pythons,
    )
    # no torchvision for a Python: the suite skips those models there
    wanted = {
        c: requirements(torch, torchvision or (None if c in with_vision else "none"), transformers)
        for c, torch in combos.items()
    }
    return _build(_resolved(wanted, index), date, id=version, kind="release", tag=f"v{version}")


def nightly_dates(indexes: tuple[str, ...]) -> list[str]:
    """Oldest first."""
    stamps = (
        NIGHTLY_STAMP.search(wheel.version)
        for index in indexes
        for wheel in wheels.project_wheels(index, "torch")
    )
    return sorted({"-".join(found.groups()) for found in stamps if found})


def check_nightly_date(date: str) -> None:
    try:
        datetime.strptime(date, "%Y-%m-%d")
    except ValueError:
        raise UserError(f"nightly date {date!r} is not YYYY-MM-DD") from None


def nightly(
    date: str,
    indexes: tuple[str, ...] = NIGHTLY_INDEXES,
    pythons: tuple[str, ...] = PYTHONS,
    transformers: str | None = None,
    transformers_index: str = PYPI,
) -> mf.Build:
    """The nightly of ``date``: each platform from the first index holding its torch."""
    check_nightly_date(date)
    for each in (*indexes, transformers_index):  # check all before reading one
        wheels.index_uri(each)
    stamp = ".dev" + date.replace("-", "")
    pins: dict[str, list[mf.Pin]] = {}
    for index in indexes:
        torch_wheels = [w for w in wheels.project_wheels(index, "torch") if stamp in w.version]
        combos = {c: v for c, v in _combos(torch_wheels, pythons).items() if c[0] not in pins}
        if combos:
            found = [w.version for w in wheels.project_wheels(index, "torchvision")]
            vision = max((v for v in found if stamp in v), key=Version, default="none")
            extra = (transformers_index,) if transformers_index != index else ()
            wanted = {c: requirements(torch, vision, transformers) for c, torch in combos.items()}
            pins.update(_resolved(wanted, index, extra))
    if not pins:
        day = datetime.fromisoformat(date)
        near = [
            d for d in nightly_dates(indexes) if abs((datetime.fromisoformat(d) - day).days) <= 7
        ]
        hint = f"; nightlies within a week: {', '.join(near)}" if near else ""
        raise UserError(f"no torch nightly of {date} on {', '.join(indexes)}{hint}")
    return _build(pins, id=date, kind="nightly")


def _file_pin(path: Path, sha256: str | None = None) -> tuple[mf.Pin, Path]:
    if not path.is_file():
        raise UserError(f"wheel file {path} does not exist")
    wheel = wheels.own_identity(str(path))
    actual = install_build.sha256_of(path)
    if sha256 and sha256.lower() != actual:
        raise UserError(f"{path.name}: sha256 {actual} does not match the given {sha256}")
    return mf.Pin(wheel.name, wheel.version, wheel.filename, path.resolve().as_uri(), actual), path


def _torch_platform(wheel: wheels.WheelName) -> str:
    platform = wheels.platform_key(wheel)
    if wheel.name != "torch" or platform is None:
        raise UserError(
            f"{wheel.filename} is not a torch wheel for a tracked platform"
            f" ({', '.join(wheels.PLATFORMS)})"
        )
    return platform


def _own_build(
    own: list[tuple[mf.Pin, Path]],
    kind: str,
    transformers: str | None,
    index: str,
    build_id: str | None,
    note: str,
) -> mf.Build:
    torch_pin, torch_file = own[0]
    wheel = wheels.parse_wheel_name(torch_pin.filename)
    platform = _torch_platform(wheel)
    identity = wheels.torch_identity(str(torch_file))
    if canonicalize_version(identity.version) != canonicalize_version(wheel.version):
        raise UserError(
            f"{wheel.filename}: its metadata says torch {wheel.version} but its"
            f" torch/version.py {identity.version}"
        )
    wanted = [f"{pin.name} @ {path.resolve().as_uri()}" for pin, path in own]
    wanted += requirements(identity.version, "none", transformers)[1:]  # all but torch
    mine = {pin.name: replace(pin, python=wheel.python) for pin, _ in own}
    pins = [mine.get(pin.name, pin) for pin in pip_set(wanted, platform, wheel.python, index)]
    return mf.Build(
        id=build_id or _build_id(identity.version),
        torch_version=identity.version,
        date=mf.format_date(identity.built),
        git_version=identity.git_version,
        kind=kind,
        pins={platform: pins},
        note=note,
    )


def _build_id(torch_version: str) -> str:
    return re.sub(r"[^a-z0-9._-]+", "-", torch_version.lower())


def wheel_file(
    path: Path,
    torchvision: Path | None = None,
    transformers: str | None = None,
    index: str = PYPI,
    sha256: str | None = None,
    build_id: str | None = None,
    note: str = "",
) -> mf.Build:
    wheels.index_uri(index)
    own = [_file_pin(path, sha256), *([_file_pin(torchvision)] if torchvision else [])]
    return _own_build(own, "wheel-file", transformers, index, build_id, note)


def wheel_url(
    url: str,
    sha256: str | None = None,
    transformers: str | None = None,
    index: str = PYPI,
    build_id: str | None = None,
    note: str = "",
) -> mf.Build:
    """Fetched once into the wheel store."""
    url, _, fragment = url.partition("#")
    if not install_build.allowed_url(url):
        raise UserError(
            f"{url!r} is not an https:// or file:// URL (http is refused: it could change the"
            " wheel on the way); for a wheel file use add-wheel"
        )
    digest = sha256 or fragment.removeprefix("sha256=")
    if not re.fullmatch(r"[0-9a-fA-F]{64}", digest):
        raise UserError(
            "a wheel URL needs its sha256: pass --sha256 or a URL ending in #sha256=...;"
            f" got {digest!r}"
        )
    _torch_platform(wheel := wheels.own_identity(url))  # by HTTP ranges, before the download
    wheels.index_uri(index)
    if url.startswith("file://"):  # copied into the store once added
        own = _file_pin(install_build.local_path(url), digest)
    else:
        pin = mf.Pin(wheel.name, wheel.version, wheel.filename, url, digest.lower())
        own = (pin, install_build.fetch_wheel(vars(pin)))  # kept in the store even if refused later
    return _own_build([own], "wheel-url", transformers, index, build_id, note)


def in_store(build: mf.Build) -> tuple[mf.Build, list[mf.Pin]]:
    """``build`` with file:// pins moved to the store, and the originals for :func:`keep`."""
    originals: list[mf.Pin] = []

    def stored(pin: mf.Pin) -> mf.Pin:
        target = install_build.stored_wheel(vars(pin)).resolve().as_uri()
        if not pin.url.startswith("file://") or target == pin.url:
            return pin
        originals.append(pin)
        return replace(pin, url=target)

    pins = {platform: list(map(stored, pins)) for platform, pins in build.pins.items()}
    return replace(build, pins=pins), originals


def keep(originals: list[mf.Pin]) -> list[Path]:
    """Copy ``originals`` into the wheel store; the copies made now."""
    stored = [install_build.stored_wheel(vars(pin)) for pin in originals]
    fresh = [path for path in stored if not path.is_file()]
    for pin in originals:
        install_build.fetch_wheel(vars(pin))
    return fresh


def existing(
    site_packages: Path,
    build_id: str | None = None,
    date: str | None = None,
    env: dict[str, str] | None = None,
    note: str = "",
) -> mf.Build:
    folder = site_packages.resolve()
    version_py = folder / "torch" / "version.py"
    if not version_py.is_file():
        raise UserError(f"{site_packages} holds no installed torch (no torch/version.py)")
    version, git_version = wheels.version_py(version_py.read_text(), str(folder))
    when = datetime.fromtimestamp(version_py.stat().st_mtime, tz=timezone.utc)
    return mf.Build(
        id=build_id or _build_id(version),
        torch_version=version,
        date=date or mf.format_date(when),
        git_version=git_version,
        kind="existing",
        pins={},
        note=note,
        site_packages=str(folder),
        env=dict(env or {}),
    )
