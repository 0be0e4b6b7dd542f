"""A platform's default timeline: which builds ``scripts/bench`` runs there, and under which Pythons.

The manifest's ``defaults`` rule: the last patch of each minor release of some channels (``since``, ``newest``,
``newest_of``). No one Python has wheels for the whole era, so each build runs under every rule Python it has
wheels for: the overlap runs under both, and the seam shows on the site.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from packaging.version import Version

from mpsbench.builds import manifest as mf
from mpsbench.builds import resolve, timeline, wheels


@dataclass(frozen=True)
class Scheduled:
    ref: str  # channel@id
    build: mf.Build
    pythons: tuple[str, ...]  # "3.10", "3.12": the interpreters it runs under by default


def python_tag(python: str) -> str:
    """ "3.10" -> "cp310" """
    return "cp" + python.replace(".", "")


def rule_for(manifest: mf.Manifest, candidates: list[str]) -> tuple[str, mf.Default]:
    """The first of this machine's platforms (best first) that the manifest gives a default."""
    for platform in candidates:
        if platform in manifest.defaults:
            return platform, manifest.defaults[platform]
    raise mf.ManifestError(
        f"no default timeline for {', '.join(candidates) or 'this platform'}; the manifest has one for:"
        f" {', '.join(sorted(manifest.defaults)) or 'none'}"
    )


def releases(manifest: mf.Manifest, platform: str, rule: mf.Default) -> list[tuple[str, mf.Build]]:
    """The rule's releases on ``platform``: the last patch of each minor, oldest first."""
    since = Version(rule.since).release[:2] if rule.since is not None else ()
    newest_of_minor: dict[tuple[int, ...], tuple[Version, str, mf.Build]] = {}
    for name in rule.channels:
        channel = manifest.channel(name)
        found = sorted(((Version(build.torch_version), build) for build in (channel.builds if channel else ())
                        if build.kind == "release" and platform in build.pins), key=lambda pair: pair[0])
        minors = sorted({version.release[:2] for version, _ in found})
        if name in rule.newest_of:  # e.g. only the newest release beside the era's few (Linux: disk)
            minors = minors[-rule.newest_of[name]:]
        for version, build in found:
            minor = version.release[:2]
            if minor in minors and minor >= since and (minor not in newest_of_minor or version > newest_of_minor[minor][0]):
                newest_of_minor[minor] = (version, f"{name}@{build.id}", build)
    ordered = [newest_of_minor[minor] for minor in sorted(newest_of_minor)]
    if rule.newest is not None:
        ordered = ordered[-rule.newest:]
    return [(ref, build) for _, ref, build in ordered]


def schedule(manifest: mf.Manifest, platform: str, here: str | None = None) -> list[Scheduled]:
    """Each default build of ``platform`` with the Pythons it runs under (``here``: the rule names none)."""
    rule = manifest.defaults[platform]
    pythons = rule.pythons or (here or f"{sys.version_info.major}.{sys.version_info.minor}",)
    planned = []
    for ref, build in releases(manifest, platform, rule):
        tags = {pin.python or wheels.parse_wheel_name(pin.filename).python for pin in build.pins[platform] if pin.name == "torch"}
        runs = tuple(python for python in pythons if python_tag(python) in tags)
        if runs:
            planned.append(Scheduled(ref, build, runs))
    return planned


def pin_pythons(manifest: mf.Manifest) -> dict[str, tuple[str, ...]]:
    """The interpreters a new build is pinned for, per platform: its default's, else every one we track."""
    return {
        platform: tuple(python_tag(p) for p in manifest.defaults[platform].pythons)
        if platform in manifest.defaults and manifest.defaults[platform].pythons else resolve.PYTHONS
        for platform in wheels.PLATFORMS
    }


def pythons(planned: list[Scheduled]) -> list[str]:
    """The Pythons a schedule runs, each once, in order: one asv run each."""
    return list(dict.fromkeys(python for item in planned for python in item.pythons))


def listing(platform: str, planned: list[Scheduled], generated: timeline.Generated) -> str:
    """The default timeline of ``platform`` as ``mpsbench timeline default`` prints it."""
    lines = [f"default timeline of {platform}: {len(planned)} builds"]
    lines += [f"  {generated.commits[item.ref][:12]}  {item.ref:<16} torch {item.build.torch_version:<10}"
              f" {item.build.date[:10]}  python {', '.join(item.pythons)}" for item in planned]
    return "\n".join(lines)
