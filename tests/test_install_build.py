"""The installer asv runs in each environment: checksum first, install once, switch by .pth."""

from __future__ import annotations

import errno
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from tests import fakes

from mpsbench.builds import install_build, timeline
from mpsbench.builds import manifest as mf
from mpsbench.core import asv

ROOT = Path(__file__).resolve().parents[1]
INSTALLER = ROOT / "src" / "mpsbench" / "builds" / "install_build.py"
TAG = f"cp{sys.version_info.major}{sys.version_info.minor}"
LOCAL_TORCH = Path("/opt/wheels/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl")


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
    return subprocess.run(
        [str(venv / "bin" / "python"), str(INSTALLER), *map(str, args)],
        capture_output=True,
        text=True,
    )


def install(venv: Path, build_dir: Path) -> subprocess.CompletedProcess[str]:
    return installer(venv, "install", build_dir, venv, ROOT / "src")


def imported(venv: Path) -> str:
    """What ``import torch`` finds in the virtualenv: the build's MARKER, or the error's last line."""
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import torch; print(torch.MARKER)"],
        capture_output=True,
        text=True,
    )
    return done.stdout.strip() or done.stderr.strip().splitlines()[-1]


def _build_dir(folder: Path, wheel: Path, sha: str | None = None, channel: str = "release") -> Path:
    pin = mf.Pin(
        "torch",
        "2.14.1+cpu",
        wheel.name,
        wheel.resolve().as_uri(),
        sha or fakes.sha256(wheel),
        python=TAG,
    )
    build = mf.Build(
        "2.14.1", "2.14.1", "2026-09-30T00:00:00Z", "f" * 40, "release", {"linux-x86_64-cpu": [pin]}
    )
    folder.mkdir(parents=True)
    (folder / "build.json").write_text(timeline.build_record(channel, build))
    return folder


def _wheel(folder: Path, marker: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    return fakes.make_wheel(
        folder, "torch", "2.14.1+cpu", python=TAG, module=f"MARKER = {marker!r}\n"
    )


def test_install_once_then_switch_by_pth(cache, venv):
    first_build = _build_dir(cache / "b1", _wheel(cache / "w1", "first"))
    second_build = _build_dir(cache / "b2", _wheel(cache / "w2", "second"), channel="nightly")
    first = install(venv, first_build)
    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith("mpsbench: installed torch 2.14.1 (linux-x86_64-cpu)")
    assert imported(venv) == "first"
    first_folder = json.loads((venv / "mpsbench-build.json").read_text())["folder"]
    assert install(venv, second_build).returncode == 0 and imported(venv) == "second"
    again = install(venv, first_build)
    assert (
        again.stdout.startswith("mpsbench: switched to cached torch 2.14.1")
        and imported(venv) == "first"
    )
    record = json.loads((venv / "mpsbench-build.json").read_text())
    assert record["build"] == "release@2.14.1" and record["pins"][0]["filename"].endswith(".whl")
    # the switch back reuses the first install's folder, intact
    assert record["folder"] == first_folder and install_build.damage(Path(first_folder)) is None
    assert record["torch_version"] == "2.14.1"
    assert record["torch_dir"] == str(Path(first_folder).resolve() / "torch")
    assert installer(venv, "uninstall", venv).returncode == 0
    assert imported(venv) == "ModuleNotFoundError: No module named 'torch'"


def test_a_checksum_mismatch_installs_nothing(cache, venv):
    build_dir = _build_dir(cache / "b1", _wheel(cache / "w1", "x"), sha="0" * 64)
    done = install(venv, build_dir)
    assert (
        done.returncode == 1
        and "does not match the pinned " + "0" * 64 + "; refusing to install" in done.stderr
    )
    assert imported(venv) == "ModuleNotFoundError: No module named 'torch'"
    assert not list((cache / "cache" / "wheels").glob("*/*.whl"))
    assert not (cache / "cache" / "builds").exists() or not any(
        (cache / "cache" / "builds").glob("*/.complete")
    )


def test_a_failed_pip_install_leaves_no_cache_entry(cache, venv):
    wheel = _wheel(cache / "w1", "x")
    wheel.write_bytes(b"not a zip archive")  # its checksum is pinned: pip is what fails
    done = install(venv, _build_dir(cache / "b1", wheel))
    assert done.returncode == 1 and done.stderr.startswith(
        "mpsbench: error: pip could not install the build: "
    )
    builds = cache / "cache" / "builds"
    assert [p.name for p in builds.iterdir()] == [
        p.name for p in builds.glob("*.lock")
    ]  # no folder, no staging
    assert imported(venv) == "ModuleNotFoundError: No module named 'torch'"


def test_no_wheel_for_this_platform_is_a_clear_error(cache, venv, monkeypatch):
    monkeypatch.setenv(install_build.PLATFORM_ENV, "macos-arm64")
    done = install(venv, _build_dir(cache / "b1", _wheel(cache / "w1", "x")))
    expected = (
        r"pins no torch wheel for cp\d+ on macos-arm64 \(pinned: linux-x86_64-cpu: cp\d+\)\n$"
    )
    assert (
        done.returncode == 1 and re.search(expected, done.stderr) and done.stderr.count("\n") == 1
    )


def test_a_local_wheelhouse_is_searched_by_file_name(cache, monkeypatch):
    wheel = _wheel(cache / "w1", "house")
    pin = {
        "name": "torch",
        "version": "2.14.1+cpu",
        "filename": wheel.name,
        "url": "https://unreachable.invalid/x.whl",
        "sha256": fakes.sha256(wheel),
    }
    monkeypatch.setenv(install_build.WHEELHOUSE_ENV, str(wheel.parent))
    stored = install_build.fetch_wheel(pin)
    assert stored.read_bytes() == wheel.read_bytes() and stored.parent.name == pin["sha256"]
    assert (
        wheel.is_file() and stored.stat().st_ino != wheel.stat().st_ino
    )  # the user's file is copied, not moved


def test_a_downloaded_wheel_is_renamed_into_the_store_not_copied(cache, monkeypatch):
    (cache / "w1").mkdir()
    wheel = fakes.make_wheel(cache / "w1", "psutil", "7.2.2", python=TAG)
    pin = {
        "name": "psutil",
        "version": "7.2.2",
        "filename": wheel.name,
        "url": "https://unreachable.invalid/p.whl",
        "sha256": fakes.sha256(wheel),
    }
    downloaded = []

    def download(
        url: str, target: Path
    ) -> Path:  # the network stands in: the file lands in fetch_wheel's scratch
        target.write_bytes(wheel.read_bytes())
        downloaded.append(target.stat().st_ino)
        return target

    monkeypatch.setattr(install_build, "_download", download)
    stored = install_build.fetch_wheel(pin)
    assert (
        stored.read_bytes() == wheel.read_bytes() and [stored.stat().st_ino] == downloaded
    )  # one write, renamed
    assert [path.name for path in (cache / "cache" / "wheels").iterdir()] == [
        pin["sha256"]
    ]  # no scratch left


def test_a_stored_wheel_changed_after_its_check_is_refused_at_install(cache, venv):
    wheel = _wheel(cache / "w1", "good")
    build_dir = _build_dir(cache / "b1", wheel)
    pin = json.loads((build_dir / "build.json").read_text())["pins"]["linux-x86_64-cpu"][0]
    stored = install_build.fetch_wheel(pin)  # checked and stored
    tampered = _wheel(cache / "w2", "tampered")
    stored.write_bytes(tampered.read_bytes())  # someone replaces the store's copy
    done = install(venv, build_dir)
    said = (
        rf"of the stored copy {re.escape(str(stored))} \(changed since it was checked; delete it to fetch it again\)"
        " does not match the pinned"
    )
    assert done.returncode == 1 and re.search(said, done.stderr), done.stderr
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
        assert (
            again.stdout.startswith("mpsbench: switched to cached torch 2.14.1")
            and imported(venv) == "first"
        )
        refused = install(venv, other)
        assert refused.returncode == 1 and re.match(
            r"mpsbench: error: cannot write the build cache at .*; make it writable,"
            r" or set MPSBENCH_CACHE to a writable folder",
            refused.stderr,
        )
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
    assert all(
        (folder / ".complete").is_file() for folder in builds.iterdir() if folder.is_dir()
    )  # only the build


# --- refused before any download, and before anything is written ----------------------------------------------


def _raw_build_dir(folder: Path, pins: dict[str, list[dict[str, str]]]) -> Path:
    """A timeline commit's build.json as asv checks it out, written raw (the manifest would refuse some of these)."""
    folder.mkdir(parents=True)
    build = {
        "channel": "release",
        "id": "x",
        "kind": "release",
        "torch_version": "2.14.1",
        "pins": pins,
    }
    (folder / "build.json").write_text(json.dumps(build))
    return folder


def _refused_whole(done: subprocess.CompletedProcess[str], cache: Path, venv: Path) -> bool:
    """One line, exit 1, no download and nothing written: no cache, no build in the environment."""
    return (
        done.returncode == 1
        and done.stderr.count("\n") == 1
        and not (cache / "cache").exists()
        and imported(venv) == "ModuleNotFoundError: No module named 'torch'"
    )


GOOD = {
    "name": "torch",
    "version": "2.14.1",
    "filename": f"torch-2.14.1-{TAG}-{TAG}-manylinux_2_28_x86_64.whl",
    "url": "https://unreachable.invalid/torch.whl",
    "sha256": "0" * 64,
    "python": TAG,
}


@pytest.mark.parametrize(
    ("pins", "said"),
    [
        (
            [{**GOOD, "python": ""}],
            r"has no set per Python for linux-x86_64-cpu \(pip would fetch the rest unchecked\)",
        ),
        (
            [{**GOOD, "filename": "../../../torch-2.14.1-py3-none-any.whl"}],
            r"refusing the pins \['\.\./\.\./\.\./torch",
        ),
        (
            [{**GOOD, "url": "http://example.org/torch.whl"}],
            r"at http://example\.org/torch\.whl'\]: each must be a plain wheel file name at an https://",
        ),
        ([GOOD, {**GOOD, "sha256": "1" * 64}], r"one per package"),
        (
            [{**GOOD, "python": "cp27"}],
            r"pins no torch wheel for cp3\d+ on linux-x86_64-cpu \(pinned: linux-x86_64-cpu: cp27\)",
        ),
        (
            [{**GOOD, "filename": f"torch-2.14.1-{TAG}-{TAG}-macosx_14_0_arm64.whl"}],
            r"cannot run here, skipped before any download: torch-2\.14\.1-.*-macosx_14_0_arm64\.whl needs a machine of",
        ),
    ],
    ids=[
        "pinned-before-sets",
        "filename-climbs-out",
        "plain-http",
        "a-package-twice",
        "another-python",
        "another-os",
    ],
)
def test_a_build_that_cannot_be_installed_whole_here_is_refused_before_any_download(
    cache, venv, pins, said
):
    done = install(venv, _raw_build_dir(cache / "b", {"linux-x86_64-cpu": pins}))
    assert re.search(said, done.stderr) and _refused_whole(done, cache, venv), (
        done.stderr
    )  # unreachable URL: not fetched


def test_a_stored_wheel_is_never_looked_up_by_a_name_that_leaves_the_store(cache):
    with pytest.raises(
        install_build.InstallError,
        match=r"refusing the pins \['\.\./x-1-py3-none-any\.whl at https://",
    ):
        install_build.fetch_wheel({**GOOD, "filename": "../x-1-py3-none-any.whl"})
    assert not (cache / "cache").exists()


def test_a_build_this_run_did_not_ask_for_is_refused_so_asv_cannot_install_it_instead(
    cache, venv, monkeypatch
):
    """asv's discovery tries every branch's newest build after a refused one (the 8.7 GB of issue 34)."""
    build_dir = _build_dir(cache / "b1", _wheel(cache / "w1", "asked"))
    asked = cache / "builds.txt"
    asked.write_text("a" * 40 + "\n")
    monkeypatch.setenv(
        asv.RUN_BUILDS, str(asked)
    )  # as every mpsbench command that runs asv sets it (asv.only)
    monkeypatch.setenv("ASV_COMMIT", "b" * 40)  # as asv sets it for its install command
    done = install(venv, build_dir)
    said = rf"not installing build release@2\.14\.1 \(bbbbbbbb\): this run measures only the builds in {asked}\n$"
    assert re.search(said, done.stderr) and _refused_whole(done, cache, venv), done.stderr
    asked.write_text("a" * 40 + "\n" + "b" * 12 + "\n")  # asked for (a hash file may hold prefixes)
    assert install(venv, build_dir).returncode == 0 and imported(venv) == "asked"


def test_a_full_disk_while_storing_a_wheel_is_one_line_with_the_path_and_leaves_no_partial_copy(
    cache, monkeypatch
):
    wheel = _wheel(cache / "w1", "x")
    pin = {
        **GOOD,
        "filename": wheel.name,
        "url": wheel.resolve().as_uri(),
        "sha256": fakes.sha256(wheel),
    }

    def full(source: Path, target: Path) -> None:
        Path(target).write_bytes(b"half a wheel")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(target))

    monkeypatch.setattr(install_build.shutil, "copyfile", full)
    with pytest.raises(
        install_build.InstallError,
        match=r"^cannot write the build cache at .*\.whl: No space left on"
        r" device; free space there, or set MPSBENCH_CACHE to a folder",
    ):
        install_build.fetch_wheel(pin)
    assert list((cache / "cache" / "wheels").rglob("*")) == [
        cache / "cache" / "wheels" / pin["sha256"]
    ]


def test_a_fetch_of_a_dead_process_is_removed_and_a_living_ones_kept(cache):
    store = cache / "cache" / "wheels"
    dead, living = (store / f"fetch-{pid}-abc" for pid in (999999999, os.getpid()))
    for fetch in (dead, living):
        fetch.mkdir(parents=True)
        (fetch / "torch-1-py3-none-any.whl").write_bytes(b"x")
    assert install_build.clean_leftovers(cache / "cache") == [dead]
    assert living.exists()


def _machine(monkeypatch, system: str, platforms: list[str], version: tuple[str, str]) -> None:
    """This machine as another: the platform tags packaging finds, sys.platform and the OS version."""
    from packaging import tags

    monkeypatch.setattr(tags, "platform_tags", lambda: iter(platforms))
    monkeypatch.setattr(install_build.sys, "platform", system)
    monkeypatch.setattr(install_build.platform, "mac_ver", lambda: (version[1], ("", "", ""), ""))
    monkeypatch.setattr(install_build.platform, "libc_ver", lambda: version)


@pytest.mark.parametrize(
    ("filename", "said"),
    [
        (
            "torch-2.13.0-cp310-cp310-macosx_14_0_arm64.whl",
            "macOS 14.0 or newer (this Mac runs macOS 13.6)",
        ),
        (
            "numpy-2.2.6-cp310-cp310-macosx_14_0_arm64.whl",
            "macOS 14.0 or newer (this Mac runs macOS 13.6)",
        ),
        ("torch-2.11.0-cp310-none-macosx_11_0_arm64.whl", None),
        ("psutil-7.2.2-cp36-abi3-macosx_11_0_arm64.whl", None),  # the stable ABI of 3.6 serves 3.10
        ("transformers-5.18.0-py3-none-any.whl", None),
        ("torch-2.13.0-cp312-cp312-macosx_11_0_arm64.whl", "Python cp312 (this is cp310)"),
    ],
)
def test_a_wheel_a_mac_cannot_run_names_the_macos_it_needs(monkeypatch, filename, said):
    from packaging import tags

    _machine(monkeypatch, "darwin", list(tags.mac_platforms((13, 6), "arm64")), ("", "13.6"))
    assert install_build.why_not_here([filename], (3, 10)) == (
        f"{filename} needs {said}" if said else None
    )


def test_a_wheel_for_a_newer_glibc_names_the_glibc_it_needs(monkeypatch):
    glibc_2_17 = [
        *(f"manylinux_2_{minor}_x86_64" for minor in range(17, 4, -1)),
        "manylinux2014_x86_64",
        "manylinux1_x86_64",
    ]
    _machine(monkeypatch, "linux", glibc_2_17, ("glibc", "2.17"))
    wheel = "torch-2.15.0-cp310-cp310-manylinux_2_28_x86_64.whl"
    assert (
        install_build.why_not_here([wheel], (3, 10))
        == f"{wheel} needs glibc 2.28 or newer (this machine has glibc 2.17)"
    )
    assert (
        install_build.why_not_here(["torch-1.13.1-cp310-cp310-manylinux1_x86_64.whl"], (3, 10))
        is None
    )


@pytest.mark.parametrize(
    ("key", "python", "wheels"),
    [
        ("macos-arm64", (3, 10), ["psutil-7.2.2-cp36", "zeus_apple_silicon-1.1.0-cp310"]),
        ("macos-arm64", (3, 13), ["psutil-7.2.2-cp36", "zeus_apple_silicon-1.1.0-cp313"]),
        ("macos-arm64", (3, 14), ["psutil-7.2.2-cp36"]),  # zeus-apple-silicon has no wheel for 3.14
        ("linux-x86_64-cuda", (3, 12), ["psutil-7.2.2-cp36", "nvidia_ml_py-13.615.71-py3"]),
        ("linux-x86_64-cpu", (3, 11), ["psutil-7.2.2-cp36"]),
        ("linux-aarch64", (3, 11), []),
    ],
)
def test_the_suite_needs_are_chosen_by_platform_and_python(key, python, wheels):
    """The energy rows' counters need nvidia-ml-py (cuda) and zeus-apple-silicon (macOS): torch brings neither."""
    pins = install_build.suite_needs(key, python)
    assert ["-".join(pin["filename"].split("-")[:3]) for pin in pins] == wheels
    assert all(
        install_build.plain_wheel_name(pin["filename"])
        and pin["url"].endswith("/" + pin["filename"])
        and re.fullmatch("[0-9a-f]{64}", pin["sha256"])
        for pin in pins
    )


def test_asv_environments_get_the_suite_needs_hash_checked_and_keep_what_they_import(
    cache, tmp_path
):
    """The installer's own imports come as a build's wheels do: from the store, checked, pip --require-hashes. One
    the environment imports already is left as it is; one with no wheel for this Python says so."""
    env = tmp_path / "needs-env"
    subprocess.run([sys.executable, "-m", "venv", str(env)], check=True, capture_output=True)

    def pin(
        name: str, module: str, folder: str, version: str = "stand-in", python: str = ""
    ) -> dict[str, str]:
        # a stand-in wheel whose distribution is named after its module (pynvml for nvidia-ml-py)
        (cache / folder).mkdir(exist_ok=True)
        wheel = fakes.make_wheel(
            cache / folder,
            module,
            "1.0",
            python="py3",
            platform="any",
            module=f"__version__ = {version!r}\n",
        )
        return {
            "name": name,
            "version": "1.0",
            "module": module,
            "python": python,
            "filename": wheel.name,
            "url": wheel.resolve().as_uri(),
            "sha256": fakes.sha256(wheel),
        }

    def needs(pinned: list[dict[str, str]]) -> str:
        script = (
            f"import sys; sys.path.insert(0, {str(INSTALLER.parent)!r}); import install_build as b;"
            f" b.SUITE_NEEDS['linux-x86_64-cuda'] = {pinned!r}; print(b.ensure_suite_needs('linux-x86_64-cuda'))"
        )
        return subprocess.run(
            [str(env / "bin" / "python"), "-c", script], capture_output=True, text=True
        ).stdout

    def version(module: str) -> str:
        found = subprocess.run(
            [str(env / "bin" / "python"), "-c", f"import {module}; print({module}.__version__)"],
            capture_output=True,
            text=True,
        )
        return found.stdout.strip() or found.stderr.strip().splitlines()[-1]

    psutil = pin("psutil", "psutil", "first")
    said = needs(
        [{**psutil, "sha256": "0" * 64}]
    )  # a wheel that is not the pinned one: nothing installed, and why
    assert said.startswith("; psutil not installed (") and "does not match the pinned 0000" in said
    assert needs([psutil]) == "\n" and version("psutil") == "stand-in"
    other_psutil = pin("psutil", "psutil", "second", version="reinstalled")
    nvml = pin("nvidia-ml-py", "pynvml", "nvml")
    zeus = pin("zeus-apple-silicon", "zeus_apple_silicon", "zeus", python="cp27")
    no_zeus = f"; zeus-apple-silicon not installed (no wheel is pinned for {TAG} on linux-x86_64-cuda): the energy rows are n/a\n"
    assert needs([other_psutil, nvml, zeus]) == no_zeus
    assert (
        version("psutil") == "stand-in" and version("pynvml") == "stand-in"
    )  # psutil was importable: kept
    assert not (
        cache / "cache" / "wheels" / other_psutil["sha256"]
    ).exists()  # and not even fetched
    assert needs([other_psutil, nvml, zeus]) == no_zeus and version(
        "zeus_apple_silicon"
    ).startswith("ModuleNotFoundError")


@pytest.mark.slow
@pytest.mark.skipif(not LOCAL_TORCH.is_file(), reason=f"needs {LOCAL_TORCH}")
def test_scripts_bench_of_a_tampered_build_installs_no_other_build_instead(tmp_path):
    """Issue 34's case: scripts/bench -b ROW HASH^! with that build's stored wheel tampered. asv's discovery then
    tried the newest build of each branch (it downloaded 8.7 GB of v2.15.0); here the tip is this .venv's torch."""
    from tests.test_faults import QUICK_SELECTION, bench_checkout

    repo, env = bench_checkout(
        tmp_path, with_wheel=True
    )  # release: [the local 2.13.0+cpu wheel, the .venv's torch]
    manifest = mf.load(repo / "builds" / "manifest.json")
    commits = timeline.compute(manifest, tmp_path / "names").commits
    wheel_build, tip = (f"release@{build.id}" for build in manifest.channel("release").builds)  # type: ignore[union-attr]
    pin = next(p for p in manifest.find(wheel_build).pins["linux-x86_64-cpu"] if p.name == "torch")
    stored = Path(env["MPSBENCH_CACHE"]) / "wheels" / pin.sha256 / pin.filename
    stored.parent.mkdir(parents=True)
    stored.write_bytes(
        LOCAL_TORCH.read_bytes()[:-1] + b"!"
    )  # the store's copy, changed since it was checked
    done = subprocess.run(
        ["scripts/bench", *QUICK_SELECTION, f"{commits[wheel_build]}^!"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=1500,
    )
    said = done.stdout + done.stderr
    # asv ran and the build failed (and, with no build ever discovered in this fresh suite, asv publish has no list)
    assert done.returncode != 0, said[-3000:]
    assert (
        f"of the stored copy {stored} (changed since it was checked" in said
        and "refusing to install" in said
    )
    assert (
        f"not installing build {tip} ({commits[tip][:8]}): this run measures only the builds in"
        in said
    )
    assert "installed torch" not in said and "switched to cached torch" not in said
    assert not list((Path(env["MPSBENCH_CACHE"]) / "builds").glob("*/.complete"))


@pytest.mark.slow
@pytest.mark.skipif(
    not LOCAL_TORCH.is_file() or sys.version_info[:2] != (3, 11), reason=f"needs {LOCAL_TORCH}"
)
def test_a_real_build_installs_from_its_pins_alone_and_imports(cache, venv):
    """pip installs exactly the pinned files (--require-hashes --no-deps --no-index): the set pip's resolver made for
    the local torch 2.13.0+cpu wheel (its requirements from PyPI, with their sha256) is all torch needs to import."""
    from mpsbench.builds import resolve

    with fakes.skip_if_index_unreachable():
        build = resolve.wheel_file(LOCAL_TORCH, transformers="none", build_id="2.13.0-cpu")
    folder = cache / "b"
    folder.mkdir()
    (folder / "build.json").write_text(timeline.build_record("local", build))
    done = install(venv, folder)
    assert done.returncode == 0, done.stderr
    version = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-c",
            "import torch; print(torch.__version__, torch.ones(2).sum())",
        ],
        capture_output=True,
        text=True,
    )
    assert version.stdout.strip() == "2.13.0+cpu tensor(2.)", version.stderr
    installed = json.loads(next((cache / "cache" / "builds").glob("*/.complete")).read_text())[
        "wheels"
    ]
    assert sorted(installed) == sorted(pin.filename for pin in build.pins["linux-x86_64-cpu"])


# --- self-healing: a build folder removed or damaged in the cache is reinstalled from the hash-checked store ------


def test_a_build_folder_removed_from_the_cache_is_reinstalled_at_the_next_start(cache, venv):
    build_dir = _build_dir(cache / "b1", _wheel(cache / "w1", "healed"))
    assert install(venv, build_dir).returncode == 0 and imported(venv) == "healed"
    folder = Path(json.loads((venv / "mpsbench-build.json").read_text())["folder"])
    import shutil

    shutil.rmtree(
        folder
    )  # asv would not run the install again: the env's installed commit is unchanged
    assert (
        imported(venv) == "healed"
    )  # the .pth's heal line reinstalled it from the store before the import
    assert install_build.damage(folder) is None


def test_a_damaged_build_folder_is_reinstalled_and_a_changed_store_copy_refused(cache, venv):
    wheel = _wheel(cache / "w1", "whole")
    build_dir = _build_dir(cache / "b1", wheel)
    assert install(venv, build_dir).returncode == 0
    folder = Path(json.loads((venv / "mpsbench-build.json").read_text())["folder"])
    (folder / "torch" / "version.py").write_text(
        "truncated"
    )  # a file of another size than its RECORD says
    assert (
        install_build.damage(folder)
        == f"{folder / 'torch' / 'version.py'} is not the size its wheel installed"
    )
    again = install(venv, build_dir)
    assert again.returncode == 0 and again.stdout.startswith("mpsbench: installed torch"), (
        again.stderr
    )
    assert install_build.damage(folder) is None and imported(venv) == "whole"
    (folder / "torch" / "__init__.py").unlink()
    stored = next((cache / "cache" / "wheels").glob("*/torch-*.whl"))
    stored.write_bytes(b"changed")  # the store is hash-checked: a changed copy is never installed
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import torch"], capture_output=True, text=True
    )
    assert "does not match the pinned" in done.stderr
    assert not (
        folder / "torch" / "__init__.py"
    ).exists()  # nothing from the changed copy was installed


def test_a_staging_folder_is_kept_while_its_build_lock_is_held_and_an_old_partial_copy_goes(cache):
    """Judged by the lock, not the PID: a cache shared by hosts or containers sees others' PIDs dead.
    A partial copy an older version left beside the store (.FILE.PID.partial) of a dead process goes."""
    import fcntl

    builds, store = cache / "cache" / "builds", cache / "cache" / "wheels"
    held, free = (builds / f"{key}.staging-999999999-abc" for key in ("a" * 20, "b" * 20))
    for staging in (held, free):
        staging.mkdir(parents=True)
    partial = store / ("0" * 64) / ".torch-1-py3-none-any.whl.999999999.partial"
    partial.parent.mkdir(parents=True)
    partial.write_bytes(b"x")
    with open(builds / f"{'a' * 20}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another installer of that build, still at work
        assert install_build.clean_leftovers(cache / "cache") == [free, partial]
    assert held.exists() and not free.exists() and not partial.exists()
