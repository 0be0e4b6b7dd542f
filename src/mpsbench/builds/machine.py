"""A complete, stable asv machine entry: the same on every machine of one kind.

Every field is part of a graph's identity, and asv's own ``os`` holds the kernel build string, so a drifting field
would split history: this writes each from facts that do not drift (``asv machine --yes`` takes only six).
"""

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


def _linux_cpu() -> str:
    with contextlib.suppress(OSError):
        found = re.search(r"^model name\s*:\s*(.+)$", Path("/proc/cpuinfo").read_text(), re.M)
        if found:
            return " ".join(found.group(1).split())
    return platform.processor() or "unknown"


def describe() -> dict[str, Any]:
    """This machine's stable facts. A Mac's OS is its name only: a macOS update (MPSGraph ships with it) shows on the
    same graph as a tracked value (benchmarks/benchmark_host.py); ``gpu`` only where there is one, so a machine
    without keeps the fields it always had."""
    if sys.platform == "darwin":
        chip = (host.output("sysctl", "-n", "machdep.cpu.brand_string") or "").strip() or platform.processor()
        facts = {"os": "macOS"}
    else:
        chip = _linux_cpu()
        try:
            release = platform.freedesktop_os_release().get("PRETTY_NAME", "Linux")
        except OSError:
            release = "Linux"
        facts = {"os": release, "os_version": release}
    gpu = host.gpu()
    if gpu:
        facts["gpu"] = gpu
    ram = round(psutil.virtual_memory().total / 1024**3)  # hw.memsize on macOS, MemTotal on Linux
    return {"arch": platform.machine(), "chip": chip, "cpu": chip, "num_cpu": str(os.cpu_count() or 1), **facts,
            "ram": f"{ram} GiB"}


def default_name(facts: dict[str, Any]) -> str:
    """A name derived from the facts, e.g. ``apple-m1-pro-10cpu``, or ``debian-x86-64-2cpu`` on Linux (the first word of
    the os-release PRETTY_NAME)."""
    apple = facts["chip"].lower().startswith("apple")
    stem = facts["chip"] if apple else f"{facts['os'].split()[0]}-{facts['arch']}"
    return re.sub(r"[^a-z0-9]+", "-", f"{stem} {facts['num_cpu']}cpu".lower()).strip("-")


class MachineError(UserError):
    """A machine name asv cannot file results under."""


def machine_file() -> Path:
    return Path.home() / ".asv-machine.json"  # where asv reads it


def check_name(name: str) -> str:
    """``name`` if asv can file results under it: a folder of the results, no '..', no separator."""
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name):
        raise MachineError(f"machine name {name!r} may hold only letters, digits, '.', '_' and '-', and must start with"
                           " a letter or digit")
    return name


def require(name: str) -> None:
    """MachineError unless asv's machine file holds ``name``: asv would refuse a run under it in many lines, exit 3."""
    path = machine_file()
    try:
        entries = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        entries = {}
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise MachineError(f"asv's machine file {path} cannot be read ({exc}); `mpsbench machine` writes it") from None
    known = sorted(key for key, entry in entries.items() if isinstance(entry, dict)) if isinstance(entries, dict) else []
    if name not in known:
        raise MachineError(f"no machine {name!r} in {path}; machines there: {', '.join(known) or 'none'}"
                           f" (`mpsbench machine --name {name}` adds this machine under that name)")


def write(name: str | None = None) -> tuple[str, dict[str, Any]]:
    """Write (or replace) this machine's entry in asv's machine file; returns its name and fields."""
    facts = describe()
    name = check_name(default_name(facts) if name is None else name)  # an empty --name is a mistake, not the default
    path = machine_file()
    # One lock for the file, from reading to writing: two at once each keep the other's entry. An OS error (a
    # read-only or full home, a file-size limit) is the command line's one line naming the path.
    with files.lock(path):
        entries, before = _entries(path)
        entries.setdefault("version", 1)
        entries[name] = {"machine": name, **facts}
        text = json.dumps(entries, indent=4, sort_keys=True) + "\n"
        if text.encode() != before:  # unchanged, untouched: a refused command leaves it byte for byte
            files.write(path, text)
    return name, entries[name]


def _entries(path: Path) -> tuple[dict[str, Any], bytes]:
    """The machine file's entries and bytes: none for a file that is missing; MachineError for one that cannot be
    read as JSON (replacing it would drop the entries another tool wrote)."""
    try:
        before = path.read_bytes()
    except FileNotFoundError:
        return {}, b""
    try:
        entries = json.loads(before)
    except (ValueError, UnicodeDecodeError):
        entries = None
    if not isinstance(entries, dict):
        raise MachineError(f"asv's machine file {path} is not a JSON object of machines; move it aside and run"
                           " `mpsbench machine` again (nothing was changed)")
    return entries, before
