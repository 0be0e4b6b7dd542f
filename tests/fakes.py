"""Stand-ins made in tests: wheels and PEP 503 indexes (no network, no real torch), git repositories, device calls."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import subprocess
import zipfile
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from mpsbench.core.errors import UserError


def make_wheel(
    folder: Path,
    name: str,
    version: str,
    *,
    python: str = "cp311",
    platform: str = "manylinux_2_28_x86_64",
    git_version: str = "0" * 40,
    built: datetime = datetime(2026, 1, 1, 12, 0, 0),
    module: str = "",
    metadata: tuple[str, ...] = (),
) -> Path:
    """A valid, installable wheel. A torch wheel carries torch/version.py like the real one.

    ``module`` becomes the package's __init__.py; ``metadata`` adds METADATA lines
    (``Requires-Dist: torch>=2.5; extra == "torch"``), which pip's resolver reads.
    """
    abi = "none" if python.startswith("py") else python
    filename = f"{name}-{version}-{python}-{abi}-{platform}.whl"
    dist_info = f"{name}-{version.split('+')[0]}.dist-info"
    files: dict[str, str] = {f"{name}/__init__.py": module or f"__version__ = {version!r}\n"}
    if name == "torch":
        files["torch/version.py"] = f"__version__ = '{version}'\ngit_version = '{git_version}'\n"
    files[f"{dist_info}/METADATA"] = "".join(
        line + "\n"
        for line in ("Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}", *metadata)
    )
    files[f"{dist_info}/WHEEL"] = (
        f"Wheel-Version: 1.0\nGenerator: fakes\nRoot-Is-Purelib: false\nTag: {python}-{abi}-{platform}\n"
    )
    record = []
    for path, text in files.items():
        digest = (
            base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        )
        record.append(f"{path},sha256={digest},{len(text.encode())}")
    record.append(f"{dist_info}/RECORD,,")
    files[f"{dist_info}/RECORD"] = "\n".join(record) + "\n"
    path = folder / filename
    with zipfile.ZipFile(path, "w") as archive:
        for member, text in files.items():
            archive.writestr(zipfile.ZipInfo(member, date_time=built.timetuple()[:6]), text)
    return path


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def make_index(root: Path, wheels: list[Path]) -> Path:
    """A PEP 503 simple index in ``root`` listing ``wheels`` with #sha256= fragments."""
    by_project: dict[str, list[Path]] = {}
    for wheel in wheels:
        by_project.setdefault(wheel.name.split("-")[0].replace("_", "-").lower(), []).append(wheel)
    for project, files in by_project.items():
        page = root / project
        page.mkdir(parents=True, exist_ok=True)
        links = "".join(
            f'<a href="{w.resolve().as_uri()}#sha256={sha256(w)}">{w.name}</a><br/>\n'
            for w in files
        )
        (page / "index.html").write_text(f"<!DOCTYPE html><html><body>\n{links}</body></html>\n")
    return root


def git(repo: Path, *args: str, date: str = "") -> str:
    """Run git in ``repo`` under a fixed identity (and commit date, when given); its stdout, stripped."""
    env = dict(
        os.environ,
        GIT_AUTHOR_NAME="t",
        GIT_AUTHOR_EMAIL="t@t.invalid",
        GIT_COMMITTER_NAME="t",
        GIT_COMMITTER_EMAIL="t@t.invalid",
    )
    if date:
        env.update(GIT_AUTHOR_DATE=date, GIT_COMMITTER_DATE=date)
    return subprocess.run(
        ["git", *args], cwd=repo, env=env, check=True, capture_output=True, text=True
    ).stdout.strip()


def timeline_repo(repo: Path) -> Path:
    """A new, empty timeline repository at ``repo`` whose first channel is release."""
    repo.mkdir()
    git(repo, "init", "-q", "-b", "release")
    return repo


def timeline_commit(
    repo: Path,
    torch_version: str,
    git_version: str,
    date: str,
    kind: str = "release",
    channel: str = "release",
    build_id: str = "",
) -> str:
    """Commit one build to a timeline repository as mpsbench.builds.timeline does (its build.json); the hash."""
    build_id = build_id or torch_version
    record = {
        "channel": channel,
        "id": build_id,
        "kind": kind,
        "torch_version": torch_version,
        "git_version": git_version,
        "date": date,
    }
    (repo / "build.json").write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    git(repo, "add", "build.json")
    git(
        repo,
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        f"torch {torch_version} ({channel}@{build_id})",
        date=date,
    )
    return git(repo, "rev-parse", "HEAD")


class Recorder:
    """Records the order of device calls made through stand-in functions."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def fn(self, name: str, result=None):
        def call(*args, **kwargs):
            self.calls.append(name)
            return result() if callable(result) else result

        return call


# what builds.wheels and builds.resolve say when the index cannot be reached
UNREACHABLE = ("cannot read the index page ", "pip cannot resolve ")


@contextlib.contextmanager
def skip_if_index_unreachable() -> Iterator[None]:
    """Skips the test where PyPI's index cannot be reached; any other UserError fails it."""
    try:
        yield
    except UserError as exc:
        if not str(exc).startswith(UNREACHABLE):
            raise
        pytest.skip(f"PyPI's index is unreachable: {exc}")
