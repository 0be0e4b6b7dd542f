"""A platform's default timeline: each minor's last patch, under each Python with wheels."""

from __future__ import annotations

import shutil
import sys
from dataclasses import dataclass, replace

from packaging.version import Version

from mpsbench.builds import install_build, resolve, timeline, wheels
from mpsbench.builds import manifest as mf
from mpsbench.core.errors import UserError

CURRENT = f"{sys.version_info.major}.{sys.version_info.minor}"  # asv's own: always found


@dataclass(frozen=True)
class Scheduled:
    ref: str  # channel@id
    build: mf.Build
    pythons: tuple[str, ...]


def python_tag(python: str) -> str:
    return "cp" + python.replace(".", "")


def rule_for(manifest: mf.Manifest, candidates: list[str]) -> tuple[str, mf.Default]:
    if found := [platform for platform in candidates if platform in manifest.defaults]:
        return found[0], manifest.defaults[found[0]]
    raise UserError(
        f"no default timeline for {', '.join(candidates) or 'this platform'}; the manifest has one"
        f" for: {', '.join(sorted(manifest.defaults)) or 'none'}"
    )


def releases(manifest: mf.Manifest, platform: str, rule: mf.Default) -> list[tuple[str, mf.Build]]:
    """The last patch of each minor, oldest first."""
    since = Version(rule.since).release[:2] if rule.since is not None else ()
    newest: dict[tuple[int, ...], tuple[Version, str, mf.Build]] = {}
    for name in rule.channels:
        channel = manifest.channel(name)
        found = [
            (Version(build.torch_version), build)
            for build in (channel.builds if channel else ())
            if build.kind == "release"
            and build.pins.get(platform)
            and "" not in build.sets(platform)
        ]
        minors = sorted({version.release[:2] for version, _ in found})
        minors = minors[-rule.newest_of.get(name, len(minors)) :]
        for version, build in found:
            minor = version.release[:2]
            known = newest.get(minor)
            if minor in minors and minor >= since and (known is None or version > known[0]):
                newest[minor] = (version, f"{name}@{build.id}", build)
    ordered = [newest[minor][1:] for minor in sorted(newest)]
    return ordered[-rule.newest :] if rule.newest else ordered


def schedule(manifest: mf.Manifest, platform: str, here: str | None = None) -> list[Scheduled]:
    """``here``: the Python where the rule names none."""
    rule = manifest.defaults[platform]
    pythons = rule.pythons or (here or CURRENT,)
    return [
        Scheduled(ref, build, runs)
        for ref, build in releases(manifest, platform, rule)
        if (
            runs := tuple(
                python for python in pythons if python_tag(python) in build.sets(platform)
            )
        )
    ]


def this_machine(manifest: mf.Manifest) -> tuple[str, list[Scheduled], list[str]]:
    platform, _ = rule_for(manifest, install_build.platform_candidates())
    return platform, *runnable_here(schedule(manifest, platform), platform)


def runnable_here(planned: list[Scheduled], platform: str) -> tuple[list[Scheduled], list[str]]:
    """The runs this machine can make, and why not the others."""
    missing = sorted(
        (p for p in pythons(planned) if p != CURRENT and not shutil.which(f"python{p}")),
        key=Version,
    )
    kept: list[Scheduled] = []
    said = [
        f"skipping every build under Python {p}: python{p} is not on PATH, where asv looks for it"
        for p in missing
    ]
    for item in planned:
        runs = []
        for python in (p for p in item.pythons if p not in missing):
            pins = item.build.sets(platform)[python_tag(python)]
            major, minor = map(int, python.split("."))
            why = install_build.why_not_here([pin.filename for pin in pins], (major, minor))
            if why is None:
                runs.append(python)
            else:
                said.append(f"skipping {item.ref} under Python {python}: {why}")
        if runs:
            kept.append(replace(item, pythons=tuple(runs)))
    return kept, said


def pin_pythons(manifest: mf.Manifest) -> dict[str, tuple[str, ...]]:
    """A new build's Pythons per platform: its default's, else all tracked."""
    return {
        platform: tuple(map(python_tag, rule.pythons))
        if (rule := manifest.defaults.get(platform)) and rule.pythons
        else resolve.PYTHONS
        for platform in wheels.PLATFORMS
    }


def pythons(planned: list[Scheduled]) -> list[str]:
    return list(dict.fromkeys(python for item in planned for python in item.pythons))


def this_machine_is(platform: str) -> str:
    """``platform`` names the wheels, not the devices."""
    cuda_wheels = platform == "linux-x86_64-cuda"
    if platform.startswith("linux-x86_64") and install_build.nvidia_gpu():
        rows = "cuda" if cuda_wheels else "cpu"
        return f"linux-x86_64 with an NVIDIA GPU ({rows} rows; {platform} wheels)"
    if cuda_wheels:
        return (
            f"linux-x86_64 (no GPU: cpu rows; the {platform} wheels are what PyPI ships for Linux)"
        )
    return f"{platform} (mps and cpu rows)" if platform.startswith("macos") else platform


def listing(
    platform: str, planned: list[Scheduled], generated: timeline.Generated, here: bool = True
) -> str:
    named = this_machine_is(platform) if here else platform
    lines = [f"default timeline of {named}: {len(planned)} build{'' if len(planned) == 1 else 's'}"]
    lines += [
        f"  {generated.commits[item.ref][:12]}  {item.ref:<16} torch {item.build.torch_version:<10}"
        f" {item.build.date[:10]}  python {', '.join(item.pythons)}"
        for item in planned
    ]
    return "\n".join(lines)
