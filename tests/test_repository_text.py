"""The repository reads as a product: code says what it does, docs stay short, nothing names this machine's paths.

Comments and docstrings in src/ and benchmarks/ say what and why in the present; issue numbers, dates and the
machines a figure was measured on live in git and in docs/evidence. String literals are data (an example date in
an error message, a GPU's name) and are not read here.
"""

from __future__ import annotations

import ast
import io
import re
import subprocess
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HISTORY = re.compile(r"\bissue #?\d+|\b20\d\d-[01]\d-[0-3]\d\b|\bH[12]00\b|\bVM\b")
# Paths of a particular machine: a user's home, this project's work folders; /Users/runner is GitHub's runner.
MACHINE_PATH = re.compile(
    r"/home/[a-z][\w.-]*/|/Users/(?!runner/)[\w.-]+/|/root/|/work/(?:main|wt)\b"
)
SCRATCH_PATH = re.compile(
    r"(?<![\w.$}])/tmp/"
)  # a scratch folder of the machine that wrote the page
DOCS_MOST_BYTES, README_MOST_BYTES = 40_000, 10_000


def tracked() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    return [ROOT / name for name in listed.split("\0") if name and (ROOT / name).is_file()]


def prose(source: str) -> list[tuple[int, str]]:
    """The comments and docstrings of a Python module, with the line each starts on."""
    found = [
        (token.start[0], token.string)
        for token in tokenize.generate_tokens(io.StringIO(source).readline)
        if token.type == tokenize.COMMENT
    ]
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and node.body
        ):
            first = node.body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                found.append((first.lineno, first.value.value))
    return found


def shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else path.name


def history_in(path: Path) -> list[str]:
    return [
        f"{shown(path)}:{line}: {match.group()}"
        for line, text in prose(path.read_text())
        for match in HISTORY.finditer(text)
    ]


CODE = sorted([*(ROOT / "src").rglob("*.py"), *(ROOT / "benchmarks").rglob("*.py")])


@pytest.mark.parametrize("path", CODE, ids=[str(path.relative_to(ROOT)) for path in CODE])
def test_code_prose_names_no_issue_date_or_machine(path):
    assert history_in(path) == []


def test_history_in_prose_is_found_and_data_is_not(tmp_path):
    module = tmp_path / "m.py"
    module.write_text(
        '"""Made for issue 31."""\n\nSTAMP = "2026-11-20"  # a nightly id, data\n\n\n'
        'def f():\n    """Fast on the H100."""\n    return "a VM"  # measured 2026-11-27\n'
    )
    found = [line.split(": ", 1)[1] for line in history_in(module)]
    assert sorted(found) == ["2026-11-27", "H100", "issue 31"]


def machine_paths(path: Path) -> list[str]:
    try:
        text = path.read_text()
    except UnicodeDecodeError:
        return []
    scratch = (
        path.suffix == ".md"
    )  # a page's commands use the reader's own folders, not the writer's /tmp
    return [
        f"{shown(path)}:{number}: {line.strip()[:100]}"
        for number, line in enumerate(text.splitlines(), start=1)
        if MACHINE_PATH.search(line) or (scratch and SCRATCH_PATH.search(line))
    ]


def test_no_tracked_file_names_a_path_of_this_machine():
    own = Path(__file__).resolve()
    assert [hit for path in tracked() if path.resolve() != own for hit in machine_paths(path)] == []


def test_a_machine_path_is_found(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "MPSBENCH_CACHE=/tmp/cold scripts/bench\nsee /home/alice/mpsbench\n$TMPDIR/tmp/x is fine\n"
    )
    code = tmp_path / "x.py"
    code.write_text(
        'ROOT = "/work/main/src"\nSCRATCH = "/tmp/x"  # code may use a scratch folder\n'
    )
    assert [hit.split(":")[1] for hit in machine_paths(page)] == ["1", "2"]
    assert [hit.split(":")[1] for hit in machine_paths(code)] == ["1"]


DOC_PATH = re.compile(
    r"(?<![:\w/])docs/[\w./-]+\.(?:md|png)\b"
)  # not a path in a commit: git show C:docs/x.md


def test_every_doc_page_the_code_names_exists():
    """A comment, message or test that sends the reader to docs/ names a page that is there."""
    named = {
        (match.group(), str(path.relative_to(ROOT)))
        for path in tracked()
        if path.suffix in (".py", ".yml", ".yaml", ".toml", "")
        and not path.is_relative_to(ROOT / "tests" / "data")
        for match in DOC_PATH.finditer(path.read_text(errors="replace"))
    }
    assert sorted((page, where) for page, where in named if not (ROOT / page).exists()) == []


def test_readme_and_docs_stay_short():
    """Every file under docs/, pages and pictures alike, is at most 40 KB."""
    files = sorted(path for path in (ROOT / "docs").rglob("*") if path.is_file())
    assert [path.name for path in files if path.stat().st_size > DOCS_MOST_BYTES] == []
    assert (ROOT / "README.md").stat().st_size <= README_MOST_BYTES
