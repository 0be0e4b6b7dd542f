"""Adding builds to the manifest and timeline, and naming them."""

from __future__ import annotations

import contextlib
from pathlib import Path

from mpsbench.builds import manifest as mf
from mpsbench.builds import resolve, timeline
from mpsbench.core import asvconf, files
from mpsbench.core.errors import UserError

MANIFEST = Path("builds/manifest.json")
TIMELINE = Path(".asv/timeline")


def append(
    manifest_path: Path,
    timeline_repo: Path,
    channel: str,
    build: mf.Build,
    parent: str | None = None,
) -> None:
    """Adds ``build``, regenerating the timeline."""
    build, originals = resolve.in_store(build)
    with files.lock(manifest_path):
        updated = mf.append(mf.load(manifest_path), channel, build, parent=parent)
        timeline.check(updated, timeline_repo)  # before a byte is written
        copies = resolve.keep(originals)
        try:
            mf.save(updated, manifest_path)
        except BaseException:
            for copy in copies:
                copy.unlink(missing_ok=True)
                with contextlib.suppress(OSError):
                    copy.parent.rmdir()
            raise
        generated = timeline.generate(updated, timeline_repo)
    sync_branches(generated, timeline_repo, asvconf.load() if asvconf.CONFIG.is_file() else None)
    commit = generated.commits[f"{channel}@{build.id}"]
    print(
        f"added {channel}@{build.id}: torch {build.torch_version}, git {build.git_version[:12]},"
        f" {build.date}, platforms {', '.join(sorted(build.pins))}; timeline commit {commit[:12]}"
    )


def add_nightly(
    manifest_path: Path,
    timeline_repo: Path,
    channel: str,
    date: str,
    *,
    indexes: tuple[str, ...] = (),
    pythons: tuple[str, ...] = resolve.PYTHONS,
    transformers: str | None = None,
    transformers_index: str = resolve.PYPI,
    parent: str | None = None,
) -> None:
    """Adds the nightly of ``date`` or "latest"."""
    indexes = indexes or resolve.NIGHTLY_INDEXES
    manifest = mf.load(manifest_path)
    if date == "latest":
        manifest.check_new(channel, parent=parent)
        if not (dates := resolve.nightly_dates(indexes)):
            raise UserError(f"no torch nightly on {', '.join(indexes)}")
        date = dates[-1]
        existing = manifest.channel(channel)
        if existing and any(build.id == date for build in existing.builds):
            print(f"{channel}@{date} is already the newest nightly; nothing to add")
            return
    else:
        resolve.check_nightly_date(date)
    manifest.check_new(channel, date, parent)  # before minutes of resolving
    build = resolve.nightly(date, indexes, pythons, transformers, transformers_index)
    append(manifest_path, timeline_repo, channel, build, parent)


def sync_branches(generated: timeline.Generated, repo: Path, conf: asvconf.AsvConf | None) -> None:
    if conf is not None and conf.sync_branches(list(generated.branches), repo):
        print(f"{conf.path.name}: branches set to the channels {', '.join(generated.branches)}")


def resolve_ref(
    manifest: mf.Manifest, generated: timeline.Generated, ref: str
) -> tuple[str, mf.Build]:
    """From CHANNEL@ID, a tag or a timeline hash prefix."""
    if "@" in ref:
        return ref, manifest.find(ref)
    tagged = [name for name in generated.commits if manifest.find(name).tag == ref]
    matches = tagged or [
        name for name, commit in generated.commits.items() if commit.startswith(ref.lower())
    ]
    if len(matches) != 1:
        raise UserError(
            f"{ref!r} names {len(matches)} timeline commits; give CHANNEL@ID, a tag or a longer"
            " hash"
        )
    return matches[0], manifest.find(matches[0])


def upstream_range(manifest: mf.Manifest, generated: timeline.Generated, old: str, new: str) -> str:
    """The PyTorch commits between two builds, and their compare link."""
    ends = [resolve_ref(manifest, generated, ref) for ref in (old, new)]
    (old_name, old_build), (new_name, new_build) = ends
    if old_name == new_name or old_build.when() > new_build.when():
        raise UserError(
            f"{old!r} ({old_name}, {old_build.date}) is not older than {new!r} ({new_name},"
            f" {new_build.date}): give two builds, the older first"
        )
    link = timeline.pytorch_url(old_build.git_version, new_build.git_version)
    return (
        " -> ".join(
            f"{name} (torch {build.torch_version}, git {build.git_version[:12]})"
            for name, build in ends
        )
        + f": {link}"
    )
