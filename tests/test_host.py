"""macOS and GPU facts through stand-ins for every command output parsed (no Mac here, no GPU).

The captured formats: ``pmset -g batt`` and ``pmset -g therm`` as pmset(1)
documents them (https://www.sudo.is/docs/macos/man_pmset.html, macOS 14.2.1)
and as public projects capture them ("Now drawing from 'AC Power'" /
"'Battery Power'", " -InternalBattery-0 (id=...)\\t85%; charging; ...";
"CPU_Speed_Limit = 100", "Note: No thermal warning level has been recorded");
``system_profiler SPDisplaysDataType -json`` with ``sppci_model`` and the GPU
core count as a string in ``sppci_cores``; ``nvidia-smi --query-gpu=name
--format=csv,noheader``, one name a line; the NVIDIA driver's
``/proc/driver/nvidia/gpus/<bus>/information`` ("Model: \\t NVIDIA ...");
a system framework's ``Resources/version.plist`` (an XML property list with
``CFBundleShortVersionString``, as Apple's bundles carry; its values on a
real Mac are unverified here).
"""

from __future__ import annotations

import json
import plistlib
import shutil
import subprocess
import sys
import types
from pathlib import Path

import psutil  # before any test plays darwin: psutil picks its platform module at import
import pytest
from benchmarks import benchmark_host

from mpsbench.builds import machine
from mpsbench.fleet import doctor
from mpsbench.measure import host, quiet, suite

ROOT = Path(__file__).resolve().parents[1]
BATT_AC = "Now drawing from 'AC Power'\n -InternalBattery-0 (id=4653155)\t100%; charged; 0:00 remaining present: true\n"
BATT_BATTERY = (
    "Now drawing from 'Battery Power'\n"
    " -InternalBattery-0 (id=4653155)\t19%; discharging; 1:02 remaining present: true\n"
)
BATT_DESKTOP = "Now drawing from 'AC Power'\n"  # a Mac mini or Studio: no battery line
THERM_QUIET = "Note: No thermal warning level has been recorded\nNote: No performance warning level has been recorded\n"
THERM_LIMITED = (
    " - CPU_Scheduler_Limit \t= 100\n - CPU_Available_CPUs \t= 10\n - CPU_Speed_Limit \t= 60\n"
)
THERM_WARNED = "Thermal warning level set to 2.\n"
DISPLAYS = json.dumps(
    {
        "SPDisplaysDataType": [
            {
                "_name": "Apple M2 Max",
                "sppci_model": "Apple M2 Max",
                "sppci_cores": "38",
                "spdisplays_vendor": "sppci_vendor_Apple",
                "spdisplays_mtlgpufamilysupport": "spdisplays_metal3",
            }
        ]
    }
)


@pytest.fixture
def mac(monkeypatch):
    """darwin, with each macOS command answered from a captured output."""
    answers = {
        ("pmset", "-g", "batt"): BATT_AC,
        ("pmset", "-g", "therm"): THERM_QUIET,
        ("system_profiler", "SPDisplaysDataType", "-json"): DISPLAYS,
        ("sysctl", "-n", "machdep.cpu.brand_string"): "Apple M2 Max\n",
    }
    monkeypatch.setattr(sys, "platform", "darwin")
    monkeypatch.setattr(host, "output", lambda *command: answers.get(command))
    monkeypatch.setattr(host.platform, "mac_ver", lambda: ("15.1.1", ("", "", ""), "arm64"))
    monkeypatch.setattr(machine.platform, "machine", lambda: "arm64")
    monkeypatch.setattr(machine.os, "cpu_count", lambda: 12)
    monkeypatch.setattr(psutil, "virtual_memory", lambda: types.SimpleNamespace(total=32 * 1024**3))
    return answers


def test_the_power_source_comes_from_pmset_batt():
    assert host.power_source(BATT_AC) == "AC Power"
    assert host.power_source(BATT_BATTERY) == "Battery Power"
    assert host.power_source(BATT_DESKTOP) == "AC Power"
    assert host.power_source("No batteries available.\n") is None


def test_thermal_pressure_comes_from_pmset_therm():
    assert host.thermal(THERM_QUIET) is None
    assert host.thermal(THERM_LIMITED) == "throttled: CPU_Speed_Limit = 60"
    assert host.thermal(THERM_WARNED) == "Thermal warning level set to 2."


def test_the_gpu_names_its_model_and_core_count():
    assert host.apple_gpu(DISPLAYS) == "Apple M2 Max, 38 GPU cores"
    assert (
        host.apple_gpu(json.dumps({"SPDisplaysDataType": [{"sppci_model": "Apple M1"}]})) is None
    )  # no core count
    assert host.apple_gpu("not json") is None
    assert host.nvidia_gpus("NVIDIA H100 80GB HBM3\n") == "NVIDIA H100 80GB HBM3"
    assert (
        host.nvidia_gpus("NVIDIA A100-SXM4-40GB\nNVIDIA A100-SXM4-40GB\n")
        == "2 x NVIDIA A100-SXM4-40GB"
    )


def test_the_nvidia_driver_names_the_gpu_in_proc(tmp_path):
    board = tmp_path / "0000:01:00.0"
    board.mkdir()
    (board / "information").write_text(
        "Model: \t\t NVIDIA H100 80GB HBM3\nIRQ:   \t\t 42\nBus Location: \t 0000:01:00.0\n"
    )
    assert host.proc_nvidia_gpus(tmp_path) == "NVIDIA H100 80GB HBM3"
    assert host.proc_nvidia_gpus(tmp_path / "none") is None


def test_a_macs_machine_entry_has_its_chip_gpu_cores_memory_and_os_name_but_not_its_version(mac):
    facts = machine.describe()
    assert facts == {
        "arch": "arm64",
        "chip": "Apple M2 Max",
        "cpu": "Apple M2 Max",
        "num_cpu": "12",
        "os": "macOS",
        "gpu": "Apple M2 Max, 38 GPU cores",
        "ram": "32 GiB",
    }
    assert machine.default_name(facts) == "apple-m2-max-12cpu"


def test_linux_without_a_gpu_keeps_the_fields_its_history_was_recorded_with(monkeypatch):
    monkeypatch.setattr(host, "gpu", lambda: None)
    assert set(machine.describe()) == {"arch", "chip", "cpu", "num_cpu", "os", "os_version", "ram"}
    monkeypatch.setattr(host, "gpu", lambda: "NVIDIA H100 80GB HBM3")
    assert (
        machine.describe()["gpu"] == "NVIDIA H100 80GB HBM3"
    )  # two boxes with different GPUs differ


def test_the_macos_version_and_power_source_are_tracked_with_every_run(mac):
    bench = benchmark_host.Host()
    assert bench.track_macos_version() == 15.0101
    assert bench.track_on_battery() == 0
    mac[("pmset", "-g", "batt")] = BATT_BATTERY
    assert bench.track_on_battery() == 1
    assert host.version_number("14.10") > host.version_number("14.9") > host.version_number("14.1")


def _framework(root: Path, name: str, version: str, plist: str = "version.plist") -> None:
    resources = root / f"{name}.framework" / "Versions" / "A" / "Resources"
    resources.mkdir(parents=True)
    (root / f"{name}.framework" / "Resources").symlink_to(
        resources
    )  # as a versioned bundle links it
    (resources / plist).write_bytes(
        plistlib.dumps({"CFBundleShortVersionString": version, "ProjectName": name})
    )


def test_mpsgraph_and_metal_versions_are_tracked_beside_the_macos_version(
    mac, tmp_path, monkeypatch
):
    _framework(tmp_path, "MetalPerformanceShadersGraph", "5.4.11")
    _framework(tmp_path, "Metal", "366.14", plist="Info.plist")
    monkeypatch.setattr(host, "FRAMEWORKS", tmp_path)
    bench = benchmark_host.Host()
    assert bench.track_mpsgraph_version() == 5.0411
    assert bench.track_metal_version() == 366.14
    (tmp_path / "Metal.framework" / "Resources" / "Info.plist").write_text("not a property list")
    with pytest.raises(suite.SkipNotImplemented, match=r"Metal\.framework has no readable version"):
        bench.track_metal_version()


def test_elsewhere_both_tracks_skip_with_the_reason(monkeypatch):
    monkeypatch.setattr(sys, "platform", "linux")
    with pytest.raises(suite.SkipNotImplemented, match="not macOS"):
        benchmark_host.Host().track_macos_version()
    with pytest.raises(suite.SkipNotImplemented, match="no power source"):
        benchmark_host.Host().track_on_battery()
    with pytest.raises(suite.SkipNotImplemented, match="not macOS: Metal is Apple's"):
        benchmark_host.Host().track_metal_version()


def _others_use(monkeypatch: pytest.MonkeyPatch, cores: float) -> None:
    """The machine as the quiet gate reads it: other processes' cpu a stand-in, power and heat from
    pmset's."""

    def read(window: float) -> quiet.State:
        return quiet.State(10, cores, 1.0, host.on_battery(), host.thermal_problem())

    monkeypatch.setattr(quiet, "read", read)


def test_doctor_warns_about_battery_heat_memory_and_busy_processes(mac, monkeypatch, capsys):
    mac[("pmset", "-g", "batt")] = BATT_BATTERY
    mac[("pmset", "-g", "therm")] = THERM_LIMITED
    gib = 1024**3
    monkeypatch.setattr(
        psutil, "virtual_memory", lambda: types.SimpleNamespace(available=2 * gib, total=32 * gib)
    )
    monkeypatch.setattr(psutil, "swap_memory", lambda: types.SimpleNamespace(used=3 * gib))
    monkeypatch.setattr(host, "busy_processes", lambda threshold: [("Xcode", 812, 180.0)])
    _others_use(monkeypatch, 3.0)
    monkeypatch.setattr(
        doctor, "check_devices", lambda: iter([doctor.Finding("ok", "mps", "mps: Apple GPU")])
    )
    monkeypatch.setattr(
        doctor,
        "CHECKS",
        (
            doctor.check_devices,
            doctor.check_memory,
            doctor.check_power,
            doctor.check_thermal,
            doctor.check_load,
        ),
    )
    assert doctor.run(strict=True) == 1
    out = capsys.readouterr().out
    assert "warn  power      on battery: a Mac throttles on battery" in out
    assert "warn  thermal    throttled: CPU_Speed_Limit = 60" in out
    assert (
        "warn  memory     2.0 of 32.0 GiB available, 3.0 GiB swap used: large batches may swap"
        in out
    )
    said = "other processes used 3.0 of 10 cores (the limit: 2.5); load average 1.0"
    assert f"warn  load       {said}" in out
    assert "warn  processes  busy on the cpu: Xcode (pid 812, 180%)" in out
    assert "untrustworthy (memory, power, thermal, load, processes)" in out


def test_doctor_on_a_quiet_mac_on_ac_power_finds_nothing(mac, monkeypatch, capsys):
    gib = 1024**3
    monkeypatch.setattr(
        psutil, "virtual_memory", lambda: types.SimpleNamespace(available=24 * gib, total=32 * gib)
    )
    monkeypatch.setattr(psutil, "swap_memory", lambda: types.SimpleNamespace(used=0))
    monkeypatch.setattr(host, "busy_processes", lambda threshold: [])
    _others_use(monkeypatch, 0.3)
    monkeypatch.setattr(
        doctor,
        "CHECKS",
        (doctor.check_memory, doctor.check_power, doctor.check_thermal, doctor.check_load),
    )
    assert doctor.run(strict=True) == 0
    assert "nothing found that would make numbers untrustworthy" in capsys.readouterr().out


@pytest.mark.parametrize(("mps_usable", "expected"), [(True, "cpu,mps"), (False, "cpu")])
def test_the_usable_devices_are_printed_as_a_value_for_mpsbench_devices(
    monkeypatch, capsys, mps_usable, expected
):
    from mpsbench import cli
    from mpsbench.measure import devices

    verdicts = {"cpu": True, "mps": mps_usable, "cuda": False}
    monkeypatch.setattr(
        devices.Device,
        "availability",
        lambda self: devices.Availability(verdicts[self], "stand-in"),
    )
    assert cli.main(["devices", "--usable"]) == 0
    assert capsys.readouterr().out == expected + "\n"


@pytest.mark.parametrize(
    ("usable", "says"),
    [
        ("cpu,mps", "mpsbench: timing cpu,mps: torch reports mps available"),
        ("cpu", "mpsbench: timing cpu only: mps is not usable here"),
    ],
)
def test_the_macos_job_times_the_usable_devices_and_says_which(tmp_path, usable, says):
    """scripts/tiny-bench in a copy whose setup, bench and mpsbench are stand-ins that report what they were given."""
    (tmp_path / "scripts").mkdir()
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    shutil.copy2(ROOT / "scripts" / "tiny-bench", tmp_path / "scripts" / "tiny-bench")
    stand_ins = {
        "scripts/setup": "true",
        "scripts/bench": 'echo "bench MPSBENCH_DEVICES=$MPSBENCH_DEVICES $*"',
        ".venv/bin/mpsbench": f'if [ "$*" = "devices --usable" ]; then echo {usable}; else echo "mpsbench $*"; fi',
    }
    for path, body in stand_ins.items():
        (tmp_path / path).write_text(f"#!/usr/bin/env bash\n{body}\n")
        (tmp_path / path).chmod(0o755)
    done = subprocess.run(
        [str(tmp_path / "scripts" / "tiny-bench")], capture_output=True, text=True, check=True
    )
    lines = done.stdout.splitlines()
    assert lines[0] == "mpsbench devices" and lines[1].startswith(says)
    tiny = (
        r"^benchmark_models\.(Training|Inference)\.time_step\('(cpu|mps|cuda)', 'mlp', (8|1024)\)$"
    )
    assert (
        lines[2]
        == f"bench MPSBENCH_DEVICES={usable} --skip-existing-successful -b {tiny} release^!"
    )
