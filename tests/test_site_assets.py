"""Making a published site self-contained: the asset table, the hash checks, the rewrite."""

from __future__ import annotations

import hashlib
import io
import re
import shutil
import subprocess
import sys
import tarfile
import urllib.error
from base64 import b64encode
from pathlib import Path

import asv
import pytest
from tests.test_torch_free import without_node

from mpsbench.site import patches, site_assets
from mpsbench.site.site_assets import Asset, SiteAssetError

ROOT = Path(__file__).resolve().parents[1]
ASV_WWW = Path(asv.__file__).parent / "www"  # the template asv publish copies into html_dir
FAKE_URL = "https://cdn.example.invalid/fakelib/1.0.0/fakelib.min.js"
FAKE_JS = b"window.fakelib = 1;\n"


def _sri(data: bytes, algorithm: str = "sha256") -> str:
    return f"{algorithm}-{b64encode(hashlib.new(algorithm, data).digest()).decode()}"


def test_the_table_names_exactly_the_urls_asvs_pages_load():
    assert set(site_assets.external_loads(ASV_WWW)) == set(site_assets.ASSETS)
    assert {asset.package for asset in site_assets.ASSETS.values()} == set(site_assets.PACKAGES)


@pytest.fixture
def fake_site(tmp_path, monkeypatch):
    """A one-library site and a cache holding that library's tarball; the real tables swapped out."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        member = tarfile.TarInfo("package/dist/fakelib.min.js")
        member.size = len(FAKE_JS)
        archive.addfile(member, io.BytesIO(FAKE_JS))
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "fakelib-1.0.0.tgz").write_bytes(buffer.getvalue())
    monkeypatch.setattr(
        site_assets, "PACKAGES", {"fakelib@1.0.0": _sri(buffer.getvalue(), "sha512")}
    )
    monkeypatch.setattr(
        site_assets, "ASSETS", {FAKE_URL: Asset("fakelib@1.0.0", "dist/fakelib.min.js")}
    )
    html = tmp_path / "html"
    html.mkdir()
    return html, cache


def _page(html: Path, integrity: str) -> Path:
    page = html / "index.html"
    page.write_text(
        "<html><head>\n"
        f'<script src="{FAKE_URL}" integrity="{integrity}" crossorigin="anonymous"></script>\n'
        '<a href="https://github.com/airspeed-velocity/asv/">a link is not a load</a>\n'
        "</head></html>\n"
    )
    return page


def test_a_library_is_copied_in_and_the_page_points_at_it(fake_site):
    html, cache = fake_site
    page = _page(html, _sri(FAKE_JS))
    assert site_assets.make_offline(html, cache) == ["vendor/fakelib@1.0.0/dist/fakelib.min.js"]
    assert (html / "vendor/fakelib@1.0.0/dist/fakelib.min.js").read_bytes() == FAKE_JS
    text = page.read_text()
    # no integrity or crossorigin left on the local tag: from file:// Chromium loads nothing that carries them
    assert '<script src="vendor/fakelib@1.0.0/dist/fakelib.min.js"></script>' in text
    assert FAKE_URL not in text
    assert "https://github.com/airspeed-velocity/asv/" in text  # links stay: they load nothing
    site_assets.make_offline(html, cache)  # after the next publish-less run: nothing left to do
    assert page.read_text() == text


def test_a_file_that_does_not_match_the_pages_integrity_is_refused(fake_site):
    html, cache = fake_site
    page = _page(html, _sri(b"something else"))
    before = page.read_text()
    with pytest.raises(
        SiteAssetError, match=r"fakelib@1.0.0/dist/fakelib.min.js has integrity sha256-.*refusing"
    ):
        site_assets.make_offline(html, cache)
    assert page.read_text() == before
    assert not (html / "vendor").exists()


def test_a_corrupt_cached_tarball_is_fetched_again_over_https_and_checked(fake_site, monkeypatch):
    html, cache = fake_site
    _page(html, _sri(FAKE_JS))
    good = (cache / "fakelib-1.0.0.tgz").read_bytes()
    (cache / "fakelib-1.0.0.tgz").write_bytes(b"not the tarball")
    asked = []
    monkeypatch.setattr(site_assets, "download", lambda url: asked.append(url) or good)
    site_assets.make_offline(html, cache)
    assert asked == [
        "https://registry.npmjs.org/fakelib/-/fakelib-1.0.0.tgz"
    ]  # the registry's dist.tarball
    assert (cache / "fakelib-1.0.0.tgz").read_bytes() == good


def test_a_registry_out_of_reach_leaves_the_cdn_tag_with_one_line_and_a_tampered_tarball_is_refused(
    fake_site, monkeypatch, caplog
):
    html, cache = fake_site
    page = _page(html, _sri(FAKE_JS))
    before = page.read_text()
    (cache / "fakelib-1.0.0.tgz").unlink()

    def offline(url):
        raise urllib.error.URLError("Name or service not known")

    monkeypatch.setattr(site_assets, "download", offline)
    with caplog.at_level("INFO", logger=site_assets.log.name):
        assert site_assets.make_offline(html, cache) == []
    assert (
        page.read_text() == before
    )  # the CDN's tag, integrity and all: the page still works online
    assert [record.getMessage() for record in caplog.records] == [
        "no CDN file made local; registry.npmjs.org unreachable (Name or service not known): fakelib@1.0.0 load from"
        " their CDNs, so the site needs the internet and asv preview until a publish reaches the registry"
    ]
    monkeypatch.setattr(site_assets, "download", lambda url: b"tampered")
    with pytest.raises(
        SiteAssetError, match=r"fakelib@1.0.0 from https://.* has integrity sha512-.*refusing"
    ):
        site_assets.make_offline(html, cache)
    assert not (cache / "fakelib-1.0.0.tgz").exists()


@pytest.mark.parametrize("cdn", ["reachable", "unreachable", "another file"])
def test_a_substitute_is_replaced_by_the_very_file_the_page_pins_when_its_cdn_serves_it(
    fake_site, monkeypatch, cdn, caplog
):
    html, cache = fake_site
    served = b"window.fakelib = 1; /* the CDN's own minified build */\n"
    page = _page(html, _sri(served, "sha512"))
    second = FAKE_URL.replace(
        "fakelib.min.js", "fakelib.plugin.min.js"
    )  # a second file on the same CDN
    page.write_text(
        page.read_text().replace(
            "</head>",
            f'<script src="{second}" integrity="{_sri(served, "sha512")}"'
            ' crossorigin="anonymous"></script>\n</head>',
        )
    )
    monkeypatch.setitem(
        site_assets.ASSETS,
        FAKE_URL,
        Asset("fakelib@1.0.0", "dist/fakelib.min.js", "test"),
    )
    monkeypatch.setitem(
        site_assets.ASSETS, second, Asset("fakelib@1.0.0", "dist/fakelib.min.js", "test")
    )
    asked = []

    def download(url):
        asked.append(url)
        if cdn == "unreachable":
            raise urllib.error.URLError("unreachable")
        return served if cdn == "reachable" else b"not the file the page pins"

    monkeypatch.setattr(site_assets, "download", download)
    with caplog.at_level("INFO", logger=site_assets.log.name):
        site_assets.make_offline(html, cache)
    copied = (html / "vendor/fakelib@1.0.0/dist/fakelib.min.js").read_bytes()
    assert copied == (served if cdn == "reachable" else FAKE_JS)
    assert '<script src="vendor/fakelib@1.0.0/dist/fakelib.min.js"></script>' in page.read_text()
    said = [
        record.getMessage()
        for record in caplog.records
        if not record.getMessage().startswith("fetched")
    ]
    if cdn != "reachable":  # asked once, said once: what is missing and what the site still does
        why = (
            "unreachable (unreachable)"
            if cdn == "unreachable"
            else "serves another file than asv's page pins"
        )
        assert asked == [FAKE_URL]
        assert said == [
            f"2 CDN files made local in the site's vendor/; cdn.example.invalid {why}:"
            " npm's fakelib@1.0.0 stand in for asv's CDN files (registry-checked), the site works the same"
        ]
    else:
        assert sorted(asked) == sorted([FAKE_URL, second]) and said == [
            "2 CDN files made local in the site's vendor/"
        ]


def test_an_unknown_external_url_names_itself(fake_site):
    html, cache = fake_site
    (html / "index.html").write_text(
        '<link rel="stylesheet" href="https://cdn.example.invalid/other.css">'
    )
    with pytest.raises(
        SiteAssetError, match=r"https://cdn.example.invalid/other.css .* not in .*ASSETS"
    ):
        site_assets.make_offline(html, cache)


def test_a_missing_site_is_one_line(tmp_path):
    with pytest.raises(
        SiteAssetError, match=f"^{tmp_path} holds no index.html: run `asv publish` first$"
    ):
        site_assets.make_offline(tmp_path)


def test_the_navbar_link_is_added_once_after_the_regressions_tab(tmp_path):
    shutil.copy(ASV_WWW / "index.html", tmp_path / "index.html")
    patches.add_nav_link(tmp_path, "Figures", "mpsbench/summary.html")
    patches.add_nav_link(tmp_path, "Figures", "mpsbench/summary.html")
    text = (tmp_path / "index.html").read_text()
    assert text.count('href="mpsbench/summary.html"') == 1
    assert text.index('id="nav-li-regressions"') < text.index('href="mpsbench/summary.html"')


def local_loads(page: Path) -> list[str]:
    """The libraries the page loads from the site itself (site_assets.VENDOR): their paths."""
    return re.findall(
        rf'<(?:script|link)\b[^>]*\b(?:src|href)="({site_assets.VENDOR}/[^"]+)"', page.read_text()
    )


def test_asvs_own_pages_become_self_contained_from_the_npm_registry(tmp_path, npm_cache):
    """The real libraries (npm registry, or the tarballs an earlier test of this run fetched)."""
    site = tmp_path / "html"
    shutil.copytree(ASV_WWW, site)
    pinned = site_assets.external_loads(site)
    written = site_assets.make_offline(site, npm_cache)
    assert site_assets.external_loads(site) == {}
    local = local_loads(site / "index.html")
    assert len(set(local)) == len(site_assets.ASSETS)  # every library, now from the site
    assert not re.search(
        r"\b(integrity|crossorigin)=", (site / "index.html").read_text()
    )  # file:// loads them
    for (
        url,
        asset,
    ) in site_assets.ASSETS.items():  # checked as written: the very bytes asv's page pins
        path = f"{site_assets.VENDOR}/{asset.package}/{asset.path}"
        assert path in local, path
        if not asset.substitute:
            pin = pinned[url]
            assert _sri((site / path).read_bytes(), pin.split("-", 1)[0]) == pin, path
    companions = sum(len(asset.companions) for asset in site_assets.ASSETS.values())
    assert len(written) == len(site_assets.ASSETS) + companions
    assert all((site / path).stat().st_size > 0 for path in written)


def test_the_publish_step_runs_without_node_on_path(tmp_path, npm_cache):
    """The site step as mpsbench publish runs it, with every folder holding node or npm taken off PATH."""
    site = tmp_path / "html"
    shutil.copytree(ASV_WWW, site)
    env = without_node(tmp_path / "bin")
    probe = "import shutil, sys; sys.exit(shutil.which('node') or shutil.which('npm'))"
    assert (
        subprocess.run([sys.executable, "-c", probe], env=env).returncode == 0
    )  # no Node to be found
    step = (
        "import sys; from pathlib import Path; from mpsbench.site import site_assets;"
        " site_assets.make_offline(Path(sys.argv[1]), Path(sys.argv[2]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", step, str(site), str(npm_cache)],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert site_assets.external_loads(site) == {}


def test_a_load_the_rewrite_missed_is_refused_by_name(fake_site, monkeypatch):
    """A tag written another way than asv writes it (here its & as &#38;) stays on the CDN: the run
    says which page still loads what, not that the site is offline."""
    html, cache = fake_site
    url = FAKE_URL + "?v=1&x=2"
    monkeypatch.setattr(site_assets, "ASSETS", {url: Asset("fakelib@1.0.0", "dist/fakelib.min.js")})
    page = html / "index.html"
    page.write_text(
        f'<html><head>\n<script src="{url.replace("&", "&#38;")}"'
        f' integrity="{_sri(FAKE_JS)}"></script>\n</head></html>\n'
    )
    with pytest.raises(SiteAssetError, match=r"^index\.html still loads .*x=2 after rewriting$"):
        site_assets.make_offline(html, cache)
