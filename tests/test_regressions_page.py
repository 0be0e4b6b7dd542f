"""The Regressions page after a real ``asv publish`` of a real two-release run: judged rows, every channel, PyTorch links.

The results are the ones recorded by README's main command on the project's
2-core VM under load (docs/evidence/recorded-cpu-run.md, kept in tests/data/recorded: 2.13.0 and
2.14.1), re-keyed onto a small timeline whose build.json records carry the two
releases' real upstream ``git_version``s, plus a channel ``exam`` with a build
of 2.14.1's upstream commit (a root of its own) and no results on the machine. asv's own page
flags every increase beyond 5% there; the judged page keeps only what holds
up by the row's own rule.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import json
import math
import os
import shutil
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from tests import asvresults, fakes

from mpsbench.builds import timeline
from mpsbench.core import asvconf
from mpsbench.regressions import rule
from mpsbench.results import recorded
from mpsbench.site import pytorch_links, regressions_page, site_assets

ROOT = Path(__file__).resolve().parents[1]
RUN = asvresults.RECORDED / "cpu-2026-11-23"
MACHINE = "debian-x86-64-2cpu"
RECORDED = {
    "e8fbb5a5ef7979c46a02c4f4573b4638e100b41e": (
        "2.13.0",
        "cf30153c4c131c8164ee7798e5022d810682e2cb",
    ),
    "58d72ce060b2bdba9b29c5fe00aa3685dea0db6e": (
        "2.14.1",
        "5c4886908584029761b579af026dcfb627c84070",
    ),
}
UPSTREAM = [git for _, git in RECORDED.values()]
ASV = [sys.executable, "-m", "asv"]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """asv publish of the recorded run with branches release and exam; asv's regressions.json kept aside."""
    tmp = tmp_path_factory.mktemp("regressions")
    repo = fakes.timeline_repo(tmp / "timeline")
    rekey = {}
    for day, (old_hash, (version, git)) in enumerate(RECORDED.items(), start=1):
        rekey[old_hash] = fakes.timeline_commit(repo, version, git, f"2026-0{day}-01T00:00:00Z")
    fakes.git(
        repo, "checkout", "-q", "--orphan", "exam"
    )  # a channel of its own, as the manifest roots one
    fakes.timeline_commit(
        repo,
        "2.14.1",
        UPSTREAM[1],
        "2026-03-01T00:00:00Z",
        kind="wheel-file",
        channel="exam",
        build_id="local",
    )
    results = tmp / "results"
    (results / MACHINE).mkdir(parents=True)
    shutil.copy(RUN / "benchmarks.json", results / "benchmarks.json")
    shutil.copy(RUN / MACHINE / "machine.json", results / MACHINE / "machine.json")
    for path in (RUN / MACHINE).glob("*-virtualenv-*.json"):
        data = json.loads(path.read_text())
        data["commit_hash"] = rekey[data["commit_hash"]]
        (results / MACHINE / f"{data['commit_hash'][:8]}{path.name[8:]}").write_text(
            json.dumps(data)
        )
    config = asvconf.load(ROOT / "asv.conf.json").raw
    config.update(
        repo=str(repo),
        branches=["release", "exam"],
        results_dir=str(results),
        html_dir=str(tmp / "html"),
        env_dir=str(tmp / "env"),
        benchmark_dir=str(ROOT / "benchmarks"),
    )
    (tmp / "asv.conf.json").write_text(json.dumps(config))
    done = subprocess.run(
        [*ASV, "publish", "--config", str(tmp / "asv.conf.json")],
        cwd=tmp,
        env=dict(os.environ, HOME=str(tmp)),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    asv_own = json.loads((tmp / "html" / "regressions.json").read_text())["regressions"]
    conf = asvconf.load(tmp / "asv.conf.json")
    regressions_page.judge_site(
        tmp / "html",
        conf.results,
        recorded.load(conf.results),
        conf.thresholds,
        timeline.Reader(conf.repo),
    )
    pytorch_links.rewrite(tmp / "html", timeline.Reader(conf.repo))
    return tmp, asv_own, list(rekey.values())


def test_only_jumps_that_hold_up_by_the_rows_own_rule_stay_on_the_page(site):
    tmp, asv_own, commits = site
    html = tmp / "html"
    kept = json.loads((html / "regressions.json").read_text())["regressions"]
    judged = json.loads((html / regressions_page.JUDGED).read_text())
    assert len(judged) == sum(len(entry[6]) for entry in asv_own)  # every jump asv found is judged
    slower = [j for j in judged if j["verdict"] == "slower"]
    assert 0 < len(slower) < len(judged)
    assert sorted(entry[0] for entry in kept) == sorted(j["benchmark"] for j in slower)
    # the false alarms are set aside, each with its reason
    leaks = [j for j in judged if ".track_leak(" in j["benchmark"]]
    assert leaks and all(j["verdict"] == "below floor" for j in leaks)
    # asv calls a higher throughput a regression; and a rate's bare median judges nothing
    rates = [j for j in judged if recorded.unit(j["unit"]).higher_is_better]
    assert rates and all(j["verdict"] == "no statistics" for j in rates)
    assert {j["verdict"] for j in judged} >= {"slower", "below floor", "noisy", "no statistics"}
    # and each kept one is what the rule says from the recorded statistics
    found = recorded.load(tmp / "results")
    rows = {row.entry: row for table in found.values.values() for row in table}
    rules = asvconf.load(tmp / "asv.conf.json").thresholds
    for j in slower:
        row = rows[j["benchmark"]]
        old, new = found.get(MACHINE, commits[0], row), found.get(MACHINE, commits[1], row)
        assert rule.judge(rules, j["benchmark"], j["unit"], old, new).slower  # type: ignore[arg-type]


def test_a_channel_without_results_leaves_every_regression_under_its_own_branch(site):
    tmp, asv_own, _ = site
    index = json.loads((tmp / "html" / "index.json").read_text())
    assert index["params"]["branch"] == ["release", "exam"]
    # asv's page keeps a row in a branch's table only if its graph params name the branch: asv left it out
    assert all("branch" not in entry[2] for entry in asv_own)
    kept = json.loads((tmp / "html" / "regressions.json").read_text())["regressions"]
    assert kept and all(entry[2].get("branch") == "release" for entry in kept)


def test_the_feed_and_the_commit_links_lead_to_pytorch(site):
    tmp, _, commits = site
    html = tmp / "html"
    kept = json.loads((html / "regressions.json").read_text())["regressions"]
    feed = (html / "regressions.xml").read_text()
    assert feed.count("<entry>") == sum(len(entry[6]) for entry in kept)
    compare = f"https://github.com/pytorch/pytorch/compare/{UPSTREAM[0]}...{UPSTREAM[1]}"
    assert feed.count(f'href="{compare}"') == feed.count("<entry>")
    assert "pytorch/pytorch/commit/" not in feed.replace(compare, "")
    index = json.loads((html / "index.json").read_text())
    assert index["show_commit_url"] == pytorch_links.SHOW_COMMIT_URL
    page = (html / pytorch_links.PAGE).read_text()
    for commit, git in zip(commits, UPSTREAM):
        assert (
            f"<code>{commit[:12]}</code>" in page
            and f'href="https://github.com/pytorch/pytorch/commit/{git}"' in page
        )


TRAINING = "benchmark_models.Training.time_step('cpu', 'mlp', 1024)"
INFERENCE = "benchmark_models.Inference.time_step('cpu', 'mlp', 1024)"
# (machine, build) -> {(kind, metric, device, model, batch): seconds}; builds: release 2.1, nightly 2.2 (dated between
# the releases, on its own channel), release 2.3, each one commit after the last on its own channel.
TWO_MACHINES = {
    ("machine-a", "2.1"): {
        ("training", "time_step", "cpu", "mlp", 1024): 0.10,
        ("inference", "time_step", "cpu", "mlp", 1024): 0.10,
    },
    ("machine-a", "2.2"): {("inference", "time_step", "cpu", "mlp", 1024): 0.20},
    ("machine-a", "2.3"): {
        ("training", "time_step", "cpu", "mlp", 1024): 0.15,  # 1.5x slower than 2.1
        ("inference", "time_step", "cpu", "mlp", 1024): 0.15,
    },  # slower than 2.1, faster than 2.2
    ("machine-b", "2.1"): {("training", "time_step", "cpu", "mlp", 1024): 1e-6},
    ("machine-b", "2.3"): {
        ("training", "time_step", "cpu", "mlp", 1024): 3e-6
    },  # 3x, but 2 us: below the floor
}


@pytest.fixture(scope="module")
def two_machines(tmp_path_factory):
    """asv publish, judged, of two machines' results on shared builds of two channels; the builds by version."""
    tmp = tmp_path_factory.mktemp("two-machines")
    repo = fakes.timeline_repo(tmp / "timeline")
    commits = {
        version: fakes.timeline_commit(
            repo, version, version[-1] * 40, f"2026-0{month}-01T00:00:00Z"
        )
        for version, month in (("2.1", 1), ("2.3", 3))
    }
    fakes.git(repo, "checkout", "-q", "--orphan", "nightly")
    commits["2.2"] = fakes.timeline_commit(
        repo, "2.2", "2" * 40, "2026-02-01T00:00:00Z", kind="nightly", channel="nightly"
    )
    benchmarks = {}
    for (machine, version), values in TWO_MACHINES.items():
        month = int(version[-1])
        benchmarks.update(
            asvresults.write_results(
                tmp / "results",
                machine,
                commits[version],
                1767225600000 + (month - 1) * 31 * 86400 * 1000,
                values,
                ["cpu"],
                ["mlp"],
                [1024],
            )
        )
    asvresults.write_benchmarks(tmp / "results", benchmarks)
    config = asvconf.load(ROOT / "asv.conf.json").raw
    config.update(
        repo=str(repo),
        branches=["release", "nightly"],
        results_dir=str(tmp / "results"),
        html_dir=str(tmp / "html"),
        env_dir=str(tmp / "env"),
        benchmark_dir=str(ROOT / "benchmarks"),
    )
    (tmp / "asv.conf.json").write_text(json.dumps(config))
    done = subprocess.run(
        [*ASV, "publish", "--config", str(tmp / "asv.conf.json")],
        cwd=tmp,
        env=dict(os.environ, HOME=str(tmp)),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    conf = asvconf.load(tmp / "asv.conf.json")
    regressions_page.judge_site(
        tmp / "html",
        conf.results,
        recorded.load(conf.results),
        conf.thresholds,
        timeline.Reader(conf.repo),
    )
    return tmp / "html", commits


def _feed_links(html: Path) -> dict[str, list[str]]:
    """Each feed entry's row and the link it carries."""
    atom = "{http://www.w3.org/2005/Atom}"
    entries = ET.parse(html / "regressions.xml").getroot().iter(f"{atom}entry")
    found: dict[str, list[str]] = {}
    for entry in entries:
        found.setdefault(entry.findtext(f"{atom}title", "").split(" ", 1)[-1], []).append(
            entry.find(f"{atom}link").get("href")
        )  # type: ignore[union-attr]
    return found


def test_each_machines_feed_entry_stays_by_its_own_verdict_on_shared_builds(two_machines):
    html, _ = two_machines
    judged = {
        (j["benchmark"], j["machine"]): j["verdict"]
        for j in json.loads((html / regressions_page.JUDGED).read_text())
    }
    assert (
        judged[(TRAINING, "machine-a")] == "slower"
        and judged[(TRAINING, "machine-b")] == "below floor"
    )
    # asv wrote an entry for each machine's jump, on the same commits; only machine-a's is a regression
    links = _feed_links(html)[TRAINING]
    assert len(links) == 1 and "machine=machine-a" in links[0], links


def test_a_one_build_jump_is_judged_against_the_build_before_on_its_channel_not_by_date(
    two_machines,
):
    html, commits = two_machines
    judged = {
        (j["benchmark"], j["machine"]): j
        for j in json.loads((html / regressions_page.JUDGED).read_text())
    }
    # the nightly 2.2, dated between the releases, is 0.20: judged against it, 2.3 would be faster
    jump = judged[(INFERENCE, "machine-a")]
    assert (jump["old"], jump["new"], jump["verdict"]) == (commits["2.1"], commits["2.3"], "slower")
    kept = json.loads((html / "regressions.json").read_text())["regressions"]
    machines = sorted(
        (entry[0], regressions_page.graph_param(entry[1], "machine")) for entry in kept
    )
    assert machines == [(INFERENCE, "machine-a"), (TRAINING, "machine-a")]


def test_the_judged_jump_and_the_latest_regression_link_one_graph_at_both_builds(two_machines):
    html, commits = two_machines
    judged = {
        (j["benchmark"], j["machine"]): j
        for j in json.loads((html / regressions_page.JUDGED).read_text())
    }
    found = {
        (r["benchmark"], r["machine"]): r
        for r in regressions_page.latest(html, timeline.Reader(html.parent / "timeline"))
    }
    for key in ((TRAINING, "machine-a"), (INFERENCE, "machine-a")):
        assert found[key]["old"] == judged[key]["old"] == commits["2.1"]
        assert found[key]["graph"] == judged[key]["graph"]
        assert f"commits={commits['2.1']}-{commits['2.3']}" in found[key]["graph"]


BUILDS = "1" * 40, "2" * 40  # the two builds of a hand-written regressions.json


def _asv_jumps(html: Path, name: str, jumps: dict[str, tuple[float, float]]) -> None:
    """An index.json and a regressions.json in which asv flags one jump per machine."""
    (html / "index.json").write_text(
        json.dumps({"benchmarks": {}, "revision_to_hash": {"1": BUILDS[0], "2": BUILDS[1]}})
    )
    rows = [
        [
            name,
            f"graphs/machine-{m}/x.json",
            {"machine": m},
            None,
            after,
            before,
            [[1, 2, before, after]],
        ]
        for m, (before, after) in jumps.items()
    ]
    (html / "regressions.json").write_text(json.dumps({"regressions": rows}))


def test_the_latest_regressions_name_each_machines_own_kind(tmp_path):
    name = "benchmark_patterns.Correctness.track_relative_error('cpu', 'linear_bias', 'float32')"
    jump = dict(benchmark=name, old=BUILDS[0], new=BUILDS[1], revision=2, before=0.001, after=0.5)
    (tmp_path / regressions_page.JUDGED).write_text(
        json.dumps(
            [  # machine-b's jump kept on asv's word alone
                {**jump, "machine": "a", "verdict": "wrong result", "regressed": True},
                {**jump, "machine": "b", "verdict": "slower", "regressed": True},
                {**jump, "machine": "c", "verdict": "below floor", "regressed": False},
            ]
        )
    )
    found = regressions_page.latest(tmp_path, timeline.Reader(None))
    assert {r["machine"]: r["verdict"] for r in found} == {"a": "wrong result", "b": "slower"}


def test_a_judged_file_without_revisions_still_lists_its_regressions_after_the_newer_ones(tmp_path):
    """An older JUDGED carries no revisions: its jumps come last, by ratio, until a publish."""
    jump = dict(benchmark="b", machine="a", old=BUILDS[0], new=BUILDS[1], before=1.0)
    judged = [
        {**jump, "after": 2.0, "verdict": "slower", "regressed": True},
        {**jump, "after": 3.0, "verdict": "slower", "regressed": True},
        {**jump, "after": 1.5, "revision": 2, "verdict": "slower", "regressed": True},
        {**jump, "after": 9.0, "revision": 2, "verdict": "noisy", "regressed": False},
    ]
    (tmp_path / regressions_page.JUDGED).write_text(json.dumps(judged))
    found = regressions_page.latest(tmp_path, timeline.Reader(None))
    assert [r["after"] for r in found] == [1.5, 3.0, 2.0]


def test_a_jump_from_zero_reads_unchanged_when_it_stays_and_infinite_when_it_grows(tmp_path):
    """The page's ratio is the rule's: 0 -> 0 is 1.00x, 0 -> more is an infinite slowdown."""
    jumps = {"stays": (0.0, 0.0), "grows": (0.0, 0.5), "doubles": (0.25, 0.5)}
    _asv_jumps(tmp_path, "benchmark_patterns.LeakPatterns.track_growth('cpu', 'maxpool2d')", jumps)
    found = regressions_page.latest(tmp_path, timeline.Reader(None))
    ratios = {r["machine"]: rule.change_ratio(r["before"], r["after"]) for r in found}
    assert ratios == {"stays": 1.0, "grows": math.inf, "doubles": 2.0}


def test_upstream_url_is_a_compare_range_a_commit_or_nothing():
    builds = {"t1": "g1", "t2": "g2", "t3": "g2", "t4": None}
    assert (
        pytorch_links.upstream_url(builds, "t1", "t2")
        == "https://github.com/pytorch/pytorch/compare/g1...g2"
    )
    assert (
        pytorch_links.upstream_url(builds, "t2", "t3")
        == "https://github.com/pytorch/pytorch/commit/g2"
    )
    assert (
        pytorch_links.upstream_url(builds, None, "t2")
        == "https://github.com/pytorch/pytorch/commit/g2"
    )
    assert pytorch_links.upstream_url(builds, "t1", "t4") is None


def test_the_builds_table_names_each_build_and_says_where_the_timeline_knows_none(tmp_path):
    repo = fakes.timeline_repo(tmp_path / "timeline")
    known, unknown = (
        fakes.timeline_commit(repo, "2.14.1", UPSTREAM[1], "2026-01-01T00:00:00Z"),
        "f" * 40,
    )
    site = tmp_path / "html"
    site.mkdir()
    (site / "index.json").write_text(json.dumps({"revision_to_hash": {"1": known, "2": unknown}}))
    pytorch_links.rewrite(site, timeline.Reader(repo))
    page = (site / pytorch_links.PAGE).read_text()
    assert f"<code>{known[:12]}</code></td><td>torch 2.14.1 (release@2.14.1)</td>" in page
    assert (
        f"<code>{unknown[:12]}</code></td><td>unknown: the timeline here has no build.json for it</td>"
        in page
    )


CHROMIUM = Path("/usr/bin/chromium")


def _requests_until(browser, prefix: str, seconds: float = 20) -> list[str]:
    """The URLs the page asked for, once one starts with ``prefix`` (or after ``seconds``)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with contextlib.suppress(
            RuntimeError
        ):  # the page is being replaced: that is what we wait for
            browser.evaluate("1")  # reads the events that arrived meanwhile
        went = [e["request"]["url"] for e in browser.of("Network.requestWillBeSent")]
        if any(url.startswith(prefix) for url in went):
            return went
        time.sleep(0.2)
    return went


@pytest.mark.slow
@pytest.mark.skipif(
    not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent: install Debian's chromium package"
)
def test_in_a_browser_the_regressions_page_lists_rows_and_its_links_reach_pytorch(
    site, tmp_path, npm_cache
):
    from tests.test_site_browser import DevTools, _LoggingHandler

    tmp, _, commits = site
    html = tmp / "html"
    site_assets.make_offline(html, npm_cache)
    handler = type("Handler", (_LoggingHandler,), {"requested": []})
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(handler, directory=str(html))
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    browser = DevTools(tmp_path / "profile")
    try:
        browser.open_page()
        browser.send(
            "Network.setBlockedURLs", urls=["*github.com*"]
        )  # see where a link goes without going
        base = f"http://127.0.0.1:{server.server_address[1]}"
        browser.send("Page.navigate", url=f"{base}/index.html#regressions")
        rows = browser.wait_for(
            "document.querySelectorAll('#regressions-body tbody tr').length", 300
        )
        kept = json.loads((html / "regressions.json").read_text())["regressions"]
        assert rows == sum(len(entry[6]) for entry in kept)
        links = browser.evaluate(
            "Array.from(document.querySelectorAll('#regressions-body a'))"
            ".map(a => a.getAttribute('href')).filter(h => h && h.indexOf('github') >= 0)"
        )
        assert links and set(links) == {
            f"{pytorch_links.PAGE}#//github.com/../compare/{commits[0][:8]}...{commits[1][:8]}"
        }
        revisions = json.loads((html / "index.json").read_text())["revision_to_hash"]
        newest = next(revision for revision, commit in revisions.items() if commit == commits[1])
        # what a click on the graph's point of 2.14.1 opens (graphdisplay.js)
        point = browser.evaluate(
            f"$.asv.main_json.show_commit_url + $.asv.get_commit_hash({newest})"
        )
        for link, upstream in (
            (links[0], f"compare/{UPSTREAM[0]}...{UPSTREAM[1]}"),
            (point, f"commit/{UPSTREAM[1]}"),
        ):
            browser.send(
                "Page.navigate", url="about:blank"
            )  # a new document: a same-page #fragment runs no script
            browser.events.clear()
            browser.send("Page.navigate", url=f"{base}/{link}")
            went = _requests_until(
                browser, "https://github.com/"
            )  # the page's script sends the browser on
            assert f"https://github.com/pytorch/pytorch/{upstream}" in went, (link, went)
        assert browser.of("Runtime.exceptionThrown") == []
    finally:
        browser.close()
        server.shutdown()
        server.server_close()
