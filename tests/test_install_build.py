"""The installer asv runs in each environment: checksum first, install once, switch by .pth."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from tests import fakes

from mpsbench.builds import install_build, timeline
from mpsbench.builds import manifest as mf

ROOT = Path(__file__).resolve().parents[1]
INSTALLER = ROOT / "src" / "mpsbench" / "builds" / "install_build.py"


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> Path:
    """A virtualenv of its own, as asv makes one: the installer runs with its python and writes the .pth there."""
    folder = tmp_path_factory.mktemp("venv") / "env"
    subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True, capture_output=True)
    return folder


@pytest.fixture
def cache(tmp_path, monkeypatch, venv):
    """A build cache of the test's own, no network for pip, and the virtualenv switched to no build."""
    monkeypatch.setenv(install_build.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setenv(install_build.PLATFORM_ENV, "linux-x86_64-cpu")
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.delenv(install_build.WHEELHOUSE_ENV, raising=False)
    monkeypatch.delenv("PIP_FIND_LINKS", raising=False)
    installer(venv, "uninstall", venv)
    return tmp_path


def installer(venv: Path, *args: object) -> subprocess.CompletedProcess[str]:
    """``python install_build.py ARGS`` with the virtualenv's python, as asv's install and uninstall commands run it."""
    return subprocess.run([str(venv / "bin" / "python"), str(INSTALLER), *map(str, args)], capture_output=True, text=True)


def install(venv: Path, build_dir: Path) -> subprocess.CompletedProcess[str]:
    return installer(venv, "install", build_dir, venv, ROOT / "src")


def imported(venv: Path) -> str:
    """What ``import torch`` finds in the virtualenv: the build's MARKER, or the error's last line."""
    done = subprocess.run([str(venv / "bin" / "python"), "-c", "import torch; print(torch.MARKER)"],
                          capture_output=True, text=True)
    return done.stdout.strip() or done.stderr.strip().splitlines()[-1]


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


def test_install_once_then_switch_by_pth(cache, venv):
    first_build = _build_dir(cache / "b1", _wheel(cache / "w1", "first"))
    second_build = _build_dir(cache / "b2", _wheel(cache / "w2", "second"), channel="nightly")
    first = install(venv, first_build)
    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith("mpsbench: installed torch 2.14.1 (linux-x86_64-cpu)")
    assert imported(venv) == "first"
    assert install(venv, second_build).returncode == 0 and imported(venv) == "second"
    again = install(venv, first_build)
    assert again.stdout.startswith("mpsbench: switched to cached torch 2.14.1") and imported(venv) == "first"
    assert json.loads((venv / "mpsbench-build.json").read_text())["fresh"] is False
    assert installer(venv, "uninstall", venv).returncode == 0
    assert imported(venv) == "ModuleNotFoundError: No module named 'torch'"


def test_a_checksum_mismatch_installs_nothing(cache, venv):
    build_dir = _build_dir(cache / "b1", _wheel(cache / "w1", "x"), sha="0" * 64)
    done = install(venv, build_dir)
    assert done.returncode == 1 and "does not match the pinned " + "0" * 64 + "; refusing to install" in done.stderr
    assert imported(venv) == "ModuleNotFoundError: No module named 'torch'"
    assert not list((cache / "cache" / "wheels").glob("*/*.whl"))
    assert not (cache / "cache" / "builds").exists() or not any((cache / "cache" / "builds").glob("*/.complete"))


def test_a_failed_pip_install_leaves_no_cache_entry(cache, venv):
    wheel = _wheel(cache / "w1", "x")
    wheel.write_bytes(b"not a zip archive")  # its checksum is pinned: pip is what fails
    done = install(venv, _build_dir(cache / "b1", wheel))
    assert done.returncode == 1 and done.stderr.startswith("mpsbench: error: pip could not install the build: ")
    builds = cache / "cache" / "builds"
    assert [p.name for p in builds.iterdir()] == [p.name for p in builds.glob("*.lock")]  # no folder, no staging
    assert imported(venv) == "ModuleNotFoundError: No module named 'torch'"


def test_no_wheel_for_this_platform_is_a_clear_error(cache, venv, monkeypatch):
    monkeypatch.setenv(install_build.PLATFORM_ENV, "macos-arm64")
    done = install(venv, _build_dir(cache / "b1", _wheel(cache / "w1", "x")))
    expected = r"pins no torch wheel for cp\d+ on macos-arm64 \(pinned platforms: linux-x86_64-cpu\)\n$"
    assert done.returncode == 1 and re.search(expected, done.stderr) and done.stderr.count("\n") == 1


def test_a_local_wheelhouse_is_searched_by_file_name(cache, monkeypatch):
    wheel = _wheel(cache / "w1", "house")
    pin = {"name": "torch", "version": "2.14.1+cpu", "filename": wheel.name, "url": "https://unreachable.invalid/x.whl",
           "sha256": fakes.sha256(wheel)}
    monkeypatch.setenv(install_build.WHEELHOUSE_ENV, str(wheel.parent))
    stored = install_build.fetch_wheel(pin)
    assert stored.read_bytes() == wheel.read_bytes() and stored.parent.name == pin["sha256"]


def test_a_stored_wheel_changed_after_its_check_is_refused_at_install(cache, venv):
    wheel = _wheel(cache / "w1", "good")
    build_dir = _build_dir(cache / "b1", wheel)
    pin = json.loads((build_dir / "build.json").read_text())["pins"]["linux-x86_64-cpu"][0]
    stored = install_build.fetch_wheel(pin)  # checked and stored
    tampered = _wheel(cache / "w2", "tampered")
    stored.write_bytes(tampered.read_bytes())  # someone replaces the store's copy
    done = install(venv, build_dir)
    assert done.returncode == 1 and re.search(r"of the stored copy .* does not match the pinned", done.stderr)
    assert imported(venv) == "ModuleNotFoundError: No module named 'torch'"
    assert not any((cache / "cache" / "builds").glob("*/.complete"))


def _chattr(flag: str, *paths: Path) -> bool:
    import shutil
    import subprocess

    if shutil.which("chattr") is None:
        return False
    return subprocess.run(["chattr", flag, *map(str, paths)], capture_output=True).returncode == 0


def test_an_immutable_cache_serves_its_installed_builds_and_refuses_others_in_one_line(cache, venv):
    installed = _build_dir(cache / "b1", _wheel(cache / "w1", "first"))
    assert install(venv, installed).returncode == 0
    other = _build_dir(cache / "b2", _wheel(cache / "w2", "second"), channel="nightly")
    folders = [cache / "cache", cache / "cache" / "builds", cache / "cache" / "wheels"]
    if not _chattr("+i", *folders):
        pytest.skip("chattr +i is not available here")
    try:
        again = install(venv, installed)
        assert again.stdout.startswith("mpsbench: switched to cached torch 2.14.1") and imported(venv) == "first"
        refused = install(venv, other)
        assert refused.returncode == 1 and refused.stderr.startswith("mpsbench: error: cannot install into the build cache")
        assert refused.stderr.count("\n") == 1 and imported(venv) == "first"
    finally:
        _chattr("-i", *folders)


def test_what_a_killed_install_left_is_removed_by_the_next_install(cache, venv):
    builds, wheels = cache / "cache" / "builds", cache / "cache" / "wheels"
    staging = builds / "0123456789abcdef0123.staging-x1y2"
    (staging / "tmp" / "pip-target-abc").mkdir(parents=True)
    (staging / "target" / "torch").mkdir(parents=True)
    fetch = wheels / "fetch-999999999-abc"  # no such process
    fetch.mkdir(parents=True)
    assert install(venv, _build_dir(cache / "b1", _wheel(cache / "w1", "x"))).returncode == 0
    assert not staging.exists() and not fetch.exists()
    assert all((folder / ".complete").is_file() for folder in builds.iterdir() if folder.is_dir())  # only the build


def test_a_build_without_per_python_sets_installs_the_wheels_whose_tags_fit_this_python(monkeypatch):
    monkeypatch.setenv(install_build.PLATFORM_ENV, "linux-x86_64-cpu")
    minor = sys.version_info.minor  # 10 or later (requires-python)
    filenames = [
        f"torch-2.14.1-cp3{minor}-cp3{minor}-manylinux_2_28_x86_64.whl",
        f"torchvision-0.29.1-cp3{minor - 1}-cp3{minor - 1}-manylinux_2_28_x86_64.whl",  # another CPython
        "tokenizers-0.22.1-cp39-abi3-manylinux_2_17_x86_64.whl",  # abi3 of 3.9 serves every later CPython
        f"future-1.0-cp3{minor + 1}-abi3-manylinux_2_17_x86_64.whl",  # abi3 from a later CPython on: not this one
        "transformers-5.18.0-py3-none-any.whl",
        "six-1.17.0-py2.py3-none-any.whl",  # a compressed tag set
        "numpy-1.26.4-pp310-pypy310_pp73-manylinux_2_17_x86_64.whl",  # another interpreter
    ]
    pins = [{"name": name.split("-")[0], "version": name.split("-")[1], "filename": name, "url": f"https://x/{name}",
             "sha256": "ab" * 32} for name in filenames]
    build = {"channel": "release", "id": "2.14.1", "pins": {"linux-x86_64-cpu": pins}}
    platform, chosen = install_build.select_pins(build)
    assert platform == "linux-x86_64-cpu"
    assert [pin["name"] for pin in chosen] == ["torch", "tokenizers", "transformers", "six"]
