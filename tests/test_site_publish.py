"""mpsbench publish: whole or not at all, every channel of the default shown, only measured builds on the top axis,
and the site working in headless Chromium both opened from disk (file://) and through ``asv preview``.

The results are asv's own files (tests/asvresults.py) for three builds of the Linux default, on both of its
channels (era and release), over the shipped manifest's timeline; the publish is the real one (asv publish and
every mpsbench step, libraries from the npm registry).
"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from tests import asvresults
from tests.test_site_browser import CHROMIUM, DevTools
from tests.test_site_browser import (
    chromium as chromium,
)  # the module's fixture, shared (re-exported)

from mpsbench import cli
from mpsbench.builds import history
from mpsbench.builds import manifest as mf
from mpsbench.builds import timeline as tl
from mpsbench.context import Suite
from mpsbench.core import asvconf, files
from mpsbench.core.errors import UserError
from mpsbench.site import patches, publish, site_assets

ROOT = Path(__file__).resolve().parents[1]
MACHINE = "sitetest"
MEASURED = (
    "era@2.0.1",
    "era@2.4.1",
    "release@2.15.0",
)  # the Linux default's channels, both of them
BENCHMARK = "benchmark_models.Training.time_step"
GRAPH_HASH = f"#{BENCHMARK}?p-device='cpu'&p-model='mlp'&p-batch_size=1"
SCREENSHOT_ENV = (
    "MPSBENCH_SCREENSHOT"  # also copy the screenshots there (a folder), to look at them
)


def _suite(tmp: Path) -> tuple[Suite, tl.Generated]:
    """A suite in ``tmp``: this checkout's config and benchmarks, the shipped manifest's timeline, no results."""
    config = asvconf.load(ROOT / "asv.conf.json").raw
    config.update(
        repo=str(tmp / "timeline"),
        benchmark_dir=str(ROOT / "benchmarks"),
        results_dir=str(tmp / "results"),
        html_dir=str(tmp / "html"),
        env_dir=str(tmp / "env"),
    )
    (tmp / "asv.conf.json").write_text(json.dumps(config))
    manifest = ROOT / history.MANIFEST
    generated = tl.generate(mf.load(manifest), tmp / "timeline")
    return Suite(tmp / "asv.conf.json", manifest, tmp / "timeline"), generated


def _record(
    suite: Suite,
    generated: tl.Generated,
    builds: tuple[str, ...] = MEASURED,
    devices: tuple[str, ...] = ("cpu",),
) -> None:
    """A value for each build of ``builds``: one step time of the mlp at batch 1 and 8 on the cpu (none on the other
    ``devices``, which the benchmarks' params list)."""
    manifest = suite.manifest
    benchmarks = {}
    for number, ref in enumerate(builds):
        date_ms = int(manifest.find(ref).when().timestamp() * 1000)
        values = {
            ("training", "time_step", "cpu", "mlp", batch): 0.001 * (number + batch)
            for batch in (1, 8)
        }
        benchmarks.update(
            asvresults.write_results(
                suite.conf.results,
                MACHINE,
                generated.commits[ref],
                date_ms,
                values,
                list(devices),
                ["mlp"],
                [1, 8],
            )
        )
    asvresults.write_benchmarks(suite.conf.results, benchmarks)


@pytest.fixture(scope="module")
def published(
    tmp_path_factory: pytest.TempPathFactory, npm_cache: Path
) -> tuple[Suite, tl.Generated]:
    """The suite with its values recorded and published (the npm tarballs from the run's cache)."""
    tmp = tmp_path_factory.mktemp("published")
    suite, generated = _suite(tmp)
    _record(suite, generated)
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(tmp)  # site_assets.CACHE is relative to the working folder
        (tmp / site_assets.CACHE).parent.mkdir(parents=True)
        os.symlink(npm_cache, tmp / site_assets.CACHE)
        publish.publish(suite)
    return suite, generated


# --- whole or not at all ---------------------------------------------------------------------------------------------
def test_with_nothing_recorded_publish_says_so_in_one_line_and_writes_nothing(tmp_path, capsys):
    suite, _ = _suite(tmp_path)
    before = sorted(path.relative_to(tmp_path) for path in tmp_path.rglob("*"))
    assert cli.main(["publish", "--config", str(suite.config_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(
        f"mpsbench: error: nothing recorded in {suite.conf.results}"
    ), err
    assert (
        sorted(path.relative_to(tmp_path) for path in tmp_path.rglob("*")) == before
    )  # not even html_dir


def test_a_failed_publish_leaves_the_previous_site_as_it_was(published, monkeypatch):
    suite, _ = published
    html = suite.conf.html
    before = {path: path.read_bytes() for path in html.rglob("*") if path.is_file()}

    def broken(html_dir: Path) -> int:
        (html_dir / "index.html").write_text(
            "half a site"
        )  # a step that fails after writing part of the site
        raise site_assets.SiteAssetError("a step failed")

    monkeypatch.setattr(patches, "make_readable_from_disk", broken)
    with pytest.raises(site_assets.SiteAssetError):
        publish.publish(suite)
    assert {path: path.read_bytes() for path in html.rglob("*") if path.is_file()} == before
    assert list(publish.staging(html).iterdir()) == []  # the scratch folder is gone too


# Another process's publish, stopped at its last step (every other step of the new site done) until a line arrives
# on its stdin.
_SLOW_PUBLISH = """
import sys
from pathlib import Path
from mpsbench.context import Suite
from mpsbench.site import patches, publish

make_readable_from_disk = patches.make_readable_from_disk

def stalled(html_dir):
    print("building", flush=True)
    sys.stdin.readline()
    return make_readable_from_disk(html_dir)

patches.make_readable_from_disk = stalled
publish.publish(Suite(*(Path(arg) for arg in sys.argv[1:])))
"""


def test_a_second_publish_waits_for_the_first_and_the_previous_site_stays_until_the_new_one_is_whole(
    tmp_path, npm_cache
):
    suite, generated = _suite(tmp_path)
    _record(suite, generated)
    html = suite.conf.html
    html.mkdir()
    (html / "index.html").write_text("old")
    (tmp_path / site_assets.CACHE).parent.mkdir(
        parents=True
    )  # the publish's npm cache: the run's, not the checkout's
    os.symlink(npm_cache, tmp_path / site_assets.CACHE)
    with subprocess.Popen(
        [
            sys.executable,
            "-c",
            _SLOW_PUBLISH,
            str(suite.config_path),
            str(suite.manifest_path),
            str(suite.timeline_path),
        ],
        cwd=tmp_path,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as first:
        assert first.stdout is not None and first.stdin is not None
        lines = iter(
            first.stdout.readline, ""
        )  # asv publish's own lines come first; "" is the end of the output
        assert "building\n" in lines, (
            "the publish ended before its last step"
        )  # reads up to the line, no further
        # a second publish would wait here: this one is asked not to
        with pytest.raises(UserError), files.lock(publish.staging(html) / "site", wait=False):
            pass
        assert (html / "index.html").read_text() == "old"  # served while the new site is made
        first.stdin.write("\n")
        first.stdin.close()
        assert first.wait() == 0
    assert (
        f'src="{patches.LOADER}"' in (html / "index.html").read_text()
    )  # the new site, its last step done
    assert list(publish.staging(html).iterdir()) == []


@pytest.mark.parametrize("option", [["-o", "elsewhere"], ["--html-dir=elsewhere"]])
def test_publish_refuses_an_html_dir_of_its_own(published, tmp_path, option):
    suite, _ = published
    with pytest.raises(
        UserError, match=r"^(-o|--html-dir=\S+): mpsbench publish writes html_dir of "
    ):
        publish.publish(
            suite, [part.replace("elsewhere", str(tmp_path / "elsewhere")) for part in option]
        )
    assert not (tmp_path / "elsewhere").exists()


@pytest.mark.parametrize("exchange", [True, False])
def test_the_new_site_replaces_the_old_one_whole_with_or_without_an_atomic_exchange(
    tmp_path, monkeypatch, exchange
):
    if not exchange:  # macOS before 10.12, a file system without renameat2: two renames
        monkeypatch.setattr(files, "_exchange", lambda first, second: False)
    elif not files._exchange(tmp_path, tmp_path):
        pytest.skip("this OS or file system swaps no folders in one step")
    old, new = tmp_path / "html", tmp_path / ".html.publishing" / "site-1"
    old.mkdir()
    (old / "index.html").write_text("old")
    (old / "gone.json").write_text("{}")
    new.mkdir(parents=True)
    (new / "index.html").write_text("new")
    files.replace_folder(new, old)
    assert (
        sorted(path.name for path in old.iterdir()) == ["index.html"]
        and (old / "index.html").read_text() == "new"
    )
    assert (
        list((tmp_path / ".html.publishing").iterdir()) == []
    )  # the old site is deleted, not left beside it


# --- what the site holds -----------------------------------------------------------------------------------------------
def test_only_builds_with_values_are_tagged_on_the_top_axis(published):
    suite, generated = published
    index = json.loads((suite.conf.html / "index.json").read_text())
    tagged = {index["revision_to_hash"][str(revision)] for revision in index["tags"].values()}
    measured = {generated.commits[ref] for ref in MEASURED}
    assert tagged and tagged <= measured
    every_tag = {tag for tag in generated.tags}
    assert len(every_tag) > len(index["tags"])  # the macOS era's 1.12.1 ... is not there


def test_the_graph_page_selects_every_channel_and_the_loader_and_twins_are_in_place(published):
    html = published[0].conf.html
    assert patches.EVERY_BRANCH in (html / patches.GRAPH_SCRIPT).read_text()
    assert patches.FIRST_BRANCH_ONLY not in (html / patches.GRAPH_SCRIPT).read_text()
    index = (html / "index.html").read_text()
    assert index.index(f'src="{patches.LOADER}"') > index.index("jquery.min.js")  # jQuery first
    assert not re.search(
        r"<(script|link)\b[^>]*\b(crossorigin|integrity)=", index
    )  # file:// loads none of those
    for path in html.rglob("*.json"):
        twin = path.with_name(path.name + patches.TWIN).read_text()
        assert twin == patches.twin(path.read_text()), path


# --- in a browser ------------------------------------------------------------------------------------------------------
@pytest.fixture
def preview(published) -> Iterator[str]:
    """``asv preview`` of the published site, as README says to view it: its base URL."""
    suite, _ = published
    # asv says where it serves on stdout; the request log goes to stderr, dropped so that no pipe fills
    with subprocess.Popen(
        [sys.executable, "-m", "asv", "preview", "--config", str(suite.config_path)],
        cwd=suite.config_path.parent,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    ) as server:
        try:
            assert server.stdout is not None
            found = next(
                filter(
                    None,
                    (
                        re.search(r"Serving at (http://\S+?)/?$", line.strip())
                        for line in server.stdout
                    ),
                ),
                None,
            )
            assert found is not None, "asv preview never said where it serves"
            yield found.group(1)
        finally:
            server.terminate()
            server.wait()


def _look(chromium: DevTools, url: str, name: str, tmp_path: Path) -> dict[str, object]:
    """Open the graph page at ``url`` and wait until flot has drawn it; what a person would see."""
    chromium.send("Page.navigate", url=url)
    drawn = chromium.wait_for(
        "document.querySelectorAll('#graph-display canvas.flot-base').length", 300
    )
    chromium.wait_for("document.readyState === 'complete'", 120)
    # the graph is redrawn as each channel's data arrives: wait until both channels' lines are in the legend
    chromium.wait_for("document.querySelectorAll('#graph-display .legendLabel').length >= 2", 60)
    shot = base64.b64decode(chromium.send("Page.captureScreenshot", format="png")["data"])
    (tmp_path / f"{name}.png").write_bytes(shot)
    if os.environ.get(SCREENSHOT_ENV):
        (Path(os.environ[SCREENSHOT_ENV]) / f"{name}.png").write_bytes(shot)
    return {
        "drawn": drawn,
        "path": chromium.evaluate("window.location.pathname"),
        "active": chromium.evaluate(
            "$('#graphdisplay-state-params .btn.active').map(function(){"
            "return $(this).text()}).get()"
        ),
        "error": chromium.evaluate("$('#error').is(':visible') ? $('#error-message').text() : ''"),
        "labels": chromium.evaluate(
            "$('#graph-display .legendLabel').map(function(){return $(this).text()}).get()"
        ),
        # the tag labels asv writes above the graph (graphdisplay.js, update_tags)
        "tags": chromium.evaluate(
            "$('#main-graph > div').filter(function(){return /^v\\d\\S*$/.test($(this).text())})"
            ".map(function(){return $(this).text()}).get()"
        ),
        "exceptions": chromium.of("Runtime.exceptionThrown"),
        "urls": [event["request"]["url"] for event in chromium.of("Network.requestWillBeSent")],
    }


def _check(seen: dict[str, object], generated: tl.Generated) -> None:
    assert str(seen["path"]).endswith("/index.html"), (
        f"the page went to {seen['path']}: a library failed to load"
    )
    assert seen["drawn"], "no flot canvas in the graph display"
    assert seen["error"] == "" and seen["exceptions"] == []
    assert {"era", "release"} <= set(seen["active"]), seen[
        "active"
    ]  # every channel selected, without a click
    for channel in ("era", "release"):  # and a line drawn for each
        assert any(f"branch-{channel}" in label for label in seen["labels"]), seen["labels"]
    tags = {tag: commit for tag, commit in generated.tags.items()}
    assert seen["tags"] and all(tag in tags for tag in seen["tags"]), seen["tags"]
    assert "v1.12.1" not in seen["tags"]  # a macOS build never measured here
    graphs = [
        unquote(urlsplit(url).path) for url in seen["urls"] if f"/{BENCHMARK}.json" in unquote(url)
    ]
    for channel in ("era", "release"):
        assert any(f"/branch-{channel}/" in path for path in graphs), graphs
    hosts = {
        urlsplit(url).hostname for url in seen["urls"] if urlsplit(url).scheme in ("http", "https")
    }
    assert hosts <= {"127.0.0.1", "localhost"}, seen["urls"]


@pytest.mark.slow
@pytest.mark.skipif(
    not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent: install Debian's chromium package"
)
def test_the_site_opened_from_disk_draws_every_channel(published, chromium, tmp_path):
    suite, generated = published
    seen = _look(
        chromium, (suite.conf.html / "index.html").as_uri() + GRAPH_HASH, "from-disk", tmp_path
    )
    _check(seen, generated)
    assert {urlsplit(url).scheme for url in seen["urls"]} <= {"file", "data"}, seen["urls"]


@pytest.mark.slow
@pytest.mark.skipif(
    not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent: install Debian's chromium package"
)
def test_the_site_through_asv_preview_draws_every_channel(published, preview, chromium, tmp_path):
    _, generated = published
    seen = _look(chromium, f"{preview}/index.html{GRAPH_HASH}", "preview", tmp_path)
    _check(seen, generated)
    assert not any(url.endswith(".json.js") for url in seen["urls"])  # http: asv's own


@pytest.mark.slow
@pytest.mark.skipif(
    not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent: install Debian's chromium package"
)
@pytest.mark.parametrize(
    ("page", "shown"),
    [
        (
            "#regressions",
            "document.body.innerText.indexOf('Regressions in release branch') >= 0",
        ),  # after its JSON
        (
            "#summarylist",
            f"$('#summarylist-display').text().indexOf('{BENCHMARK.split('.', 1)[1]}') >= 0",
        ),
    ],
)
def test_the_other_pages_open_from_disk_too(published, chromium, page, shown):
    # each loads its own JSON (regressions.json, the summary graphs) through the same loader
    chromium.send("Page.navigate", url=(published[0].conf.html / "index.html").as_uri() + page)
    assert chromium.wait_for(shown, 120), chromium.evaluate("document.body.innerText")
    assert chromium.evaluate("$('#error').is(':visible') ? $('#error-message').text() : ''") == ""
    assert chromium.of("Runtime.exceptionThrown") == []


def test_publish_recorded_answers_help_and_refuses_a_missing_run_in_one_line_creating_nothing(
    tmp_path,
):
    """It cds to its own checkout and writes under its .asv/recorded: a copy in tmp_path keeps that here."""
    (tmp_path / "scripts").mkdir()
    script = tmp_path / "scripts" / "publish-recorded"
    script.write_bytes((ROOT / "scripts" / "publish-recorded").read_bytes())
    script.chmod(0o755)
    shown = subprocess.run([script, "--help"], capture_output=True, text=True, timeout=600)
    assert (shown.returncode, shown.stderr) == (0, "")
    assert shown.stdout == "usage: scripts/publish-recorded RUN_DIR [RESULT_FOLDER ...]\n"
    for args, named in [
        ([tmp_path / "nonexistent"], "RUN_DIR"),
        ([tmp_path, tmp_path / "nonexistent"], "RESULT_FOLDER"),
    ]:
        if (
            named == "RESULT_FOLDER"
        ):  # a run that is whole, so that the missing extra folder is what is refused
            (tmp_path / "timeline.bundle").write_text("")
            (tmp_path / "results").mkdir()
        refused = subprocess.run([script, *args], capture_output=True, text=True, timeout=600)
        assert refused.returncode == 2 and refused.stdout == ""
        assert (
            refused.stderr.count("\n") == 1
            and f"{named} '{tmp_path / 'nonexistent'}'" in refused.stderr
        )
        assert not (tmp_path / ".asv").exists()


# --- the first site: one build, a cpu-only machine ---------------------------------------------------------------
FIRST = "release@2.15.0"
LANDING_VALUE = (
    "8.00ms"  # the mlp's training step at batch 8 (its largest: the seed's 1024 is not measured)
)


@pytest.fixture(scope="module")
def first_site(tmp_path_factory: pytest.TempPathFactory, npm_cache: Path) -> Suite:
    """One build measured on the cpu of a machine whose benchmarks also list mps and cuda, published for real."""
    tmp = tmp_path_factory.mktemp("first")
    suite, generated = _suite(tmp)
    _record(suite, generated, (FIRST,), ("cpu", "mps", "cuda"))
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(tmp)
        (tmp / site_assets.CACHE).parent.mkdir(parents=True)
        os.symlink(npm_cache, tmp / site_assets.CACHE)
        publish.publish(suite)
    return suite


def _console_errors(chromium: DevTools) -> list[object]:
    """Script exceptions, console.error calls and the browser's own error entries (a file that failed to load)."""
    return [
        *chromium.of("Runtime.exceptionThrown"),
        *(event for event in chromium.of("Runtime.consoleAPICalled") if event["type"] == "error"),
        *(
            event["entry"]
            for event in chromium.of("Log.entryAdded")
            if event["entry"]["level"] == "error"
        ),
    ]


def _shoot(chromium: DevTools, name: str, tmp_path: Path) -> None:
    shot = base64.b64decode(chromium.send("Page.captureScreenshot", format="png")["data"])
    (tmp_path / f"{name}.png").write_bytes(shot)
    if os.environ.get(SCREENSHOT_ENV):
        (Path(os.environ[SCREENSHOT_ENV]) / f"{name}.png").write_bytes(shot)


@pytest.mark.slow
@pytest.mark.skipif(
    not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent: install Debian's chromium package"
)
def test_the_first_site_opens_from_disk_on_the_seed_rows_values_with_no_console_error(
    first_site, chromium, tmp_path
):
    chromium.send("Log.enable")
    chromium.send("Page.navigate", url=(first_site.conf.html / "index.html").as_uri())
    assert chromium.wait_for("document.readyState === 'complete'", 120)
    landing_text = chromium.evaluate("document.getElementById('mpsbench-landing').innerText")
    assert (
        f"{MACHINE} newest build:" in landing_text
        and "torch 2.15.0 (release@2.15.0)" in landing_text
    )
    cells = chromium.evaluate(
        "$('#mpsbench-landing tbody tr').map(function(){return $(this).children('td')"
        ".map(function(){return $(this).text()}).get().join('|')}).get()"
    )
    assert cells == [f"mlp|training|{LANDING_VALUE} bs 8*"], (
        cells
    )  # cpu only: no mps, cuda or speedup column
    assert chromium.evaluate("$('#mpsbench-landing').is(':visible')")
    # asv's grid stays below it: the tile of the one measured benchmark draws its lone build as a labelled point
    tile = f"summarygrid-{BENCHMARK}"
    assert chromium.wait_for(f"document.getElementById('{tile}') !== null", 120)
    chromium.evaluate(
        f"document.getElementById('{tile}').scrollIntoView(); $(window).trigger('scroll'); true"
    )
    label = chromium.wait_for(
        f"$(document.getElementById('{tile}')).find('.mpsbench-lone-label').text()", 120
    )
    assert re.fullmatch(r"one build: 2\.828ms", label), (
        label
    )  # asv's tile: the geometric mean of batches 1 and 8
    chromium.evaluate("window.scrollTo(0, 0)")
    _shoot(chromium, "landing", tmp_path)
    assert _console_errors(chromium) == []
    tiles = chromium.evaluate(
        "$('#summarygrid-display .benchmark-plot').map(function(){return this.id}).get()"
    )
    assert tiles == [tile], (
        tiles
    )  # only the measured benchmark: no empty box asking for a graph never written


@pytest.mark.slow
@pytest.mark.skipif(
    not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent: install Debian's chromium package"
)
def test_a_landing_link_opens_its_graph_and_the_graph_page_selects_only_devices_with_data(
    first_site, chromium, tmp_path
):
    index = (first_site.conf.html / "index.html").as_uri()
    chromium.send("Page.navigate", url=index)
    assert chromium.wait_for("document.readyState === 'complete'", 120)
    href = chromium.evaluate("$('#mpsbench-landing tbody a').attr('href')")
    assert href.startswith(
        f"#{BENCHMARK}?machine={MACHINE}&p-device=%27cpu%27&p-model=%27mlp%27&p-batch_size=8"
    )
    for url, labels in [
        (index + href, ["8.000ms"]),  # the link: that batch
        (index + f"#{BENCHMARK}", ["1.000ms", "8.000ms"]),
    ]:  # nothing chosen
        chromium.send(
            "Page.navigate", url="about:blank"
        )  # a new hash alone does not reload the page
        chromium.send("Page.navigate", url=url)
        assert chromium.wait_for(
            "document.querySelectorAll('#graph-display canvas.flot-base').length", 300
        )
        # each lone build labelled with its value in asv's units
        assert chromium.wait_for("$('#main-graph .mpsbench-lone-label').length", 120)
        assert (
            sorted(
                chromium.evaluate(
                    "$('#main-graph .mpsbench-lone-label').map(function(){"
                    "return $(this).text()}).get()"
                )
            )
            == labels
        )
        active = chromium.evaluate(
            "$('#graphdisplay-navigation-params .btn.active').map(function(){"
            "return $(this).text()}).get()"
        )
        assert "cpu" in active and "mps" not in active and "cuda" not in active, active
    _shoot(chromium, "graph-one-build", tmp_path)
    assert chromium.of("Runtime.exceptionThrown") == []


@pytest.mark.slow
@pytest.mark.skipif(
    not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent: install Debian's chromium package"
)
def test_the_landing_summary_shows_the_newest_build_through_asv_preview(
    published, preview, chromium
):
    chromium.send("Page.navigate", url=f"{preview}/index.html")
    assert chromium.wait_for("document.readyState === 'complete'", 120)
    assert "torch 2.15.0 (release@2.15.0)" in chromium.evaluate(
        "$('#mpsbench-landing h3').text()"
    )  # the newest
    cells = chromium.evaluate(
        "$('#mpsbench-landing tbody tr').map(function(){return $(this).children('td')"
        ".map(function(){return $(this).text()}).get().join('|')}).get()"
    )
    assert cells == ["mlp|training|10.0ms bs 8*"], (
        cells
    )  # 2.15.0's batch-8 step, not an older build's
    assert chromium.of("Runtime.exceptionThrown") == []
