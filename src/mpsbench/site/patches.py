"""Patches asv 0.6.6's pages; each stops with one line where asv's code moved."""

from __future__ import annotations

import contextlib
import html
import json
import re
from collections.abc import Collection, Iterator
from importlib import resources
from pathlib import Path
from typing import Any

from mpsbench.site.site_assets import VENDOR, SiteAssetError

NAV_ANCHOR = '<li id="nav-li-regressions">'
GRAPH_SCRIPT = "graphdisplay.js"
GRID_SCRIPT = "summarygrid.js"
MEASURED_KEY = "mpsbench_measured"
# asv shows only the first branch (channel) on load
FIRST_BRANCH_ONLY = "state[param] = [values[0]];"
EVERY_BRANCH = "state[param] = values;  /* mpsbench: every channel (site.patches) */"
# Chromium refuses XMLHttpRequest from file://: this loads NAME.json.js instead
LOADER = f"{VENDOR}/mpsbench/file-json.js"
# asv selects each param's first values, which may have no data
FIRST_VALUES = re.compile(
    r"for \(var j = 0; j < param_values\.length && \(j\+1\)\*count <= max_curves; \+\+j\) \{"
    r"\s*item\.push\(j\);\s*\}"
)
MEASURED_VALUES = (
    f"var measured = ((index.{MEASURED_KEY} || {{}})[current_benchmark] || [])[k];"
    "  /* mpsbench: values with data (site.patches) */"
    "\n                    for (var j = 0; j < param_values.length && (item.length+1)*count <= max_curves; ++j) {"
    "\n                        if (!measured || measured.indexOf(param_values[j]) >= 0) { item.push(j); }"
    "\n                    }"
    "\n                    if (item.length == 0) { item.push(0); }"
)
EVERY_TILE = "$.each(main_json.benchmarks, function(bm_name, bm) {"
MEASURED_TILES = (
    f"{EVERY_TILE}\n            if (main_json.{MEASURED_KEY} && !main_json.{MEASURED_KEY}[bm_name]) {{ return; }}"
    "  /* mpsbench: tiles with data only (site.patches) */"
)
LONE_POINT = f"{VENDOR}/mpsbench/lone-point.js"
ASV_SCRIPT = re.compile(r"(?=<script\b[^>]*\bsrc=\"asv\.js\")")
TWIN = ".js"
_JQUERY_TAG = re.compile(
    r"<script\b[^>]*\bsrc=\"[^\"]*jquery(?:-[\d.]+)?\.min\.js\"[^>]*>\s*</script>", re.IGNORECASE
)


def insert_once(
    html_dir: Path, marker: str, anchor: re.Pattern[str], what: str, addition: str
) -> None:
    index = html_dir / "index.html"
    text = index.read_text("utf-8")
    if marker in text:
        return
    if (found := anchor.search(text)) is None:
        raise SiteAssetError(f"{index} has no {what}; a different asv version?")
    index.write_text(text[: found.end()] + addition + text[found.end() :], "utf-8")


def add_nav_link(html_dir: Path, label: str, href: str) -> None:
    item_id = "nav-li-mpsbench-" + re.sub(r"[^a-z0-9]+", "-", label.lower()).strip("-")
    insert_once(
        html_dir,
        f'id="{item_id}"',
        re.compile(re.escape(NAV_ANCHOR) + ".*?</li>", re.DOTALL),
        NAV_ANCHOR,
        f'\n\t<li id="{item_id}"><a href="{html.escape(href)}">{html.escape(label)}</a></li>',
    )


def _add_script(html_dir: Path, name: str, target: str, anchor: re.Pattern[str], what: str) -> None:
    (html_dir / target).parent.mkdir(parents=True, exist_ok=True)
    (html_dir / target).write_text(
        resources.files("mpsbench.site").joinpath(name).read_text("utf-8"), "utf-8"
    )
    insert_once(html_dir, f'src="{target}"', anchor, what, f'<script src="{target}"></script>\n')


def patch_graphs(html_dir: Path) -> None:
    """Every channel, only measured param values and tiles, lone points labelled."""
    for script, old, new, what in (
        (GRAPH_SCRIPT, re.escape(FIRST_BRANCH_ONLY), EVERY_BRANCH, repr(FIRST_BRANCH_ONLY)),
        (GRAPH_SCRIPT, FIRST_VALUES, MEASURED_VALUES, "loop selecting the first param values"),
        (GRID_SCRIPT, re.escape(EVERY_TILE), MEASURED_TILES, repr(EVERY_TILE)),
    ):
        text = (path := html_dir / script).read_text("utf-8")
        if new in text:
            continue
        if len(around := re.split(old, text)) != 2:
            raise SiteAssetError(
                f"{path} has no one {what}; a different asv version? see mpsbench.site.patches"
            )
        path.write_text(new.join(around), "utf-8")
    _add_script(html_dir, "lone_point.js", LONE_POINT, ASV_SCRIPT, "asv.js script")


@contextlib.contextmanager
def index_json(html_dir: Path) -> Iterator[dict[str, Any]]:
    path = html_dir / "index.json"
    index = json.loads(path.read_text("utf-8"))
    yield index
    path.write_text(json.dumps(index, separators=(",", ":")), "utf-8")


def keep_measured_tags(html_dir: Path, measured: Collection[str]) -> list[str]:
    """Returns the tags left out."""
    with index_json(html_dir) as index:
        hashes, tags = index.get("revision_to_hash", {}), index.get("tags", {})
        index["tags"] = {
            tag: revision for tag, revision in tags.items() if hashes.get(str(revision)) in measured
        }
    return sorted(tags.keys() - index["tags"].keys())


def twin(data: str) -> str:
    return f"mpsbenchJSON(document.currentScript, {data});\n"


def make_readable_from_disk(html_dir: Path) -> int:
    """The file:// loader and a .js twin of each JSON file; the twins made."""
    _add_script(html_dir, "file_json.js", LOADER, _JQUERY_TAG, "jQuery script")
    documents = sorted(html_dir.rglob("*.json"))
    for path in documents:
        data = path.read_text("utf-8")
        json.loads(data)  # no twin of invalid JSON
        path.with_name(path.name + TWIN).write_text(twin(data), "utf-8")
    return len(documents)
