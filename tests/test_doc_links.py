"""Every relative link in README.md and docs/ resolves: the file exists and, with a #fragment, so does the heading."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")  # [text](target)
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)


def anchors(page: Path) -> set[str]:
    """The #fragments GitHub gives the page's headings: lowercased, punctuation dropped, spaces as hyphens."""
    headings = re.findall(r"^#+ (.+)$", FENCE.sub("", page.read_text()), re.MULTILINE)
    return {
        re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-") for heading in headings
    }


def broken_links(page: Path) -> list[str]:
    broken = []
    for target in LINK.findall(FENCE.sub("", page.read_text())):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ...: not ours to check here
            continue
        path, _, fragment = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif fragment and linked.suffix == ".md" and fragment not in anchors(linked):
            broken.append(f"{target}: no heading #{fragment} in {linked.name}")
    return broken


@pytest.mark.parametrize("page", PAGES, ids=[str(page.relative_to(ROOT)) for page in PAGES])
def test_every_relative_link_resolves(page):
    assert broken_links(page) == []


def test_a_link_to_a_missing_file_or_heading_is_found(tmp_path):
    (tmp_path / "other.md").write_text("# The budget, part 2\n\n```\n# not a heading\n```\n")
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](other.md#the-budget-part-2) [gone](missing.md) [bad](other.md#not-a-heading)"
        " [web](https://example.org/x.md)\n```\n[in a block](nowhere.md)\n```\n"
    )
    assert [line.split(":")[0] for line in broken_links(page)] == [
        "missing.md",
        "other.md#not-a-heading",
    ]


def test_evidence_is_short_pages_only():
    """docs/evidence holds a short Markdown page per claim (and the pictures they show), under 500 KB in all:
    raw logs and results stay out of the tree."""
    files = [path for path in (ROOT / "docs" / "evidence").rglob("*") if path.is_file()]
    assert [path.name for path in files if path.suffix not in (".md", ".png")] == []
    assert sum(path.stat().st_size for path in files if path.suffix == ".md") < 500_000
