"""A published asv site made self-contained: its CDN libraries from the npm registry."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import html
import io
import os
import re
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from mpsbench.builds import wheels
from mpsbench.core import files, progress
from mpsbench.core.errors import UserError

CACHE = Path(".asv/npm-cache")
VENDOR = "vendor"
REGISTRY_ENV = "npm_config_registry"
REGISTRY = "https://registry.npmjs.org"


class SiteAssetError(UserError):
    """A site that cannot be patched or made self-contained."""


class Unreachable(SiteAssetError):
    """A fetch the network refused: that host's CDN links stay."""

    def __init__(self, url: str, reason: str) -> None:
        self.host, self.why = _host(url), f"unreachable ({reason})"
        super().__init__(f"{url} {self.why}")


@dataclass(frozen=True)
class Asset:
    """The npm package file that replaces a CDN URL in asv's pages."""

    package: str
    path: str  # in the tarball's package/
    substitute: str = ""  # why npm's bytes differ from the CDN's
    companions: tuple[str, ...] = ()


PACKAGES: dict[str, str] = {
    "jquery@3.3.1": "sha512-Ubldcmxp5np52/ENotGxlLe6aGMvmF4R8S6tZjsP6Knsaxd/xp3Zrh50cG93lR6nPXyUFwzN3ZSOQI0wRJNdGg==",
    "flot@0.8.3": "sha512-xg2otcTJDvS+ERK+my4wxG/ASq90QURXtoM4LhacCq0jQW2jbyjdttbRNqU2cPykrpMvJ6b2uSp6SAgYAzj9tQ==",
    "flot-orderbars@1.0.0": "sha512-Jv51fvzevUjNXEeozpwEKfPjhiZhfiJddv0WHjduUTCmSF+7T5K7C9c9Y1wIVmUhDBv5fLMjgbwKecT0GIKPZA==",
    "stupid-table-plugin@1.1.3": "sha512-"
    "2Vk7XouQPxUQPRe9w0Fu7ZZ8kHLK7rDoLMsCgtKxRNJ7f4dSOGvW9CkHsq5wD6QsaEnWoyLBYH3xOEsrK3yWBg==",
    "blueimp-md5@2.19.0": "sha512-DRQrD6gJyy8FbiE4s+bDoXS9hiW3Vbx5uCdwvcCf3zLHL+Iv7LtGHLpr+GZV8rHG8tK766FGYBwRbu8pELTt+w==",
    "bootstrap@3.1.1": "sha512-TAzqS8E/ISpVHP29gYhy+1NSV+FJwApDVQhDfgLYsIuUDJiqJzH2DfORN5tiu+Ie2iBLrzEG34t4Rf465cigqg==",
}
_CDNJS = "https://cdnjs.cloudflare.com/ajax/libs"
_BOOTSTRAP = "https://cdn.jsdelivr.net/npm/bootstrap@3.1.1/dist"

# every URL asv 0.6.6's www/index.html loads
ASSETS: dict[str, Asset] = {
    "https://code.jquery.com/jquery-3.3.1.min.js": Asset("jquery@3.3.1", "dist/jquery.min.js"),
    **{
        f"{_CDNJS}/flot/0.8.3/jquery.flot{plugin}.min.js": Asset(
            "flot@0.8.3",
            f"jquery.flot{plugin}.js",
            "cdnjs minified it; npm's is the same release unminified",
        )
        for plugin in ("", ".time", ".selection", ".categories")
    },
    "https://cdn.jsdelivr.net/npm/flot-orderbars@1.0.0/js/jquery.flot.orderBars.js": Asset(
        "flot-orderbars@1.0.0", "js/jquery.flot.orderBars.js"
    ),
    f"{_CDNJS}/stupidtable/1.0.1/stupidtable.min.js": Asset(
        "stupid-table-plugin@1.1.3",
        "stupidtable.min.js",
        "1.0.1 is not on npm; 1.1.3 is API-compatible",
    ),
    f"{_CDNJS}/blueimp-md5/2.19.0/js/md5.min.js": Asset("blueimp-md5@2.19.0", "js/md5.min.js"),
    f"{_BOOTSTRAP}/js/bootstrap.min.js": Asset("bootstrap@3.1.1", "dist/js/bootstrap.min.js"),
    f"{_BOOTSTRAP}/css/bootstrap.min.css": Asset(
        "bootstrap@3.1.1",
        "dist/css/bootstrap.min.css",
        companions=tuple(
            f"dist/fonts/glyphicons-halflings-regular.{ext}"
            for ext in ("eot", "svg", "ttf", "woff")
        ),
    ),
}

_TAG = re.compile(r"<(script|link)\b[^>]*>", re.IGNORECASE)  # what loads; <a> only links
_ATTRIBUTE = re.compile(r"""\b([\w-]+)\s*=\s*(["'])(.*?)\2""", re.DOTALL)
_EXTERNAL = re.compile(r"^(https?:)?//", re.IGNORECASE)
_CORS_ATTRIBUTES = re.compile(
    r"""\s+(?:integrity|crossorigin|referrerpolicy)\s*=\s*(["']).*?\1""", re.IGNORECASE
)

log = progress.logger(__name__)


def _host(url: str) -> str:
    return urlsplit(url).hostname or url


def sri(data: bytes, algorithm: str) -> str:
    if algorithm not in ("sha256", "sha384", "sha512"):
        raise SiteAssetError(
            f"unsupported integrity algorithm {algorithm!r}; SRI allows sha256, sha384, sha512"
        )
    return f"{algorithm}-{base64.b64encode(hashlib.new(algorithm, data).digest()).decode('ascii')}"


def _matches(data: bytes, expected: str) -> bool:
    return any(sri(data, candidate.split("-", 1)[0]) == candidate for candidate in expected.split())


def check_integrity(data: bytes, expected: str, what: str) -> None:
    if not _matches(data, expected):
        actual = sri(data, expected.split("-", 1)[0])
        raise SiteAssetError(
            f"{what} has integrity {actual}, expected {expected}; refusing to use it"
        )


def download(url: str) -> bytes:
    with wheels.open_url(url) as response:
        return bytes(response.read())


def _fetch(url: str, integrity: str, path: Path, what: str) -> bytes:
    if path.is_file() and _matches(cached := path.read_bytes(), integrity):
        return cached
    try:
        data = download(url)
    except (OSError, ValueError) as exc:
        raise Unreachable(url, str(getattr(exc, "reason", None) or exc)) from None
    log.info(f"fetched {what} from {url}")
    check_integrity(data, integrity, f"{what} from {url}")
    path.parent.mkdir(parents=True, exist_ok=True)
    files.write(path, data)
    return data


def package_file(spec: str, path: str, cache: Path) -> bytes:
    name, _, version = spec.rpartition("@")
    registry = (os.environ.get(REGISTRY_ENV) or REGISTRY).rstrip("/")
    url = f"{registry}/{name}/-/{name.rsplit('/', 1)[-1]}-{version}.tgz"
    tarball = _fetch(url, PACKAGES[spec], cache / f"{name}-{version}.tgz", spec)
    with (
        tarfile.open(fileobj=io.BytesIO(tarball), mode="r:gz") as archive,
        contextlib.suppress(KeyError),
    ):
        if member := archive.extractfile(f"package/{path}"):
            return member.read()
    raise SiteAssetError(f"{spec} has no file {path}")


def _source(tag: str) -> tuple[str, dict[str, str]]:
    found = {name.lower(): html.unescape(value) for name, _, value in _ATTRIBUTE.findall(tag)}
    return found.get("src") or found.get("href") or "", found


def pages(html_dir: Path) -> list[Path]:
    return sorted(html_dir.glob("*.html"))


def _page_loads(page: Path) -> Iterator[tuple[str, str]]:
    for tag in _TAG.finditer(page.read_text("utf-8")):
        url, attributes = _source(tag.group(0))
        if _EXTERNAL.match(url):
            yield url, attributes.get("integrity", "")


def external_loads(html_dir: Path) -> dict[str, str]:
    """Each URL the pages load from elsewhere, with its first integrity pin."""
    found: dict[str, str] = {}
    for page in pages(html_dir):
        for url, integrity in _page_loads(page):
            found.setdefault(url, integrity)
    return found


def _rewrite(text: str, local: dict[str, str]) -> str:
    """Known tags to their local copies, without the CORS attributes file:// refuses."""

    def replace(found: re.Match[str]) -> str:
        tag, url = found.group(0), _source(found.group(0))[0]
        if url not in local:
            return tag
        tag = tag.replace(html.escape(url, quote=True), local[url]).replace(url, local[url])
        return _CORS_ATTRIBUTES.sub("", tag)

    return _TAG.sub(replace, text)


def _outcome(made_local: int, substitutes: set[str], down: dict[str, str], left: set[str]) -> str:
    said = (
        f"{made_local} CDN files made local in the site's {VENDOR}/"
        if made_local
        else "no CDN file made local"
    )
    what = []
    if left:
        what.append(
            f"{', '.join(sorted(left))} load from their CDNs, so the site needs the internet and asv"
            " preview until a publish reaches the registry"
        )
    if substitutes:
        what.append(
            f"npm's {', '.join(sorted(substitutes))} stand in for asv's CDN files"
            " (registry-checked), the site works the same"
        )
    if not what:
        return said
    hosts = ", ".join(f"{host} {why}" for host, why in sorted(down.items()))
    return f"{said}; {hosts + ': ' if hosts else ''}{'; '.join(what)}"


def make_offline(html_dir: Path, cache: Path = CACHE) -> list[str]:
    """Returns the files written."""
    if not (html_dir / "index.html").is_file():
        raise SiteAssetError(f"{html_dir} holds no index.html: run `asv publish` first")
    loads = external_loads(html_dir)
    if unknown := sorted(loads.keys() - ASSETS.keys()):
        raise SiteAssetError(
            f"{unknown[0]} (loaded by the pages) is not in mpsbench.site.site_assets.ASSETS; a"
            " different asv version? add it there"
        )
    written: list[str] = []
    local: dict[str, str] = {}
    substitutes: set[str] = set()
    down: dict[str, str] = {}
    left_on_cdn: set[str] = set()
    for url, integrity in sorted(loads.items()):
        asset, host = ASSETS[url], _host(url)
        try:
            data = {
                path: package_file(asset.package, path, cache)
                for path in (asset.path, *asset.companions)
            }
        except Unreachable as exc:
            down.setdefault(exc.host, exc.why)
            left_on_cdn.add(asset.package)
            continue
        if asset.substitute:
            if integrity and host not in down:
                try:
                    cached = cache / "cdn" / re.sub(r"[^\w.-]+", "_", url.split("://", 1)[-1])
                    data[asset.path] = _fetch(url, integrity, cached, "asv's own file")
                except Unreachable as exc:
                    down[host] = exc.why
                except SiteAssetError:
                    down[host] = "serves another file than asv's page pins"
            if host in down or not integrity:
                substitutes.add(asset.package)
        elif integrity:
            check_integrity(data[asset.path], integrity, f"{asset.package}/{asset.path}")
        folder = f"{VENDOR}/{asset.package}"
        for path, content in data.items():
            written.append(f"{folder}/{path}")
            (html_dir / written[-1]).parent.mkdir(parents=True, exist_ok=True)
            (html_dir / written[-1]).write_bytes(content)
        local[url] = f"{folder}/{asset.path}"
    for page in pages(html_dir):
        text = page.read_text("utf-8")
        if (rewritten := _rewrite(text, local)) != text:
            page.write_text(rewritten, "utf-8")
    # a tag the rewrite missed (another escaping, a new asv page) would need the network again
    for page in pages(html_dir):
        for url, _ in _page_loads(page):
            if ASSETS[url].package not in left_on_cdn:
                raise SiteAssetError(f"{page.name} still loads {url} after rewriting")
    log.info(_outcome(len(local), substitutes, down, left_on_cdn))
    return written
