"""One reader of asv's results files: mpsbench.results.recorded; every other module calls it.

asv's results folder holds a file per machine and build (and machine.json, benchmarks.json). A
second module that parsed them would read them a second way (other errors, other checks), so the
source is scanned. No module but recorded.py, nor a tool or script, reaches asv's ``asv.results``.
Each call of asv's ``load_json`` anywhere in the package, and each ``json.load``/``json.loads`` in
the layers that know a results folder (results and every layer above it), is listed below with
what it reads, none of them a results file. The layers below results (core, builds, measure)
cannot import recorded (import-linter's layers contract) and read no file of a results folder.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "mpsbench"
READER = "results/recorded.py"
# results and every layer above it (pyproject.toml's layers contract)
SCANNED = ("results", "regressions", "context.py", "site", "fleet", "bench.py", "cli.py")
LOADERS = ("load", "loads")  # json's readers
# asv's reading, naming and finding of results files, reached without importing asv.results
ASV_RESULTS_NAMES = ("iter_results", "get_result_hash_from_prefix", "get_filename")

# Each json.load/json.loads outside recorded.py, by module and function: what it reads.
OTHER_JSON = {
    ("results/merge.py", "read_lines"): "the side files (<results>-held.jsonl, -costs.jsonl)",
    ("regressions/explain.py", "_profile"): "the profiling process's answer file",
    ("regressions/servers.py", "place"): "the placing process's answer line",
    ("regressions/servers.py", "Server._reply"): "a benchmark server's reply line",
    (
        "regressions/serve_build.py",
        "_round",
    ): "a round's result, through JSON as asv_runner's file carries it",
    ("regressions/serve_build.py", "_forked_round"): "the forked round's reply line",
    ("regressions/serve_build.py", "main"): "compare's request lines",
    ("site/regressions_page.py", "_published"): "the site's regressions.json and index.json",
    ("site/regressions_page.py", "_judged"): "the site's judged regressions",
    ("site/patches.py", "index_json"): "the site's index.json, to change and write back",
    ("site/patches.py", "make_readable_from_disk"): "the site's JSON documents, checked",
}
# asv's load_json outside recorded.py: what it reads.
OTHER_LOAD_JSON = {
    ("core/asvconf.py", "load"): "asv.conf.json, with its comments, as asv reads it",
}


class _Reads(ast.NodeVisitor):
    """Where one module reads JSON or reaches asv's results module, by enclosing function."""

    def __init__(self) -> None:
        self.scope: list[str] = []
        self.json_modules: set[str] = set()  # names bound to the json module
        self.json_loaders: set[str] = set()  # names bound to json.load or json.loads
        self.json: list[str] = []  # enclosing function of each json.load(s)
        self.load_json: list[str] = []  # ... of each asv load_json
        self.asv_results: list[str] = []  # "line N: what" for each use of asv.results

    def _where(self) -> str:
        return ".".join(self.scope) or "<module>"

    def _scoped(self, node: ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.scope.append(node.name)
        self.generic_visit(node)
        self.scope.pop()

    visit_ClassDef = visit_FunctionDef = visit_AsyncFunctionDef = _scoped

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.name == "json":
                self.json_modules.add(alias.asname or "json")
            if alias.name == "asv.results" or alias.name.startswith("asv.results."):
                self.asv_results.append(f"line {node.lineno}: import {alias.name}")

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        names = [alias.name for alias in node.names]
        if node.module == "json":
            self.json_loaders.update(
                alias.asname or alias.name for alias in node.names if alias.name in LOADERS
            )
        if (node.module or "").startswith("asv.results") or (
            node.module == "asv" and "results" in names
        ):
            self.asv_results.append(f"line {node.lineno}: from {node.module} import {names}")

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr.startswith(ASV_RESULTS_NAMES) or (
            node.attr == "load" and isinstance(node.value, ast.Name) and node.value.id == "Results"
        ):
            self.asv_results.append(f"line {node.lineno}: {ast.unparse(node)}")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        called = node.func
        if (
            isinstance(called, ast.Attribute)
            and called.attr in LOADERS
            and isinstance(called.value, ast.Name)
            and called.value.id in self.json_modules
        ) or (isinstance(called, ast.Name) and called.id in self.json_loaders):
            self.json.append(self._where())
        if (isinstance(called, ast.Attribute) and called.attr == "load_json") or (
            isinstance(called, ast.Name) and called.id == "load_json"
        ):
            self.load_json.append(self._where())
        self.generic_visit(node)


def reads(source: str) -> _Reads:
    found = _Reads()
    found.visit(ast.parse(source))
    return found


def modules() -> dict[str, _Reads]:
    """Every module of the package but recorded.py, by its path in the package."""
    return {
        str(path.relative_to(PACKAGE)): reads(path.read_text(encoding="utf-8"))
        for path in sorted(PACKAGE.rglob("*.py"))
        if str(path.relative_to(PACKAGE)) != READER
    }


def scanned(module: str) -> bool:
    return module.split("/", 1)[0] in SCANNED


def test_no_module_but_recorded_reaches_asv_s_results_module():
    used = {module: found.asv_results for module, found in modules().items() if found.asv_results}
    for path in sorted([*(ROOT / "tools").rglob("*.py"), *(ROOT / "scripts").rglob("*.py")]):
        if found := reads(path.read_text(encoding="utf-8")).asv_results:
            used[str(path.relative_to(ROOT))] = found
    assert used == {}, "read, name or find results files through mpsbench.results.recorded"


def test_no_module_but_recorded_and_the_listed_calls_asv_s_load_json():
    found = {(module, where) for module, each in modules().items() for where in each.load_json}
    assert found - set(OTHER_LOAD_JSON) == set(), "read results files with recorded.raw/read"
    assert set(OTHER_LOAD_JSON) - found == set(), "a listed reader is gone: strike it off the list"


def test_every_json_reader_from_the_results_layer_up_is_listed_with_what_it_reads():
    found = {
        (module, where)
        for module, each in modules().items()
        if scanned(module)
        for where in each.json
    }
    unlisted = sorted(found - set(OTHER_JSON))
    assert unlisted == [], (
        "read a results file with recorded.raw (as written) or recorded.read (asv's Results);"
        " list any other JSON file in OTHER_JSON with what it is"
    )
    assert set(OTHER_JSON) - found == set(), "a listed reader is gone: strike it off the list"


def test_recorded_itself_reads_results_through_asv():
    found = reads((PACKAGE / READER).read_text(encoding="utf-8"))
    assert found.asv_results and found.json and found.load_json


@pytest.mark.parametrize(
    "source",
    [
        "import json\ndef f(p):\n    return json.loads(p.read_text())\n",
        "import json as j\ndef f(h):\n    return j.load(h)\n",
        "from json import loads\ndef f(p):\n    return loads(p.read_text())\n",
    ],
)
def test_the_scan_finds_a_json_reader_however_json_is_imported(source):
    assert reads(source).json == ["f"]


@pytest.mark.parametrize(
    "source",
    [
        "from asv import results\n",
        "from asv.results import Results\n",
        "import asv.results\n",
        "import asv\nasv.results.iter_results_for_machine('r', 'm')\n",
        "def f(Results, p):\n    return Results.load(p)\n",
    ],
)
def test_the_scan_finds_each_way_to_asv_s_results_module(source):
    assert reads(source).asv_results != []


def test_the_scan_names_the_function_and_class_a_reader_is_in():
    source = "import json\nclass C:\n    def f(self, p):\n        return json.loads(p)\n"
    assert reads(source).json == ["C.f"]
    assert reads("from asv import util\ndef g(p):\n    util.load_json(p)\n").load_json == ["g"]
