"""What a graph shows before anyone clicks: every channel, and only the builds measured here on the top axis.

asv 0.6.6's graph page selects the first of ``branches`` alone (``release``): on the Linux default three of its
four builds are on ``era`` and stayed hidden until ``era`` was clicked. Its top axis labels every tag of the
timeline, macOS-only builds that no machine of this site measured among them, one over the other. A step of
``mpsbench publish`` after ``asv publish`` (docs/site.md).
"""

from __future__ import annotations

import json
from collections.abc import Collection
from pathlib import Path

from mpsbench.site import site_assets

GRAPH_SCRIPT = "graphdisplay.js"
# asv 0.6.6's default selection of the branch parameter (graphdisplay.js, setup_benchmark_params), and ours
FIRST_BRANCH_ONLY = "state[param] = [values[0]];"
EVERY_BRANCH = "state[param] = values;  /* mpsbench: every channel of the default (site.default_view) */"


class DefaultViewError(site_assets.SiteAssetError):
    """The published pages are not the ones this step knows: the message says which."""


def show_every_channel(html_dir: Path) -> None:
    """Make the graph page select every branch (channel) on load, as it selects every machine."""
    script = html_dir / GRAPH_SCRIPT
    text = script.read_text(encoding="utf-8")
    if EVERY_BRANCH in text:
        return
    if text.count(FIRST_BRANCH_ONLY) != 1:
        raise DefaultViewError(f"{script} has no one {FIRST_BRANCH_ONLY!r} to select every channel by; a different"
                               " asv version? see mpsbench.site.default_view")
    script.write_text(text.replace(FIRST_BRANCH_ONLY, EVERY_BRANCH), encoding="utf-8")


def keep_measured_tags(html_dir: Path, measured: Collection[str]) -> list[str]:
    """Keep on the top axis only the tags of builds (timeline commits) with a recorded value; return those dropped."""
    index_path = html_dir / "index.json"
    index = json.loads(index_path.read_text(encoding="utf-8"))
    hashes = {int(revision): commit for revision, commit in index.get("revision_to_hash", {}).items()}
    tags = index.get("tags", {})
    kept = {tag: revision for tag, revision in tags.items() if hashes.get(int(revision)) in measured}
    if kept != tags:
        index["tags"] = kept
        index_path.write_text(json.dumps(index), encoding="utf-8")
    return sorted(set(tags) - set(kept))
