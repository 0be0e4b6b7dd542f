"""Wheels: names, PEP 503 indexes, and what a wheel says of itself (read remotely by HTTP ranges)."""

from __future__ import annotations

import contextlib
import email.parser
import html.parser
import io
import re
import urllib.parse
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import packaging.tags
import packaging.utils
import packaging.version

from mpsbench.builds import install_build
from mpsbench.core.errors import UserError

# PyPI's Linux torch is the CUDA build; a cpu-only one is "+cpu"
PLATFORMS: tuple[str, ...] = ("macos-arm64", "linux-x86_64-cpu", "linux-x86_64-cuda")


open_url = install_build.open_url


def _dotted(parts: Iterable[str]) -> str:
    return ".".join(sorted(set(parts)))


@dataclass(frozen=True)
class WheelName:
    filename: str
    name: str  # canonical, '-' written '_'
    version: str
    tags: frozenset[packaging.tags.Tag]

    @property
    def public_version(self) -> str:
        return self.version.split("+", 1)[0]

    @property
    def python(self) -> str:
        return _dotted(tag.interpreter for tag in self.tags)

    @property
    def platform(self) -> str:
        return _dotted(tag.platform for tag in self.tags)


def parse_wheel_name(filename: str) -> WheelName:
    base = urllib.parse.unquote(filename.rsplit("/", 1)[-1])
    try:
        name, version, _build, tags = packaging.utils.parse_wheel_filename(base)
    except (packaging.utils.InvalidWheelFilename, packaging.version.InvalidVersion):
        raise UserError(
            f"{base!r} is not a wheel file name (expected NAME-VERSION-PY-ABI-PLATFORM.whl)"
        ) from None
    return WheelName(base, name.replace("-", "_"), str(version), tags)


def platform_key(wheel: WheelName) -> str | None:
    """The manifest platform a wheel serves; None for a pure-Python or untracked one."""
    if "macosx" in wheel.platform and wheel.platform.endswith("arm64"):
        return "macos-arm64"
    if "linux" in wheel.platform and wheel.platform.endswith("x86_64"):
        local = packaging.version.Version(wheel.version).local or ""
        return "linux-x86_64-cpu" if local.split(".")[0] == "cpu" else "linux-x86_64-cuda"
    return None


class _Links(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        href = dict(attrs).get("href")
        if tag == "a" and href:
            self.hrefs.append(href)


def index_uri(index: str) -> str:
    """A PEP 503 index (a URL or a folder) as an https:// or file:// URL."""
    if "://" not in index:
        return Path(index).resolve().as_uri()
    if not index.startswith(("https://", "file://")):
        raise UserError(
            f"index {index!r}: use https://, file:// or a folder (plain http could change the"
            " wheels on the way)"
        )
    return index


def project_wheels(index_url: str, project: str) -> list[WheelName]:
    page_url = f"{index_uri(index_url).rstrip('/')}/{packaging.utils.canonicalize_name(project)}/"
    try:  # a folder: index.html
        with open_url(page_url + ("index.html" if page_url[:7] == "file://" else "")) as response:
            text = response.read().decode("utf-8", "replace")
    except OSError as exc:
        raise UserError(f"cannot read the index page {page_url}: {exc}") from None
    links = _Links()  # a parser, not a regex: any quoting an index serves
    links.feed(text)
    found = []
    for url in (href.partition("#")[0] for href in links.hrefs):
        if url.endswith(".whl"):
            with contextlib.suppress(UserError):
                found.append(parse_wheel_name(url))
    return found


class _HTTPRangeFile(io.RawIOBase):
    """A remote file read by HTTP ranges, for ``zipfile``."""

    def __init__(self, url: str) -> None:
        super().__init__()
        self.url = url
        self.position = 0
        with open_url(url, "HEAD") as response:
            self.size = int(response.headers["Content-Length"])

    def seekable(self) -> bool:
        return True

    def readable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        anchor = {io.SEEK_SET: 0, io.SEEK_CUR: self.position, io.SEEK_END: self.size}[whence]
        self.position = max(0, anchor + offset)
        return self.position

    def read(self, size: int = -1) -> bytes:
        end = self.size if size is None or size < 0 else min(self.size, self.position + size)
        if end <= self.position:
            return b""
        with open_url(self.url, Range=f"bytes={self.position}-{end - 1}") as response:
            data: bytes = response.read()
        self.position += len(data)
        return data


@dataclass(frozen=True)
class TorchIdentity:
    version: str
    git_version: str
    built: datetime  # torch/version.py's timestamp (UTC)


def _read(location: str, pattern: str) -> dict[str, tuple[str, zipfile.ZipInfo]]:
    remote = location.startswith(("http://", "https://"))
    try:
        source = _HTTPRangeFile(location) if remote else install_build.local_path(location)
        with zipfile.ZipFile(source) as wheel:
            return {
                info.filename: (wheel.read(info).decode(), info)
                for info in wheel.infolist()
                if re.fullmatch(pattern, info.filename)
            }
    except (OSError, zipfile.BadZipFile, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read {location} as a wheel: {exc}") from None


def torch_identity(location: str) -> TorchIdentity:
    found = _read(location, r"torch/version\.py")
    if not found:
        raise UserError(f"{location} holds no torch/version.py: is it a torch wheel?")
    text, info = found["torch/version.py"]
    return TorchIdentity(
        *version_py(text, location), datetime(*info.date_time, tzinfo=timezone.utc)
    )


def own_identity(location: str) -> WheelName:
    """A wheel's identity by its own METADATA and WHEEL, refused if renamed."""
    named = parse_wheel_name(location)
    found = _read(location, r"[^/]+\.dist-info/(METADATA|WHEEL)")
    if len(folders := {name.split("/", 1)[0] for name in found}) != 1 or len(found) != 2:
        raise UserError(
            f"{named.filename} holds {len(folders)} .dist-info folders with METADATA and WHEEL;"
            " a wheel has one"
        )
    metadata, wheel_file = (
        email.parser.HeaderParser().parsestr(found[name][0]) for name in sorted(found)
    )
    try:
        version = packaging.version.Version(metadata.get("Version", ""))
        tags = frozenset(
            tag
            for line in wheel_file.get_all("Tag") or []
            for tag in packaging.tags.parse_tag(line)
        )
    except ValueError:
        raise UserError(
            f"{named.filename}: its METADATA or WHEEL holds no valid Version or Tag"
        ) from None
    name = packaging.utils.canonicalize_name(metadata.get("Name", "")).replace("-", "_")
    own = WheelName(named.filename, name, str(version), tags)
    if own != named:
        said = [f"{w.name} {w.version} for {w.python} on {w.platform}" for w in (named, own)]
        raise UserError(
            f"{named.filename}: its file name says {said[0]}, its own metadata {said[1]};"
            " refusing a renamed wheel (nothing was changed)"
        )
    return own


def version_py(text: str, where: str) -> tuple[str, str]:
    version = re.search(r"^__version__\s*=\s*['\"]([^'\"]+)", text, re.M)
    git = re.search(r"^git_version\s*=\s*['\"]([0-9a-fA-F]+|Unknown)['\"]", text, re.M)
    if not version or not git:
        raise UserError(f"{where}: torch/version.py has no __version__ or git_version")
    return version.group(1), git.group(1)
