"""docs/reference names every command: a command added to the parser without its section fails here."""

from __future__ import annotations

import re

from tools import reference_docs


def test_every_command_has_its_section_in_the_reference():
    documented = {path: set(re.findall(r"^## (mpsbench.*)$", path.read_text(), re.MULTILINE))
                  for path in (reference_docs.PAGE, reference_docs.NIGHTLY_PAGE)}
    names = [name for name, _ in reference_docs.commands(reference_docs.cli.build_parser())]
    missing = [name for name in names if not any(name in headings for headings in documented.values())]
    assert missing == [], "run: PYTHONPATH=src python -m tools.reference_docs"
    assert len(names) > 30  # every subcommand is walked, not only the top level


def test_the_generated_pages_hold_each_commands_help():
    pages = reference_docs.pages()
    assert set(pages) == {reference_docs.PAGE, reference_docs.NIGHTLY_PAGE}
    assert "## mpsbench bisect\n\n```\nusage: mpsbench bisect" in pages[reference_docs.PAGE]
    assert "## mpsbench nightly resolve\n" in pages[reference_docs.NIGHTLY_PAGE]
    assert "## mpsbench nightly resolve\n" not in pages[reference_docs.PAGE]
