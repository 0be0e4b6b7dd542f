"""Each build's record and PyTorch commit, read back from the timeline repository asv walks.

Read from each timeline commit's ``build.json``, not from builds/manifest.json: a recorded run (scripts/publish-recorded,
the fleet's results branch) keeps the timeline it was measured against, which today's manifest may not name.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

from mpsbench.regressions import factor
from mpsbench.site.document import Cell, Link

UPSTREAM = "https://github.com/pytorch/pytorch"
RELEASE_URL = f"{UPSTREAM}/releases/tag/v{{version}}"


class Timeline:
    """The timeline repository (None: not known here, and every build reads as unknown)."""

    def __init__(self, repo: Path | None) -> None:
        bare = repo is not None and (repo / "HEAD").is_file() and (repo / "objects").is_dir()
        self.repo = repo if repo is not None and ((repo / ".git").exists() or bare) else None
        self._builds: dict[str, dict[str, Any]] = {}

    def _git(self, *args: str) -> str:
        if self.repo is None:
            return ""
        done = subprocess.run(["git", "-C", str(self.repo), *args], capture_output=True, text=True, check=False)
        return done.stdout if done.returncode == 0 else ""

    def build(self, commit: str) -> dict[str, Any]:
        """The commit's build.json (channel, id, kind, torch_version, git_version...); empty if it has none."""
        if commit not in self._builds:
            try:
                self._builds[commit] = json.loads(self._git("show", f"{commit}:build.json") or "{}")
            except ValueError:
                self._builds[commit] = {}
        return self._builds[commit]

    def git_version(self, commit: str) -> str | None:
        """The PyTorch commit the build was made from; None where unknown (a local build's "Unknown")."""
        version = str(self.build(commit).get("git_version", ""))
        return version if re.fullmatch(r"[0-9a-fA-F]{7,40}", version) else None

    def parent(self, commit: str) -> str | None:
        return self._git("rev-parse", "--verify", "--quiet", f"{commit}^").strip() or None

    def label(self, commit: str) -> str:
        """The short hash and the build, as the timeline's commit subject names it."""
        build = self.build(commit)
        if not build:
            return commit[:8]
        return f"{commit[:8]} torch {build.get('torch_version')} ({build.get('channel')}@{build.get('id')})"

    def link(self, commit: str) -> str:
        """The build's PyTorch release page; a nightly or local build: its upstream commit ("" if unknown)."""
        build = self.build(commit)
        if build.get("kind") == "release":
            return RELEASE_URL.format(version=build["torch_version"])
        git_version = self.git_version(commit)
        return f"{UPSTREAM}/commit/{git_version}" if git_version else ""

    def pytorch_range(self, old: str | None, new: str) -> Cell:
        """The PyTorch commits between two builds, as a compare link."""
        old_version = self.git_version(old) if old else None
        new_version = self.git_version(new)
        if not (old_version and new_version):
            return "git_version unknown"
        same = old_version == new_version  # two builds of one upstream commit: nothing to compare
        text = f"{new_version[:12]} (both builds)" if same else f"{old_version[:12]}...{new_version[:12]}"
        return Link(text, pytorch_url(old_version, new_version))


def pytorch_url(old_version: str | None, new_version: str) -> str:
    """PyTorch's page for a build: the compare range from ``old_version``'s commit, or its own commit alone."""
    if old_version and old_version != new_version:
        return f"{UPSTREAM}/compare/{old_version}...{new_version}"
    return f"{UPSTREAM}/commit/{new_version}"


def timeline_from_config(config: Path | None) -> Timeline:
    """The repository named by asv.conf.json's ``repo``, resolved from the config's folder."""
    if config is None or not config.is_file():
        return Timeline(None)
    repo = factor.read_config(config).get("repo")
    if not isinstance(repo, str) or "://" in repo:
        return Timeline(None)
    return Timeline((config.parent / repo).resolve())
