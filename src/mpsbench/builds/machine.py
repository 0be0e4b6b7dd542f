"""asv's machine entry, alike on machines of one kind: each field names a graph."""

from __future__ import annotations

import contextlib
import json
import os
import platform
import re
import sys
from pathlib import Path
from typing import Any

import psutil

from mpsbench.core import files
from mpsbench.core.errors import UserError
from mpsbench.measure import host


def describe() -> dict[str, Any]:
    """Stable facts only: a Mac's OS version is a tracked value."""
    if sys.platform == "darwin":
        brand = host.output("sysctl", "-n", "machdep.cpu.brand_string")
        chip = (brand or "").strip() or platform.processor()
        facts = {"os": "macOS"}
    else:
        found = None
        with contextlib.suppress(OSError):
            found = re.search(r"^model name\s*:\s*(.+)$", Path("/proc/cpuinfo").read_text(), re.M)
        chip = " ".join(found[1].split()) if found else platform.processor() or "unknown"
        release = "Linux"
        with contextlib.suppress(OSError):
            release = platform.freedesktop_os_release().get("PRETTY_NAME", release)
        facts = {"os": release, "os_version": release}
    if gpu := host.gpu():
        facts["gpu"] = gpu
    return {
        "arch": platform.machine(),
        "chip": chip,
        "cpu": chip,
        "num_cpu": str(os.cpu_count() or 1),
        **facts,
        "ram": f"{round(psutil.virtual_memory().total / 1024**3)} GiB",
    }


def default_name(facts: dict[str, Any]) -> str:
    apple = facts["chip"].lower().startswith("apple")
    stem = facts["chip"] if apple else f"{facts['os'].split()[0]}-{facts['arch']}"
    return re.sub(r"[^a-z0-9]+", "-", f"{stem} {facts['num_cpu']}cpu".lower()).strip("-")


def machine_file() -> Path:
    return Path.home() / ".asv-machine.json"


def check_name(name: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name):  # a folder name
        raise UserError(
            f"machine name {name!r} may hold only letters, digits, '.', '_' and '-', and must start"
            " with a letter or digit"
        )
    return name


def require(name: str) -> None:
    path = machine_file()
    known = sorted(key for key, entry in _entries(path)[0].items() if isinstance(entry, dict))
    if name not in known:
        raise UserError(
            f"no machine {name!r} in {path}; machines there: {', '.join(known) or 'none'}"
            f" (`mpsbench machine --name {name}` adds this one)"
        )


def write(name: str | None = None) -> tuple[str, dict[str, Any]]:
    facts = describe()
    name = check_name(default_name(facts) if name is None else name)  # "" is no default
    path = machine_file()
    with files.lock(path):  # two writers each keep the other's entry
        entries, before = _entries(path)
        entries.setdefault("version", 1)
        entries[name] = {"machine": name, **facts}
        text = json.dumps(entries, indent=4, sort_keys=True) + "\n"
        if text.encode() != before:
            files.write(path, text)
    return name, entries[name]


def _entries(path: Path) -> tuple[dict[str, Any], bytes]:
    try:
        before = path.read_bytes()
    except FileNotFoundError:
        return {}, b""
    except OSError as exc:
        raise UserError(f"asv's machine file {path} cannot be read ({exc.strerror})") from None
    entries = None
    with contextlib.suppress(ValueError):  # UnicodeDecodeError is one
        entries = json.loads(before)
    if not isinstance(entries, dict):
        raise UserError(
            f"asv's machine file {path} is not a JSON object of machines; move it aside and run"
            " `mpsbench machine` again (nothing was changed)"
        )
    return entries, before
