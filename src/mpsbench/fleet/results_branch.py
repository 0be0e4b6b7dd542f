"""The results branch: every machine's results and the fleet's manifest, kept in git beside the code.

The nightly workflow keeps what the fleet has measured on a branch of the
suite's own repository (``results`` by default) holding::

    builds/manifest.json      the fleet's builds: the repository's, plus every nightly added since
    results/benchmarks.json   asv's, the union of every machine's (mpsbench results merge)
    results/<machine>/...     one folder per machine, written only by merging that machine's results

:func:`fetch` copies the branch's files into a plain folder (no worktree, no
checkout: the suite's own checkout is not touched), :func:`push` commits
that folder on top of the fetched commit and pushes it. The push is a
fast-forward or nothing: if the branch moved meanwhile, it is refused and
the job fails rather than overwrite another job's commit.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

IDENTITY = {
    "GIT_AUTHOR_NAME": "mpsbench nightly", "GIT_AUTHOR_EMAIL": "nightly@mpsbench.invalid",
    "GIT_COMMITTER_NAME": "mpsbench nightly", "GIT_COMMITTER_EMAIL": "nightly@mpsbench.invalid",
}
README = """\
# mpsbench results

Written by the nightly workflow (.github/workflows/nightly.yml); see docs/fleet.md on the main branch.
`builds/manifest.json` is the fleet's manifest; `results/` is an asv results directory with one folder
per machine. Results are only ever added: `mpsbench results merge` never overwrites a file.
"""


class FleetError(RuntimeError):
    """A git operation on the results branch failed: the message says which and why."""


def _git(repo: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    full_env = {key: value for key, value in os.environ.items() if key not in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE")}
    full_env.update(env or {})
    return subprocess.run(["git", *args], cwd=repo, env=full_env, capture_output=True, check=False)


def _run(repo: Path, *args: str, env: dict[str, str] | None = None) -> str:
    done = _git(repo, *args, env=env)
    if done.returncode != 0:
        raise FleetError(f"git {' '.join(args[:2])} failed: {done.stderr.decode(errors='replace').strip()}")
    return done.stdout.decode().strip()


def tracking_ref(remote: str, branch: str) -> str:
    return f"refs/remotes/{remote}/{branch}"


def fetch(repo: Path, folder: Path, remote: str = "origin", branch: str = "results") -> str | None:
    """Replace ``folder`` with the files of ``remote``'s ``branch``; its commit, or None if it does not exist yet."""
    ref = tracking_ref(remote, branch)
    listed = _git(repo, "ls-remote", "--exit-code", "--heads", remote, branch)
    if listed.returncode == 2:  # no such branch: the first nightly creates it
        _git(repo, "update-ref", "-d", ref)
        commit = None
    elif listed.returncode != 0:
        raise FleetError(f"git ls-remote {remote} failed: {listed.stderr.decode(errors='replace').strip()}")
    else:
        _run(repo, "fetch", "--quiet", "--no-tags", "--depth=1", remote, f"+refs/heads/{branch}:{ref}")
        commit = _run(repo, "rev-parse", "--verify", ref)
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    if commit is not None:
        archive = _git(repo, "archive", "--format=tar", commit)
        if archive.returncode != 0:
            raise FleetError(f"git archive {commit[:12]} failed: {archive.stderr.decode(errors='replace').strip()}")
        with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
            if hasattr(tarfile, "data_filter"):  # Python 3.12 and the security releases before it
                tar.extractall(folder, filter="data")
            else:
                tar.extractall(folder)  # a git archive of our own branch
    return commit


def push(repo: Path, folder: Path, message: str, remote: str = "origin", branch: str = "results") -> str | None:
    """Commit ``folder`` on top of the fetched commit and push it; the new commit, or None if nothing changed."""
    ref = tracking_ref(remote, branch)
    parent = _git(repo, "rev-parse", "--verify", "--quiet", ref).stdout.decode().strip() or None
    if not (folder / "README.md").exists():
        (folder / "README.md").write_text(README)
    git_dir = _run(repo, "rev-parse", "--absolute-git-dir")
    with tempfile.TemporaryDirectory() as scratch:
        env = {"GIT_DIR": git_dir, "GIT_WORK_TREE": str(folder.resolve()), "GIT_INDEX_FILE": str(Path(scratch) / "index")}
        _run(folder, "add", "--all", "--force", ".", env=env)
        tree = _run(folder, "write-tree", env=env)
    if parent is not None and _run(repo, "rev-parse", f"{parent}^{{tree}}") == tree:
        return None
    commit = _run(repo, "commit-tree", tree, *(["-p", parent] if parent else []), "-m", message, env=IDENTITY)
    done = _git(repo, "push", "--quiet", remote, f"{commit}:refs/heads/{branch}")
    if done.returncode != 0:
        raise FleetError(
            f"pushing to {remote} {branch} was refused (it moved since it was fetched, or no permission): "
            f"{done.stderr.decode(errors='replace').strip()}"
        )
    _run(repo, "update-ref", ref, commit)
    return commit
