"""The manifest: validation, atomic saves, and append-only channels."""

from __future__ import annotations

import json

import pytest

from mpsbench.builds import manifest as mf

SHA = "a" * 64


def build(build_id: str, date: str, tag: str | None = None) -> mf.Build:
    pin = mf.Pin("torch", build_id, f"torch-{build_id}-cp311-cp311-manylinux_2_28_x86_64.whl", "https://x/t.whl", SHA)
    return mf.Build(build_id, build_id, date, "f" * 40, "release", {"linux-x86_64-cuda": [pin]}, tag=tag)


def test_round_trip_through_json_is_lossless():
    manifest = mf.append(mf.append(mf.Manifest(), "release", build("2.13.0", "2026-07-06T00:00:00Z", "v2.13.0")),
                         "release", build("2.14.1", "2026-09-30T00:00:00Z", "v2.14.1"))
    assert mf.from_json(json.loads(mf.dumps(mf.to_json(manifest)))) == manifest


def test_a_build_older_than_the_channel_tip_is_refused():
    manifest = mf.append(mf.Manifest(), "nightly", build("2026-11-20", "2026-11-20T00:00:00Z"))
    with pytest.raises(mf.ManifestError, match=r"older than nightly's tip 2026-11-20 .* bisection channel"):
        mf.append(manifest, "nightly", build("2026-11-10", "2026-11-10T00:00:00Z"))


def test_a_repeated_build_id_is_refused():
    manifest = mf.append(mf.Manifest(), "release", build("2.14.1", "2026-09-30T00:00:00Z"))
    with pytest.raises(mf.ManifestError, match=r"already has a build '2\.14\.1'"):
        mf.append(manifest, "release", build("2.14.1", "2026-10-30T00:00:00Z"))


def test_a_fork_needs_an_existing_parent_and_starts_after_it():
    manifest = mf.append(mf.Manifest(), "nightly", build("2026-11-01", "2026-11-01T00:00:00Z"))
    with pytest.raises(mf.ManifestError, match="no build 'nightly-x@1'"):
        mf.append(manifest, "bisect", build("2026-11-02", "2026-11-02T00:00:00Z"), parent="nightly-x@1")
    with pytest.raises(mf.ManifestError, match="older than 2026-11-01T00:00:00Z"):
        mf.append(manifest, "bisect", build("2026-10-02", "2026-10-02T00:00:00Z"), parent="nightly@2026-11-01")
    forked = mf.append(manifest, "bisect", build("2026-11-02", "2026-11-02T00:00:00Z"), parent="nightly@2026-11-01")
    assert forked.channel("bisect").parent == "nightly@2026-11-01"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda b: mf.Build(**{**vars(b), "pins": {"windows": b.pins["linux-x86_64-cuda"]}}), "unknown platform 'windows'"),
        (lambda b: mf.Build(**{**vars(b), "date": "2026-13-40"}), "is not YYYY-MM-DDTHH:MM:SSZ"),
        (lambda b: mf.Build(**{**vars(b), "kind": "beta"}), "unknown kind 'beta'; choose one of: release, nightly"),
        (lambda b: mf.Build(**{**vars(b), "pins": {}}), "pins no wheels"),
    ],
)
def test_invalid_builds_are_refused_by_name(change, message):
    with pytest.raises(mf.ManifestError, match=message):
        mf.append(mf.Manifest(), "release", change(build("2.14.1", "2026-09-30T00:00:00Z")))


def test_save_is_atomic_and_validates_first(tmp_path):
    path = tmp_path / "manifest.json"
    good = mf.append(mf.Manifest(), "release", build("2.14.1", "2026-09-30T00:00:00Z"))
    mf.save(good, path)
    before = path.read_bytes()
    bad = mf.Manifest((mf.Channel("release", (build("2.14.1", "2026-09-30T00:00:00Z"),) * 2),))
    with pytest.raises(mf.ManifestError):
        mf.save(bad, path)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["manifest.json"]
    assert mf.load(path) == good


def test_the_shipped_manifest_is_valid():
    from pathlib import Path

    shipped = mf.load(Path(__file__).resolve().parents[1] / "builds" / "manifest.json")
    releases = shipped.channel("release")
    assert releases is not None and [b.id for b in releases.builds] == ["2.13.0", "2.14.1", "2.15.0"]
