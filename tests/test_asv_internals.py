"""asv's and asv_runner's internals are reached through mpsbench.core.asv_internals alone, and
only under the versions it was read from."""

from __future__ import annotations

import ast
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from mpsbench.core import asv_internals

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "mpsbench"
ONE = "core/asv_internals.py"
ASV_PACKAGES = ("asv", "asv_runner")


def test_the_installed_asv_and_asv_runner_are_the_versions_the_uses_were_read_from():
    installed = {name: metadata.version(name) for name in ASV_PACKAGES}
    read = {"asv": asv_internals.ASV, "asv_runner": asv_internals.ASV_RUNNER}
    users = {module: used_names(source) for module, source in modules().items()}
    uses = [
        f"{name} ({module}{'.' + attr if attr else ''}):"
        f" {', '.join(user for user, names in users.items() if name in names)}"
        for name, (module, attr) in asv_internals.USES.items()
    ]
    assert installed == read, (
        f"installed {installed}, read from {read}: re-check each use, then set the versions in"
        " mpsbench.core.asv_internals\n" + "\n".join([*uses, *asv_internals.RELIED])
    )


@pytest.mark.parametrize("name", sorted(asv_internals.USES))
def test_each_use_is_still_there(name):
    assert getattr(asv_internals, name) is not None


def test_a_name_not_listed_is_no_attribute():
    with pytest.raises(AttributeError, match="make_parser"):
        asv_internals.make_parser  # noqa: B018


def asv_imports(source: str) -> list[str]:
    """Each import of asv or asv_runner in ``source``, however it is written."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or ""] if node.level == 0 else []
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            called = node.func
            name = called.attr if isinstance(called, ast.Attribute) else getattr(called, "id", "")
            names = [str(node.args[0].value)] if name in ("import_module", "__import__") else []
        else:
            continue
        found += [
            f"line {node.lineno}: {name}" for name in names if name.split(".")[0] in ASV_PACKAGES
        ]
    return found


@pytest.mark.parametrize(
    "source",
    [
        "import asv\n",
        "import asv_runner.discovery as d\n",
        "from asv import util\n",
        "def f():\n    from asv_runner.statistics import get_err\n",
        "import importlib\nimportlib.import_module('asv.results')\n",
        "__import__('asv_runner')\n",
    ],
)
def test_the_scan_finds_each_way_to_import_asv(source):
    assert asv_imports(source) != []


def test_the_scan_leaves_other_packages_and_relative_imports():
    assert asv_imports("import asvx\nfrom . import asv\nfrom mpsbench.core import asv\n") == []


def modules() -> dict[str, str]:
    return {
        str(path.relative_to(PACKAGE)): path.read_text(encoding="utf-8")
        for path in sorted(PACKAGE.rglob("*.py"))
    }


def test_no_module_but_asv_internals_and_the_standalone_ones_imports_asv_or_asv_runner():
    found = {module: asv_imports(source) for module, source in modules().items() if module != ONE}
    assert {
        m: lines for m, lines in found.items() if lines and m not in asv_internals.STANDALONE
    } == {}, "take asv's names from mpsbench.core.asv_internals (USES)"
    assert all(found[module] for module in asv_internals.STANDALONE), "strike it off STANDALONE"


def test_a_standalone_module_takes_only_names_listed_in_uses():
    listed = set(asv_internals.USES.values())
    for module in asv_internals.STANDALONE:
        for node in ast.walk(ast.parse((PACKAGE / module).read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.ImportFrom)
                and (node.module or "").split(".")[0] in ASV_PACKAGES
            ):
                taken = {(node.module, alias.name) for alias in node.names}
                assert taken <= listed, f"{module}: list {sorted(taken - listed)} in USES"


def used_names(source: str) -> set[str]:
    """The names of asv_internals that ``source`` takes: imported from it or read off it."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module == "mpsbench.core.asv_internals":
            found.update(alias.name for alias in node.names)
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "asv_internals"
        ):
            found.add(node.attr)
    return found


def test_every_name_taken_is_listed_and_every_listed_name_is_taken():
    taken = set().union(*(used_names(source) for m, source in modules().items() if m != ONE))
    standalone = {
        name
        for name, (module, attribute) in asv_internals.USES.items()
        for path in asv_internals.STANDALONE
        if f"from {module} import {attribute}" in (PACKAGE / path).read_text(encoding="utf-8")
    }
    assert taken - set(asv_internals.USES) == set(), "list the name in asv_internals.USES"
    assert set(asv_internals.USES) - taken - standalone == set(), (
        "a use is gone: strike it off USES"
    )


def test_ending_an_asv_forkserver_removes_its_socket_folder_and_nothing_else(tmp_path):
    import psutil

    from mpsbench.core import asv

    folder = tmp_path / "asv-forkserver-x1"
    folder.mkdir()
    other = tmp_path / "not-asvs"
    other.mkdir()
    sleep = "import time; time.sleep(120)"
    server = subprocess.Popen(
        [sys.executable, "-c", sleep, "run_server", str(tmp_path), str(folder / "socket")]
    )
    bystander = subprocess.Popen(
        [sys.executable, "-c", sleep, "run_server", str(tmp_path), str(other / "socket")]
    )
    try:
        asv.end([psutil.Process(server.pid), psutil.Process(bystander.pid)])
        assert not psutil.pid_exists(server.pid) and not psutil.pid_exists(bystander.pid)
        assert not folder.exists() and other.is_dir()
    finally:
        for process in (server, bystander):
            process.kill()
