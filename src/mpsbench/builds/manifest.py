"""builds/manifest.json: append-only channels of builds, each pinned per platform."""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Annotated, Any

from packaging.utils import canonicalize_name, parse_wheel_filename
from packaging.version import Version
from pydantic import BeforeValidator, ConfigDict, TypeAdapter, ValidationError

from mpsbench.builds.install_build import allowed_url, plain_wheel_name
from mpsbench.builds.wheels import PLATFORMS
from mpsbench.core import files
from mpsbench.core.errors import UserError

SCHEMA = 1
KINDS = ("release", "nightly", "wheel-file", "wheel-url", "existing")
_NAME = "[a-z0-9][a-z0-9._-]*"
_DATE = "%Y-%m-%dT%H:%M:%SZ"
MAX_NAME = 100  # ref file, ".lock" and results folder names fit 255 bytes
EPOCH = datetime(1970, 1, 2, tzinfo=timezone.utc)  # git dates are seconds since 1970
FUTURE = timedelta(days=1)  # clock and time-zone slack


def _passes(test: Callable[[Any], object], value: Any) -> bool:
    try:
        return bool(test(value))
    except (ValueError, TypeError):
        return False


def _form(expected: str, test: Callable[[Any], object] | str) -> BeforeValidator:
    passes = functools.partial(re.fullmatch, test) if isinstance(test, str) else test

    def check(value: Any) -> Any:
        if not _passes(passes, value):
            raise ValueError(f"expected {expected}")
        return value

    return BeforeValidator(check)


def ref_safe(value: object, pattern: str = _NAME) -> bool:
    """Whether ``value`` matches ``pattern`` and is a one-level git ref name."""
    return (
        isinstance(value, str)
        and re.fullmatch(pattern, value) is not None
        and len(value) <= MAX_NAME
        and ".." not in value
        and not value.endswith((".", ".lock"))
    )


_REF_RULE = f"at most {MAX_NAME} characters, no '..', not ending in '.' or '.lock'"
NAME_RULE = (
    f"lower-case letters, digits, '.', '_' or '-', starting with a letter or digit, {_REF_RULE}"
)
Name = Annotated[str, _form(f"{NAME_RULE} (e.g. release, 2.14.1)", ref_safe)]
Platform = Annotated[str, _form(f"a platform: {', '.join(PLATFORMS)}", PLATFORMS.__contains__)]
WheelFile = Annotated[
    str, _form("a plain wheel file name NAME-VERSION-PY-ABI-PLATFORM.whl", plain_wheel_name)
]
Url = Annotated[str, _form("an https:// or file:// URL", allowed_url)]
Sha256 = Annotated[str, _form("64 lower-case hex digits", r"[0-9a-f]{64}")]
PythonTag = Annotated[str, _form("a CPython tag such as cp312, or empty", r"(cp3\d+)?")]
PinName = Annotated[
    str, _form("a wheel's package name, e.g. typing_extensions", r"[a-z0-9][a-z0-9_]*")
]
PepVersion = Annotated[str, _form("a PEP 440 version, e.g. 2.14.1 or 2.15.0.dev20261120", Version)]
Word = Annotated[str, _form("a word without spaces", r"\S+")]
Date = Annotated[
    str,
    _form("a UTC date YYYY-MM-DDTHH:MM:SSZ from 1970-01-02", lambda v: parse_date(v) >= EPOCH),
]
GitVersion = Annotated[
    str, _form("torch's git commit (hex digits) or Unknown", r"[0-9a-fA-F]+|Unknown")
]
Kind = Annotated[str, _form(f"one of: {', '.join(KINDS)}", KINDS.__contains__)]
Tag = Annotated[
    str,
    _form(
        f"a git tag: letters, digits, '.', '_' or '-', {_REF_RULE} (e.g. v2.14.1)",
        functools.partial(ref_safe, pattern=r"[A-Za-z0-9][A-Za-z0-9._-]*"),
    ),
]
Ref = Annotated[str, _form("a build as CHANNEL@ID", f"{_NAME}@{_NAME}")]
EnvName = Annotated[str, _form("an environment variable name", r"[A-Za-z_][A-Za-z0-9_]*")]
Minor = Annotated[str, _form("a minor release such as 1.12", r"\d+\.\d+")]
Python = Annotated[str, _form("a Python version such as 3.12", r"3\.\d+")]
Count = Annotated[int, _form("a whole number of at least 1", lambda v: type(v) is int and v >= 1)]
_CONFIG = ConfigDict(extra="forbid", revalidate_instances="always")


@dataclass(frozen=True)
class Pin:
    __pydantic_config__ = _CONFIG
    name: PinName
    version: PepVersion
    filename: WheelFile
    url: Url
    sha256: Sha256
    python: PythonTag = ""  # "": an old set, which the installer refuses


@dataclass(frozen=True)
class Build:
    """One PyTorch build: a commit of the timeline."""

    __pydantic_config__ = _CONFIG
    id: Name
    torch_version: Word
    date: Date
    git_version: GitVersion
    kind: Kind
    pins: dict[Platform, list[Pin]]
    tag: Tag | None = None
    note: str = ""
    site_packages: str | None = None  # kind "existing": a torch used in place
    env: dict[EnvName, str] = field(default_factory=dict)

    def when(self) -> datetime:
        return parse_date(self.date)

    def sets(self, platform: str) -> dict[str, list[Pin]]:
        found: dict[str, list[Pin]] = {}
        for pin in self.pins.get(platform, []):
            found.setdefault(pin.python, []).append(pin)
        return found


@dataclass(frozen=True)
class Channel:
    __pydantic_config__ = _CONFIG
    name: Name
    builds: tuple[Build, ...]
    parent: Ref | None = None


@dataclass(frozen=True)
class Default:
    """A platform's default releases (defaults.py applies it)."""

    __pydantic_config__ = _CONFIG
    channels: tuple[Name, ...]
    since: Minor | None = None
    newest: Count | None = None
    newest_of: dict[Name, Count] = field(default_factory=dict)
    pythons: tuple[Python, ...] = ()  # (): asv's own


@dataclass(frozen=True)
class Manifest:
    __pydantic_config__ = _CONFIG
    channels: tuple[Channel, ...] = ()
    defaults: dict[Platform, Default] = field(default_factory=dict)

    def channel(self, name: str) -> Channel | None:
        return next((channel for channel in self.channels if channel.name == name), None)

    def check_new(self, name: str, build_id: str | None = None, parent: str | None = None) -> None:
        """Refuse what :func:`append` would, before any download."""
        check_name("channel name", name)
        existing = self.channel(name)
        if build_id is not None:
            check_name("build id", build_id)
            if existing and any(old.id == build_id for old in existing.builds):
                raise UserError(f"channel {name} already has a build {build_id!r}")
        if parent is not None:
            if existing and parent != existing.parent:
                raise UserError(f"channel {name} exists already; only a new channel takes --parent")
            self.find(parent)

    def find(self, ref: str) -> Build:
        name, _, build_id = ref.partition("@")
        channel = self.channel(name)
        if channel is None or not build_id:
            names = ", ".join(c.name for c in self.channels) or "none"
            raise UserError(f"no build {ref!r}: name one as CHANNEL@ID; channels: {names}")
        if found := [build for build in channel.builds if build.id == build_id]:
            return found[0]
        ids = ", ".join(build.id for build in channel.builds)
        raise UserError(f"no build {build_id!r} on channel {name}; it has: {ids}")


def format_date(moment: datetime) -> str:
    return moment.strftime(_DATE)


def parse_date(value: str) -> datetime:
    return datetime.strptime(value, _DATE).replace(tzinfo=timezone.utc)


def refuse_future(date: str, what: str) -> None:
    """Refuse a ``date`` over a day ahead: as a tip it would refuse every real build."""
    latest = datetime.now(timezone.utc) + FUTURE
    if parse_date(date) > latest:
        raise UserError(
            f"{what} {date} is in the future; a build is dated at most a day ahead"
            f" (until {format_date(latest)})"
        )


@functools.cache
def _adapter(kind: type[Any]) -> TypeAdapter[Any]:
    return TypeAdapter(kind)


def _where(loc: list[int | str], data: Any) -> str:
    head = ""
    names: list[Any] = []
    for key, named in (("channels", "name"), ("builds", "id")):
        if loc[:1] != [key] or len(loc) < 2:
            break
        data, index, loc = data[key][loc[1]], loc[1], loc[2:]
        names.append(data.get(named) if isinstance(data, dict) else None)
        if all(isinstance(name, str) for name in names):
            head = f"{'build' if len(names) > 1 else 'channel'} {'@'.join(names)}"
        else:
            head = f"{head}.{key}[{index}]".lstrip(".")
    path = "".join(
        f"[{step}]" if isinstance(step, int) else " (the key)" if step == "[key]" else f".{step}"
        for step in loc
    ).lstrip(".")
    return f"{head}: {path}" if head and path else head or path or "the manifest"


def _problem(exc: ValidationError, data: Any) -> str:
    error = exc.errors(include_url=False)[0]
    where = _where(list(error["loc"]), data)
    if error["type"] == "missing":
        return f"{where} is missing"
    if error["type"] in ("unexpected_keyword_argument", "extra_forbidden"):
        return f"{where} is not a field of the manifest (misspelt?)"
    said = error["msg"].removeprefix("Value error, ").replace("Input should be ", "expected ", 1)
    return f"{where} = {_shown(error['input'])}: {said}"


def _shown(value: Any) -> str:
    shown = repr(value)
    return shown if len(shown) <= 80 else shown[:77] + "..."


def _check_rules(manifest: Manifest) -> None:
    seen: set[str] = set()
    tags: set[str] = set()
    for channel in manifest.channels:
        if channel.name in seen:
            raise UserError(f"channel {channel.name} is there twice")
        previous = None
        if channel.parent is not None:
            if channel.parent.partition("@")[0] not in seen:
                raise UserError(
                    f"channel {channel.name} forks from {channel.parent!r}, which no earlier"
                    " channel holds"
                )
            previous = manifest.find(channel.parent)
        seen.add(channel.name)
        ids: set[str] = set()
        for build in channel.builds:
            _check_build(channel.name, build)
            if build.id in ids:
                raise UserError(f"channel {channel.name} has build {build.id!r} twice")
            if previous is not None and build.when() < previous.when():
                raise UserError(
                    f"build {channel.name}@{build.id} dated {build.date} is older than"
                    f" {previous.id} ({previous.date}), the build before it; add it on a"
                    " bisection channel forked from an earlier build (--parent)"
                )
            if build.tag is not None and build.tag in tags:
                raise UserError(f"tag {build.tag!r} is used twice")
            ids.add(build.id)
            tags.add(build.tag or "")
            previous = build
    for platform, rule in manifest.defaults.items():
        where = f"the default timeline of {platform}"
        unknown = [name for name in rule.channels if name not in seen]
        if not rule.channels or unknown:
            raise UserError(
                f"{where} names channels {unknown or '[]'}; the manifest has:"
                f" {', '.join(sorted(seen))}"
            )
        if stray := [name for name in rule.newest_of if name not in rule.channels]:
            raise UserError(
                f"{where}: newest_of names {stray[0]!r}, not one of its channels"
                f" ({', '.join(rule.channels)})"
            )


def _check_build(channel: str, build: Build) -> None:
    where = f"build {channel}@{build.id}"
    if build.kind == "existing":
        if not build.site_packages or build.pins:
            raise UserError(
                f"{where}: an existing build names its site-packages folder and pins no wheels"
            )
        return
    if not build.pins:
        raise UserError(f"{where}: pins no wheels for any platform")
    if build.kind == "release" and not _passes(Version, build.torch_version):
        raise UserError(
            f"{where}: torch_version = {build.torch_version!r}: a release needs a PEP 440 version"
        )
    for platform, pins in build.pins.items():
        for pin in pins:
            name, version, _, _ = parse_wheel_filename(pin.filename)
            if (name, version) != (canonicalize_name(pin.name), Version(pin.version)):
                raise UserError(
                    f"{where}: {pin.filename} is not {pin.name} {pin.version}, as its pin says"
                )
        sets = build.sets(platform)
        if "" in sets and len(sets) > 1:
            raise UserError(f"{where}: {platform} mixes per-Python sets with a set of none")
        for python, pins in sets.items():
            names = [pin.name for pin in pins]
            twice = sorted({name for name in names if names.count(name) > 1}) if python else []
            if "torch" not in names or twice:  # a set by tags: one per Python
                raise UserError(
                    f"{where}: the {platform} set {python or '(by tags)'} needs one torch wheel and"
                    f" one wheel per package{'; twice: ' + ', '.join(twice) if twice else ''}"
                )


def from_json(data: Any, source: str = "manifest") -> Manifest:
    """A manifest from its JSON form, checked whole."""
    if not isinstance(data, dict):
        raise UserError(
            f'{source}: a manifest is a JSON object with "schema": {SCHEMA} and "channels",'
            f" not {type(data).__name__}"
        )
    body = dict(data)
    if type(schema := body.pop("schema", None)) is not int or schema != SCHEMA:
        raise UserError(f"{source}: schema = {schema!r}: expected {SCHEMA}")
    try:
        manifest: Manifest = _adapter(Manifest).validate_python(body)
        _check_rules(manifest)
    except ValidationError as exc:
        raise UserError(f"{source}: {_problem(exc, body)}") from None
    except UserError as exc:
        raise UserError(f"{source}: {exc}") from None
    return manifest


def validate(manifest: Manifest) -> None:
    from_json(to_json(manifest))


# defaults left out: a new field never changes old records' bytes (and timeline hashes)
def to_json(manifest: Manifest) -> dict[str, Any]:
    dumped = _adapter(Manifest).dump_python(manifest, mode="json", exclude_defaults=True)
    return {"schema": SCHEMA, "channels": [], **dumped}


def build_to_json(build: Build) -> dict[str, Any]:
    return _adapter(Build).dump_python(build, mode="json", exclude_defaults=True)  # type: ignore[no-any-return]


def dumps(data: Any) -> str:
    """Canonical JSON: the same data always gives the same bytes (timeline hashes rely on it)."""
    return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=True) + "\n"


def load(path: Path, missing_ok: bool = False) -> Manifest:
    """The manifest at ``path``; missing: refused (a mistyped --manifest would empty the timeline)."""
    try:
        data = json.loads(path.read_bytes())
    except FileNotFoundError:
        if missing_ok:
            return Manifest()
        raise UserError(
            f"no manifest {path} (the project's is builds/manifest.json); to start a new one, write"
            f' {{"schema": {SCHEMA}, "channels": []}} to it'
        ) from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UserError(f"{path} is not valid JSON: {exc}") from None
    except OSError as exc:
        raise UserError(f"cannot read the manifest {path}: {exc.strerror}") from None
    return from_json(data, str(path))


def save(manifest: Manifest, path: Path) -> None:
    validate(manifest)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with files.lock(path):
            files.write(path, dumps(to_json(manifest)))
    except OSError as exc:
        raise UserError(
            f"cannot write the manifest {exc.filename or path}: {exc.strerror}; nothing was changed"
        ) from None


def check_name(what: str, value: str) -> None:
    if not ref_safe(value):
        raise UserError(f"{what} {_shown(value)}: expected {NAME_RULE}")


def append(manifest: Manifest, name: str, build: Build, parent: str | None = None) -> Manifest:
    """A new manifest with ``build`` appended to channel ``name`` (new: forked from ``parent``)."""
    manifest.check_new(name, build.id, parent)
    channels = tuple(
        replace(c, builds=(*c.builds, build)) if c.name == name else c for c in manifest.channels
    )
    if manifest.channel(name) is None:
        channels += (Channel(name, (build,), parent),)
    result = Manifest(channels, manifest.defaults)
    validate(result)  # before the date is parsed
    refuse_future(build.date, f"build {name}@{build.id} dated")
    return result
