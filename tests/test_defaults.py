"""Per-platform default timelines and the Python split, from the manifest alone (offline)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from packaging.version import Version

from mpsbench import cli
from mpsbench.builds import defaults, install_build, resolve, timeline, wheels
from mpsbench.builds import manifest as mf
from mpsbench.core.errors import UserError

SHIPPED = Path(__file__).resolve().parents[1] / "builds" / "manifest.json"


def pin(name: str, version: str, python: str, platform: str = "macosx_14_0_arm64") -> mf.Pin:
    filename = f"{name}-{version}-{python}-{python}-{platform}.whl"
    return mf.Pin(
        name, version, filename, f"https://example.org/{filename}", "ab" * 32, python=python
    )


def release(version: str, date: str, pythons: tuple[str, ...]) -> mf.Build:
    pins = {"macos-arm64": [pin("torch", version, python) for python in pythons]}
    return mf.Build(version, version, date, "0" * 40, "release", pins, tag=f"v{version}")


def made_up() -> mf.Manifest:
    era = mf.Channel(
        "era",
        (
            release("1.11.0", "2022-03-10T00:00:00Z", ("cp310",)),
            release("1.12.0", "2022-06-28T00:00:00Z", ("cp310",)),
            release("1.12.1", "2022-08-05T00:00:00Z", ("cp310",)),
            release("2.2.2", "2024-03-27T00:00:00Z", ("cp310", "cp312")),
        ),
    )
    newer = mf.Channel(
        "release",
        (
            release("2.14.1", "2026-09-30T00:00:00Z", ("cp312",)),
            release("2.15.0", "2026-11-01T00:00:00Z", ("cp312",)),
        ),
    )
    rule = mf.Default(("era", "release"), since="1.12", pythons=("3.10", "3.12"))
    short = mf.Default(("era", "release"), newest=2)
    spread = mf.Default(("era", "release"), since="1.12", newest_of={"release": 1})
    return mf.Manifest(
        (era, newer), {"macos-arm64": rule, "linux-x86_64-cuda": short, "linux-x86_64-cpu": spread}
    )


def test_last_patch_of_each_minor_since_the_first_named_with_every_python_it_has():
    planned = defaults.schedule(made_up(), "macos-arm64")
    assert [(item.ref, item.pythons) for item in planned] == [
        ("era@1.12.1", ("3.10",)),  # 1.11.0 is before "since"; 1.12.0 has a later patch
        ("era@2.2.2", ("3.10", "3.12")),  # the overlap: measured under both, the seam shows
        ("release@2.14.1", ("3.12",)),
        ("release@2.15.0", ("3.12",)),
    ]


def test_newest_keeps_the_last_few_and_no_pythons_means_asvs_own():
    manifest = made_up()
    rule = manifest.defaults["linux-x86_64-cuda"]
    linux = mf.Manifest(manifest.channels, {"macos-arm64": rule})
    planned = defaults.schedule(linux, "macos-arm64", here="3.12")
    assert [(item.ref, item.pythons) for item in planned] == [
        ("release@2.14.1", ("3.12",)),
        ("release@2.15.0", ("3.12",)),
    ]


def test_newest_of_one_channel_keeps_the_era_and_that_channels_newest():
    manifest = made_up()
    era_and_newest = mf.Manifest(
        manifest.channels, {"macos-arm64": manifest.defaults["linux-x86_64-cpu"]}
    )
    planned = defaults.schedule(era_and_newest, "macos-arm64", here="3.10")
    assert [item.ref for item in planned] == [
        "era@1.12.1",
        "era@2.2.2",
    ]  # 2.15.0 has no cp310 wheel
    planned = defaults.schedule(era_and_newest, "macos-arm64", here="3.12")
    assert [item.ref for item in planned] == ["era@2.2.2", "release@2.15.0"]  # not release@2.14.1


def test_the_machines_platform_picks_its_rule_and_an_absent_one_is_named():
    manifest = made_up()
    assert (
        defaults.rule_for(manifest, ["linux-x86_64-cpu", "linux-x86_64-cuda"])[0]
        == "linux-x86_64-cpu"
    )
    only_macos = mf.Manifest(manifest.channels, {"macos-arm64": manifest.defaults["macos-arm64"]})
    assert defaults.rule_for(only_macos, ["macos-arm64"])[0] == "macos-arm64"
    named = r"no default timeline for linux-x86_64-cpu; .* macos-arm64"
    with pytest.raises(UserError, match=named):
        defaults.rule_for(only_macos, ["linux-x86_64-cpu"])


@pytest.mark.parametrize(
    ("rule", "message"),
    [
        (mf.Default(("nope",)), r"names channels \['nope'\]"),
        (
            mf.Default(("era",), newest=0),
            r"defaults\.macos-arm64\.newest = 0: expected a whole number of at least 1",
        ),
        (
            mf.Default(("era",), newest_of={"release": 1}),
            r"newest_of names 'release', not one of its channels \(era\)",
        ),
        (
            mf.Default(("era",), newest_of={"era": 0}),
            r"newest_of\.era = 0: expected a whole number of at least 1",
        ),
        (
            mf.Default(("era",), pythons=("cp310",)),
            r"pythons\[0\] = 'cp310': expected a Python version such as 3\.12",
        ),
    ],
)
def test_bad_rules_are_refused_by_name(rule, message):
    with pytest.raises(UserError, match=message):
        mf.validate(mf.Manifest(made_up().channels, {"macos-arm64": rule}))


def test_rules_and_per_python_pins_round_trip_and_older_pins_keep_their_bytes():
    manifest = made_up()
    assert mf.from_json(mf.to_json(manifest)) == manifest
    old = mf.Pin(
        "torch",
        "2.13.0",
        "torch-2.13.0-cp310-cp310-macosx_14_0_arm64.whl",
        "https://x/t.whl",
        "ab" * 32,
    )
    build = mf.Build(
        "2.13.0", "2.13.0", "2026-07-06T21:56:20Z", "0" * 40, "release", {"macos-arm64": [old]}
    )
    assert (
        "python" not in mf.build_to_json(build)["pins"]["macos-arm64"][0]
    )  # timeline hashes unchanged


def test_the_installer_takes_only_this_interpreters_set(monkeypatch):
    this = f"cp3{sys.version_info.minor}"
    before, after = f"cp3{sys.version_info.minor - 1}", f"cp3{sys.version_info.minor + 1}"
    build = {
        "channel": "era",
        "id": "2.2.2",
        "pins": {
            "macos-arm64": [
                vars(pin(name, version, python))
                for python in (before, this, after)
                for name, version in (("torch", "2.2.2"), ("numpy", "1.26.4"))
            ]
        },
    }
    monkeypatch.setenv(install_build.PLATFORM_ENV, "macos-arm64")  # as a Mac's installer sees it
    assert [p["filename"] for p in install_build.select_pins(build)[1]] == [
        f"torch-2.2.2-{this}-{this}-macosx_14_0_arm64.whl",
        f"numpy-1.26.4-{this}-{this}-macosx_14_0_arm64.whl",
    ]
    build["pins"]["macos-arm64"] = [
        pin for pin in build["pins"]["macos-arm64"] if pin["python"] != this
    ]
    with pytest.raises(install_build.InstallError, match=f"pins no torch wheel for {this}"):
        install_build.select_pins(build)


# --- the shipped manifest --------------------------------------------------------------

SHIPPED_MANIFEST = mf.load(SHIPPED)


@pytest.mark.parametrize("platform", sorted(SHIPPED_MANIFEST.defaults))
def test_every_default_build_pins_a_complete_set_for_each_of_its_pythons(platform):
    planned = defaults.schedule(SHIPPED_MANIFEST, platform, here="3.11")
    assert planned
    for item in planned:
        for python in item.pythons:
            chosen = item.build.sets(platform)[defaults.python_tag(python)]
            names = [p.name for p in chosen]
            where = f"{item.ref} {platform} {python}"
            assert "torch" in names and len(names) == len(set(names)), where
            for each in chosen:
                assert each.url.startswith("https://") and re.fullmatch(
                    r"[0-9a-f]{64}", each.sha256
                ), where
                assert wheels.parse_wheel_name(each.url).filename == each.filename, where
            version = Version(item.build.torch_version)
            assert (
                next(p for p in chosen if p.name == "torch").version.split("+")[0]
                == item.build.torch_version
            )
            vision = [p for p in chosen if p.name == "torchvision"]
            if vision:
                assert vision[0].version.startswith(
                    resolve.torchvision_series(item.build.torch_version) + "."
                ), where
            if version.release[:2] < (2, 3):
                assert Version(next(p for p in chosen if p.name == "numpy").version).major == 1, (
                    where
                )


def test_the_macos_default_spans_every_minor_from_1_12_to_the_newest_under_two_pythons():
    planned = defaults.schedule(SHIPPED_MANIFEST, "macos-arm64")
    minors = [Version(item.build.torch_version).release[:2] for item in planned]
    newest = max(
        Version(b.torch_version)
        for c in SHIPPED_MANIFEST.channels
        for b in c.builds
        if b.kind == "release"
    )
    assert minors[0] == (1, 12) and minors[-1] == newest.release[:2]
    assert minors == [(1, 12), (1, 13)] + [(2, minor) for minor in range(newest.release[1] + 1)]
    assert planned[0].pythons == ("3.10",) and planned[-1].pythons == (
        "3.12",
    )  # no one Python spans it
    both = [item.build.torch_version for item in planned if item.pythons == ("3.10", "3.12")]
    assert both and all(
        Version(v) < newest for v in both
    )  # the overlap is kept: the seam is measured


def test_the_linux_default_spans_the_era_in_a_few_builds_under_asvs_python():
    planned = defaults.schedule(SHIPPED_MANIFEST, "linux-x86_64-cuda", here="3.11")
    assert 4 <= len(planned) <= 5 and all(
        item.pythons == ("3.11",) for item in planned
    )  # about 6 GB each
    newest = max(
        (b for c in SHIPPED_MANIFEST.channels for b in c.builds if b.kind == "release"),
        key=lambda b: Version(b.torch_version),
    )
    assert planned[-1].build == newest
    assert Version(planned[0].build.torch_version) < Version(
        "2.0"
    )  # from before 2.0: years of history
    years = {item.build.date[:4] for item in planned}
    assert int(max(years)) - int(min(years)) >= 3


def test_every_pinned_transformers_is_below_its_torchs_cap():
    for channel in SHIPPED_MANIFEST.channels:
        for build in channel.builds:
            cap = resolve.transformers_cap(build.torch_version)
            for platform, pins in build.pins.items():
                for each in pins:
                    if each.name == "transformers" and cap:
                        assert Version(each.version) < Version(cap), (
                            f"{channel.name}@{build.id} {platform}"
                        )


def test_cli_prints_each_pythons_commits_for_asv(tmp_path, capsys):
    paths = ["--manifest", str(SHIPPED), "--timeline", str(tmp_path / "t")]
    assert cli.main(["timeline", "default", "--platform", "macos-arm64", "--pythons", *paths]) == 0
    assert capsys.readouterr().out.split() == ["3.10", "3.12"]
    assert (
        cli.main(
            [
                "timeline",
                "default",
                "--platform",
                "macos-arm64",
                "--hashes",
                "--python",
                "3.10",
                *paths,
            ]
        )
        == 0
    )
    hashes = capsys.readouterr().out.split()
    generated = timeline.compute(SHIPPED_MANIFEST, tmp_path / "t")
    planned = defaults.schedule(SHIPPED_MANIFEST, "macos-arm64")
    assert hashes == [generated.commits[item.ref] for item in planned if "3.10" in item.pythons]
    assert cli.main(["timeline", "default", "--platform", "macos-arm64", "--hashes", *paths]) == 2
    assert "--hashes needs --python" in capsys.readouterr().err


def test_a_mac_on_macos_13_without_python_3_10_skips_what_it_cannot_run_before_any_download(
    monkeypatch,
):
    import shutil
    import sys

    from packaging import tags

    monkeypatch.setattr(tags, "platform_tags", lambda: iter(tags.mac_platforms((13, 6), "arm64")))
    monkeypatch.setattr(sys, "platform", "darwin")
    monkeypatch.setattr(install_build.platform, "mac_ver", lambda: ("13.6", ("", "", ""), ""))
    monkeypatch.setattr(
        shutil, "which", lambda name: "/usr/bin/python3.12" if name == "python3.12" else None
    )
    planned = defaults.schedule(SHIPPED_MANIFEST, "macos-arm64")
    kept, said = defaults.runnable_here(planned, "macos-arm64")
    assert (
        said[0]
        == "skipping every build under Python 3.10: python3.10 is not on PATH, where asv looks for it"
    )

    def needs_14(item: defaults.Scheduled) -> bool:  # judged from the file names alone
        return any(
            re.search(r"macosx_1[4-9]_", pin.filename)
            for pin in item.build.sets("macos-arm64")["cp312"]
        )

    under_312 = [item for item in planned if "3.12" in item.pythons]
    assert [(item.ref, item.pythons) for item in kept] == [
        (item.ref, ("3.12",)) for item in under_312 if not needs_14(item)
    ]
    skipped = [item.ref for item in under_312 if needs_14(item)]
    assert skipped and [line.split()[1] for line in said[1:]] == skipped
    assert all(
        re.fullmatch(
            r"skipping \S+ under Python 3\.12: \S+macosx_14_0_arm64\.whl needs macOS 14\.0 or newer"
            r" \(this Mac runs macOS 13\.6\)",
            line,
        )
        for line in said[1:]
    ), said


@pytest.mark.parametrize(
    ("platform", "gpu", "said"),
    [
        (
            "linux-x86_64-cuda",
            True,
            "linux-x86_64 with an NVIDIA GPU (cuda rows; linux-x86_64-cuda wheels)",
        ),
        (
            "linux-x86_64-cpu",
            True,
            "linux-x86_64 with an NVIDIA GPU (cpu rows; linux-x86_64-cpu wheels)",
        ),  # no CUDA in them
        ("linux-x86_64-cpu", False, "linux-x86_64-cpu"),
    ],
)
def test_the_rows_named_are_those_the_platforms_wheels_can_measure(
    monkeypatch, platform, gpu, said
):
    monkeypatch.setattr(install_build, "nvidia_gpu", lambda: gpu)
    assert defaults.this_machine_is(platform) == said


@pytest.mark.parametrize(
    ("gpu", "said"),
    [
        (
            False,
            "default timeline of linux-x86_64 (no GPU: cpu rows; the linux-x86_64-cuda wheels are what PyPI ships",
        ),
        (
            True,
            "default timeline of linux-x86_64 with an NVIDIA GPU (cuda rows; linux-x86_64-cuda wheels)",
        ),
    ],
)
def test_the_listing_names_this_machine_not_the_wheels_platform(
    monkeypatch, tmp_path, capsys, gpu, said
):
    # a Linux machine without a GPU takes the cuda rule (PyPI's Linux torch is the cuda build), yet has no cuda
    monkeypatch.setattr(install_build, "nvidia_gpu", lambda: gpu)
    monkeypatch.setattr(
        install_build, "platform_candidates", lambda: ["linux-x86_64-cpu", "linux-x86_64-cuda"]
    )
    monkeypatch.setattr(defaults, "runnable_here", lambda planned, platform: (planned, []))
    paths = ["--manifest", str(SHIPPED), "--timeline", str(tmp_path / "t")]
    assert cli.main(["timeline", "default", *paths]) == 0
    assert capsys.readouterr().out.splitlines()[0].startswith(said)
    # another platform asked for by name is that platform, whatever this machine is
    assert cli.main(["timeline", "default", "--platform", "linux-x86_64-cuda", *paths]) == 0
    assert capsys.readouterr().out.startswith("default timeline of linux-x86_64-cuda: ")
