"""docs/reference names every command and every benchmark: one added without its section fails here."""

from __future__ import annotations

import re
import sys

from tools import reference_docs


def test_every_command_has_its_section_in_the_reference():
    documented = {
        path: set(re.findall(r"^## (mpsbench.*)$", path.read_text(), re.MULTILINE))
        for path in (reference_docs.PAGE, reference_docs.NIGHTLY_PAGE)
    }
    names = [name for name, _ in reference_docs.commands(reference_docs.cli.PARSER)]
    missing = [
        name for name in names if not any(name in headings for headings in documented.values())
    ]
    assert missing == [], "run: PYTHONPATH=src python -m tools.reference_docs"
    assert len(names) > 30  # every subcommand is walked, not only the top level


def test_the_generated_pages_hold_each_commands_help():
    pages = reference_docs.pages()
    assert set(pages) == {
        reference_docs.PAGE,
        reference_docs.NIGHTLY_PAGE,
        reference_docs.BENCHMARKS_PAGE,
    }
    assert "## mpsbench bisect\n\n```\nusage: mpsbench bisect" in pages[reference_docs.PAGE]
    assert "## mpsbench nightly resolve\n" in pages[reference_docs.NIGHTLY_PAGE]
    assert "## mpsbench nightly resolve\n" not in pages[reference_docs.PAGE]


def test_every_benchmark_is_in_the_reference():
    """The committed page holds a row for each benchmark asv discovers (the generator writes one a benchmark)."""
    from asv_runner.discovery import disc_benchmarks

    root = reference_docs.REFERENCE.parents[1]
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))  # benchmarks/ imports as asv imports it
    page = reference_docs.BENCHMARKS_PAGE.read_text()
    names = [bench.name.split(".", 1)[1] for bench in disc_benchmarks(str(root / "benchmarks"))]
    assert [name for name in names if f"| `{name}` |" not in page] == [], (
        "run: PYTHONPATH=src python -m tools.reference_docs"
    )
    assert len(names) > 40
