"""``mpsbench publish``: the site built beside html_dir, then swapped in whole."""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path

from mpsbench.context import Suite
from mpsbench.core import asv, asvconf, files, progress
from mpsbench.core.errors import UserError
from mpsbench.results import recorded
from mpsbench.site import (
    landing,
    patches,
    pytorch_links,
    regressions_page,
    report,
    site_assets,
    throughput,
)

FIGURES = "mpsbench"
HTML_DIR_OPTIONS = ("-o", "--html-dir")

log = progress.logger(__name__)


def measured_builds(results: Path) -> set[str]:
    try:
        found = recorded.load(results, strict=False)
    except recorded.RecordedError:
        return set()
    return {commit for (_, commit), rows in found.values.items() if rows}


def staging(html: Path) -> Path:
    return html.parent / f".{html.name}.publishing"


def publish(suite: Suite, asv_options: Sequence[str] = ()) -> None:
    conf = suite.conf
    keep = [
        files.Kept("the results folder", conf.results, nothing_inside=True),
        *([files.Kept("the timeline", conf.repo, nothing_inside=True)] if conf.repo else []),
        files.Kept("the folder of the config", conf.root),
        files.Kept("the repository", asvconf.ROOT),
    ]
    files.check_owned(conf.html, keep, f"html_dir {conf.html} of {conf.path}")
    if given := [option for option in asv_options if option.split("=", 1)[0] in HTML_DIR_OPTIONS]:
        raise UserError(
            f"{given[0]}: mpsbench publish writes html_dir of {conf.path} ({conf.html}); set it"
            " there, or pass another --config"
        )
    if not (measured := measured_builds(conf.results)):
        raise UserError(
            f"nothing recorded in {conf.results} yet: {conf.html} left as it was; record values"
            " first (scripts/bench)"
        )
    folder = staging(conf.html)
    folder.mkdir(parents=True, exist_ok=True)
    with files.lock(folder / "site"):  # not the results' lock: a run never blocks it
        for left in folder.iterdir():
            files.remove(left, keep)
        scratch = Path(tempfile.mkdtemp(prefix="site-", dir=folder))
        try:
            _build(suite, scratch, measured, asv_options)
            files.replace_folder(scratch, conf.html, keep)
        finally:
            if scratch.exists():
                files.remove(scratch, keep)
    log.info(
        f"site written to {conf.html}: open its index.html in a browser, or serve it with"
        f" .venv/bin/asv preview --config {suite.config_path}"
    )


def _build(suite: Suite, html: Path, measured: set[str], asv_options: Sequence[str]) -> None:
    conf, figures = suite.conf, f"{FIGURES}/summary.html"
    log.info("asv publish")
    asv.publish(conf.path, [*asv_options, "--html-dir", str(html)])
    results = throughput.load(conf.results)
    judged = regressions_page.judge_site(
        html, conf.results, results.recorded, conf.thresholds, suite.reader
    )
    log.info(
        f"Regressions page: {sum(j['regressed'] for j in judged)} of {len(judged)} jumps asv found"
        f" are regressions; every verdict: {conf.html / regressions_page.JUDGED}"
    )
    builds = pytorch_links.rewrite(html, suite.reader)
    log.info(
        f"commit links lead to PyTorch: {sum(map(bool, builds.values()))} of {len(builds)} builds"
        " have one"
    )
    log.info(f"building the figures into {conf.html / FIGURES}")
    report.build(conf.results, html / FIGURES, conf, html, results)
    log.info(f"making the site self-contained (npm registry, cache {site_assets.CACHE})")
    site_assets.make_offline(html)
    patches.add_nav_link(html, "Figures", figures)
    summaries = landing.write(html, results, suite.reader, figures)
    machines = f"{len(summaries)} machine{'s' if len(summaries) != 1 else ''}"
    log.info(f"index.html opens on the step times of {machines}")
    patches.patch_graphs(html)
    if dropped := patches.keep_measured_tags(html, measured):
        more = ", ..." if len(dropped) > 5 else ""
        log.info(
            f"top axis: {len(dropped)} unmeasured builds' tags left out ({', '.join(dropped[:5])}{more})"
        )
    twins = patches.make_readable_from_disk(html)  # last: every JSON is final
    log.info(f"{twins} JSON files given a .js twin: index.html opens from disk")
