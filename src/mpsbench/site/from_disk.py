"""A published site that works opened as a file (``file:///.../index.html``), not only from a server.

From ``file://`` Chromium refuses the XMLHttpRequest with which asv's pages load every JSON file (``info.json``,
``index.json``, the graphs, ``regressions.json``) and loads no script whose tag asks for CORS or integrity. So
each JSON file gets a twin ``NAME.json.js`` that hands its content to a small jQuery transport (``file_json.js``,
loaded right after jQuery), which loads the twin with a ``<script>`` element from disk and stays out of the way
over http. The last step of a publish: it copies the JSON as every earlier step left it (docs/site.md).
"""

from __future__ import annotations

import json
import re
from importlib import resources
from pathlib import Path

from mpsbench.site import site_assets

LOADER = f"{site_assets.VENDOR}/mpsbench/file-json.js"  # where the transport goes in html_dir
TWIN = ".js"  # NAME.json -> NAME.json.js
# the <script> tag that loads jQuery, whatever site_assets made of its URL
_JQUERY_TAG = re.compile(r"<script\b[^>]*\bsrc=\"[^\"]*jquery(?:-[\d.]+)?\.min\.js\"[^>]*>\s*</script>", re.IGNORECASE)


class FromDiskError(site_assets.SiteAssetError):
    """The site's pages are not the ones this step knows: the message says which."""


def twin(data: str) -> str:
    """The JavaScript twin of a JSON document: the same value, handed to the transport."""
    return f"mpsbenchJSON(document.currentScript, {data});\n"


def write_twins(html_dir: Path) -> int:
    """Write NAME.json.js beside every NAME.json of the site; return how many."""
    count = 0
    for path in sorted(html_dir.rglob("*.json")):
        text = path.read_text(encoding="utf-8")
        json.loads(text)  # a file that is no JSON would make a twin that is no JavaScript: stop on it here
        path.with_name(path.name + TWIN).write_text(twin(text), encoding="utf-8")
        count += 1
    return count


def install_loader(html_dir: Path) -> None:
    """Copy the transport into the site and load it right after jQuery in index.html (once)."""
    target = html_dir / LOADER
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(resources.files("mpsbench.site").joinpath("file_json.js").read_text(encoding="utf-8"),
                      encoding="utf-8")
    index = html_dir / "index.html"
    text = index.read_text(encoding="utf-8")
    if f'src="{LOADER}"' in text:
        return
    found = _JQUERY_TAG.search(text)
    if found is None:
        raise FromDiskError(f"{index} loads no jQuery that the file:// loader could follow; a different asv version?")
    tag = f'\n    <script src="{LOADER}"></script>'
    index.write_text(text[:found.end()] + tag + text[found.end():], encoding="utf-8")


def make_readable_from_disk(html_dir: Path) -> int:
    """The loader and every JSON file's twin: the site opens from disk. Returns the number of twins."""
    install_loader(html_dir)
    return write_twins(html_dir)
