"""The installer asv runs in each environment: checksum first, install once, switch by .pth."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from tests import fakes

from mpsbench.builds import install_build, timeline
from mpsbench.builds import manifest as mf


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv(install_build.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setenv(install_build.PLATFORM_ENV, "linux-x86_64-cpu")
    monkeypatch.delenv(install_build.WHEELHOUSE_ENV, raising=False)
    monkeypatch.delenv("PIP_FIND_LINKS", raising=False)
    site = tmp_path / "site-packages"
    site.mkdir()
    monkeypatch.setattr(install_build, "_site_packages", lambda: site)
    return tmp_path


def _build_dir(folder: Path, wheel: Path, sha: str | None = None, channel: str = "release") -> Path:
    pin = mf.Pin("torch", "2.14.1", wheel.name, wheel.resolve().as_uri(), sha or fakes.sha256(wheel))
    build = mf.Build("2.14.1", "2.14.1", "2026-09-30T00:00:00Z", "f" * 40, "release", {"linux-x86_64-cpu": [pin]})
    folder.mkdir(parents=True)
    (folder / "build.json").write_text(timeline.build_record(channel, build))
    return folder


def _wheel(folder: Path, marker: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    return fakes.make_wheel(folder, "torch", "2.14.1+cpu", python=tag, module=f"MARKER = {marker!r}\n")


def test_install_once_then_switch_by_pth(cache):
    build_dir = _build_dir(cache / "b1", _wheel(cache / "w1", "first"))
    env = cache / "env"
    env.mkdir()
    src = Path(__file__).resolve().parents[1] / "src"
    first = install_build.install(build_dir, env, src)
    assert first.startswith("mpsbench: installed torch 2.14.1 (linux-x86_64-cpu)")
    pth = (cache / "site-packages" / install_build.PTH_NAME).read_text().splitlines()
    assert pth[1] == str(src)
    assert (Path(pth[0]) / "torch" / "__init__.py").read_text() == "MARKER = 'first'\n"
    again = install_build.install(build_dir, env, src)
    assert again.startswith("mpsbench: switched to cached torch 2.14.1")
    assert json.loads((env / "mpsbench-build.json").read_text())["fresh"] is False
    install_build.uninstall(env)
    assert not (cache / "site-packages" / install_build.PTH_NAME).exists()


def test_a_checksum_mismatch_installs_nothing(cache):
    build_dir = _build_dir(cache / "b1", _wheel(cache / "w1", "x"), sha="0" * 64)
    with pytest.raises(install_build.InstallError, match=r"does not match the pinned 0{64}; refusing to install"):
        install_build.install(build_dir, cache, cache)
    assert not (cache / "site-packages" / install_build.PTH_NAME).exists()
    assert not list((cache / "cache" / "wheels").glob("*/*.whl"))
    assert not (cache / "cache" / "builds").exists() or not any((cache / "cache" / "builds").glob("*/.complete"))


def test_a_failed_pip_install_leaves_no_cache_entry(cache, monkeypatch):
    build_dir = _build_dir(cache / "b1", _wheel(cache / "w1", "x"))

    class Failed:
        returncode, stdout, stderr = 1, "", "ERROR: no space left on device"

    monkeypatch.setattr(install_build.subprocess, "run", lambda *a, **k: Failed())
    with pytest.raises(install_build.InstallError, match="no space left on device"):
        install_build.install(build_dir, cache, cache)
    builds = cache / "cache" / "builds"
    assert [p.name for p in builds.iterdir()] == [p.name for p in builds.glob("*.lock")]  # no folder, no staging


def test_no_wheel_for_this_platform_is_a_clear_error(cache, monkeypatch):
    monkeypatch.setenv(install_build.PLATFORM_ENV, "macos-arm64")
    build_dir = _build_dir(cache / "b1", _wheel(cache / "w1", "x"))
    expected = r"pins no torch wheel for cp\d+ on macos-arm64 \(pinned platforms: linux-x86_64-cpu\)"
    with pytest.raises(install_build.InstallError, match=expected):
        install_build.install(build_dir, cache, cache)


def test_a_local_wheelhouse_is_searched_by_file_name(cache, monkeypatch):
    wheel = _wheel(cache / "w1", "house")
    pin = {"name": "torch", "version": "2.14.1+cpu", "filename": wheel.name, "url": "https://unreachable.invalid/x.whl",
           "sha256": fakes.sha256(wheel)}
    monkeypatch.setenv(install_build.WHEELHOUSE_ENV, str(wheel.parent))
    stored = install_build.fetch_wheel(pin)
    assert stored.read_bytes() == wheel.read_bytes() and stored.parent.name == pin["sha256"]


def test_a_stored_wheel_changed_after_its_check_is_refused_at_install(cache):
    wheel = _wheel(cache / "w1", "good")
    build_dir = _build_dir(cache / "b1", wheel)
    pin = json.loads((build_dir / "build.json").read_text())["pins"]["linux-x86_64-cpu"][0]
    stored = install_build.fetch_wheel(pin)  # checked and stored
    tampered = _wheel(cache / "w2", "tampered")
    stored.write_bytes(tampered.read_bytes())  # someone replaces the store's copy
    with pytest.raises(install_build.InstallError, match=r"of the stored copy .* does not match the pinned"):
        install_build.install(build_dir, cache / "env", cache)
    assert not (cache / "site-packages" / install_build.PTH_NAME).exists()
    assert not any((cache / "cache" / "builds").glob("*/.complete"))


def _chattr(flag: str, *paths: Path) -> bool:
    import shutil
    import subprocess

    if shutil.which("chattr") is None:
        return False
    return subprocess.run(["chattr", flag, *map(str, paths)], capture_output=True).returncode == 0


def test_an_immutable_cache_serves_its_installed_builds_and_refuses_others_in_one_line(cache):
    env = cache / "env"
    env.mkdir()
    src = Path(__file__).resolve().parents[1] / "src"
    installed = _build_dir(cache / "b1", _wheel(cache / "w1", "first"))
    install_build.install(installed, env, src)
    other = _build_dir(cache / "b2", _wheel(cache / "w2", "second"), channel="nightly")
    folders = [cache / "cache", cache / "cache" / "builds", cache / "cache" / "wheels"]
    if not _chattr("+i", *folders):
        pytest.skip("chattr +i is not available here")
    try:
        again = install_build.install(installed, env, src)
        assert again.startswith("mpsbench: switched to cached torch 2.14.1")
        with pytest.raises(install_build.InstallError, match=r"^cannot install into the build cache .*"):
            install_build.install(other, env, src)
    finally:
        _chattr("-i", *folders)


def test_what_a_killed_install_left_is_removed_by_the_next_install(cache):
    builds, wheels = cache / "cache" / "builds", cache / "cache" / "wheels"
    staging = builds / "0123456789abcdef0123.staging-x1y2"
    (staging / "tmp" / "pip-target-abc").mkdir(parents=True)
    (staging / "target" / "torch").mkdir(parents=True)
    fetch = wheels / "fetch-999999999-abc"  # no such process
    fetch.mkdir(parents=True)
    install_build.install(_build_dir(cache / "b1", _wheel(cache / "w1", "x")), cache, cache)
    assert not staging.exists() and not fetch.exists()
    assert all((folder / ".complete").is_file() for folder in builds.iterdir() if folder.is_dir())  # only the build


def test_a_wheel_fits_a_python_by_its_tags_the_stable_abi_included():
    def fits(filename: str) -> bool:
        return install_build._fits(filename, (3, 11))

    assert fits("torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl")
    assert not fits("torch-2.14.1-cp310-cp310-manylinux_2_28_x86_64.whl")
    assert fits("tokenizers-0.22.1-cp39-abi3-manylinux_2_17_x86_64.whl")  # abi3 of 3.9 serves 3.11
    assert not fits("future-1.0-cp312-abi3-manylinux_2_17_x86_64.whl")  # abi3 from 3.12 on: not 3.11
    assert fits("transformers-5.18.0-py3-none-any.whl")
    assert fits("six-1.17.0-py2.py3-none-any.whl")  # a compressed tag set
    assert not fits("numpy-1.26.4-pp310-pypy310_pp73-manylinux_2_17_x86_64.whl")  # another interpreter
