"""The installer asv runs in each environment: checksum first, install once, switch by .pth."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests import fakes

from mpsbench.builds import install_build, timeline
from mpsbench.builds import manifest as mf

TAG = f"cp{sys.version_info.major}{sys.version_info.minor}"
LOCAL_TORCH = Path("/opt/wheels/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl")


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


def _build_dir(folder: Path, wheel: Path, sha: str | None = None, channel: str = "release", python: str = TAG) -> Path:
    pin = mf.Pin("torch", "2.14.1+cpu", wheel.name, wheel.resolve().as_uri(), sha or fakes.sha256(wheel), python=python)
    build = mf.Build("2.14.1", "2.14.1", "2026-09-30T00:00:00Z", "f" * 40, "release", {"linux-x86_64-cpu": [pin]})
    folder.mkdir(parents=True)
    (folder / "build.json").write_text(timeline.build_record(channel, build))
    return folder


def _wheel(folder: Path, marker: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    return fakes.make_wheel(folder, "torch", "2.14.1+cpu", python=TAG, module=f"MARKER = {marker!r}\n")


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
        with pytest.raises(install_build.InstallError,
                           match=r"^cannot write the build cache at .*; make it writable, or set MPSBENCH_CACHE"):
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




# --- refused before any download, and before anything is written ----------------------------------------------


def _raw_build_dir(folder: Path, pins: dict[str, list[dict[str, str]]]) -> Path:
    """A timeline commit's build.json as asv checks it out, written raw (the manifest would refuse some of these)."""
    folder.mkdir(parents=True)
    build = {"channel": "release", "id": "x", "kind": "release", "torch_version": "2.14.1", "pins": pins}
    (folder / "build.json").write_text(json.dumps(build))
    return folder


def _nothing_written(cache: Path) -> bool:
    return not (cache / "cache").exists() and not (cache / "site-packages" / install_build.PTH_NAME).exists()


GOOD = {"name": "torch", "version": "2.14.1", "filename": f"torch-2.14.1-{TAG}-{TAG}-manylinux_2_28_x86_64.whl",
        "url": "https://unreachable.invalid/torch.whl", "sha256": "0" * 64, "python": TAG}


@pytest.mark.parametrize(
    ("pins", "said"),
    [
        ([{**GOOD, "python": ""}],
         r"pins only torch for linux-x86_64-cpu, not a complete set per Python: pip would fetch the rest unpinned"),
        ([{**GOOD, "filename": "../../../torch-2.14.1-py3-none-any.whl"}], r"refusing the pins \['\.\./\.\./\.\./torch"),
        ([{**GOOD, "url": "http://example.org/torch.whl"}], r"each must be a plain wheel file name at an https:// or file://"),
        ([GOOD, {**GOOD, "sha256": "1" * 64}], r"one per package"),
        ([{**GOOD, "python": "cp27"}], r"pins no torch wheel for cp3\d+ on linux-x86_64-cpu \(its sets there: .*: cp27\)"),
        ([{**GOOD, "filename": f"torch-2.14.1-{TAG}-{TAG}-macosx_14_0_arm64.whl"}],
         r"cannot run here, skipped before any download: torch-2\.14\.1-.*-macosx_14_0_arm64\.whl needs a machine of"),
    ],
    ids=["pinned-before-sets", "filename-climbs-out", "plain-http", "a-package-twice", "another-python", "another-os"],
)
def test_a_build_that_cannot_be_installed_whole_here_is_refused_before_any_download(cache, pins, said):
    build_dir = _raw_build_dir(cache / "b", {"linux-x86_64-cpu": pins})
    with pytest.raises(install_build.InstallError, match=said):
        install_build.install(build_dir, cache / "env", cache)
    assert _nothing_written(cache)  # the URL is unreachable: a download would have said so instead


def test_a_stored_wheel_is_never_looked_up_by_a_name_that_leaves_the_store(cache):
    with pytest.raises(install_build.InstallError, match=r"refusing the pin '\.\./x-1-py3-none-any\.whl'"):
        install_build.fetch_wheel({**GOOD, "filename": "../x-1-py3-none-any.whl"})
    assert _nothing_written(cache)


def test_a_build_this_run_did_not_ask_for_is_refused_so_asv_cannot_install_it_instead(cache, monkeypatch):
    """asv's discovery tries every branch's newest build after a refused one (the 8.7 GB of issue 34)."""
    build_dir = _build_dir(cache / "b1", _wheel(cache / "w1", "asked"))
    asked = cache / "builds.txt"
    asked.write_text("a" * 40 + "\n")
    monkeypatch.setenv(install_build.RUN_BUILDS_ENV, str(asked))
    monkeypatch.setenv("ASV_COMMIT", "b" * 40)
    with pytest.raises(install_build.InstallError, match=rf"not installing build release@2\.14\.1 \(bbbbbbbb\):"
                                                          rf" this run measures only the builds in {asked}"):
        install_build.install(build_dir, cache / "env", cache)
    assert _nothing_written(cache)
    asked.write_text("a" * 40 + "\n" + "b" * 12 + "\n")  # asked for (a hash file may hold prefixes)
    (cache / "env").mkdir()
    assert install_build.install(build_dir, cache / "env", cache).startswith("mpsbench: installed torch 2.14.1")


def test_a_full_disk_while_storing_a_wheel_is_one_line_with_the_path_and_leaves_no_partial_copy(cache, monkeypatch):
    wheel = _wheel(cache / "w1", "x")
    pin = {**GOOD, "filename": wheel.name, "url": wheel.resolve().as_uri(), "sha256": fakes.sha256(wheel)}

    def full(source: Path, target: Path) -> None:
        Path(target).write_bytes(b"half a wheel")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(target))

    monkeypatch.setattr(install_build.shutil, "copyfile", full)
    with pytest.raises(install_build.InstallError, match=r"^cannot write the build cache at .*\.partial: No space left on"
                                                         r" device; free space there, or set MPSBENCH_CACHE to a folder"):
        install_build.fetch_wheel(pin)
    assert list((cache / "cache" / "wheels").rglob("*")) == [cache / "cache" / "wheels" / pin["sha256"]]


def test_a_partial_copy_of_a_dead_process_is_removed_and_a_living_ones_kept(cache):
    store = cache / "cache" / "wheels" / ("0" * 64)
    store.mkdir(parents=True)
    dead, living = (store / f".torch-1-py3-none-any.whl.{pid}.partial" for pid in (999999999, os.getpid()))
    dead.write_bytes(b"x")
    living.write_bytes(b"x")
    assert install_build.clean_leftovers(cache / "cache") == [dead]
    assert living.exists()


def _machine(monkeypatch, system: str, tags_here: list, version: tuple[str, str]) -> None:
    """This process as another machine: what packaging's sys_tags, sys.platform and the OS version say."""
    from packaging import tags

    monkeypatch.setattr(tags, "sys_tags", lambda: iter(tags_here))
    monkeypatch.setattr(install_build.sys, "platform", system)
    monkeypatch.setattr(install_build.platform, "mac_ver", lambda: (version[1], ("", "", ""), ""))
    monkeypatch.setattr(install_build.platform, "libc_ver", lambda: version)
    monkeypatch.setattr(install_build, "_python_tag", lambda: "cp310")


def _tags(platforms: list[str]) -> list:
    from packaging import tags

    return [*tags.cpython_tags((3, 10), platforms=platforms), *tags.compatible_tags((3, 10), platforms=platforms)]


@pytest.mark.parametrize(
    ("filename", "said"),
    [
        ("torch-2.13.0-cp310-cp310-macosx_14_0_arm64.whl", "macOS 14.0 or newer (this Mac runs macOS 13.6)"),
        ("numpy-2.2.6-cp310-cp310-macosx_14_0_arm64.whl", "macOS 14.0 or newer (this Mac runs macOS 13.6)"),
        ("torch-2.11.0-cp310-none-macosx_11_0_arm64.whl", None),
        ("psutil-7.2.2-cp36-abi3-macosx_11_0_arm64.whl", None),  # the stable ABI of 3.6 serves 3.10
        ("transformers-5.18.0-py3-none-any.whl", None),
        ("torch-2.13.0-cp312-cp312-macosx_11_0_arm64.whl", "Python cp312 (this is cp310)"),
    ],
)
def test_a_wheel_a_mac_cannot_run_names_the_macos_it_needs(monkeypatch, filename, said):
    from packaging import tags

    _machine(monkeypatch, "darwin", _tags(list(tags.mac_platforms((13, 6), "arm64"))), ("", "13.6"))
    assert install_build.why_not_here([filename]) == (f"{filename} needs {said}" if said else None)


def test_a_wheel_for_a_newer_glibc_names_the_glibc_it_needs(monkeypatch):
    glibc_2_17 = [*(f"manylinux_2_{minor}_x86_64" for minor in range(17, 4, -1)), "manylinux2014_x86_64", "manylinux1_x86_64"]
    _machine(monkeypatch, "linux", _tags(glibc_2_17), ("glibc", "2.17"))
    wheel = "torch-2.15.0-cp310-cp310-manylinux_2_28_x86_64.whl"
    assert install_build.why_not_here([wheel]) == f"{wheel} needs glibc 2.28 or newer (this machine has glibc 2.17)"
    assert install_build.why_not_here(["torch-1.13.1-cp310-cp310-manylinux1_x86_64.whl"]) is None


def test_asv_environments_get_the_pinned_psutil_hash_checked(cache, monkeypatch):
    assert install_build.ensure_suite_needs("linux-x86_64-cpu") == ""  # importable here: nothing to install, no pip call
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "psutil" else real(name, *a))
    wheel = fakes.make_wheel(cache, "psutil", "7.2.2", python="cp36", platform="manylinux_2_12_x86_64")
    pin = {"name": "psutil", "version": "7.2.2", "filename": wheel.name, "url": wheel.resolve().as_uri(),
           "sha256": fakes.sha256(wheel)}
    monkeypatch.setitem(install_build.SUITE_NEEDS, "linux-x86_64-cpu", pin)
    asked = []

    def pip(*args: str, tmp: Path | None = None) -> object:
        asked.append((args, Path(args[args.index("-r") + 1]).read_text()))
        return type("Done", (), {"returncode": 0, "stdout": "", "stderr": ""})()

    monkeypatch.setattr(install_build, "_pip", pip)
    assert install_build.ensure_suite_needs("linux-x86_64-cpu") == ""
    (args, requirements), = asked
    assert {"--no-deps", "--require-hashes", "--no-index"} <= set(args)
    stored = cache / "cache" / "wheels" / pin["sha256"] / wheel.name  # checked into the store first
    assert requirements == f"{stored.as_uri()} --hash=sha256:{pin['sha256']}\n" and stored.is_file()
    monkeypatch.setitem(install_build.SUITE_NEEDS, "linux-x86_64-cpu", {**pin, "sha256": "0" * 64})
    said = install_build.ensure_suite_needs("linux-x86_64-cpu")
    assert said.startswith("; psutil not installed (") and "does not match the pinned 0000" in said and len(asked) == 1


@pytest.mark.slow
@pytest.mark.skipif(not LOCAL_TORCH.is_file(), reason=f"needs {LOCAL_TORCH}")
def test_scripts_bench_of_a_tampered_build_installs_no_other_build_instead(tmp_path):
    """Issue 34's case: scripts/bench -b ROW HASH^! with that build's stored wheel tampered. asv's discovery then
    tried the newest build of each branch (it downloaded 8.7 GB of v2.15.0); here the tip is this .venv's torch."""
    from tests.test_faults import QUICK_SELECTION, bench_checkout

    repo, env = bench_checkout(tmp_path, with_wheel=True)  # release: [the local 2.13.0+cpu wheel, the .venv's torch]
    manifest = mf.load(repo / "builds" / "manifest.json")
    commits = timeline.compute(manifest, tmp_path / "names").commits
    wheel_build, tip = (f"release@{build.id}" for build in manifest.channel("release").builds)  # type: ignore[union-attr]
    pin = next(p for p in manifest.find(wheel_build).pins["linux-x86_64-cpu"] if p.name == "torch")
    stored = Path(env["MPSBENCH_CACHE"]) / "wheels" / pin.sha256 / pin.filename
    stored.parent.mkdir(parents=True)
    stored.write_bytes(LOCAL_TORCH.read_bytes()[:-1] + b"!")  # the store's copy, changed since it was checked
    done = subprocess.run(["scripts/bench", *QUICK_SELECTION, f"{commits[wheel_build]}^!"], cwd=repo, env=env,
                          capture_output=True, text=True, timeout=1500)
    said = done.stdout + done.stderr
    # asv ran and the build failed (and, with no build ever discovered in this fresh suite, asv publish has no list)
    assert done.returncode != 0, said[-3000:]
    assert "of the stored copy (changed since it was checked" in said and "refusing to install" in said
    assert f"not installing build {tip} ({commits[tip][:8]}): this run measures only the builds in" in said
    assert "installed torch" not in said and "switched to cached torch" not in said
    assert not list((Path(env["MPSBENCH_CACHE"]) / "builds").glob("*/.complete"))
