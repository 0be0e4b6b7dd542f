"""Commit links through pytorch.html's redirect to PyTorch's commits."""

from __future__ import annotations

import html
import json
import re
from importlib import resources
from pathlib import Path

from mpsbench.builds.timeline import UPSTREAM, Reader, pytorch_url
from mpsbench.site import patches

PAGE = "pytorch.html"
SHOW_COMMIT_URL = f"{PAGE}#//github.com/"
_FEED_LINK = re.compile(
    r"https?://github\.com/pytorch/pytorch/commit/(?:\.\./compare/([0-9a-f]+)\.\.\.([0-9a-f]+)|([0-9a-f]+))"
)


def upstream_url(builds: dict[str, str | None], old: str | None, new: str) -> str | None:
    """``new``'s PyTorch commit, or the range from ``old``'s; None without a git_version."""
    git_new, git_old = builds.get(new), builds.get(old) if old else None
    if not git_new or (old and not git_old):
        return None
    return pytorch_url(git_old, git_new)


def _full(builds: dict[str, str | None], prefix: str) -> str | None:
    return next((commit for commit in builds if commit.startswith(prefix)), None)


def _row(timeline: Reader, commit: str, git: str | None) -> str:
    build = timeline.label(commit).removeprefix(commit[:8]).strip()
    link = f'<a href="{UPSTREAM}/commit/{git}">{git[:12]}</a>' if git else "no git_version recorded"
    return (
        f"<tr><td><code>{commit[:12]}</code></td><td>"
        f"{html.escape(build or 'unknown: the timeline here has no build.json for it')}</td>"
        f"<td>{link}</td></tr>"
    )


def rewrite(site: Path, timeline: Reader) -> dict[str, str | None]:
    """Returns each build's git_version."""
    with patches.index_json(site) as index:
        commits = list(index["revision_to_hash"].values())
        index["show_commit_url"] = SHOW_COMMIT_URL
    parents = [parent for commit in commits if (parent := timeline.parent(commit))]
    builds = {commit: timeline.git_version(commit) for commit in commits + parents}
    rows = "".join(_row(timeline, commit, git) for commit, git in builds.items())
    data = json.dumps({commit: {"git": git} for commit, git in builds.items()}).replace(
        "</", "<\\/"
    )
    script = resources.files("mpsbench.site").joinpath("pytorch_links.js").read_text("utf-8")
    title = "PyTorch commits of the builds"
    (site / PAGE).write_text(
        f'<!doctype html><html><head><meta charset="utf-8"><title>{title}</title></head><body>'
        f'<p><a href="index.html">&larr; benchmark graphs</a></p><h1>{title}</h1>'
        '<p id="note">Each build is a timeline commit, made from the PyTorch commit beside it.</p>'
        "<table><thead><tr><th>timeline commit</th><th>build</th><th>PyTorch commit</th></tr>"
        f'</thead><tbody>{rows}</tbody></table><script type="application/json" id="builds">{data}'
        f"</script><script>var UPSTREAM = {json.dumps(UPSTREAM)};\n{script}</script></body></html>\n",
        "utf-8",
    )

    def upstream(match: re.Match[str]) -> str:
        old, new = match.group(1), match.group(2) or match.group(3)
        if full_new := _full(builds, new):
            # one commit: asv means the change from its parent
            full_old = _full(builds, old) if old else timeline.parent(full_new)
            if url := upstream_url(builds, full_old, full_new):
                return url
        return SHOW_COMMIT_URL + new

    feed = site / "regressions.xml"
    if feed.is_file():
        feed.write_text(_FEED_LINK.sub(upstream, feed.read_text("utf-8")), "utf-8")
    return builds
