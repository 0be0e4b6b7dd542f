"""What the host says about itself, parsed from the OS's own tools."""

from __future__ import annotations

import contextlib
import json
import os
import platform
import plistlib
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

NVIDIA_PROC = Path("/proc/driver/nvidia/gpus")
FRAMEWORKS = Path("/System/Library/Frameworks")


def output(*command: str) -> str | None:
    """stdout, or None when the command is missing, fails or hangs."""
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def pmset(what: str) -> str:
    return (output("pmset", "-g", what) if sys.platform == "darwin" else None) or ""


def apple_gpu(displays_json: str) -> str | None:
    try:
        entries = json.loads(displays_json).get("SPDisplaysDataType", [])
    except (ValueError, AttributeError):
        return None
    for entry in entries:
        cores = str(entry.get("sppci_cores", "")).strip()
        model = entry.get("sppci_model") or entry.get("_name")
        if cores.isdigit() and model:
            return f"{model}, {cores} GPU cores"
    return None


def nvidia_gpus(smi_names: str) -> str | None:
    """``2 x NVIDIA A100-SXM4-80GB`` for two of a kind."""
    counted = Counter(name.strip() for name in smi_names.splitlines() if name.strip()).items()
    return ", ".join(name if n == 1 else f"{n} x {name}" for name, n in counted) or None


def proc_nvidia_gpus(root: Path = NVIDIA_PROC) -> str | None:
    text = "".join(path.read_text(errors="replace") for path in sorted(root.glob("*/information")))
    return nvidia_gpus("\n".join(re.findall(r"^Model:\s*(.+)$", text, re.M)))


def gpu() -> str | None:
    if sys.platform == "darwin":
        return apple_gpu(output("system_profiler", "SPDisplaysDataType", "-json") or "")
    names = output("nvidia-smi", "--query-gpu=name", "--format=csv,noheader")
    return nvidia_gpus(names or "") or proc_nvidia_gpus()


def macos_version() -> str | None:
    return (platform.mac_ver()[0] or None) if sys.platform == "darwin" else None


def framework_version(name: str) -> str | None:
    """``366.14`` for ``Metal``: macOS updates replace what mps runs on."""
    resources = FRAMEWORKS / f"{name}.framework" / "Resources"
    for plist in (resources / "version.plist", resources / "Info.plist"):
        with contextlib.suppress(OSError, ValueError):
            info = plistlib.loads(plist.read_bytes())
            if version := info.get("CFBundleShortVersionString") or info.get("CFBundleVersion"):
                return str(version)
    return None


def version_number(version: str) -> float:
    """15.1.1 -> 15.0101, a number that sorts and plots."""
    parts = [int(part) for part in re.findall(r"\d+", version)[:3]] + [0, 0]
    return round(parts[0] + parts[1] / 100 + parts[2] / 10000, 4)


def power_source(pmset_batt: str) -> str | None:
    found = re.search(r"Now drawing from '([^']+)'", pmset_batt)
    return found.group(1) if found else None


def on_battery() -> bool | None:
    source = power_source(pmset("batt"))
    return None if source is None else source == "Battery Power"


def thermal(pmset_therm: str) -> str | None:
    """Throttling (limits under 100), else warnings, in ``pmset -g therm``."""
    limits = {
        name: int(value) for name, value in re.findall(r"(\w+_Limit)\s*=\s*(\d+)", pmset_therm)
    }
    if throttled := sorted((name, value) for name, value in limits.items() if value < 100):
        return "throttled: " + ", ".join(f"{name} = {value}" for name, value in throttled)
    warnings = [
        line.strip()
        for line in pmset_therm.splitlines()
        if re.search(r"warning level", line, re.I)
        and not re.search(r"\bNo \w+ warning level", line)
    ]
    return "; ".join(warnings) or None


def thermal_problem() -> str | None:
    return thermal(pmset("therm"))


def busy_processes(threshold: float) -> list[tuple[str, int, float]]:
    """Processes above ``threshold`` % of a core over a second, busiest first."""
    import psutil

    fields = ["name", "cpu_percent"]
    list(psutil.process_iter(fields))  # psutil keeps these: the next call's percent is since this
    time.sleep(1.0)
    found = [
        (str(process.info["name"]), process.pid, process.info["cpu_percent"])
        for process in psutil.process_iter(fields)
        if process.pid != os.getpid() and (process.info["cpu_percent"] or 0.0) > threshold
    ]
    return sorted(found, key=lambda busy: -busy[2])
