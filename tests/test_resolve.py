"""Adding builds by kind, against a local PEP 503 index made in the test; refusals change nothing."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from pathlib import Path

import pytest
from tests import fakes

from mpsbench import cli
from mpsbench.builds import manifest as mf
from mpsbench.builds import resolve, wheels
from mpsbench.core.errors import UserError

GIT_A, GIT_B = "a1" * 20, "b2" * 20
TORCH_EXTRA = ("Provides-Extra: torch",)
LINUX_ONLY = 'Requires-Dist: nvidia-fake; platform_system == "Linux"'


@pytest.fixture
def index(tmp_path):
    files = tmp_path / "files"
    files.mkdir()
    wheels = [
        # pip resolving on this Linux host must judge markers as the target would (pip_target.py)
        fakes.make_wheel(
            files,
            "torch",
            "2.14.1",
            git_version=GIT_A,
            built=datetime(2026, 9, 30, 12, 58, 32),
            metadata=(LINUX_ONLY,),
        ),
        fakes.make_wheel(
            files, "nvidia_fake", "13.0", python="py3", platform="manylinux_2_17_x86_64"
        ),
        fakes.make_wheel(
            files,
            "torch",
            "2.14.1",
            platform="macosx_14_0_arm64",
            git_version=GIT_A,
            metadata=(LINUX_ONLY,),
        ),
        fakes.make_wheel(files, "torch", "2.14.1", python="cp39"),  # an interpreter we do not pin
        fakes.make_wheel(files, "torchvision", "0.29.0"),
        fakes.make_wheel(files, "torchvision", "0.29.1"),
        fakes.make_wheel(files, "torchvision", "0.29.1", platform="macosx_14_0_arm64"),
        fakes.make_wheel(
            files,
            "transformers",
            "5.18.0",
            python="py3",
            platform="any",
            metadata=(*TORCH_EXTRA, 'Requires-Dist: torch>=2.5; extra == "torch"'),
        ),
        fakes.make_wheel(
            files,
            "transformers",
            "4.36.2",
            python="py3",
            platform="any",
            metadata=(*TORCH_EXTRA, 'Requires-Dist: torch>=1.10; extra == "torch"'),
        ),
        # like the real 4.51.3: its extra accepts torch 2.0, its code imports torch.compiler (2.1+)
        fakes.make_wheel(
            files,
            "transformers",
            "4.51.3",
            python="py3",
            platform="any",
            metadata=(*TORCH_EXTRA, 'Requires-Dist: torch>=2.0; extra == "torch"'),
        ),
        # an old release: its torchvision series, numpy 1.x, and the transformers whose extra accepts it
        fakes.make_wheel(files, "torch", "2.0.1", platform="manylinux1_x86_64", git_version=GIT_B),
        fakes.make_wheel(
            files,
            "torchvision",
            "0.15.2",
            platform="manylinux1_x86_64",
            metadata=("Requires-Dist: numpy",),
        ),
        fakes.make_wheel(files, "numpy", "1.26.4"),
        fakes.make_wheel(files, "numpy", "2.1.0"),
        fakes.make_wheel(
            files,
            "torch",
            "2.15.0.dev20261120+cpu",
            git_version=GIT_B,
            built=datetime(2026, 11, 20, 3),
        ),
        fakes.make_wheel(files, "torchvision", "0.30.0.dev20261120+cpu"),
        fakes.make_wheel(
            files,
            "torch",
            "2.15.0.dev20261122+cpu",
            git_version=GIT_A,
            built=datetime(2026, 11, 22, 3),
        ),
    ]
    return fakes.make_index(tmp_path / "simple", wheels)


def test_a_release_pins_what_pip_resolves_per_platform_and_python(index):
    build = resolve.release("2.14.1", index=str(index))
    assert (
        build.git_version == GIT_A
        and build.date == "2026-09-30T12:58:32Z"
        and build.tag == "v2.14.1"
    )
    assert sorted(build.pins) == ["linux-x86_64-cuda", "macos-arm64"]
    linux = [pin.filename for pin in build.pins["linux-x86_64-cuda"]]
    assert (
        linux
        == [
            "nvidia_fake-13.0-py3-none-manylinux_2_17_x86_64.whl",  # Linux only: absent from the macOS set
            "torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl",
            "torchvision-0.29.1-cp311-cp311-manylinux_2_28_x86_64.whl",  # the newest of its series
            "transformers-5.18.0-py3-none-any.whl",  # the newest whose torch extra accepts 2.14.1
        ]
    )
    for pin in build.pins["linux-x86_64-cuda"]:
        assert (
            pin.sha256 == fakes.sha256(index.parent / "files" / pin.filename)
            and pin.python == "cp311"
        )
    assert [pin.name for pin in build.pins["macos-arm64"]] == [
        "torch",
        "torchvision",
        "transformers",
    ]


def test_an_old_release_gets_numpy_1_and_the_transformers_its_requirements_allow(index):
    build = resolve.release("2.0.1", index=str(index), pythons={"linux-x86_64-cuda": ("cp311",)})
    assert (
        [pin.filename for pin in build.pins["linux-x86_64-cuda"]]
        == [
            "numpy-1.26.4-cp311-cp311-manylinux_2_28_x86_64.whl",  # torch before 2.3 breaks under numpy 2
            "torch-2.0.1-cp311-cp311-manylinux1_x86_64.whl",
            "torchvision-0.15.2-cp311-cp311-manylinux1_x86_64.whl",
            "transformers-4.36.2-py3-none-any.whl",  # 5.18.0's extra wants torch>=2.5; 4.51.3 is capped
        ]
    )
    assert (
        resolve.requirements("2.5.1")[-1] == "transformers[torch]"
    )  # no numpy cap from 2.3 on, no transformers cap from 2.5


def test_transformers_is_capped_where_its_metadata_lags_its_imports():
    assert "transformers[torch]<4.50" in resolve.requirements(
        "2.0.1"
    )  # 4.50 imports torch.compiler (2.1+)
    assert "transformers[torch]<5.14" in resolve.requirements(
        "2.4.1"
    )  # 5.14 imports DTensor (2.5+)
    assert "transformers[torch]==4.51.3" in resolve.requirements(
        "2.0.1", transformers="4.51.3"
    )  # named: as named
    assert not [
        line
        for line in resolve.requirements("2.0.1", transformers="none")
        if "transformers" in line
    ]


def test_pythons_per_platform_pin_only_those_sets(index):
    build = resolve.release("2.14.1", index=str(index), pythons={"macos-arm64": ("cp311",)})
    assert list(build.pins) == ["macos-arm64"]
    assert {pin.python for pin in build.pins["macos-arm64"]} == {"cp311"}


def test_a_nightly_by_date_resolves_its_version_and_identity(index):
    build = resolve.nightly("2026-11-20", indexes=(str(index),), transformers_index=str(index))
    assert build.torch_version == "2.15.0.dev20261120" and build.git_version == GIT_B
    assert build.id == "2026-11-20" and build.kind == "nightly"
    assert [pin.name for pin in build.pins["linux-x86_64-cpu"]] == [
        "torch",
        "torchvision",
        "transformers",
    ]
    assert build.pins["linux-x86_64-cpu"][1].version == "0.30.0.dev20261120+cpu"
    assert resolve.nightly_dates((str(index),)) == ["2026-11-20", "2026-11-22"]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda ix: resolve.release("2.99.0", index=ix),
            "torch 2.99.0 is not on .*; recent releases there: 2.0.1, 2.14.1",
        ),
        (
            lambda ix: resolve.release("latest", index=ix),
            "release version 'latest' is not MAJOR.MINOR.PATCH",
        ),
        (
            lambda ix: resolve.nightly("2026-11-21", indexes=(ix,)),
            "no torch nightly of 2026-11-21 .* 2026-11-20, 2026-11-22",
        ),
        (
            lambda ix: resolve.nightly("21/11/2026", indexes=(ix,)),
            "nightly date '21/11/2026' is not YYYY-MM-DD",
        ),
    ],
)
def test_bad_versions_and_dates_are_refused_with_the_choices(index, call, message):
    with pytest.raises(UserError, match=message):
        call(str(index))


def test_a_wheel_file_with_the_wrong_checksum_or_missing_is_refused(index, tmp_path):
    wheel = index.parent / "files" / "torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl"
    with pytest.raises(UserError, match="does not match the given " + "0" * 64):
        resolve.wheel_file(wheel, sha256="0" * 64, index=str(index))
    with pytest.raises(UserError, match="does not exist"):
        resolve.wheel_file(tmp_path / "nope.whl", index=str(index))
    build = resolve.wheel_file(wheel, index=str(index), build_id="mine-1")
    torch_pin = next(pin for pin in build.pins["linux-x86_64-cuda"] if pin.name == "torch")
    assert build.kind == "wheel-file" and torch_pin.url == wheel.resolve().as_uri()


def test_pip_says_whether_a_pinned_set_is_complete_and_as_its_index_serves_it(index):
    build = resolve.release("2.0.1", index=str(index), pythons={"linux-x86_64-cuda": ("cp311",)})
    pins = build.pins["linux-x86_64-cuda"]
    assert resolve.check_set(pins, "linux-x86_64-cuda", "cp311", str(index)) == []
    without_numpy = [
        pin for pin in pins if pin.name != "numpy"
    ]  # torchvision 0.15.2 requires numpy
    assert resolve.check_set(without_numpy, "linux-x86_64-cuda", "cp311", str(index)) == [
        "needs numpy 2.1.0, which the set does not pin"
    ]
    changed = [replace(pin, sha256="0" * 64) if pin.name == "torch" else pin for pin in pins]
    [said] = resolve.check_set(changed, "linux-x86_64-cuda", "cp311", str(index))
    assert said.startswith(
        "torch-2.0.1-cp311-cp311-manylinux1_x86_64.whl sha256 000000000000: the index serves"
    )


def test_an_index_or_wheel_url_over_plain_http_is_refused_before_anything_is_read(tmp_path):
    for call in (
        lambda: resolve.release("2.14.1", index="http://example.invalid/simple"),
        lambda: resolve.nightly(
            "2026-11-20", indexes=("https://example.invalid/a", "http://example.invalid/b")
        ),
        lambda: resolve.wheel_file(tmp_path / "x.whl", index="http://example.invalid/simple"),
    ):
        with pytest.raises(
            UserError,
            match=r"index 'http://example\.invalid/.*': use https://, file:// or a folder",
        ):
            call()
    with pytest.raises(UserError, match=r"is not an https:// or file:// URL \(http is refused"):
        resolve.wheel_url(
            f"http://example.invalid/torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl#sha256={'0' * 64}"
        )


def test_torchvision_series_follows_torch():
    assert resolve.torchvision_series("1.12.1") == "0.13"
    assert resolve.torchvision_series("2.0.1") == "0.15"
    assert resolve.torchvision_series("2.14.1") == "0.29"


def _cli(*args: str) -> int:
    return cli.main(list(args))


def _empty_manifest(path: Path) -> Path:
    """A manifest of no builds, as a new one starts (a missing one is refused)."""
    path.write_text('{"schema": 1, "channels": []}')
    return path


def test_cli_refusals_leave_manifest_and_timeline_untouched(index, tmp_path, capsys):
    manifest, line = _empty_manifest(tmp_path / "m.json"), tmp_path / "timeline"
    paths = ["--manifest", str(manifest), "--timeline", str(line)]
    assert (
        _cli(
            "build",
            "add-nightly",
            "2026-11-22",
            "--index",
            str(index),
            "--transformers-index",
            str(index),
            *paths,
        )
        == 0
    )
    before = manifest.read_bytes()
    tip = (line / ".git" / "refs" / "heads" / "nightly").read_text()
    assert (
        _cli(
            "build",
            "add-nightly",
            "2026-11-20",
            "--index",
            str(index),
            "--transformers-index",
            str(index),
            *paths,
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "is older than 2026-11-22 (" in err and err.count("\n") == 1
    assert _cli("build", "add-release", "9.9.9", "--index", str(index), *paths) == 2
    assert manifest.read_bytes() == before
    assert (line / ".git" / "refs" / "heads" / "nightly").read_text() == tip
    # the bisection route: a channel forked from the good build accepts the older nightly
    assert (
        _cli(
            "build",
            "add-nightly",
            "2026-11-20",
            "--channel",
            "bisect",
            "--parent",
            "nightly@2026-11-22",
            "--index",
            str(index),
            "--transformers-index",
            str(index),
            *paths,
        )
        == 2
    )  # older than its parent
    assert mf.load(manifest).channel("bisect") is None


def test_cli_latest_nightly_appends_once(index, tmp_path, capsys):
    paths = [
        "--manifest",
        str(_empty_manifest(tmp_path / "m.json")),
        "--timeline",
        str(tmp_path / "t"),
    ]
    args = [
        "build",
        "add-nightly",
        "latest",
        "--index",
        str(index),
        "--transformers-index",
        str(index),
        *paths,
    ]
    assert _cli(*args) == 0
    assert "added nightly@2026-11-22" in capsys.readouterr().out
    assert _cli(*args) == 0
    assert "already the newest nightly" in capsys.readouterr().out


def _never(*args: object, **kwargs: object) -> None:
    raise AssertionError("resolved a build that the command should have refused first")


def test_a_build_the_channel_has_is_refused_before_anything_is_resolved(
    tmp_path, monkeypatch, capsys
):
    """add-release 2.14.1 waited for pip's resolution (minutes) before saying the channel had it."""
    for name in ("release", "nightly", "nightly_dates", "existing"):
        monkeypatch.setattr(resolve, name, _never)
    monkeypatch.setattr(wheels, "project_wheels", _never)
    pin = mf.Pin(
        "torch",
        "2.14.1",
        "torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl",
        "https://example.invalid/t.whl",
        "0" * 64,
    )
    made = {
        "id": "2.14.1",
        "torch_version": "2.14.1",
        "date": "2026-09-30T12:00:00Z",
        "git_version": GIT_A,
        "pins": {"linux-x86_64-cpu": [pin]},
    }
    manifest = mf.append(mf.Manifest(), "release", mf.Build(kind="release", **made))
    manifest = mf.append(
        manifest, "nightly", mf.Build(kind="nightly", **{**made, "id": "2026-11-20"})
    )
    path = tmp_path / "m.json"
    mf.save(manifest, path)
    before = path.read_bytes()
    paths = ["--manifest", str(path), "--timeline", str(tmp_path / "t")]
    for argv, said in (
        (["add-release", "2.14.1"], "channel release already has a build '2.14.1'"),
        (["add-nightly", "2026-11-20"], "channel nightly already has a build '2026-11-20'"),
        (
            ["add-existing", ".", "--id", "2.14.1", "--channel", "release"],
            "already has a build '2.14.1'",
        ),
    ):
        assert _cli("build", *argv, *paths) == 2
        err = capsys.readouterr().err
        assert said in err and err.count("\n") == 1
    assert path.read_bytes() == before and not (tmp_path / "t").exists()


def test_a_missing_manifest_is_refused_before_anything_is_resolved_or_written(
    tmp_path, monkeypatch, capsys
):
    """A mistyped --manifest made a stray manifest of one build (and set asv's branches to its channel)."""
    for name in ("release", "nightly", "existing"):
        monkeypatch.setattr(resolve, name, _never)
    typo = tmp_path / "typo.json"
    paths = ["--manifest", str(typo), "--timeline", str(tmp_path / "t")]
    for argv in (
        ["add-release", "2.14.1"],
        ["add-nightly", "2026-11-20"],
        ["add-existing", "."],
        ["list"],
    ):
        assert _cli("build", *argv, *paths) == 2
        err = capsys.readouterr().err
        assert err == (
            f"mpsbench: error: no manifest {typo} (the project's is builds/manifest.json); to start a new one,"
            ' write {"schema": 1, "channels": []} to it\n'
        )
    assert sorted(tmp_path.iterdir()) == []
