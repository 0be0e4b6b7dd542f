"""git, run in a named repository, never one the environment points at."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from mpsbench.core.errors import UserError

_REDIRECTS = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE")


def run(
    repo: Path,
    *args: str,
    data: str | bytes | None = None,
    env: dict[str, str] | None = None,
    check: bool = True,
) -> subprocess.CompletedProcess[bytes]:
    # set by git hooks: they would redirect the command to another repository
    clean = {key: value for key, value in os.environ.items() if key not in _REDIRECTS}
    stdin = data.encode() if isinstance(data, str) else data
    done = subprocess.run(
        ["git", *args],
        cwd=repo,
        input=stdin,
        env={**clean, **(env or {})},
        capture_output=True,
        check=False,
    )
    if check and done.returncode != 0:
        raise UserError(f"git {' '.join(args[:2])} failed in {repo}: {said(done)}")
    return done


def text(repo: Path, *args: str, data: str | None = None, env: dict[str, str] | None = None) -> str:
    return run(repo, *args, data=data, env=env).stdout.decode().strip()


def said(done: subprocess.CompletedProcess[bytes]) -> str:
    return "; ".join(
        line.strip() for line in done.stderr.decode(errors="replace").splitlines() if line.strip()
    )
