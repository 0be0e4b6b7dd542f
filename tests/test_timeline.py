"""The timeline repository: deterministic hashes, append-only history, upstream ranges."""

from __future__ import annotations

import dataclasses
import subprocess

import pytest
from tests.test_manifest import build

from mpsbench.builds import history, timeline
from mpsbench.builds import manifest as mf
from mpsbench.core import ranges
from mpsbench.core.errors import UserError


def _two_releases() -> mf.Manifest:
    first = mf.append(mf.Manifest(), "release", build("2.13.0", "2026-07-06T21:56:20Z", "v2.13.0"))
    return mf.append(first, "release", build("2.14.1", "2026-09-30T12:58:32Z", "v2.14.1"))


def git(repo, *args):
    return subprocess.run(
        ["git", *args], cwd=repo, capture_output=True, text=True, check=True
    ).stdout.strip()


def test_the_same_manifest_gives_the_same_hashes_in_any_repository(tmp_path):
    one = timeline.generate(_two_releases(), tmp_path / "a")
    two = timeline.generate(_two_releases(), tmp_path / "b")
    assert one == two
    assert git(tmp_path / "a", "rev-parse", "release") == one.branches["release"]


def test_appending_a_build_keeps_every_earlier_hash(tmp_path):
    before = timeline.generate(_two_releases(), tmp_path / "repo")
    grown = mf.append(
        _two_releases(), "release", build("2.15.0", "2026-11-01T00:00:00Z", "v2.15.0")
    )
    after = timeline.generate(grown, tmp_path / "repo")
    for name, commit in before.commits.items():
        assert after.commits[name] == commit
    assert git(tmp_path / "repo", "rev-parse", "release~1") == before.branches["release"]


def test_commits_carry_the_build_date_version_and_git_version(tmp_path):
    generated = timeline.generate(_two_releases(), tmp_path / "repo")
    commit = generated.commits["release@2.14.1"]
    assert git(tmp_path / "repo", "log", "-1", "--format=%ad|%cd", "--date=iso-strict", commit) == (
        "2026-09-30T12:58:32+00:00|2026-09-30T12:58:32+00:00"
    )
    message = git(tmp_path / "repo", "log", "-1", "--format=%B", commit)
    assert "torch_version: 2.14.1" in message and f"git_version: {'f' * 40}" in message
    assert git(tmp_path / "repo", "cat-file", "-t", "v2.14.1") == "tag"  # annotated
    assert git(tmp_path / "repo", "rev-parse", "v2.14.1^{commit}") == commit
    assert git(tmp_path / "repo", "ls-tree", "--name-only", commit).split() == [
        "README.md",
        "build.json",
    ]


def test_a_rewritten_channel_is_refused_unless_forced(tmp_path):
    timeline.generate(_two_releases(), tmp_path / "repo")
    rewritten = mf.append(
        mf.Manifest(), "release", build("2.14.1", "2026-09-30T12:58:32Z", "v2.14.1")
    )
    with pytest.raises(
        UserError,
        match="the manifest rewrote that channel, and moving it would orphan its old builds' results",
    ):
        timeline.generate(rewritten, tmp_path / "repo")
    timeline.generate(rewritten, tmp_path / "repo", force=True)


def test_a_bisection_channel_forks_from_the_good_build(tmp_path):
    manifest = mf.append(
        _two_releases(), "bisect", build("2.14.0", "2026-08-01T00:00:00Z"), parent="release@2.13.0"
    )
    generated = timeline.generate(manifest, tmp_path / "repo")
    assert git(tmp_path / "repo", "rev-parse", "bisect~1") == generated.commits["release@2.13.0"]
    assert (
        generated.commits["release@2.14.1"]
        == timeline.generate(_two_releases(), tmp_path / "b").commits["release@2.14.1"]
    )


def test_upstream_range_links_the_two_git_versions(tmp_path):
    old = dataclasses.replace(
        build("2.13.0", "2026-07-06T21:56:20Z", "v2.13.0"), git_version="a" * 40
    )
    manifest = mf.append(
        mf.append(mf.Manifest(), "release", old), "release", build("2.14.1", "2026-09-30T12:58:32Z")
    )
    generated = timeline.generate(manifest, tmp_path / "repo")
    line = history.upstream_range(
        manifest, generated, generated.commits["release@2.13.0"][:10], "release@2.14.1"
    )
    assert line.endswith(f"https://github.com/pytorch/pytorch/compare/{'a' * 40}...{'f' * 40}")
    assert line.startswith("release@2.13.0 (torch 2.13.0")


def test_upstream_range_of_two_builds_of_one_commit_links_that_commit(tmp_path):
    # the site's rule too (timeline.pytorch_url): an empty compare range is that commit's own page
    manifest = _two_releases()
    generated = timeline.generate(manifest, tmp_path / "repo")
    line = history.upstream_range(manifest, generated, "release@2.13.0", "release@2.14.1")
    assert line.endswith(f"https://github.com/pytorch/pytorch/commit/{'f' * 40}")


def test_a_range_naming_no_timeline_commit_is_refused_in_one_line(tmp_path):
    generated = timeline.generate(_two_releases(), tmp_path / "repo")
    old, new = generated.commits["release@2.13.0"], generated.commits["release@2.14.1"]
    # A -b regex may contain "..": option values are never taken for the range.
    # asv's own parser finds the range: -j takes an optional count, so "-j 4 ALL" and "-j 2 release" are valid.
    (tmp_path / "builds.txt").write_text(f"{new}\n")
    for good in (
        ["-b", r"benchmark_models\..*", f"{old}..{new}"],
        [f"{new}^!"],
        ["release"],
        ["-j", "4", "ALL"],
        ["-j", "2", "release"],
        ["-E", "virtualenv:3.11", f"HASHFILE:{tmp_path / 'builds.txt'}"],
        ["'release'"],
    ):
        assert timeline.bad_range(tmp_path / "repo", good) is None, good
    reason = timeline.bad_range(tmp_path / "repo", ["-b", "Training", "^..deadbeef"])
    assert reason is not None
    assert "'^..deadbeef'" in reason and "v2.14.1" in reason and "\n" not in reason
    assert "'nope'" in (
        timeline.bad_range(tmp_path / "repo", ["-j", "4", "nope"]) or ""
    )  # the range after -j N is checked


def test_check_range_and_a_record_run_read_a_range_alike(tmp_path):
    """One reading (core/ranges.py): what `timeline check-range` lets pass, `results record` runs, and the reverse."""
    generated = timeline.generate(_two_releases(), tmp_path / "repo")
    old, new = generated.commits["release@2.13.0"], generated.commits["release@2.14.1"]
    assert ranges.builds(tmp_path / "repo", ["release"], f"'{old}..{new}'") == [
        new
    ]  # shell words, as asv splits them
    for word in (
        "NEW",
        "EXISTING",
        "TAGS",
        "HEAD",
    ):  # asv's words that pick no named build: refused by both
        reason = timeline.bad_range(tmp_path / "repo", ["--quick", word])
        assert (
            reason
            == f"range {word!r} is not supported here: use ALL, HASHFILE:path, or timeline hashes from 'mpsbench"
            " build list' (HASH^! or OLD..NEW), channels and tags (release, v2.13.0, v2.14.1)"
        )
        with pytest.raises(UserError) as refused:
            ranges.builds(tmp_path / "repo", ["release"], word)
        assert str(refused.value) == reason
    for bad in (f"{new}..{old}", "nope", "'unclosed"):
        with pytest.raises(UserError) as refused:
            ranges.builds(tmp_path / "repo", ["release"], bad)
        assert str(refused.value) == timeline.bad_range(tmp_path / "repo", [bad])
    with pytest.raises(UserError, match=r"not CHANNEL@ID: 'mpsbench build list' gives each hash"):
        ranges.builds(
            tmp_path / "repo", ["release"], "release@2.14.1^!"
        )  # how the other commands name a build


def test_a_channel_removed_from_the_manifest_loses_its_branch_on_generate(tmp_path):
    manifest = mf.append(
        _two_releases(), "bisect", build("2.14.0", "2026-08-01T00:00:00Z"), parent="release@2.13.0"
    )
    timeline.generate(manifest, tmp_path / "repo")
    assert git(tmp_path / "repo", "branch", "--format=%(refname:short)").split() == [
        "bisect",
        "release",
    ]
    generated = timeline.generate(
        _two_releases(), tmp_path / "repo"
    )  # the bisection is done: channel removed
    assert git(tmp_path / "repo", "branch", "--format=%(refname:short)").split() == ["release"]
    assert git(tmp_path / "repo", "rev-parse", "release") == generated.branches["release"]
    assert git(tmp_path / "repo", "symbolic-ref", "HEAD") == "refs/heads/release"


def test_the_summary_counts_one_build_as_one_build(tmp_path):
    manifest = mf.append(
        _two_releases(), "bisect", build("2.14.0", "2026-08-01T00:00:00Z"), parent="release@2.13.0"
    )
    lines = timeline.summary(
        manifest, timeline.generate(manifest, tmp_path / "repo"), tmp_path / "repo"
    ).splitlines()
    assert [line.split(", tip")[0] for line in lines[:2]] == [
        "release: 2 builds",
        "bisect: 1 build",
    ]
