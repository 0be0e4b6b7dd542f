"""Install a timeline build into an asv environment: once per build, then switch by a .pth file.

asv runs this (``install_command``) with the environment's own python: standard library and pip
only. Every wheel is sha256-checked before pip sees it, and by pip again.

    python install_build.py install BUILD_DIR ENV_DIR SUITE_SRC
    python install_build.py uninstall ENV_DIR
    python install_build.py requirements MANIFEST CHANNEL[@ID]  (CI: the build's pinned set, as pip hashes)
    python install_build.py heal ENV_DIR          (the .pth's: reinstall a build whose folder is gone or damaged)
    python install_build.py paths BUILD_DIR SUITE_SRC    (compare's build servers: JSON, nothing switched)
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
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
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

PTH_NAME = "mpsbench_build.pth"
CACHE_ENV = "MPSBENCH_CACHE"  # default: ~/.cache/mpsbench
PLATFORM_ENV = "MPSBENCH_PLATFORM"  # force one of the manifest's platform keys
WHEELHOUSE_ENV = "MPSBENCH_WHEELHOUSE"  # folders searched for pinned wheels, os.pathsep-separated
RUN_BUILDS_ENV = "MPSBENCH_RUN_BUILDS"  # a file of the timeline hashes this asv run may install
HEALING_ENV = "MPSBENCH_HEALING"  # no nested heals
# The suite's own imports, which torch does not bring: what each one's absence costs.
WITHOUT = {
    "psutil": "cpu memory falls back to /proc or is skipped",
    "nvidia-ml-py": "cuda's energy rows are n/a",
    "zeus-apple-silicon": "the energy rows are n/a",
}
_FILES = "https://files.pythonhosted.org/packages/"


def _need(*fields: str) -> dict[str, str]:
    """A SUITE_NEEDS pin from name, version, module, python ('': every CPython), path, sha256."""
    pin = dict(zip(("name", "version", "module", "python", "path", "sha256"), fields))
    path = pin.pop("path")
    return {**pin, "filename": path.rsplit("/", 1)[1], "url": _FILES + path}


_PSUTIL_MAC = _need(  # stable-ABI wheels: every CPython
    "psutil",
    "7.2.2",
    "psutil",
    "",
    "80/c4/f5af4c1ca8c1eeb2e92ccca14ce8effdeec651d5ab6053c589b074eda6e1/"
    "psutil-7.2.2-cp36-abi3-macosx_11_0_arm64.whl",
    "1a7b04c10f32cc88ab39cbf606e117fd74721c831c98a27dc04578deb0c16979",
)
_PSUTIL_LINUX = _need(
    "psutil",
    "7.2.2",
    "psutil",
    "",
    "b5/70/5d8df3b09e25bce090399cf48e452d25c935ab72dad19406c77f4e828045/"
    "psutil-7.2.2-cp36-abi3-manylinux2010_x86_64.manylinux_2_12_x86_64.manylinux_2_28_x86_64.whl",
    "076a2d2f923fd4821644f5ba89f059523da90dc9014e85f8e45a5774ca5bc6f9",
)
_NVML = _need(
    "nvidia-ml-py",
    "13.615.71",
    "pynvml",
    "",
    "53/a1/1681dfa1c904d4e3e72e51b55a0ff012d50b766843ef832d584abe2113c6/"
    "nvidia_ml_py-13.615.71-py3-none-any.whl",
    "959bf4adf6fe1308e4bd739e722236b0d1ec8392e2cefad33ff70c311380b9b6",
)
_ZEUS = [  # CPython 3.10-3.13 only: elsewhere the rows are n/a
    _need(
        "zeus-apple-silicon",
        "1.1.0",
        "zeus_apple_silicon",
        tag,
        f"{folder}/zeus_apple_silicon-1.1.0-{tag}-{tag}-macosx_11_0_arm64.whl",
        sha,
    )
    for tag, folder, sha in (
        (
            "cp310",
            "b9/2c/2d2cd9d53167b4ab951217d54fa13f3ac183808958193de7d83455903d10",
            "ed75237100da14552c50618ad8a18e16eb8d7fb1bdf31c43f5134bf2ab47830d",
        ),
        (
            "cp311",
            "4a/cd/69179ff6d638103440457cbe1c8c0b30d0a22a6bb6f2c043a42995fb99e4",
            "fca4ff0211b1440841fa8454ea6effedc55c83a17be770ad92bb39da961a2214",
        ),
        (
            "cp312",
            "4b/50/dae39d71cdfed918eea04596ca582f3a8428bb8e44d76e88020d02f04b75",
            "c862421e3477344260fad80276cb6b8f6ed7189b5472ef3fca9a54cd5a780aa7",
        ),
        (
            "cp313",
            "c8/0c/e162be99be598d9be1ee48732a95475a42473b311c4809fc01dcc13a68c7",
            "410ecf3f594fc94202ad778d274131a24a403553c9b56c7907344edc9107ec03",
        ),
    )
]
SUITE_NEEDS: dict[str, list[dict[str, str]]] = {
    "macos-arm64": [_PSUTIL_MAC, *_ZEUS],
    "linux-x86_64-cpu": [_PSUTIL_LINUX],
    "linux-x86_64-cuda": [_PSUTIL_LINUX, _NVML],
}


class InstallError(Exception):
    """A build that cannot be installed here. Not UserError: this file imports no mpsbench."""


def cache_root() -> Path:
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "mpsbench")


def stored_wheel(pin: dict[str, str]) -> Path:
    """Where the wheel store keeps a pin's wheel."""
    return cache_root() / "wheels" / pin["sha256"] / pin["filename"]


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _packaging() -> tuple[ModuleType, ModuleType]:
    """packaging's ``tags`` and ``utils``: the installed packaging, else pip's own copy."""
    try:
        from packaging import tags, utils
    except ImportError:  # only then: importing pip disables setuptools' distutils shim
        # (pypa/pip#8761), which a later torch.compile needs
        from pip._vendor.packaging import tags, utils  # type: ignore[no-redef]
    return tags, utils


def plain_wheel_name(filename: object) -> bool:
    """Whether ``filename`` is a wheel's file name that, joined onto a folder, stays in it."""
    if not isinstance(filename, str) or any(part in filename for part in ("/", "\\", "..", "\0")):
        return False
    try:
        _packaging()[1].parse_wheel_filename(filename)
    except ValueError:  # InvalidWheelFilename, InvalidVersion
        return False
    return True


def allowed_url(url: object) -> bool:
    return isinstance(url, str) and re.fullmatch(r"(https|file)://\S+", url) is not None


def nvidia_gpu() -> bool:
    return Path("/proc/driver/nvidia/gpus").is_dir() or shutil.which("nvidia-smi") is not None


def platform_candidates() -> list[str]:
    """The manifest's platforms this machine runs, best first."""
    if forced := os.environ.get(PLATFORM_ENV):
        return [forced]
    machine = platform.machine().lower()
    if sys.platform == "darwin" and machine == "arm64":
        return ["macos-arm64"]
    if sys.platform.startswith("linux") and machine in ("x86_64", "amd64"):
        # PyPI's Linux torch is a CUDA build, which runs on the cpu too.
        keys = ["linux-x86_64-cpu", "linux-x86_64-cuda"]
        return keys[::-1] if nvidia_gpu() else keys
    return []


def _python_tag(python: tuple[int, int] | None = None) -> str:
    major, minor = python or sys.version_info[:2]
    return f"cp{major}{minor}"


def _ref(build: dict[str, Any]) -> str:
    return f"build {build['channel']}@{build['id']}"


def select_pins(
    build: dict[str, Any], python: tuple[int, int] | None = None
) -> tuple[str, list[dict[str, str]]]:
    """The platform and ``build``'s complete set for this machine and this Python (or ``python``)."""
    candidates, tag = platform_candidates(), _python_tag(python)
    for key in candidates:
        pins = build["pins"].get(key, [])
        if pins and not all(pin.get("python") for pin in pins):
            raise InstallError(
                f"{_ref(build)} pins only {', '.join(sorted({pin['name'] for pin in pins}))} for {key},"
                " not a complete set per Python: pip would fetch the rest unpinned and unchecked;"
                " re-pin it with `mpsbench build add-release VERSION --channel NAME`"
            )
        chosen = [pin for pin in pins if pin["python"] == tag]
        if any(pin["name"] == "torch" for pin in chosen):
            bad = [
                pin["filename"]
                for pin in chosen
                if not plain_wheel_name(pin["filename"]) or not allowed_url(pin["url"])
            ]
            if bad or len({pin["name"] for pin in chosen}) != len(chosen):
                raise InstallError(
                    f"{_ref(build)}: refusing the pins {bad or [p['filename'] for p in chosen]} for"
                    f" {key}: each must be a plain wheel file name at an https:// or file:// URL,"
                    " one per package"
                )
            return key, chosen
    sets = [
        f"{key}: {', '.join(sorted({pin.get('python') or '?' for pin in build['pins'][key]}))}"
        for key in candidates
        if build["pins"].get(key)
    ]
    pinned = (
        f"its sets there: {'; '.join(sets)}"
        if sets
        else f"pinned platforms: {', '.join(sorted(build['pins'])) or 'none'}"
    )
    raise InstallError(
        f"{_ref(build)} pins no torch wheel for {tag} on"
        f" {', '.join(candidates) or sys.platform + '/' + platform.machine()} ({pinned})"
    )


def why_not_here(filenames: list[str], python: tuple[int, int] | None = None) -> str | None:
    """Why this machine cannot run one of these wheels under this Python (or ``python``), or None."""
    tags, utils = _packaging()
    if python is None:
        here = set(tags.sys_tags())
    else:  # this machine's platforms, another interpreter
        platforms = list(tags.platform_tags())
        here = {
            *tags.cpython_tags(python, platforms=platforms),
            *tags.compatible_tags(python, platforms=platforms),
        }
    for filename in filenames:
        wanted = utils.parse_wheel_filename(filename)[3]
        if here.isdisjoint(wanted):
            return f"{filename} needs {_requirement(wanted, here, _python_tag(python))}"
    return None


def _requirement(wanted: frozenset[Any], here: set[Any], this: str) -> str:
    platforms = sorted({tag.platform for tag in wanted})
    if set(platforms) & {tag.platform for tag in here}:
        return f"Python {', '.join(sorted({tag.interpreter for tag in wanted}))} (this is {this})"

    def oldest(prefix: str) -> str | None:
        found = [tuple(map(int, p.split("_")[1:3])) for p in platforms if p.startswith(prefix)]
        return ".".join(map(str, min(found))) if found else None

    if (mac := oldest("macosx_")) and sys.platform == "darwin":
        return f"macOS {mac} or newer (this Mac runs macOS {platform.mac_ver()[0]})"
    if (glibc := oldest("manylinux_")) and sys.platform.startswith("linux"):
        return f"glibc {glibc} or newer (this machine has {' '.join(platform.libc_ver())})"
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
    entries = (
        entry
        for variable in (WHEELHOUSE_ENV, "PIP_FIND_LINKS")
        for entry in os.environ.get(variable, "").replace(" ", os.pathsep).split(os.pathsep)
    )
    return [
        Path(entry) for entry in entries if entry and "://" not in entry and Path(entry).is_dir()
    ]


def _pip(*args: str, tmp: Path | None = None) -> subprocess.CompletedProcess[str]:
    # The pins are the authority: a machine-wide pip constraint must not veto them.
    env = dict(os.environ, PIP_CONSTRAINT=os.devnull)
    if tmp is not None:
        env["TMPDIR"] = str(tmp)
    command = [sys.executable, "-m", "pip", "--quiet", "--disable-pip-version-check", *args]
    return subprocess.run(command, capture_output=True, text=True, env=env)


def _pip_install_checked(
    what: str, wheels: list[tuple[Path, dict[str, str]]], folder: Path, *target: str
) -> None:
    """pip installs ``wheels`` (into ``target``, if given) only as hashed; scratch in ``folder``."""
    listed = folder / "requirements.txt"
    listed.write_text(
        "".join(f"{p.resolve().as_uri()} --hash=sha256:{pin['sha256']}\n" for p, pin in wheels)
    )
    args = ("--no-deps", "--require-hashes", "--no-index", "--no-warn-script-location", "-r")
    done = _pip("install", *args, str(listed), *target, tmp=folder / "tmp" if target else None)
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip().splitlines()[-5:]
        raise InstallError(f"pip could not install {what}: {' | '.join(said)}")


def _check(pin: dict[str, str], found: Path, where: str, note: str = "") -> None:
    actual = sha256_of(found)
    if actual != pin["sha256"]:
        raise InstallError(
            f"{pin['filename']}: sha256 {actual} of {where} {found}{note} does not match the pinned"
            f" {pin['sha256']}; refusing to install"
        )


DOWNLOAD_TRIES = 5  # attempts at one wheel, each resuming where the last was cut
DOWNLOAD_BACKOFF = 2.0  # seconds before the second attempt, doubled before each next one
PROGRESS_EVERY = 60.0  # seconds between a long download's progress lines


def _download(
    url: str, target: Path, tries: int | None = None, backoff: float | None = None
) -> Path:
    """Download ``url`` into ``target``, resuming by HTTP Range after a cut, with progress on
    stderr; callers check sha256."""
    import http.client

    tries = tries or DOWNLOAD_TRIES
    backoff = DOWNLOAD_BACKOFF if backoff is None else backoff
    done, total, said, problem = 0, None, time.monotonic(), ""
    for attempt in range(1, tries + 1):
        headers = {"User-Agent": "mpsbench", **({"Range": f"bytes={done}-"} if done else {})}
        try:
            request = urllib.request.Request(url, headers=headers)
            with urllib.request.urlopen(request, timeout=120) as response:
                if done and response.status != 206:  # the range was not honoured: all again
                    done = 0
                if (length := response.headers.get("Content-Length")) is not None:
                    total = done + int(length)
                with open(target, "ab" if done else "wb") as out:
                    while chunk := response.read(1 << 20):
                        out.write(chunk)
                        done += len(chunk)
                        if time.monotonic() - said >= PROGRESS_EVERY:
                            said = time.monotonic()
                            of = f" of {total / 1e9:.2f} GB" if total else ""
                            _say(target, f"{done / 1e9:.2f} GB{of} downloaded")
            if total is None or done >= total:
                return target
            problem = f"the connection closed after {done} of {total} bytes"
        except urllib.error.HTTPError as exc:
            if exc.code not in (408, 429) and exc.code < 500:  # no retry mends it
                raise InstallError(f"{target.name}: cannot download {url}: {exc}") from None
            problem = str(exc)
        except (
            urllib.error.URLError,
            TimeoutError,
            ConnectionError,
            http.client.HTTPException,
        ) as exc:
            problem = str(exc) or type(exc).__name__
        if attempt < tries:
            wait = backoff * 2 ** (attempt - 1)
            _say(
                target,
                f"{problem}; attempt {attempt + 1} of {tries} in {wait:.0f} s, from byte {done}",
            )
            time.sleep(wait)
    raise InstallError(f"{target.name}: cannot download {url} after {tries} attempts: {problem}")


def _say(target: Path, text: str) -> None:
    print(f"mpsbench: {target.name}: {text}", file=sys.stderr)


def disk_problem(exc: OSError) -> InstallError:
    """A cache that cannot be written, in one line with the path and what to do."""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        advice = (
            "free space there, or set {} to a folder on a disk with room (a build takes 3-6 GB)"
        )
    else:
        advice = "make it writable, or set {} to a writable folder"
    return InstallError(
        f"cannot write the build cache at {exc.filename or cache_root()}: {exc.strerror or exc};"
        f" {advice.format(CACHE_ENV)}"
    )


def _find(pin: dict[str, str], scratch: Path) -> Path:
    """The pinned wheel from a local wheelhouse, a file:// pin, pip, else the URL."""
    name = pin["filename"]
    found = next((f / name for f in _local_wheelhouses() if (f / name).is_file()), None)
    if found is None and pin["url"].startswith("file://"):
        found = Path(urllib.request.url2pathname(urllib.parse.urlparse(pin["url"]).path))
        if not found.is_file():
            raise InstallError(f"{name}: the pinned file {found} does not exist")
    if found is None and pin["name"] in ("torch", "torchvision", "transformers"):
        spec = f"{pin['name']}=={pin['version']}"
        _pip("download", "--no-deps", "--only-binary=:all:", "--dest", str(scratch), spec)
        found = scratch / name if (scratch / name).is_file() else None
    return found or _download(pin["url"], scratch / name)


def fetch_wheel(pin: dict[str, str]) -> Path:
    """The pinned wheel in the local store, fetched and sha256-checked once; it takes its name
    only whole (renamed in from scratch on the store's disk, or copied via a .partial)."""
    if not plain_wheel_name(pin["filename"]) or not allowed_url(pin["url"]):
        raise InstallError(
            f"refusing the pin {pin['filename']!r} at {pin['url']!r}: a plain wheel file name"
            " at an https:// or file:// URL is expected"
        )
    stored = stored_wheel(pin)
    store = stored.parent
    if stored.is_file():
        note = " (changed since it was checked; delete it to fetch it again)"
        _check(pin, stored, "the stored copy", note)
        return stored
    try:
        store.parent.mkdir(parents=True, exist_ok=True)
        prefix = f"fetch-{os.getpid()}-"
        with tempfile.TemporaryDirectory(dir=store.parent, prefix=prefix) as scratch:
            found = _find(pin, Path(scratch))
            _check(pin, found, "the wheel found at")
            store.mkdir(exist_ok=True)
            if found.parent == Path(scratch):  # renamed, not written twice
                os.replace(found, stored)
            else:  # the user's file stays where it is
                partial = store / f".{pin['filename']}.{os.getpid()}.partial"
                try:
                    shutil.copyfile(found, partial)
                    os.replace(partial, stored)
                finally:
                    partial.unlink(missing_ok=True)
    except OSError as exc:
        raise disk_problem(exc) from None
    return stored


@contextlib.contextmanager
def _locked(path: Path, wait: bool = True) -> Iterator[bool]:
    """An exclusive lock on ``path``; False if held and ``wait`` is off."""
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:  # closing it releases the lock
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        yield True


def _alive(pid: str) -> bool:
    try:
        os.kill(int(pid), 0)
    except (ValueError, ProcessLookupError):
        return False
    except PermissionError:  # another user's process
        pass
    return True


def clean_leftovers(root: Path) -> list[Path]:
    """Remove what killed installs left: unheld staging, dead processes' fetches and copies."""
    removed = []
    for staging in sorted((root / "builds").glob("*.staging-*")):
        lock = root / "builds" / (staging.name.split(".staging-")[0] + ".lock")
        with _locked(lock, wait=False) as free:
            if free:
                shutil.rmtree(staging, ignore_errors=True)
                removed.append(staging)
    for fetch in sorted((root / "wheels").glob("fetch-*-*")):
        if not _alive(fetch.name.split("-")[1]):
            shutil.rmtree(fetch, ignore_errors=True)
            removed.append(fetch)
    for partial in sorted((root / "wheels").glob("*/.*.partial")):  # .FILENAME.PID.partial
        if not _alive(partial.name.rsplit(".", 2)[-2]):
            partial.unlink(missing_ok=True)
            removed.append(partial)
    return removed


def installed_folder(pins: list[dict[str, str]]) -> Path:
    """Where this set of wheels is installed in the cache (``.complete`` once it is)."""
    key = hashlib.sha256("".join(sorted(pin["sha256"] for pin in pins)).encode())
    return cache_root() / "builds" / key.hexdigest()[:20]


def damage(folder: Path) -> str | None:
    """What is wrong with an installed build's folder, or None: not complete, or a file its RECORDs
    list missing or of another size (a stat, as the wheels were hash-checked)."""
    if not (folder / ".complete").is_file():
        return f"{folder} is missing or was never completed"
    for record in sorted(folder.glob("*.dist-info/RECORD")):
        try:
            lines = record.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            return f"{record} cannot be read ({exc})"
        for line in lines:
            name, _, rest = line.partition(",")
            size = rest.rpartition(",")[2]
            if not size.isdigit() or name.startswith(("/", "..")):
                continue
            try:
                if (folder / name).stat().st_size != int(size):
                    return f"{folder / name} is not the size its wheel installed"
            except OSError:
                return f"{folder / name} is missing"
    return None


def ensure_installed(pins: list[dict[str, str]]) -> tuple[Path, bool]:
    """The folder of this set of wheels, (re)installed from the store if damaged; True if now.
    A whole folder serves from a read-only cache."""
    folder = installed_folder(pins)
    if damage(folder) is None:
        return folder, False
    try:
        clean_leftovers(cache_root())
        with _locked(folder.with_suffix(".lock")):
            if damage(folder) is None:
                return folder, False
            wheels = [(fetch_wheel(pin), pin) for pin in pins]
            staging = Path(tempfile.mkdtemp(dir=folder.parent, prefix=folder.name + ".staging-"))
            try:
                (staging / "tmp").mkdir()  # pip --target unpacks GBs into TMPDIR
                installed = staging / "target"
                _pip_install_checked("the build", wheels, staging, "--target", str(installed))
                names = [path.name for path, _ in wheels]
                (installed / ".complete").write_text(json.dumps({"wheels": names}, indent=1))
                if folder.exists():
                    shutil.rmtree(folder)
                os.replace(installed, folder)
            finally:
                shutil.rmtree(staging, ignore_errors=True)
            return folder, True
    except OSError as exc:  # a read-only or full cache: one line, not a traceback
        raise disk_problem(exc) from None


def _site_packages() -> Path:
    return Path(sysconfig.get_paths()["purelib"])


def suite_needs(key: str, python: tuple[int, int] | None = None) -> list[dict[str, str]]:
    """SUITE_NEEDS' pins for ``key`` that serve this interpreter (or CPython ``python``)."""
    return [pin for pin in SUITE_NEEDS.get(key, []) if pin["python"] in ("", _python_tag(python))]


def ensure_suite_needs(key: str) -> str:
    """Install, hash-checked, each SUITE_NEEDS package for ``key`` not yet importable; '' or, per
    package left out, why."""
    import importlib.util

    key = key if key in SUITE_NEEDS else next(iter(platform_candidates()), key)
    modules = {pin["name"]: pin["module"] for pins in SUITE_NEEDS.values() for pin in pins}
    wanted = {pin["name"] for pin in SUITE_NEEDS.get(key, [])} or {"psutil"}
    lacking = [name for name in sorted(wanted) if importlib.util.find_spec(modules[name]) is None]
    why = {name: f"no wheel is pinned for {_python_tag()} on {key}" for name in lacking}
    fetched = []
    for pin in suite_needs(key):
        if pin["name"] in why:
            try:
                fetched.append((fetch_wheel(pin), pin))
            except (InstallError, OSError) as exc:
                why[pin["name"]] = str(exc)
    names = [pin["name"] for _, pin in fetched]
    try:
        if fetched:
            with tempfile.TemporaryDirectory(prefix="mpsbench-needs-") as scratch:
                _pip_install_checked(", ".join(names), fetched, Path(scratch))
        why = {name: reason for name, reason in why.items() if name not in names}
    except (InstallError, OSError) as exc:
        why.update(dict.fromkeys(names, str(exc)))
    return "".join(
        f"; {name} not installed ({reason}): {WITHOUT[name]}" for name, reason in why.items()
    )


def build_folder(build_dir: Path) -> tuple[dict[str, Any], str, Path, bool]:
    """The build in ``build_dir``, its platform key and folder (True if installed now); every
    refusal comes before any download."""
    build = json.loads((build_dir / "build.json").read_text())
    _refuse_unasked(build)
    if build["kind"] == "existing":
        folder = Path(build["site_packages"])
        if not (folder / "torch" / "__init__.py").is_file():
            raise InstallError(f"{_ref(build)}: {folder} holds no torch")
        return build, "existing", folder, False
    key, pins = select_pins(build)
    if unfit := why_not_here([pin["filename"] for pin in pins]):
        raise InstallError(f"{_ref(build)} cannot run here, skipped before any download: {unfit}")
    return build, key, *ensure_installed(pins)


def sys_path(folder: Path, suite_src: Path) -> list[str]:
    return [str(folder), str(suite_src.resolve())]


def paths(build_dir: Path, suite_src: Path) -> dict[str, Any]:
    """The build installed but not switched to: its PYTHONPATH entries, ``torch_dir`` and ``env``."""
    build, key, folder, fresh = build_folder(build_dir)
    return {
        "build": f"{build['channel']}@{build['id']}",
        "paths": sys_path(folder, suite_src),
        "torch_dir": str(folder.resolve() / "torch"),
        "env": dict(build.get("env") or {}),
        "fresh": fresh,
        "needs": ensure_suite_needs(key),
    }


def install(build_dir: Path, env_dir: Path, suite_src: Path) -> str:
    """Install (once) and switch the running environment to the build in ``build_dir``."""
    started = time.perf_counter()
    build, key, folder, fresh = build_folder(build_dir)
    # Heal line first: site adds only existing folders, so a healed folder still reaches sys.path.
    lines = [
        *([] if key == "existing" else [_heal_line(folder, env_dir)]),
        *sys_path(folder, suite_src),
    ]
    if build.get("env"):  # a .pth "import" line runs at interpreter start
        lines.append(f"import os; os.environ.update({json.dumps(build['env'], sort_keys=True)})")
    (_site_packages() / PTH_NAME).write_text("\n".join(lines) + "\n")
    record = {
        "build": f"{build['channel']}@{build['id']}",
        "platform": key,
        "folder": str(folder),
        "fresh": fresh,
        "pins": [] if key == "existing" else select_pins(build)[1],
    }
    (env_dir / "mpsbench-build.json").write_text(json.dumps(record, indent=1) + "\n")
    how = "installed" if fresh else "switched to cached"
    needs = ensure_suite_needs(key)
    seconds = time.perf_counter() - started
    return f"mpsbench: {how} torch {build['torch_version']} ({key}) in {seconds:.2f} s{needs}"


def _heal_line(folder: Path, env_dir: Path) -> str:
    """The .pth line that reinstalls the build at interpreter start if its folder is gone (asv
    installs only when it switches commits): two stats when the folder is whole."""
    marks = [str(folder / ".complete"), str(folder / "torch" / "__init__.py")]
    command = [str(Path(__file__).resolve()), "heal", str(env_dir)]
    return (
        f"import os, subprocess, sys; all(map(os.path.isfile, {json.dumps(marks)}))"
        f" or os.environ.get({HEALING_ENV!r}) or subprocess.run([sys.executable, *{json.dumps(command)}],"
        f" env=dict(os.environ, {HEALING_ENV}='1'))"
    )


def heal(env_dir: Path) -> str:
    """Reinstall the environment's build from the store if missing or damaged; says what."""
    try:
        record = json.loads((env_dir / "mpsbench-build.json").read_text())
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
    """Build ``ref``'s (CHANNEL@ID, or CHANNEL: its newest) pinned set here as hashed pip
    requirements."""
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
    (env_dir / "mpsbench-build.json").unlink(missing_ok=True)


def main(argv: list[str]) -> int:
    command, args = (argv[0], [Path(arg) for arg in argv[1:]]) if argv else ("", [])
    try:
        if command == "install" and len(args) == 3:
            print(install(*args))
        elif command == "paths" and len(args) == 2:
            print(json.dumps(paths(*args)))
        elif command == "requirements" and len(args) == 2:
            print(requirements(args[0], argv[2]), end="")
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
