"""The results branch to and from a plain folder, never through the suite's checkout."""

from __future__ import annotations

import io
import tarfile
import tempfile
from pathlib import Path

from mpsbench.core import files, git
from mpsbench.core.errors import UserError

NAME, EMAIL = "mpsbench nightly", "nightly@mpsbench.invalid"
IDENTITY = {
    "GIT_AUTHOR_NAME": NAME,
    "GIT_AUTHOR_EMAIL": EMAIL,
    "GIT_COMMITTER_NAME": NAME,
    "GIT_COMMITTER_EMAIL": EMAIL,
}
README = """\
# mpsbench results

Written by the nightly workflow (docs/how-to/fleet.md on the main branch): `builds/manifest.json` is the
fleet's manifest, `results/` an asv results directory with a folder per machine. Results are only ever
added: `mpsbench results merge` never overwrites a file.
"""


def fetch(repo: Path, folder: Path, remote: str = "origin", branch: str = "results") -> str | None:
    """Replace ``folder`` with ``remote``'s ``branch``; its commit, None if none yet."""
    ref = f"refs/remotes/{remote}/{branch}"
    listed = git.run(repo, "ls-remote", "--exit-code", "--heads", remote, branch, check=False)
    if listed.returncode not in (0, 2):  # 2: no such branch, which the first nightly creates
        raise UserError(f"git ls-remote {remote} failed: {git.said(listed)}")
    commit = None
    if listed.returncode:
        git.run(repo, "update-ref", "-d", ref, check=False)
    else:
        git.run(
            repo,
            "fetch",
            "--quiet",
            "--no-tags",
            "--depth=1",
            remote,
            f"+refs/heads/{branch}:{ref}",
        )
        commit = git.text(repo, "rev-parse", "--verify", ref)
    # replaced whole: never the checkout, nor a folder holding it (--fleet . would be)
    kept = [files.Kept("the repository", repo)]
    files.check_owned(folder, kept, f"the fleet's folder {folder}")
    files.remove(folder, kept)
    folder.mkdir(parents=True)
    if commit is not None:
        archive = git.run(repo, "archive", "--format=tar", commit).stdout
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            # the safe filter where Python has it
            tar.extraction_filter = getattr(tarfile, "data_filter", None)
            tar.extractall(folder)
    return commit


def push(
    repo: Path, folder: Path, message: str, remote: str = "origin", branch: str = "results"
) -> str | None:
    """Commit ``folder`` on the fetched commit and push it; the commit, None if unchanged."""
    ref = f"refs/remotes/{remote}/{branch}"
    parent = git.text(repo, "rev-parse", "--verify", "--quiet", ref, check=False)
    if not (readme := folder / "README.md").exists():
        readme.write_text(README)
    # an index of its own: the checkout's is untouched
    with tempfile.TemporaryDirectory() as scratch:
        env = {
            "GIT_DIR": git.text(repo, "rev-parse", "--absolute-git-dir"),
            "GIT_WORK_TREE": str(folder.resolve()),
            "GIT_INDEX_FILE": str(Path(scratch) / "index"),
        }
        git.run(folder, "add", "--all", "--force", ".", env=env)
        tree = git.text(folder, "write-tree", env=env)
    if parent and git.text(repo, "rev-parse", f"{parent}^{{tree}}") == tree:
        return None
    parents = ["-p", parent] if parent else []
    commit = git.text(repo, "commit-tree", tree, *parents, "-m", message, env=IDENTITY)
    done = git.run(repo, "push", "--quiet", remote, f"{commit}:refs/heads/{branch}", check=False)
    if done.returncode:
        raise UserError(
            f"pushing to {remote} {branch} was refused (moved since fetched, or no permission):"
            f" {git.said(done)}"
        )
    git.run(repo, "update-ref", ref, commit)
    return commit
