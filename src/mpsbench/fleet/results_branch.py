"""The results branch: the fleet's manifest (builds/) and every machine's results (results/), kept in git.

:func:`fetch` copies the branch's files into a plain folder, never touching the suite's checkout;
:func:`push` commits that folder on top of the fetched commit, fast-forward or nothing: if the branch
moved meanwhile the job fails rather than overwrite another job's commit (docs/how-to/fleet.md).
"""

from __future__ import annotations

import io
import tarfile
import tempfile
from pathlib import Path

from mpsbench.core import files, git
from mpsbench.core.errors import UserError

IDENTITY = {
    "GIT_AUTHOR_NAME": "mpsbench nightly",
    "GIT_AUTHOR_EMAIL": "nightly@mpsbench.invalid",
    "GIT_COMMITTER_NAME": "mpsbench nightly",
    "GIT_COMMITTER_EMAIL": "nightly@mpsbench.invalid",
}
README = """\
# mpsbench results

Written by the nightly workflow (.github/workflows/nightly.yml); see docs/how-to/fleet.md on the main branch.
`builds/manifest.json` is the fleet's manifest; `results/` is an asv results directory with one folder
per machine. Results are only ever added: `mpsbench results merge` never overwrites a file.
"""


def fetch(repo: Path, folder: Path, remote: str = "origin", branch: str = "results") -> str | None:
    """Replace ``folder`` with the files of ``remote``'s ``branch``; its commit, or None if it does not exist yet."""
    ref = f"refs/remotes/{remote}/{branch}"
    listed = git.run(repo, "ls-remote", "--exit-code", "--heads", remote, branch, check=False)
    if listed.returncode == 2:  # no such branch: the first nightly creates it
        git.run(repo, "update-ref", "-d", ref, check=False)
        commit = None
    elif listed.returncode != 0:
        raise UserError(f"git ls-remote {remote} failed: {git.said(listed)}")
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
    # replaced whole: never the checkout it is fetched into, nor a folder holding it (--fleet . would be)
    files.check_owned(folder, [files.Kept("the repository", repo)], f"the fleet's folder {folder}")
    if folder.exists():
        files.remove(folder, [files.Kept("the repository", repo)])
    folder.mkdir(parents=True)
    if commit is not None:
        with tarfile.open(
            fileobj=io.BytesIO(git.run(repo, "archive", "--format=tar", commit).stdout)
        ) as tar:
            # the safe filter where Python has it (3.12, and the security releases before); else our own branch is trusted
            tar.extraction_filter = getattr(tarfile, "data_filter", None)
            tar.extractall(folder)
    return commit


def push(
    repo: Path, folder: Path, message: str, remote: str = "origin", branch: str = "results"
) -> str | None:
    """Commit ``folder`` on top of the fetched commit and push it; the new commit, or None if nothing changed."""
    ref = f"refs/remotes/{remote}/{branch}"
    parent = (
        git.run(repo, "rev-parse", "--verify", "--quiet", ref, check=False).stdout.decode().strip()
        or None
    )
    if not (folder / "README.md").exists():
        (folder / "README.md").write_text(README)
    git_dir = git.text(repo, "rev-parse", "--absolute-git-dir")
    with (
        tempfile.TemporaryDirectory() as scratch
    ):  # an index of its own: the suite's checkout is never touched
        env = {
            "GIT_DIR": git_dir,
            "GIT_WORK_TREE": str(folder.resolve()),
            "GIT_INDEX_FILE": str(Path(scratch) / "index"),
        }
        git.run(folder, "add", "--all", "--force", ".", env=env)
        tree = git.text(folder, "write-tree", env=env)
    if parent is not None and git.text(repo, "rev-parse", f"{parent}^{{tree}}") == tree:
        return None
    commit = git.text(
        repo, "commit-tree", tree, *(["-p", parent] if parent else []), "-m", message, env=IDENTITY
    )
    done = git.run(repo, "push", "--quiet", remote, f"{commit}:refs/heads/{branch}", check=False)
    if done.returncode != 0:
        raise UserError(
            f"pushing to {remote} {branch} was refused (it moved since it was fetched, or no permission): {git.said(done)}"
        )
    git.run(repo, "update-ref", ref, commit)
    return commit
