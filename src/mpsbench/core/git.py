"""git in a named repository, never one the environment names."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

from mpsbench.core.errors import UserError

_REDIRECTS = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE")  # set by hooks: they redirect git


def run(
    repo: Path,
    *args: str,
    data: str | bytes | None = None,
    env: dict[str, str] | None = None,
    check: bool = True,
) -> subprocess.CompletedProcess[bytes]:
    clean = {key: value for key, value in os.environ.items() if key not in _REDIRECTS}
    done = subprocess.run(
        ["git", *args],
        cwd=repo,
        input=data.encode() if isinstance(data, str) else data,
        env={**clean, **(env or {})},
        capture_output=True,
    )
    if check and done.returncode != 0:
        raise UserError(f"git {' '.join(args[:2])} failed in {repo}: {said(done)}")
    return done


def text(repo: Path, *args: str, **options: Any) -> str:
    return run(repo, *args, **options).stdout.decode().strip()


def said(done: subprocess.CompletedProcess[bytes]) -> str:
    return "; ".join(
        line.strip() for line in done.stderr.decode(errors="replace").splitlines() if line.strip()
    )
