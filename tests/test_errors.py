"""One error class: every other exception class of mpsbench is caught by name somewhere.

A user's mistake is :class:`mpsbench.core.errors.UserError`, printed alike by every command. A
subclass earns its place only where a caller tells it apart (``except``, ``isinstance``,
``contextlib.suppress``): one no caller names is UserError under another name, and goes. Each
subclass of UserError is named, with its reason, in mpsbench.core.errors' docstring.
"""

from __future__ import annotations

import ast
import functools
import importlib
import pkgutil
import re
from pathlib import Path

import pytest

import mpsbench
from mpsbench.core import errors
from mpsbench.core.errors import UserError

ROOT = Path(__file__).resolve().parents[1]
SCANNED = (ROOT / "src", ROOT / "tools")  # tools/ are callers too (check_pins reports a refusal)


def _modules() -> list[str]:
    """Every module of the package, imported; one needing a package not installed here is left."""
    names = []
    for found in pkgutil.walk_packages(mpsbench.__path__, "mpsbench."):
        try:
            importlib.import_module(found.name)
        except ModuleNotFoundError as exc:
            if (exc.name or "").startswith("mpsbench"):
                raise
            continue
        names.append(found.name)
    return names


def _subclasses(cls: type[BaseException]) -> set[type[BaseException]]:
    found = set()
    for sub in cls.__subclasses__():
        found |= {sub, *_subclasses(sub)}
    return found


def exception_classes() -> list[type[BaseException]]:
    """The package's own exception classes (UserError aside), in every module imported."""
    _modules()
    return sorted(
        (
            cls
            for cls in _subclasses(BaseException)
            if cls.__module__.startswith("mpsbench.") and cls is not UserError
        ),
        key=lambda cls: f"{cls.__module__}.{cls.__qualname__}",
    )


def _names(node: ast.AST) -> set[str]:
    """The class names an expression mentions: ``X``, ``module.X``, and those in tuples of them."""
    return {
        sub.id if isinstance(sub, ast.Name) else sub.attr
        for sub in ast.walk(node)
        if isinstance(sub, (ast.Name, ast.Attribute))
    }


def caught_names(source: str) -> tuple[set[str], dict[str, set[str]]]:
    """The names in ``except`` clauses, ``isinstance`` tests and ``suppress`` calls of
    ``source``, and its module-level tuples (``GUARD_ERRORS = (A, B)``) by their names."""
    caught: set[str] = set()
    tuples: dict[str, set[str]] = {}
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.ExceptHandler) and node.type is not None:
            caught |= _names(node.type)
        elif isinstance(node, ast.Call):
            called = _names(node.func)
            if "isinstance" in called and len(node.args) == 2:
                caught |= _names(node.args[1])
            elif "suppress" in called:
                caught |= set().union(*map(_names, node.args))
    for statement in tree.body:
        if isinstance(statement, ast.Assign) and isinstance(statement.value, ast.Tuple):
            for target in statement.targets:
                if isinstance(target, ast.Name):
                    tuples[target.id] = _names(statement.value)
    return caught, tuples


@functools.cache
def caught_anywhere() -> frozenset[str]:
    """Every class name a caller in src/ or tools/ catches, a tuple caught by its name included."""
    caught: set[str] = set()
    tuples: dict[str, set[str]] = {}
    for folder in SCANNED:
        for path in folder.rglob("*.py"):
            names, named = caught_names(path.read_text(encoding="utf-8"))
            caught |= names
            tuples.update(named)
    return frozenset(caught.union(*(members for name, members in tuples.items() if name in caught)))


CLASSES = exception_classes()


def test_the_scan_finds_what_a_caller_catches():
    source = (
        "import contextlib\n"
        "GUARD = (a.One, Two)\n"
        "try:\n    pass\nexcept (m.Three, *GUARD):\n    pass\n"
        "isinstance(e, Four)\n"
        "with contextlib.suppress(m.Five):\n    pass\n"
        "raise Six()\n"
    )
    names, tuples = caught_names(source)
    assert {"Three", "GUARD", "Four", "Five"} <= names
    assert "Six" not in names
    assert tuples["GUARD"] == {"a", "One", "Two"}


def test_the_package_is_walked():
    # UserError's catchers and the classes with a stated reason are found: the walk is not empty
    names = {cls.__name__ for cls in CLASSES}
    assert {"SiteAssetError", "RecordedError", "Stopped", "InstallError"} <= names


@pytest.mark.parametrize(
    "cls", [cls for cls in CLASSES if issubclass(cls, UserError)], ids=lambda cls: cls.__qualname__
)
def test_each_user_error_subclass_is_named_with_its_reason_in_the_errors_module(cls):
    assert re.search(rf"\b{cls.__name__}\b", errors.__doc__ or ""), (
        f"{cls.__module__}.{cls.__qualname__}: mpsbench.core.errors' docstring does not say why it"
        " is not UserError itself"
    )


@pytest.mark.parametrize("cls", CLASSES, ids=lambda cls: cls.__qualname__)
def test_each_exception_class_is_told_apart_by_a_caller(cls: type[BaseException]):
    assert cls.__name__ in caught_anywhere(), (
        f"{cls.__module__}.{cls.__qualname__}: no except, isinstance or suppress in src/ or"
        " tools/ names it: raise UserError instead"
    )


@pytest.mark.parametrize("cls", CLASSES, ids=lambda cls: cls.__qualname__)
def test_each_exception_class_says_why_it_is_its_own(cls: type[BaseException]):
    assert cls.__doc__ and cls.__doc__.strip(), f"{cls.__qualname__} has no docstring"
