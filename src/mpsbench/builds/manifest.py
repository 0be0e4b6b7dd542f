"""builds/manifest.json: append-only channels of builds, each pinned per platform (timeline.py makes asv's git of it).

A channel may fork from another's build (``parent``): a bisection or a developer's builds sit beside it without
changing any existing commit. :func:`save` validates first and replaces the file atomically.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from mpsbench.builds.wheels import PLATFORMS
from mpsbench.core import errors

SCHEMA = 1
KINDS = ("release", "nightly", "wheel-file", "wheel-url", "existing")
_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_DATE = "%Y-%m-%dT%H:%M:%SZ"


class ManifestError(errors.UserError):
    """A manifest, or a change to it, that is refused: the message says why."""


@dataclass(frozen=True)
class Pin:
    """One wheel, pinned by its file name and sha256; ``url`` says where to fetch it."""

    name: str
    version: str
    filename: str
    url: str
    sha256: str
    # The interpreter whose resolved set this wheel belongs to ("cp310"): a build
    # resolved by pip pins one complete set per platform and Python. Empty on
    # builds pinned before that (each wheel then serves the Pythons its tags name).
    python: str = ""


@dataclass(frozen=True)
class Build:
    """One PyTorch build: a commit of the timeline."""

    id: str  # unique within its channel: "2.14.1", "2026-11-20", "mybranch-1"
    torch_version: str  # as torch reports it: "2.14.1", "2.15.0.dev20261120"
    date: str  # UTC, "YYYY-MM-DDTHH:MM:SSZ": the commit's date on asv's axis
    git_version: str  # torch.version.git_version: the upstream commit
    kind: str  # one of KINDS
    pins: dict[str, list[Pin]]  # platform key -> the wheels to install there
    tag: str | None = None  # an annotated tag on the timeline (releases)
    note: str = ""
    # kind "existing": a torch already installed here, used in place (nothing is installed)
    site_packages: str | None = None
    # Environment variables set in every process of the build's asv environment
    # (through its .pth file): e.g. a calibration copy of a build that injects a slowdown.
    env: dict[str, str] = field(default_factory=dict)

    def when(self) -> datetime:
        """The build's date, timezone-aware in UTC (never the local zone: hashes depend on it)."""
        return datetime.strptime(self.date, _DATE).replace(tzinfo=timezone.utc)


@dataclass(frozen=True)
class Channel:
    name: str
    builds: tuple[Build, ...]
    parent: str | None = None  # "channel@id" this channel forks from; None: a root


@dataclass(frozen=True)
class Default:
    """Which builds a platform runs by default: its releases, by rule (defaults.py applies it)."""

    channels: tuple[str, ...]  # the channels whose releases it draws from, in order
    since: str | None = None  # the oldest minor release, e.g. "1.12"; None: from the first
    newest: int | None = None  # keep only this many newest releases; None: all
    # keep only this many of one channel's newest releases, e.g. {"release": 1}: the era's few and the newest
    newest_of: dict[str, int] = field(default_factory=dict)
    pythons: tuple[str, ...] = ()  # "3.10", "3.12": each build runs under each it has wheels for; (): asv's own


@dataclass(frozen=True)
class Manifest:
    channels: tuple[Channel, ...] = field(default_factory=tuple)
    defaults: dict[str, Default] = field(default_factory=dict)  # platform key -> its default timeline

    def channel(self, name: str) -> Channel | None:
        return next((channel for channel in self.channels if channel.name == name), None)

    def find(self, ref: str) -> Build:
        """The build named ``channel@id``, or a one-line error listing what exists."""
        channel_name, _, build_id = ref.partition("@")
        channel = self.channel(channel_name)
        if channel is None or not build_id:
            names = ", ".join(c.name for c in self.channels) or "none"
            raise ManifestError(f"no build {ref!r}: name one as CHANNEL@ID; channels: {names}")
        for build in channel.builds:
            if build.id == build_id:
                return build
        ids = ", ".join(build.id for build in channel.builds)
        raise ManifestError(f"no build {build_id!r} on channel {channel_name}; it has: {ids}")


def format_date(moment: datetime) -> str:
    return moment.strftime(_DATE)


# --- validation ----------------------------------------------------------------


def validate(manifest: Manifest) -> None:
    """Raise ManifestError naming the first problem found."""
    seen_channels: set[str] = set()
    tags: set[str] = set()
    for channel in manifest.channels:
        if not _NAME.match(channel.name) or channel.name in seen_channels:
            raise ManifestError(f"channel name {channel.name!r} is invalid or repeated")
        seen_channels.add(channel.name)
        previous: Build | None = None
        if channel.parent is not None:
            parent_channel = channel.parent.partition("@")[0]
            if parent_channel not in seen_channels or parent_channel == channel.name:
                raise ManifestError(f"channel {channel.name} forks from {channel.parent!r}, which no earlier channel holds")
            previous = manifest.find(channel.parent)
        ids: set[str] = set()
        for build in channel.builds:
            _validate_build(channel.name, build)
            if build.id in ids:
                raise ManifestError(f"channel {channel.name} has build {build.id!r} twice")
            ids.add(build.id)
            if previous is not None and build.when() < previous.when():
                raise ManifestError(
                    f"build {channel.name}@{build.id} dated {build.date} is older than {previous.date},"
                    f" the build before it; a channel only grows forward in time"
                )
            if build.tag is not None:
                if build.tag in tags:
                    raise ManifestError(f"tag {build.tag!r} is used twice")
                tags.add(build.tag)
            previous = build
    for platform, rule in manifest.defaults.items():
        where = f"the default timeline of {platform}"
        if platform not in PLATFORMS:
            raise ManifestError(f"{where}: unknown platform; choose one of: {', '.join(PLATFORMS)}")
        unknown = [name for name in rule.channels if name not in seen_channels]
        if not rule.channels or unknown:
            raise ManifestError(f"{where} names channels {unknown or '[]'}; the manifest has: {', '.join(sorted(seen_channels))}")
        if rule.newest is not None and rule.newest < 1:
            raise ManifestError(f"{where}: newest must be at least 1, got {rule.newest}")
        for name, count in rule.newest_of.items():
            if name not in rule.channels or not isinstance(count, int) or count < 1:
                raise ManifestError(f"{where}: newest_of needs one of its channels ({', '.join(rule.channels)})"
                                    f" and a count of at least 1, got {name!r}: {count!r}")
        bad = [python for python in rule.pythons if not re.fullmatch(r"3\.\d+", python)]
        if bad:
            raise ManifestError(f"{where}: pythons must look like 3.12, got {bad}")


def _validate_build(channel: str, build: Build) -> None:
    where = f"build {channel}@{build.id}"
    if not _NAME.match(build.id):
        raise ManifestError(f"{where}: id must be lower-case letters, digits, '.', '_' or '-'")
    if build.kind not in KINDS:
        raise ManifestError(f"{where}: unknown kind {build.kind!r}; choose one of: {', '.join(KINDS)}")
    try:
        build.when()
    except ValueError:
        raise ManifestError(f"{where}: date {build.date!r} is not YYYY-MM-DDTHH:MM:SSZ") from None
    if build.kind == "existing":
        if not build.site_packages or build.pins:
            raise ManifestError(f"{where}: an existing build names its site-packages folder and pins no wheels")
        return
    if not build.pins:
        raise ManifestError(f"{where}: pins no wheels for any platform")
    for platform, pins in build.pins.items():
        if platform not in PLATFORMS:
            raise ManifestError(f"{where}: unknown platform {platform!r}; choose one of: {', '.join(PLATFORMS)}")
        if not any(pin.name == "torch" for pin in pins):
            raise ManifestError(f"{where}: platform {platform} pins no torch wheel")
        for pin in pins:
            if not _SHA256.match(pin.sha256):
                raise ManifestError(f"{where}: {pin.filename} has no valid sha256")
            if not pin.filename.endswith(".whl") or not pin.url:
                raise ManifestError(f"{where}: {pin.filename!r} needs a wheel file name and a URL")


# --- reading and writing ---------------------------------------------------------


def _pin_from(data: dict[str, Any]) -> Pin:
    return Pin(**{key: str(data[key]) for key in ("name", "version", "filename", "url", "sha256")},
               python=str(data.get("python", "")))


def _default_from(data: dict[str, Any]) -> Default:
    return Default(
        channels=tuple(data["channels"]), since=data.get("since"), newest=data.get("newest"),
        newest_of=dict(data.get("newest_of", {})), pythons=tuple(data.get("pythons", ())),
    )


def _build_from(data: dict[str, Any]) -> Build:
    pins = {platform: [_pin_from(pin) for pin in wheels] for platform, wheels in data["pins"].items()}
    return Build(
        id=data["id"], torch_version=data["torch_version"], date=data["date"], git_version=data["git_version"],
        kind=data["kind"], pins=pins, tag=data.get("tag"), note=data.get("note", ""),
        site_packages=data.get("site_packages"), env=dict(data.get("env", {})),
    )


def from_json(data: dict[str, Any]) -> Manifest:
    if not isinstance(data, dict):  # e.g. [] : one line, not an AttributeError
        raise ManifestError(f"a manifest is a JSON object with \"schema\": {SCHEMA} and \"channels\", not {type(data).__name__}")
    if data.get("schema") != SCHEMA:
        raise ManifestError(f"manifest schema {data.get('schema')!r} is not {SCHEMA}")
    try:
        channels = tuple(
            Channel(c["name"], tuple(_build_from(b) for b in c["builds"]), c.get("parent"))
            for c in data["channels"]
        )
        defaults = {platform: _default_from(rule) for platform, rule in data.get("defaults", {}).items()}
    except KeyError as exc:
        raise ManifestError(f"manifest entry lacks a field: {exc}") from None
    except (TypeError, AttributeError) as exc:  # an entry that is not an object
        raise ManifestError(f"manifest entry is malformed: {exc}") from None
    manifest = Manifest(channels, defaults)
    validate(manifest)
    return manifest


def to_json(manifest: Manifest) -> dict[str, Any]:
    channels = [
        {"name": channel.name, **({"parent": channel.parent} if channel.parent is not None else {}),
         "builds": [build_to_json(build) for build in channel.builds]}
        for channel in manifest.channels
    ]
    data: dict[str, Any] = {"schema": SCHEMA, "channels": channels}
    if manifest.defaults:
        data["defaults"] = {
            platform: {key: value for key, value in asdict(rule).items() if value not in (None, (), {})}
            for platform, rule in manifest.defaults.items()
        }
    return data


def build_to_json(build: Build) -> dict[str, Any]:
    data = asdict(build)
    # Optional fields are left out when unset, so that adding a field never changes
    # the bytes (and so the timeline hashes) of builds that do not use it.
    for key in ("tag", "note", "site_packages", "env"):
        if not data[key]:
            del data[key]
    for pins in data["pins"].values():
        for pin in pins:
            if not pin["python"]:
                del pin["python"]
    return data


def dumps(data: Any) -> str:
    """Canonical JSON: the same data always gives the same bytes (timeline hashes rely on it)."""
    return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=True) + "\n"


def load(path: Path) -> Manifest:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return Manifest()
    except json.JSONDecodeError as exc:
        raise ManifestError(f"{path} is not valid JSON: {exc}") from None
    return from_json(data)


def save(manifest: Manifest, path: Path) -> None:
    """Validate, then replace ``path`` atomically."""
    validate(manifest)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".manifest-", suffix=".json")
    with os.fdopen(handle, "w") as out:
        out.write(dumps(to_json(manifest)))
    os.replace(temporary, path)


# --- changes -----------------------------------------------------------------------


def append(manifest: Manifest, channel_name: str, build: Build, parent: str | None = None) -> Manifest:
    """A new manifest with ``build`` at the end of ``channel_name``, created if new (forked from ``parent``, channel@id)."""
    if not _NAME.match(channel_name):
        raise ManifestError(f"channel name {channel_name!r} must be lower-case letters, digits, '.', '_' or '-'")
    existing = manifest.channel(channel_name)
    if existing is None:
        if parent is not None:
            manifest.find(parent)  # a clear error if it does not exist
        channels = (*manifest.channels, Channel(channel_name, (build,), parent))
    else:
        if parent is not None and parent != existing.parent:
            raise ManifestError(f"channel {channel_name} exists already; only a new channel takes --parent")
        if any(old.id == build.id for old in existing.builds):
            raise ManifestError(f"channel {channel_name} already has a build {build.id!r}")
        tip = existing.builds[-1]
        if build.when() < tip.when():
            raise ManifestError(
                f"build {build.id} dated {build.date} is older than {channel_name}'s tip {tip.id} ({tip.date});"
                f" add it on a bisection channel forked from the build before it (--parent)"
            )
        updated = replace(existing, builds=(*existing.builds, build))
        channels = tuple(updated if c.name == channel_name else c for c in manifest.channels)
    result = Manifest(channels, manifest.defaults)
    validate(result)
    return result
