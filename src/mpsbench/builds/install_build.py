"""Install a timeline build into an asv environment: once per build, then switch by a .pth file.

asv runs this (``install_command``) with the environment's own python before anything else is there:
standard library and pip only. Every wheel is checked against its sha256; a build is staged and renamed into
place only when pip succeeds, and a cached one is switched to without writing (a read-only cache serves).

    python install_build.py install BUILD_DIR ENV_DIR SUITE_SRC
    python install_build.py uninstall ENV_DIR
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

PTH_NAME = "mpsbench_build.pth"
CACHE_ENV = "MPSBENCH_CACHE"  # default: ~/.cache/mpsbench
PLATFORM_ENV = "MPSBENCH_PLATFORM"  # force one of the manifest's platform keys
WHEELHOUSE_ENV = "MPSBENCH_WHEELHOUSE"  # folders searched for pinned wheels, os.pathsep-separated
# The suite's own imports beside the build (pyproject's dependencies): psutil reads the cpu's
# memory on every OS (src/mpsbench/measure/process_memory.py, which falls back where this install failed).
SUITE_NEEDS = ("psutil>=5.9",)


class InstallError(Exception):
    """A build that cannot be installed here: the message says which wheel and why.

    Not a ``command.UserError``: asv runs this file in a fresh environment with the standard library only.
    Where the CLI meets it (``resolve`` fetching a wheel) it becomes a ResolveError.
    """


def cache_root() -> Path:
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "mpsbench")


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


# --- choosing the wheels for this machine --------------------------------------------


def platform_candidates() -> list[str]:
    """Manifest platforms this machine can run, best first."""
    forced = os.environ.get(PLATFORM_ENV)
    if forced:
        return [forced]
    machine = platform.machine().lower()
    if sys.platform == "darwin" and machine == "arm64":
        return ["macos-arm64"]
    if sys.platform.startswith("linux") and machine in ("x86_64", "amd64"):
        # PyPI's Linux torch is a CUDA build, which runs on the cpu too.
        if Path("/proc/driver/nvidia/gpus").is_dir() or shutil.which("nvidia-smi"):
            return ["linux-x86_64-cuda", "linux-x86_64-cpu"]
        return ["linux-x86_64-cpu", "linux-x86_64-cuda"]
    return []


def _python_tag() -> str:
    return f"cp{sys.version_info.major}{sys.version_info.minor}"


def _fits(filename: str, python: tuple[int, int]) -> bool:
    """Whether a wheel's python and abi tags admit CPython ``python`` (its platform is the manifest's key)."""
    try:
        from packaging import tags, utils
    except ImportError:  # an environment asv has just made holds pip and nothing else yet: pip's own copy
        # Imported only there: importing pip turns setuptools' distutils shim off for the rest of the
        # process (pypa/pip#8761), and a later torch.compile imports setuptools.
        from pip._vendor.packaging import tags, utils  # type: ignore[no-redef]

    ours = {(tag.interpreter, tag.abi) for tag in (*tags.cpython_tags(python), *tags.compatible_tags(python))}
    return any((tag.interpreter, tag.abi) in ours for tag in utils.parse_wheel_filename(filename)[3])


def select_pins(build: dict[str, Any]) -> tuple[str, list[dict[str, str]]]:
    """The platform and the wheels of ``build`` for this machine and python."""
    candidates = platform_candidates()
    for key in candidates:
        pins = build["pins"].get(key, [])
        # A build resolved per interpreter names each wheel's set ("python": "cp310"): this
        # interpreter's set, complete, and no other. Older builds: each wheel by its tags.
        if any(pin.get("python") for pin in pins):
            pins = [pin for pin in pins if pin.get("python") == _python_tag()]
        else:
            pins = [pin for pin in pins if _fits(pin["filename"], sys.version_info[:2])]
        if any(pin["name"] == "torch" for pin in pins):
            chosen: dict[str, dict[str, str]] = {}
            for pin in pins:  # one wheel per package
                chosen.setdefault(pin["name"], pin)
            return key, list(chosen.values())
    pinned = ", ".join(sorted(build["pins"])) or "none"
    raise InstallError(
        f"build {build['channel']}@{build['id']} pins no torch wheel for {_python_tag()} on"
        f" {', '.join(candidates) or sys.platform + '/' + platform.machine()} (pinned platforms: {pinned})"
    )


# --- fetching and checking wheels ------------------------------------------------------


def _local_wheelhouses() -> list[Path]:
    folders = []
    for variable in (WHEELHOUSE_ENV, "PIP_FIND_LINKS"):
        for entry in os.environ.get(variable, "").replace(" ", os.pathsep).split(os.pathsep):
            if entry and "://" not in entry and Path(entry).is_dir():
                folders.append(Path(entry))
    return folders


def _pip(*args: str, tmp: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run this environment's pip quietly; a failure's output is in the result."""
    # The manifest's pins are the authority on what is installed: a machine-wide
    # pip constraint (a cap on torch's version, say) must not veto the build under test.
    env = dict(os.environ, PIP_CONSTRAINT=os.devnull)
    if tmp is not None:  # pip --target unpacks GBs into TMPDIR: keep them where the next run cleans up
        env["TMPDIR"] = str(tmp)
    command = [sys.executable, "-m", "pip", "--quiet", "--disable-pip-version-check", *args]
    return subprocess.run(command, capture_output=True, text=True, env=env)


def _tail(done: subprocess.CompletedProcess[str], lines: int) -> str:
    return " | ".join((done.stderr or done.stdout).strip().splitlines()[-lines:])


def _check(pin: dict[str, str], found: Path, where: str) -> None:
    actual = sha256_of(found)
    if actual != pin["sha256"]:
        raise InstallError(
            f"{pin['filename']}: sha256 {actual} of {where} {found} does not match the pinned {pin['sha256']};"
            " refusing to install"
        )


def _pip_download(pin: dict[str, str], dest: Path) -> Path | None:
    """Let pip find ``name==version`` through this machine's configured indexes and mirrors."""
    done = _pip("download", "--no-deps", "--only-binary=:all:", "--dest", str(dest), f"{pin['name']}=={pin['version']}")
    found = dest / pin["filename"]
    return found if done.returncode == 0 and found.is_file() else None


def _download(url: str, dest: Path) -> Path:
    target = dest / urllib.parse.unquote(url.rsplit("/", 1)[-1])
    request = urllib.request.Request(url, headers={"User-Agent": "mpsbench"})
    with urllib.request.urlopen(request, timeout=120) as response, open(target, "wb") as out:
        shutil.copyfileobj(response, out, 1 << 20)
    return target


def fetch_wheel(pin: dict[str, str]) -> Path:
    """The pinned wheel in the local wheel store, fetched and checked once.

    From the store, local wheelhouses, the pin's file:// path, pip (this machine's indexes and mirrors), else the
    URL itself; whatever is found must match the pinned sha256, or nothing is stored.
    """
    store = cache_root() / "wheels" / pin["sha256"]
    stored = store / pin["filename"]
    if stored.is_file():
        _check(pin, stored, "the stored copy (changed since it was checked; delete it to fetch it again)")
        return stored
    store.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=store.parent, prefix=f"fetch-{os.getpid()}-") as scratch:
        found = next((f / pin["filename"] for f in _local_wheelhouses() if (f / pin["filename"]).is_file()), None)
        url = pin["url"]
        if found is None and url.startswith("file://"):
            path = Path(urllib.request.url2pathname(urllib.parse.urlparse(url).path))
            if not path.is_file():
                raise InstallError(f"{pin['filename']}: the pinned file {path} does not exist")
            found = path
        if found is None and pin["name"] in ("torch", "torchvision", "transformers"):
            found = _pip_download(pin, Path(scratch))
        if found is None:
            try:
                found = _download(url, Path(scratch))
            except OSError as exc:
                raise InstallError(f"{pin['filename']}: cannot download {url}: {exc}") from None
        _check(pin, found, "the wheel found at")
        store.mkdir(exist_ok=True)
        partial = store / (pin["filename"] + ".partial")
        shutil.copyfile(found, partial)
        os.replace(partial, stored)
    return stored


# --- installing once, switching by .pth ------------------------------------------------


@contextlib.contextmanager
def _locked(path: Path, wait: bool = True) -> Iterator[bool]:
    """Serialize installs of one build between concurrent asv runs; yields False if ``wait`` is off and it is held."""
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        yield True  # closing the file releases the lock


def _alive(pid: str) -> bool:
    try:
        os.kill(int(pid), 0)
    except (ValueError, ProcessLookupError):
        return False
    except PermissionError:  # another user's process
        pass
    return True


def clean_leftovers(root: Path) -> list[Path]:
    """Remove what killed installs left: staging folders no install holds, fetch folders of dead processes."""
    removed = []
    for staging in sorted((root / "builds").glob("*.staging-*")):
        with _locked(root / "builds" / (staging.name.split(".staging-")[0] + ".lock"), wait=False) as free:
            if free:
                shutil.rmtree(staging, ignore_errors=True)
                removed.append(staging)
    for fetch in sorted((root / "wheels").glob("fetch-*-*")):
        if not _alive(fetch.name.split("-")[1]):
            shutil.rmtree(fetch, ignore_errors=True)
            removed.append(fetch)
    return removed


def ensure_installed(pins: list[dict[str, str]]) -> tuple[Path, bool]:
    """The folder holding this set of wheels installed with their dependencies; True if installed now."""
    key = hashlib.sha256("".join(sorted(pin["sha256"] for pin in pins)).encode()).hexdigest()[:20]
    folder = cache_root() / "builds" / key
    if (folder / ".complete").is_file():  # installed: nothing to write, so a read-only cache serves it
        return folder, False
    try:
        clean_leftovers(cache_root())
        with _locked(folder.with_suffix(".lock")):
            if (folder / ".complete").is_file():
                return folder, False
            wheels = [str(fetch_wheel(pin)) for pin in pins]
            staging = Path(tempfile.mkdtemp(dir=folder.parent, prefix=folder.name + ".staging-"))
            (staging / "tmp").mkdir()
            done = _pip("install", "--no-warn-script-location", "--target", str(staging / "target"), *wheels,
                        tmp=staging / "tmp")
            if done.returncode != 0:
                shutil.rmtree(staging, ignore_errors=True)
                raise InstallError("pip could not install the build: " + _tail(done, 5))
            installed = staging / "target"
            (installed / ".complete").write_text(json.dumps({"wheels": [Path(w).name for w in wheels]}, indent=1))
            if folder.exists():
                shutil.rmtree(folder)
            os.replace(installed, folder)
            shutil.rmtree(staging, ignore_errors=True)
            return folder, True
    except OSError as exc:  # a read-only or full cache: one line, not a traceback
        raise InstallError(f"cannot install into the build cache {cache_root()}: {exc}") from None


def _site_packages() -> Path:
    return Path(sysconfig.get_paths()["purelib"])


def ensure_suite_needs() -> str:
    """Install SUITE_NEEDS into this environment (once: later calls find them); '' or what is missing and why."""
    import importlib.util

    missing = [need for need in SUITE_NEEDS if importlib.util.find_spec(need.split(">")[0]) is None]
    if not missing:
        return ""
    done = _pip("install", "--no-deps", *missing)
    if done.returncode == 0:
        return ""
    return f"; {', '.join(missing)} not installed ({_tail(done, 1)}): cpu memory falls back to /proc or is skipped"


def install(build_dir: Path, env_dir: Path, suite_src: Path) -> str:
    """Install (once) and switch the running environment to the build in ``build_dir``."""
    started = time.perf_counter()
    build = json.loads((build_dir / "build.json").read_text())
    if build["kind"] == "existing":
        key, folder, fresh = "existing", Path(build["site_packages"]), False
        if not (folder / "torch" / "__init__.py").is_file():
            raise InstallError(f"build {build['channel']}@{build['id']}: {folder} holds no torch")
    else:
        key, pins = select_pins(build)
        folder, fresh = ensure_installed(pins)
    pth_lines = [str(folder), str(suite_src.resolve())]
    if build.get("env"):  # a .pth line that starts with "import" is executed at every interpreter start
        pth_lines.append(f"import os; os.environ.update({json.dumps(build['env'], sort_keys=True)})")
    (_site_packages() / PTH_NAME).write_text("\n".join(pth_lines) + "\n")
    record = {"build": f"{build['channel']}@{build['id']}", "platform": key, "folder": str(folder), "fresh": fresh}
    (env_dir / "mpsbench-build.json").write_text(json.dumps(record, indent=1) + "\n")
    how = "installed" if fresh else "switched to cached"
    needs = ensure_suite_needs()
    return f"mpsbench: {how} torch {build['torch_version']} ({key}) in {time.perf_counter() - started:.2f} s{needs}"


def uninstall(env_dir: Path) -> None:
    (_site_packages() / PTH_NAME).unlink(missing_ok=True)
    (env_dir / "mpsbench-build.json").unlink(missing_ok=True)


def main(argv: list[str]) -> int:
    try:
        if argv[:1] == ["install"] and len(argv) == 4:
            print(install(Path(argv[1]), Path(argv[2]), Path(argv[3])))
        elif argv[:1] == ["uninstall"] and len(argv) == 2:
            uninstall(Path(argv[1]))
        else:
            print(__doc__, file=sys.stderr)
            return 2
    except InstallError as exc:
        print(f"mpsbench: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
