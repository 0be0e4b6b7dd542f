"""Install a timeline build once and switch an asv environment to it by a .pth file (standard
library and pip only).

    install_build.py install BUILD_DIR ENV_DIR SUITE_SRC | uninstall ENV_DIR | heal ENV_DIR
    install_build.py requirements MANIFEST CHANNEL[@ID] | paths BUILD_DIR SUITE_SRC
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from types import ModuleType
from typing import Any

PTH_NAME = "mpsbench_build.pth"
RECORD = "mpsbench-build.json"
CACHE_ENV = "MPSBENCH_CACHE"
PLATFORM_ENV = "MPSBENCH_PLATFORM"
WHEELHOUSE_ENV = "MPSBENCH_WHEELHOUSE"  # os.pathsep-separated folders of pinned wheels
RUN_BUILDS_ENV = "MPSBENCH_RUN_BUILDS"  # file of the timeline hashes this run may install
HEALING_ENV = "MPSBENCH_HEALING"
PIP_FETCHES = ("torch", "torchvision", "transformers")  # pip download tried before their URL
WITHOUT = {
    "psutil": "cpu memory falls back to /proc or is skipped",
    "nvidia-ml-py": "cuda's energy rows are n/a",
    "zeus-apple-silicon": "the energy rows are n/a",
}

# name version module python ("-": any) sha256, then the path under PyPI's packages/
_NEEDS = """
psutil 7.2.2 psutil - 1a7b04c10f32cc88ab39cbf606e117fd74721c831c98a27dc04578deb0c16979
  80/c4/f5af4c1ca8c1eeb2e92ccca14ce8effdeec651d5ab6053c589b074eda6e1
  psutil-7.2.2-cp36-abi3-macosx_11_0_arm64.whl
psutil 7.2.2 psutil - 076a2d2f923fd4821644f5ba89f059523da90dc9014e85f8e45a5774ca5bc6f9
  b5/70/5d8df3b09e25bce090399cf48e452d25c935ab72dad19406c77f4e828045
  psutil-7.2.2-cp36-abi3-manylinux2010_x86_64.manylinux_2_12_x86_64.manylinux_2_28_x86_64.whl
nvidia-ml-py 13.615.71 pynvml - 959bf4adf6fe1308e4bd739e722236b0d1ec8392e2cefad33ff70c311380b9b6
  53/a1/1681dfa1c904d4e3e72e51b55a0ff012d50b766843ef832d584abe2113c6
  nvidia_ml_py-13.615.71-py3-none-any.whl
zeus-apple-silicon 1.1.0 zeus_apple_silicon cp310 ed75237100da14552c50618ad8a18e16eb8d7fb1bdf31c43f5134bf2ab47830d
  b9/2c/2d2cd9d53167b4ab951217d54fa13f3ac183808958193de7d83455903d10
  zeus_apple_silicon-1.1.0-cp310-cp310-macosx_11_0_arm64.whl
zeus-apple-silicon 1.1.0 zeus_apple_silicon cp311 fca4ff0211b1440841fa8454ea6effedc55c83a17be770ad92bb39da961a2214
  4a/cd/69179ff6d638103440457cbe1c8c0b30d0a22a6bb6f2c043a42995fb99e4
  zeus_apple_silicon-1.1.0-cp311-cp311-macosx_11_0_arm64.whl
zeus-apple-silicon 1.1.0 zeus_apple_silicon cp312 c862421e3477344260fad80276cb6b8f6ed7189b5472ef3fca9a54cd5a780aa7
  4b/50/dae39d71cdfed918eea04596ca582f3a8428bb8e44d76e88020d02f04b75
  zeus_apple_silicon-1.1.0-cp312-cp312-macosx_11_0_arm64.whl
zeus-apple-silicon 1.1.0 zeus_apple_silicon cp313 410ecf3f594fc94202ad778d274131a24a403553c9b56c7907344edc9107ec03
  c8/0c/e162be99be598d9be1ee48732a95475a42473b311c4809fc01dcc13a68c7
  zeus_apple_silicon-1.1.0-cp313-cp313-macosx_11_0_arm64.whl
"""
_PINS = [
    {"name": name, "version": version, "module": module, "python": python.strip("-"), "sha256": sha}
    | {"filename": file, "url": f"https://files.pythonhosted.org/packages/{folder}/{file}"}
    for name, version, module, python, sha, folder, file in zip(*[iter(_NEEDS.split())] * 7)
]
# zeus-apple-silicon has wheels for CPython 3.10-3.13 only: elsewhere the energy rows are n/a
SUITE_NEEDS: dict[str, list[dict[str, str]]] = {
    "macos-arm64": [_PINS[0], *_PINS[3:]],
    "linux-x86_64-cpu": [_PINS[1]],
    "linux-x86_64-cuda": _PINS[1:3],
}


class InstallError(Exception):
    """Not a UserError: this file imports no mpsbench."""


def cache_root() -> Path:
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "mpsbench")


def stored_wheel(pin: dict[str, str]) -> Path:
    return cache_root() / "wheels" / pin["sha256"] / pin["filename"]


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _packaging() -> tuple[ModuleType, ModuleType]:
    try:
        from packaging import tags, utils
    except ImportError:  # only then: importing pip breaks a later torch.compile (pypa/pip#8761)
        from pip._vendor.packaging import tags, utils  # type: ignore[no-redef]
    return tags, utils


def plain_wheel_name(filename: object) -> bool:
    if not isinstance(filename, str) or any(bad in filename for bad in ("/", "\\", "..", "\0")):
        return False
    try:
        _packaging()[1].parse_wheel_filename(filename)
    except ValueError:
        return False
    return True


def allowed_url(url: object) -> bool:
    return isinstance(url, str) and re.fullmatch(r"(https|file)://\S+", url) is not None


def _refuse_odd(pins: list[dict[str, str]], where: str = "") -> None:
    plain = all(plain_wheel_name(p["filename"]) and allowed_url(p["url"]) for p in pins)
    if not plain or len({p["name"] for p in pins}) < len(pins):
        named = [f"{p['filename']} at {p['url']}" for p in pins]
        raise InstallError(
            f"{where}refusing the pins {named}: each must be a plain wheel file name at an https://"
            " or file:// URL, one per package"
        )


def nvidia_gpu() -> bool:
    return Path("/proc/driver/nvidia/gpus").is_dir() or shutil.which("nvidia-smi") is not None


def platform_candidates() -> list[str]:
    if forced := os.environ.get(PLATFORM_ENV):
        return [forced]
    machine = platform.machine().lower()
    if sys.platform == "darwin" and machine == "arm64":
        return ["macos-arm64"]
    if sys.platform.startswith("linux") and machine in ("x86_64", "amd64"):
        # PyPI's Linux torch (CUDA) runs on the cpu too
        keys = ["linux-x86_64-cpu", "linux-x86_64-cuda"]
        return keys[::-1] if nvidia_gpu() else keys
    return []


def _python_tag(python: tuple[int, int] | None = None) -> str:
    major, minor = python or sys.version_info[:2]
    return f"cp{major}{minor}"


def _name(build: dict[str, Any]) -> str:
    return f"{build['channel']}@{build['id']}"


def _ref(build: dict[str, Any]) -> str:
    return f"build {_name(build)}"


def select_pins(
    build: dict[str, Any], python: tuple[int, int] | None = None
) -> tuple[str, list[dict[str, str]]]:
    """The platform key and ``build``'s set for this machine and Python."""
    candidates, tag = platform_candidates(), _python_tag(python)
    for key in candidates:
        pins = build["pins"].get(key, [])
        if not all(pin.get("python") for pin in pins):
            raise InstallError(
                f"{_ref(build)} has no set per Python for {key} (pip would fetch the rest"
                " unchecked); re-pin it with `mpsbench build add-release`"
            )
        chosen = [pin for pin in pins if pin["python"] == tag]
        if any(pin["name"] == "torch" for pin in chosen):
            _refuse_odd(chosen, f"{_ref(build)} on {key}: ")
            return key, chosen
    pinned = (
        "; ".join(
            f"{key}: {', '.join(sorted({pin.get('python') or '?' for pin in pins}))}"
            for key, pins in sorted(build["pins"].items())
        )
        or "none"
    )
    here = ", ".join(candidates) or f"{sys.platform}/{platform.machine()}"
    raise InstallError(f"{_ref(build)} pins no torch wheel for {tag} on {here} (pinned: {pinned})")


def why_not_here(filenames: list[str], python: tuple[int, int] | None = None) -> str | None:
    """Why one of these wheels cannot run here (under ``python``, else this one)."""
    tags, utils = _packaging()
    platforms, this = list(tags.platform_tags()), _python_tag(python)
    here = {
        *tags.cpython_tags(python, platforms=platforms),
        *tags.compatible_tags(python, this, platforms),
    }
    for filename in filenames:
        wanted = utils.parse_wheel_filename(filename)[3]
        if here.isdisjoint(wanted):
            return f"{filename} needs {_requirement(wanted, here, this)}"
    return None


def _requirement(wanted: frozenset[Any], here: set[Any], this: str) -> str:
    platforms = sorted({tag.platform for tag in wanted})
    if set(platforms) & {tag.platform for tag in here}:
        return f"Python {', '.join(sorted({tag.interpreter for tag in wanted}))} (this is {this})"
    for prefix, system, needs, have in (
        ("macosx_", "darwin", "macOS", f"this Mac runs macOS {platform.mac_ver()[0]}"),
        ("manylinux_", "linux", "glibc", f"this machine has {' '.join(platform.libc_ver())}"),
    ):
        found = [tuple(map(int, p.split("_")[1:3])) for p in platforms if p.startswith(prefix)]
        if found and sys.platform.startswith(system):
            return f"{needs} {'.'.join(map(str, min(found)))} or newer ({have})"
    return f"a machine of {', '.join(platforms)}"


def _refuse_unasked(build: dict[str, Any]) -> None:
    listed, commit = os.environ.get(RUN_BUILDS_ENV), os.environ.get("ASV_COMMIT", "")
    if not listed or not commit:
        return
    try:
        asked = Path(listed).read_text().split()
    except OSError as exc:
        raise InstallError(
            f"cannot read {RUN_BUILDS_ENV}={listed}, the builds this run measures: {exc.strerror}"
        ) from None
    if not any(len(line) >= 7 and commit.startswith(line) for line in asked):
        raise InstallError(
            f"not installing {_ref(build)} ({commit[:8]}): this run measures only the builds in {listed}"
        )


def _local_wheelhouses() -> list[Path]:
    entries = " ".join(os.environ.get(name, "") for name in (WHEELHOUSE_ENV, "PIP_FIND_LINKS"))
    return [
        Path(entry)
        for entry in entries.replace(os.pathsep, " ").split()
        if "://" not in entry and Path(entry).is_dir()
    ]


def _pip(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # pip unpacks GBs into TMPDIR; no machine-wide pip constraint may veto the pins
    env = dict(os.environ, PIP_CONSTRAINT=os.devnull, TMPDIR=str(tmp))
    command = [sys.executable, "-m", "pip", "--quiet", "--disable-pip-version-check", *args]
    return subprocess.run(command, capture_output=True, text=True, env=env)


def _pip_install_checked(
    what: str, wheels: list[tuple[Path, dict[str, str]]], folder: Path, *target: str
) -> None:
    listed = folder / "requirements.txt"
    listed.write_text(
        "".join(f"{p.resolve().as_uri()} --hash=sha256:{pin['sha256']}\n" for p, pin in wheels)
    )
    args = ("--no-deps", "--require-hashes", "--no-index", "--no-warn-script-location", "-r")
    done = _pip(folder, "install", *args, str(listed), *target)
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip().splitlines()[-5:]
        raise InstallError(f"pip could not install {what}: {' | '.join(said)}")


def _check(pin: dict[str, str], found: Path, where: str) -> None:
    if (actual := sha256_of(found)) != pin["sha256"]:
        raise InstallError(
            f"{pin['filename']}: sha256 {actual} of {where} does not match the pinned"
            f" {pin['sha256']}; refusing to install"
        )


DOWNLOAD_TRIES = 5
DOWNLOAD_BACKOFF = 2.0  # seconds, doubled at each retry
PROGRESS_EVERY = 60.0


def open_url(url: str, method: str | None = None, timeout: float = 60, **headers: str) -> Any:
    headers = {"User-Agent": "mpsbench (+https://github.com/mpsbench/mpsbench)", **headers}
    return urllib.request.urlopen(
        urllib.request.Request(url, method=method, headers=headers), timeout=timeout
    )


def _download(url: str, target: Path) -> Path:
    """Resume by HTTP Range after a cut; the caller checks sha256."""
    import http.client

    done, total, said, problem = 0, None, time.monotonic(), ""
    for attempt in range(1, DOWNLOAD_TRIES + 1):
        if attempt > 1:
            wait = DOWNLOAD_BACKOFF * 2 ** (attempt - 2)
            _say(
                target,
                f"{problem}; attempt {attempt} of {DOWNLOAD_TRIES} in {wait:.0f} s, from byte {done}",
            )
            time.sleep(wait)
        try:
            with open_url(
                url, timeout=120, **({"Range": f"bytes={done}-"} if done else {})
            ) as response:
                if response.status != 206:  # the Range was ignored: start over
                    done = 0
                if (length := response.headers.get("Content-Length")) is not None:
                    total = done + int(length)
                with open(target, "ab" if done else "wb") as out:
                    while chunk := response.read(1 << 20):
                        done += out.write(chunk)
                        if time.monotonic() - said >= PROGRESS_EVERY:
                            said = time.monotonic()
                            of = f" of {total / 1e9:.2f}" if total else ""
                            _say(target, f"{done / 1e9:.2f}{of} GB downloaded")
            if total is None or done >= total:
                return target
            problem = f"the connection closed after {done} of {total} bytes"
        except urllib.error.HTTPError as exc:
            if exc.code not in (408, 429) and exc.code < 500:
                raise InstallError(f"{target.name}: cannot download {url}: {exc}") from None
            problem = str(exc)
        except (
            urllib.error.URLError,
            TimeoutError,
            ConnectionError,
            http.client.HTTPException,
        ) as exc:
            problem = str(exc) or type(exc).__name__
    raise InstallError(
        f"{target.name}: cannot download {url} after {DOWNLOAD_TRIES} attempts: {problem}"
    )


def _say(target: Path, text: str) -> None:
    print(f"mpsbench: {target.name}: {text}", file=sys.stderr)


def disk_problem(exc: OSError) -> InstallError:
    advice = (
        f"free space there, or set {CACHE_ENV} to a folder on a disk with room (a build takes 3-6 GB)"
        if exc.errno in (errno.ENOSPC, errno.EDQUOT)
        else f"make it writable, or set {CACHE_ENV} to a writable folder"
    )
    return InstallError(
        f"cannot write the build cache at {exc.filename or cache_root()}: {exc.strerror or exc};"
        f" {advice}"
    )


def local_path(location: str) -> Path:
    if location.startswith("file://"):
        return Path(urllib.request.url2pathname(urllib.parse.urlparse(location).path))
    return Path(location)


def _find(pin: dict[str, str], scratch: Path) -> Path:
    name = pin["filename"]
    if housed := [f / name for f in _local_wheelhouses() if (f / name).is_file()]:
        return housed[0]
    if pin["url"].startswith("file://"):
        if not (found := local_path(pin["url"])).is_file():
            raise InstallError(f"{name}: the pinned file {found} does not exist")
        return found
    if pin["name"] in PIP_FETCHES:
        spec = f"{pin['name']}=={pin['version']}"
        _pip(scratch, "download", "--no-deps", "--only-binary=:all:", "--dest", str(scratch), spec)
        if (scratch / name).is_file():
            return scratch / name
    return _download(pin["url"], scratch / name)


def fetch_wheel(pin: dict[str, str]) -> Path:
    """The pinned wheel in the store, fetched and sha256-checked once."""
    _refuse_odd([pin])
    stored = stored_wheel(pin)
    if stored.is_file():
        _check(
            pin,
            stored,
            f"the stored copy {stored} (changed since it was checked; delete it to fetch it again)",
        )
        return stored
    try:
        stored.parent.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(
            dir=stored.parent.parent, prefix=f"fetch-{os.getpid()}-"
        ) as scratch:
            found = _find(pin, Path(scratch))
            _check(pin, found, f"the wheel found at {found}")
            stored.parent.mkdir(exist_ok=True)
            if found.parent != Path(scratch):  # the user's own file stays where it is
                found = shutil.copyfile(found, Path(scratch) / found.name)
            os.replace(found, stored)
    except OSError as exc:
        raise disk_problem(exc) from None
    return stored


def _alive(pid: str) -> bool:
    try:
        os.kill(int(pid), 0)
    except (ValueError, ProcessLookupError):
        return False
    except PermissionError:
        pass
    return True


def clean_leftovers(root: Path) -> list[Path]:
    """Remove the staging folders whose build lock is free and the fetches of processes gone."""
    removed = []
    for staging in sorted((root / "builds").glob("*.staging-*")):
        # by the lock, not the PID: a cache shared by hosts or containers sees others' PIDs dead
        lock_path = root / "builds" / f"{staging.name.split('.staging-')[0]}.lock"
        with open(lock_path, "a") as lock, contextlib.suppress(BlockingIOError):
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            shutil.rmtree(staging, ignore_errors=True)
            removed.append(staging)
    fetches = [(path, path.name.split("-")[1]) for path in (root / "wheels").glob("fetch-*-*")]
    # .FILE.PID.partial: the copies older versions made beside the store
    partials = [
        (path, path.name.rsplit(".", 2)[-2]) for path in (root / "wheels").glob("*/.*.partial")
    ]
    for leftover, pid in sorted([*fetches, *partials]):
        if not _alive(pid):
            shutil.rmtree(leftover, ignore_errors=True)
            leftover.unlink(missing_ok=True)
            removed.append(leftover)
    return removed


def installed_folder(pins: list[dict[str, str]]) -> Path:
    key = hashlib.sha256("".join(sorted(pin["sha256"] for pin in pins)).encode())
    return cache_root() / "builds" / key.hexdigest()[:20]


def damage(folder: Path) -> str | None:
    """Why an installed build's folder is not whole, else None."""
    if not (folder / ".complete").is_file():
        return f"{folder} is missing or was never completed"
    for dist in importlib.metadata.distributions(path=[str(folder)]):
        try:
            files = dist.files or []
        except (OSError, UnicodeDecodeError) as exc:
            return f"the RECORD of {dist.name} in {folder} cannot be read ({exc})"
        for file in (f for f in files if f.size is not None and not str(f).startswith(("/", ".."))):
            try:
                if (folder / file).stat().st_size != file.size:
                    return f"{folder / file} is not the size its wheel installed"
            except OSError:
                return f"{folder / file} is missing"
    return None


def ensure_installed(pins: list[dict[str, str]]) -> tuple[Path, bool]:
    """The folder of ``pins``, installed unless whole (True: now)."""
    folder = installed_folder(pins)
    if damage(folder) is None:
        return folder, False
    try:
        clean_leftovers(cache_root())
        folder.parent.mkdir(parents=True, exist_ok=True)
        with open(folder.with_suffix(".lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if damage(folder) is None:
                return folder, False
            wheels = [(fetch_wheel(pin), pin) for pin in pins]
            with tempfile.TemporaryDirectory(
                dir=folder.parent,
                prefix=f"{folder.name}.staging-",
                ignore_cleanup_errors=True,
            ) as scratch:
                installed = Path(scratch) / "target"
                _pip_install_checked("the build", wheels, Path(scratch), "--target", str(installed))
                complete_mark = {"wheels": [path.name for path, _ in wheels]}
                (installed / ".complete").write_text(json.dumps(complete_mark, indent=1))
                shutil.rmtree(folder, ignore_errors=True)
                os.replace(installed, folder)
            return folder, True
    except OSError as exc:
        raise disk_problem(exc) from None


def _site_packages() -> Path:
    return Path(sysconfig.get_paths()["purelib"])


def suite_needs(key: str, python: tuple[int, int] | None = None) -> list[dict[str, str]]:
    return [pin for pin in SUITE_NEEDS.get(key, []) if pin["python"] in ("", _python_tag(python))]


def ensure_suite_needs(key: str) -> str:
    """Install the SUITE_NEEDS of ``key`` not yet importable; why any is left out."""
    key = key if key in SUITE_NEEDS else next(iter(platform_candidates()), key)
    modules = {pin["name"]: pin["module"] for pins in SUITE_NEEDS.values() for pin in pins}
    why = {
        name: f"no wheel is pinned for {_python_tag()} on {key}"
        for name in sorted({pin["name"] for pin in SUITE_NEEDS.get(key, [])} or {"psutil"})
        if importlib.util.find_spec(modules[name]) is None
    }
    fetched = []
    for pin in (pin for pin in suite_needs(key) if pin["name"] in why):
        try:
            fetched.append((fetch_wheel(pin), pin))
        except (InstallError, OSError) as exc:
            why[pin["name"]] = str(exc)
    if names := [pin["name"] for _, pin in fetched]:
        try:
            with tempfile.TemporaryDirectory(prefix="mpsbench-needs-") as scratch:
                _pip_install_checked(", ".join(names), fetched, Path(scratch))
            for name in names:
                del why[name]
        except (InstallError, OSError) as exc:
            why.update(dict.fromkeys(names, str(exc)))
    return "".join(
        f"; {name} not installed ({said}): {WITHOUT[name]}" for name, said in why.items()
    )


def paths(build_dir: Path, suite_src: Path) -> dict[str, Any]:
    """The build installed but not switched to: its record, sys.path entries and variables."""
    build = json.loads((build_dir / "build.json").read_text())
    _refuse_unasked(build)
    pins: list[dict[str, str]] = []
    key, fresh = "existing", False
    if build["kind"] == "existing":
        folder = Path(build["site_packages"])
        if not (folder / "torch" / "__init__.py").is_file():
            raise InstallError(f"{_ref(build)}: {folder} holds no torch")
    else:
        key, pins = select_pins(build)
        if unfit := why_not_here([pin["filename"] for pin in pins]):
            raise InstallError(
                f"{_ref(build)} cannot run here, skipped before any download: {unfit}"
            )
        folder, fresh = ensure_installed(pins)
    return {
        "build": _name(build),
        "torch_version": build["torch_version"],
        "platform": key,
        "folder": str(folder),
        "fresh": fresh,
        "pins": pins,
        "paths": [str(folder), str(suite_src.resolve())],
        "torch_dir": str(folder.resolve() / "torch"),
        "env": build.get("env") or {},
        "needs": ensure_suite_needs(key),
    }


def install(build_dir: Path, env_dir: Path, suite_src: Path) -> str:
    started = time.perf_counter()
    placed = paths(build_dir, suite_src)
    key = placed["platform"]
    # heal first: site adds only folders that exist, and it may restore one
    lines = [] if key == "existing" else [_heal_line(Path(placed["folder"]), env_dir)]
    lines += placed["paths"]
    if placed["env"]:
        lines.append(f"import os; os.environ.update({json.dumps(placed['env'], sort_keys=True)})")
    (_site_packages() / PTH_NAME).write_text("\n".join(lines) + "\n")
    # heal reads build and pins; the rest tells a user which torch this environment imports
    kept = ("build", "pins", "folder", "torch_version", "torch_dir")
    record = {name: placed[name] for name in kept}
    (env_dir / RECORD).write_text(json.dumps(record, indent=1) + "\n")
    how = "installed" if placed["fresh"] else "switched to cached"
    seconds = time.perf_counter() - started
    return f"mpsbench: {how} torch {placed['torch_version']} ({key}) in {seconds:.2f} s{placed['needs']}"


def _heal_line(folder: Path, env_dir: Path) -> str:
    """Reinstall a vanished build at start-up (asv installs only on a switch)."""
    marks = [str(folder / ".complete"), str(folder / "torch" / "__init__.py")]
    command = [str(Path(__file__).resolve()), "heal", str(env_dir)]
    return (
        f"import os, subprocess, sys; all(map(os.path.isfile, {json.dumps(marks)}))"
        f" or os.environ.get({HEALING_ENV!r}) or subprocess.run([sys.executable, *{json.dumps(command)}],"
        f" env=dict(os.environ, {HEALING_ENV}='1'))"
    )


def heal(env_dir: Path) -> str:
    try:
        record = json.loads((env_dir / RECORD).read_text())
    except (OSError, ValueError) as exc:
        raise InstallError(
            f"cannot read the build of {env_dir} ({exc}); asv's next install of it writes it"
        ) from None
    name, pins = record.get("build"), record.get("pins") or []
    if not pins:
        return f"mpsbench: {name} is used in place; nothing to heal"
    why = damage(installed_folder(pins))
    folder, fresh = ensure_installed(pins)
    if fresh:
        return f"mpsbench: reinstalled {name} from the store into {folder} ({why})"
    return f"mpsbench: {name} is whole in {folder}"


def requirements(manifest: Path, ref: str) -> str:
    """``ref``'s set here (CHANNEL@ID, or CHANNEL's newest) as hashed requirements."""
    channel_name, _, build_id = ref.partition("@")
    channels = json.loads(manifest.read_text()).get("channels", [])
    builds: list[dict[str, Any]] = next(
        (c["builds"] for c in channels if c.get("name") == channel_name), []
    )
    found = [b for b in builds if b["id"] == build_id] if build_id else builds
    if not found:
        raise InstallError(f"{manifest} has no build {ref!r}")
    _, pins = select_pins({"channel": channel_name, **found[-1]})
    return "".join(f"{pin['name']} @ {pin['url']} --hash=sha256:{pin['sha256']}\n" for pin in pins)


def uninstall(env_dir: Path) -> None:
    (_site_packages() / PTH_NAME).unlink(missing_ok=True)
    (env_dir / RECORD).unlink(missing_ok=True)


def main(argv: list[str]) -> int:
    command, *rest = argv or [""]
    args = [Path(arg) for arg in rest]
    try:
        if command == "install" and len(args) == 3:
            print(install(*args))
        elif command == "paths" and len(args) == 2:
            print(json.dumps(paths(*args)))
        elif command == "requirements" and len(args) == 2:
            print(requirements(args[0], rest[1]), end="")
        elif command == "heal" and len(args) == 1:
            print(heal(*args), file=sys.stderr)  # a benchmark's stdout is its answer to asv
        elif command == "uninstall" and len(args) == 1:
            uninstall(*args)
        else:
            print(__doc__, file=sys.stderr)
            return 2
    except InstallError as exc:
        print(f"mpsbench: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
