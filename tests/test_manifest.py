"""The manifest: its schema checked where it enters, atomic saves, append-only channels, the shipped file's bytes."""

from __future__ import annotations

import copy
import errno
import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from packaging import tags, utils

from mpsbench import cli
from mpsbench.builds import defaults, install_build, timeline
from mpsbench.builds import manifest as mf
from mpsbench.core import files
from mpsbench.core.errors import UserError

SHA = "a" * 64
SHIPPED = Path(__file__).resolve().parents[1] / "builds" / "manifest.json"


def build(build_id: str, date: str, tag: str | None = None) -> mf.Build:
    version = f"2.15.0.dev{build_id.replace('-', '')}" if build_id.startswith("20") else build_id
    pin = mf.Pin(
        "torch",
        version,
        f"torch-{version}-cp311-cp311-manylinux_2_28_x86_64.whl",
        "https://x/t.whl",
        SHA,
        python="cp311",
    )
    return mf.Build(
        build_id, version, date, "f" * 40, "release", {"linux-x86_64-cuda": [pin]}, tag=tag
    )


def test_round_trip_through_json_is_lossless():
    manifest = mf.append(
        mf.append(mf.Manifest(), "release", build("2.13.0", "2026-07-06T00:00:00Z", "v2.13.0")),
        "release",
        build("2.14.1", "2026-09-30T00:00:00Z", "v2.14.1"),
    )
    assert mf.from_json(json.loads(mf.dumps(mf.to_json(manifest)))) == manifest


def test_a_build_older_than_the_channel_tip_is_refused():
    manifest = mf.append(mf.Manifest(), "nightly", build("2026-11-20", "2026-11-20T00:00:00Z"))
    with pytest.raises(
        UserError,
        match=r"older than 2026-11-20 \(2026-11-20T00:00:00Z\), the build before it; add it on a bisection channel",
    ):
        mf.append(manifest, "nightly", build("2026-11-10", "2026-11-10T00:00:00Z"))


def test_a_repeated_build_id_is_refused():
    manifest = mf.append(mf.Manifest(), "release", build("2.14.1", "2026-09-30T00:00:00Z"))
    with pytest.raises(UserError, match=r"already has a build '2\.14\.1'"):
        mf.append(manifest, "release", build("2.14.1", "2026-10-30T00:00:00Z"))


def test_a_fork_needs_an_existing_parent_and_starts_after_it():
    manifest = mf.append(mf.Manifest(), "nightly", build("2026-11-01", "2026-11-01T00:00:00Z"))
    with pytest.raises(UserError, match="no build 'nightly-x@1'"):
        mf.append(
            manifest, "bisect", build("2026-11-02", "2026-11-02T00:00:00Z"), parent="nightly-x@1"
        )
    with pytest.raises(UserError, match=r"older than 2026-11-01 \(2026-11-01T00:00:00Z\)"):
        mf.append(
            manifest,
            "bisect",
            build("2026-10-02", "2026-10-02T00:00:00Z"),
            parent="nightly@2026-11-01",
        )
    forked = mf.append(
        manifest, "bisect", build("2026-11-02", "2026-11-02T00:00:00Z"), parent="nightly@2026-11-01"
    )
    assert forked.channel("bisect").parent == "nightly@2026-11-01"


def test_a_build_made_in_code_is_checked_as_a_file_would_be():
    bad = build(
        "2.14.1", "yesterday"
    )  # e.g. add-existing --date yesterday: one line, not a ValueError
    with pytest.raises(
        UserError, match=r"build release@2\.14\.1: date = 'yesterday': expected a UTC date"
    ):
        mf.append(mf.Manifest(), "release", bad)
    tip = mf.append(mf.Manifest(), "release", build("2.14.0", "2026-09-01T00:00:00Z"))
    with pytest.raises(UserError, match=r"date = 'yesterday'"):
        mf.append(tip, "release", bad)  # compared with the tip's date only once it is a date
    with pytest.raises(UserError, match=r"channel name 12: expected lower-case"):
        mf.append(mf.Manifest(), 12, build("2.14.1", "2026-09-30T00:00:00Z"))  # type: ignore[arg-type]


# --- a bad manifest file: one line naming the field, the value and what is expected; nothing written ---------

Edit = Callable[[dict[str, Any]], Any]


def _build(data: dict[str, Any], channel: int = 0, index: int = 0) -> dict[str, Any]:
    found: dict[str, Any] = data["channels"][channel]["builds"][index]
    return found


def _pin(data: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = _build(data)["pins"]["macos-arm64"][0]
    return found


BAD_MANIFESTS: list[tuple[str, Edit, str]] = [
    # seen by a new user (issue 34): each was a traceback, or accepted
    (
        "channel-name-a-number",
        lambda d: d["channels"][0].update(name=12),
        r"channels\[0\]: name = 12: expected lower-case letters, digits",
    ),
    (
        "build-date-a-number",
        lambda d: _build(d).update(date=20260706),
        r"build release@2\.13\.0: date = 20260706: expected a UTC date YYYY-MM-DDTHH:MM:SSZ",
    ),
    (
        "defaults-newest-a-string",
        lambda d: d["defaults"]["linux-x86_64-cuda"].update(newest="3"),
        r"defaults\.linux-x86_64-cuda\.newest = '3': expected a whole number of at least 1",
    ),
    (
        "defaults-newest-of-a-string",
        lambda d: d["defaults"]["linux-x86_64-cuda"]["newest_of"].update(release="1"),
        r"newest_of\.release = '1': expected a whole number",
    ),
    (
        "site-packages-a-list",
        lambda d: _build(d).update(site_packages=["/x"]),
        r"build release@2\.13\.0: site_packages = \['/x'\]: expected a valid string",
    ),
    (
        "pin-filename-climbs-out",
        lambda d: _pin(d).update(filename="../../../x-1-py3-none-any.whl"),
        r"pins\.macos-arm64\[0\]\.filename = '\.\./\.\./\.\./x-1-py3-none-any\.whl': expected a plain wheel file name",
    ),
    (
        "pin-url-plain-http",
        lambda d: _pin(d).update(url="http://example.org/" + _pin(d)["filename"]),
        r"pins\.macos-arm64\[0\]\.url = 'http://example\.org/.*': expected an https:// or file:// URL",
    ),
    # the form of every other field
    (
        "unknown-kind",
        lambda d: _build(d).update(kind="beta"),
        r"kind = 'beta': expected one of: release, nightly, wheel-file, wheel-url, existing",
    ),
    (
        "unknown-platform",
        lambda d: _build(d)["pins"].update(windows=[]),
        r"pins\.windows \(the key\) = 'windows': expected a platform: macos-arm64, linux-x86_64-cpu, linux-x86_64-cuda",
    ),
    (
        "misspelt-field",
        lambda d: _build(d).update(site_package="/x"),
        r"site_package is not a field of the manifest",
    ),
    (
        "missing-field",
        lambda d: _build(d).pop("git_version"),
        r"build release@2\.13\.0: git_version is missing",
    ),
    ("schema-a-string", lambda d: d.update(schema="1"), r"schema = '1': expected 1"),
    (
        "sha256-short",
        lambda d: _pin(d).update(sha256="abc"),
        r"sha256 = 'abc': expected 64 lower-case hex digits",
    ),
    (
        "pin-of-another-file",
        lambda d: _pin(d).update(version="9.9"),
        r"is not torch 9\.9, as its pin says",
    ),
    (
        "env-name",
        lambda d: _build(d).update(env={"A B": "1"}),
        r"env\.A B \(the key\) = 'A B': expected an environment",
    ),
    (
        "channel-not-an-object",
        lambda d: d["channels"].__setitem__(0, "release"),
        r"channels\[0\] = 'release': expected",
    ),
    (
        "channel-twice",
        lambda d: d["channels"].append(copy.deepcopy(d["channels"][0])),
        r"channel release is there twice",
    ),
    (
        "build-twice",
        lambda d: d["channels"][0]["builds"].append(copy.deepcopy(_build(d))),
        r"channel release has build '2\.13\.0' twice",
    ),
    (
        "tag-twice",
        lambda d: _build(d, 0, 1).update(tag="v2.13.0"),
        r"tag 'v2\.13\.0' is used twice",
    ),
    (
        "back-in-time",
        lambda d: _build(d).update(date="2030-01-01T00:00:00Z"),
        r"build release@2\.14\.1 dated .* is older than \S+ \(2030-01-01T00:00:00Z\)",
    ),
    (
        "parent-unknown",
        lambda d: d["channels"].append({"name": "x", "parent": "nope@1", "builds": []}),
        r"channel x forks from 'nope@1', which no earlier channel holds",
    ),
    (
        "parent-malformed",
        lambda d: d["channels"][1].update(parent="release"),
        r"parent = 'release': expected a build as CHANNEL@ID",
    ),
    (
        "release-version",
        lambda d: _build(d).update(torch_version="latest"),
        r"torch_version = 'latest': a release needs a PEP 440 version",
    ),
    (
        "set-with-two-torches",
        lambda d: _build(d, 1, 0)["pins"]["macos-arm64"].append(
            {**next(p for p in _build(d, 1, 0)["pins"]["macos-arm64"] if p["name"] == "torch")}
        ),
        r"the macos-arm64 set cp310 needs one torch wheel and one wheel per package; twice: torch",
    ),
    (
        "existing-with-pins",
        lambda d: _build(d).update(kind="existing", site_packages="/x"),
        r"an existing build names its site-packages folder and pins no wheels",
    ),
    (
        "default-newest-zero",
        lambda d: d["defaults"]["linux-x86_64-cuda"].update(newest=0),
        r"newest = 0: expected a whole",
    ),
    (
        "default-python-tag",
        lambda d: d["defaults"]["macos-arm64"].update(pythons=["cp310"]),
        r"pythons\[0\] = 'cp310': expected a Python version such as 3\.12",
    ),
    (
        "default-unknown-channel",
        lambda d: d["defaults"]["macos-arm64"].update(channels=["nope"]),
        r"the default timeline of macos-arm64 names channels \['nope'\]",
    ),
    (
        "default-newest-of-elsewhere",
        lambda d: d["defaults"]["macos-arm64"].update(newest_of={"x": 1}),
        r"newest_of names 'x', not one of its channels \(era, release\)",
    ),
]


@pytest.mark.parametrize(
    ("edit", "said"), [case[1:] for case in BAD_MANIFESTS], ids=[case[0] for case in BAD_MANIFESTS]
)
def test_a_bad_manifest_is_one_line_naming_field_value_and_choices(tmp_path, capsys, edit, said):
    data = json.loads(SHIPPED.read_text())
    edit(data)
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps(data))
    before = path.read_bytes()
    assert (
        cli.main(
            ["build", "list", "--manifest", str(path), "--timeline", str(tmp_path / "timeline")]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith(f"mpsbench: error: {path}: "), err
    assert re.search(said, err), err
    assert path.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == [
        "manifest.json"
    ]


def test_save_is_atomic_and_validates_first(tmp_path):
    path = tmp_path / "manifest.json"
    good = mf.append(mf.Manifest(), "release", build("2.14.1", "2026-09-30T00:00:00Z"))
    mf.save(good, path)
    before = path.read_bytes()
    bad = mf.Manifest((mf.Channel("release", (build("2.14.1", "2026-09-30T00:00:00Z"),) * 2),))
    with pytest.raises(UserError):
        mf.save(bad, path)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["manifest.json"]
    assert mf.load(path) == good


def test_a_full_disk_while_saving_is_one_line_and_leaves_the_manifest_as_it_was(
    tmp_path, monkeypatch
):
    path = tmp_path / "manifest.json"
    mf.save(mf.append(mf.Manifest(), "release", build("2.14.1", "2026-09-30T00:00:00Z")), path)
    before = path.read_bytes()

    def full(source: str, target: str) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), target)

    monkeypatch.setattr(
        files.os, "replace", full
    )  # the manifest is written as every file is: core.files.write
    with pytest.raises(
        UserError,
        match=rf"cannot write the manifest {path}: No space left on device; nothing",
    ):
        mf.save(mf.append(mf.load(path), "release", build("2.15.0", "2026-10-30T00:00:00Z")), path)
    assert path.read_bytes() == before and [p.name for p in tmp_path.iterdir()] == ["manifest.json"]


# --- the shipped manifest ------------------------------------------------------------------------------------

SHIPPED_MANIFEST = mf.load(SHIPPED)
# Pinned before builds were resolved per Python (torch, torchvision, transformers and no more). Kept as they are:
# their timeline commits, and so the results recorded for them, hash these bytes. The installer refuses them; the
# macOS default runs their complete re-pins on the era channel.
PINNED_BEFORE_SETS = {"release@2.13.0", "release@2.14.1"}


def test_the_schema_keeps_every_shipped_byte_and_so_every_timeline_hash():
    assert mf.dumps(mf.to_json(SHIPPED_MANIFEST)) == SHIPPED.read_text()
    raw = json.loads(SHIPPED.read_text())
    for channel, raw_channel in zip(SHIPPED_MANIFEST.channels, raw["channels"], strict=True):
        for parsed, as_written in zip(channel.builds, raw_channel["builds"], strict=True):
            assert timeline.build_record(channel.name, parsed) == mf.dumps(
                {"channel": channel.name, **as_written}
            )


def test_every_shipped_set_is_resolved_whole_and_every_wheel_fits_its_set():
    """Each (build, platform, Python) holds one wheel per package, torch among them, each a plain wheel name at an
    https URL whose tags admit that Python and platform; only the builds pinned before sets hold none (and those
    are never scheduled). Whether pip needs more than a set holds is asked of pip itself: tools/check_pins.py."""
    legacy = set()
    for channel in SHIPPED_MANIFEST.channels:
        for build_ in channel.builds:
            ref = f"{channel.name}@{build_.id}"
            for platform in build_.pins:
                sets = build_.sets(platform)
                if "" in sets:
                    legacy.add(ref)
                    continue
                for python, pins in sets.items():
                    names = [pin.name for pin in pins]
                    assert names.count("torch") == 1 and len(names) == len(set(names)), (
                        ref,
                        platform,
                        python,
                    )
                    version = (3, int(python[3:]))
                    runs = {
                        (tag.interpreter, tag.abi)
                        for tag in (*tags.cpython_tags(version), *tags.compatible_tags(version))
                    }
                    for pin in pins:
                        assert install_build.plain_wheel_name(pin.filename) and pin.url.startswith(
                            "https://"
                        ), pin
                        found = utils.parse_wheel_filename(pin.filename)[3]
                        assert any((tag.interpreter, tag.abi) in runs for tag in found), (
                            ref,
                            python,
                            pin.filename,
                        )
                        os_word = "macosx" if platform == "macos-arm64" else "linux"
                        assert all(
                            tag.platform == "any" or os_word in tag.platform for tag in found
                        ), (ref, pin.filename)
    assert legacy == PINNED_BEFORE_SETS
    for platform in SHIPPED_MANIFEST.defaults:
        assert (
            not {item.ref for item in defaults.schedule(SHIPPED_MANIFEST, platform, here="3.11")}
            & legacy
        )
