"""``mpsbench publish``: the site of a suite's results, in the suite's html_dir.

``asv publish`` wipes html_dir, so every step after it runs every time: the Regressions page re-judged row by row,
commit links to PyTorch, the figures page, and every library made local so the site works offline (docs/site.md).
"""

from __future__ import annotations

from collections.abc import Sequence

from mpsbench.context import Suite
from mpsbench.core import asv, progress
from mpsbench.site import pytorch_links, regressions_page, report, site_assets

FIGURES = "mpsbench"  # the figures page's folder in html_dir

log = progress.logger(__name__)


def publish(suite: Suite, asv_options: Sequence[str] = ()) -> None:
    """``asv publish`` (with ``asv_options``), then each of mpsbench's steps over the published site."""
    conf = suite.conf
    log.info("asv publish")
    asv.publish(conf.path, asv_options)
    judged = regressions_page.judge_site(conf.html, conf.results, conf.thresholds)
    kept = sum(1 for jump in judged if jump["regressed"])
    log.info(f"Regressions page: {kept} of {len(judged)} jumps asv found are regressions;"
             f" the rest are set aside with their reason in {conf.html / regressions_page.JUDGED}")
    builds = pytorch_links.rewrite(conf.html, suite.reader)
    log.info(f"commit links lead to PyTorch: {sum(1 for git in builds.values() if git)} of {len(builds)} builds have"
             " an upstream commit")
    log.info(f"building the figures into {conf.html / FIGURES}")
    report.build(conf.results, conf.html / FIGURES, conf, site=conf.html)
    log.info(f"making the site self-contained (libraries from the npm registry, cached in {site_assets.CACHE})")
    site_assets.make_offline(conf.html)
    site_assets.add_nav_link(conf.html, "Figures", f"{FIGURES}/summary.html")
    log.info(f"site written to {conf.html}; view it offline with: .venv/bin/asv preview --config {suite.config_path}")
