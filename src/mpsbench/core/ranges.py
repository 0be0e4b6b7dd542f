"""The timeline builds an ``asv run`` range names."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path

from mpsbench.core import git
from mpsbench.core.errors import UserError

REFUSED = ("NEW", "EXISTING", "TAGS", "HEAD")  # meaningless to a record run's scratch folder
HASHFILE = "HASHFILE:"


def _choices(timeline: Path) -> str:
    names = git.text(
        timeline, "for-each-ref", "--format=%(refname:short)", "refs/heads/", "refs/tags/"
    ).split()
    return (
        "use ALL, HASHFILE:path, or timeline hashes from 'mpsbench build list' (HASH^! or"
        f" OLD..NEW), channels and tags ({', '.join(names) or 'none yet'})"
    )


def _listed(timeline: Path, what: str, *args: str) -> list[str]:
    done = git.run(timeline, *args, check=False)
    if done.returncode == 0:
        return done.stdout.decode().split()
    said = git.said(done) or "git failed"
    if "@" in what:  # CHANNEL@ID is no git revision
        root = (
            "; name builds by timeline hash or tag, not CHANNEL@ID: 'mpsbench build list' gives"
            " each hash"
        )
    elif "^" in what:  # a channel's first build has no parent
        root = "; a channel's first build has no '^': name the channel for all its builds"
    else:
        root = ""
    raise UserError(
        f"{what} names no build of the timeline {timeline} ({said}{root}): {_choices(timeline)}"
    )


def builds(timeline: Path, branches: Sequence[str], spec: str | None) -> list[str]:
    """The timeline commits ``spec`` names, in asv's order."""
    what, git_range = f"range {spec!r}", False
    if spec in REFUSED:
        raise UserError(f"{what} is not supported here: {_choices(timeline)}")
    if spec is None or spec.startswith(HASHFILE):
        what = "the config's branches" if spec is None else what
        names = branches if spec is None else Path(spec.removeprefix(HASHFILE)).read_text().split()
        queries = [["rev-parse", "--verify", f"{name}^{{commit}}"] for name in names]
    elif spec == "ALL":
        queries = [["rev-list", "--first-parent", branch] for branch in branches]
    else:
        try:
            words = shlex.split(spec)  # as asv does
        except ValueError as exc:
            raise UserError(
                f"{what} cannot be read as asv reads it ({exc}): {_choices(timeline)}"
            ) from None
        what, git_range = f"build {what}", True
        queries = [["rev-list", "--first-parent", *words, "--"]]
    found = [commit for query in queries for commit in _listed(timeline, what, *query)]
    if not found:  # asv would run nothing and say little
        why = "is it reversed? asv ranges are OLD..NEW" if git_range else _choices(timeline)
        raise UserError(f"{what} names no build of the timeline {timeline}: {why}")
    return list(dict.fromkeys(found))
