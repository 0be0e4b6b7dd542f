"""Energy per step: the three counters' readers with stand-ins (NVML, IOReport, RAPL), and the method that reads them.

No counter here is real: this machine has no GPU and no readable RAPL, so every reader is fed a stand-in of the
package or the sysfs files it reads, shaped as the real ones are (docs/explanation/instruments.md cites each).
"""

from __future__ import annotations

import pathlib
import sys
import threading
import time
import types
from collections.abc import Callable

import pytest
from benchmarks import benchmark_models

from mpsbench.measure import energy, figures, measured, suite


def test_the_power_is_read_between_the_first_and_last_update_inside_the_steps():
    # a counter that moves every 50 ms at 400 W; steps from t=1.0 to t=3.0, ten of them
    updates = [(1.0 + 0.05 * n + 0.003, 400 * 0.05 * n) for n in range(-5, 45)]
    found = energy.reading("stand-in", updates, 1.0, 3.0, 10)
    assert found.watts == pytest.approx(400)
    assert found.joules_per_step == pytest.approx(400 * 2.0 / 10)
    assert found.updates == 40  # the updates before the steps and after them are not theirs


def test_a_counter_too_coarse_for_the_steps_skips_with_the_reason():
    with pytest.raises(
        suite.SkipNotImplemented, match=r"stand-in updated 1 times in 2\.0 s of steps: too coarse"
    ):
        energy.reading("stand-in", [(0.5, 0.0), (1.5, 10.0)], 1.0, 3.0, 10)


class Clock:
    """A stand-in for time.perf_counter that moves only when a step says it spent time (as tests/test_epoch.py's).

    energy.measure's poller is a thread that reads the counter every poll_seconds: a step waits until the poller has read
    the counter twice at the step's new time, so the read that sees the change is stamped with that time and the
    steps never outrun the poller, however busy the machine.
    """

    def __init__(self) -> None:
        self.now, self.reads = 1000.0, 0
        self.moved = threading.Condition()

    def __call__(self) -> float:
        return self.now

    def read(self, joules: Callable[[float], float]) -> float:
        """A counter's reading now: ``joules`` of the clock's time."""
        with self.moved:
            value = joules(self.now)
            self.reads += 1
            self.moved.notify_all()
        return value

    def step(self, seconds: float) -> None:
        with self.moved:
            self.now += seconds
            self.reads = 0
            # the second read starts after the first, the one that sees the change, has stamped it
            assert self.moved.wait_for(lambda: self.reads >= 2, timeout=900), (
                "the poller stopped reading"
            )


@pytest.fixture
def clock(monkeypatch) -> Clock:
    clock = Clock()
    monkeypatch.setattr(energy.time, "perf_counter", clock)
    return clock


def continuous(clock: Clock, watts: float) -> Callable[[], float]:
    """A counter that integrates a constant power continuously: every read shows the energy up to now."""
    origin = clock.now
    return lambda: clock.read(lambda now: watts * (now - origin))


def test_the_steps_run_until_enough_time_and_updates_have_passed(clock):
    calls = []
    found = energy.measure(
        lambda: (calls.append(None), clock.step(0.01)),
        lambda: None,
        energy.Counter("stand-in", continuous(clock, 250.0), 0.002),
        steps_per_call=20,
        min_seconds=0.2,
        min_updates=5,
        settle_seconds=0,
    )
    assert found.seconds >= 0.2 and found.updates >= 5
    assert found.steps == 20 * (
        len(calls) - 1
    )  # one untimed call at the least: its time sets the window
    assert found.watts == pytest.approx(250.0)
    assert found.joules_per_step == pytest.approx(found.watts * found.seconds / found.steps)


@pytest.mark.parametrize("wanted", [2, 7])
def test_the_window_ends_at_the_step_that_brings_min_updates_since_it_opened(clock, wanted):
    # each step moves the counter once, stamped at the step's end; the settle call's update is
    # stamped at the window's start itself, so it is not one of the window's
    found = energy.measure(
        lambda: clock.step(0.01),
        lambda: None,
        energy.Counter("stand-in", continuous(clock, 100.0), 0.002),
        min_seconds=0.001,
        min_updates=wanted,
        settle_seconds=0,
    )
    assert (found.steps, found.updates) == (wanted, wanted)
    assert found.seconds == pytest.approx(0.01 * wanted)


def test_updates_stamped_as_the_window_opened_are_not_its_own_however_late_they_are_appended(
    monkeypatch,
):
    """A stand-in poller whose two updates, stamped just before and at the window's start, reach
    the list only during the window's first step (a poller preempted between its stamp and its
    append): the window still waits for ``min_updates`` stamped after its start."""
    now, lists, ready, calls = [1000.0], [], threading.Event(), []
    monkeypatch.setattr(energy.time, "perf_counter", lambda: now[0])

    def poller(found, updates, stopping) -> None:
        lists.append(updates)
        ready.set()
        stopping.wait()

    def stamped(when: float) -> tuple[float, float]:
        return when, 100.0 * (when - 1000.0)  # 100 W

    def run() -> None:
        assert ready.wait(timeout=900)
        if len(calls) == 1:  # the window's first step: the settle call's updates arrive late
            lists[0].extend([stamped(now[0] - 0.001), stamped(now[0])])
        now[0] += 0.01
        if calls:  # each step of the window: one update, stamped at its end
            lists[0].append(stamped(now[0]))
        calls.append(None)

    monkeypatch.setattr(energy, "_poll", poller)
    found = energy.measure(
        run,
        lambda: None,
        energy.Counter("stand-in", lambda: 0.0, 0.002),
        min_seconds=0.001,
        min_updates=3,
        settle_seconds=0,
    )
    assert (found.steps, found.updates) == (3, 3)  # not 1: the two late ones are not counted
    assert found.watts == pytest.approx(100.0)


def settling(clock: Clock) -> Callable[[], float]:
    """A board that draws 1000 W for its first 0.2 s (what it ran before), then 250 W."""
    origin = clock.now
    return lambda: clock.read(
        lambda now: 1000.0 * min(now - origin, 0.2) + 250.0 * max(now - origin - 0.2, 0.0)
    )


@pytest.mark.parametrize(("settle", "watts"), [(0.3, 250.0), (0.0, None)])
def test_the_untimed_steps_first_let_the_power_settle(clock, settle, watts):
    found = energy.measure(
        lambda: clock.step(0.005),
        lambda: None,
        energy.Counter("stand-in", settling(clock), 0.002),
        min_seconds=0.3,
        min_updates=5,
        settle_seconds=settle,
    )
    if watts is None:  # unsettled, the reading includes the earlier work's power
        assert found.watts > 300.0
    else:
        assert found.watts == pytest.approx(watts)


@pytest.mark.parametrize(("step", "window"), [(0.002, 0.4), (0.012, 0.1)])
def test_a_step_the_host_paces_gets_the_longer_window(monkeypatch, clock, step, window):
    monkeypatch.setattr(energy, "SHORT_STEP_WINDOW", 0.4)
    monkeypatch.setattr(energy, "MIN_SECONDS", 0.1)
    found = energy.measure(
        lambda: clock.step(step),
        lambda: None,
        energy.Counter("stand-in", continuous(clock, 100.0), 0.002),
        min_updates=2,
        settle_seconds=0,
    )
    assert (
        window <= found.seconds < window + step
    )  # the window is the settle's step time's, not a guess


def test_a_counter_that_fails_fails_the_measurement():
    def broken() -> float:
        raise OSError("the counter went away")

    counter = energy.Counter("stand-in", broken, 0.001)
    with pytest.raises(OSError, match="the counter went away"):
        energy.measure(lambda: time.sleep(0.001), lambda: None, counter, min_seconds=0.05)


# --- NVML ---------------------------------------------------------------------------------------------------


class NVMLError(Exception):
    pass


def _pynvml(millijoules, supported=True):
    """A stand-in for nvidia-ml-py's pynvml: the calls energy.py makes, on one H100."""
    module = types.ModuleType("pynvml")
    module.NVMLError = NVMLError
    module.nvmlInit = lambda: None
    module.nvmlDeviceGetHandleByUUID = lambda uuid: ("by uuid", uuid)
    module.nvmlDeviceGetHandleByIndex = lambda index: ("by index", index)
    module.nvmlDeviceGetName = lambda handle: "NVIDIA H100 80GB HBM3"

    def total_energy(handle):
        if not supported:
            raise NVMLError("Not Supported")
        return millijoules()

    module.nvmlDeviceGetTotalEnergyConsumption = total_energy
    return module


@pytest.fixture
def one_gpu(monkeypatch):
    properties = types.SimpleNamespace(uuid="8a4f-stand-in")
    monkeypatch.setattr(energy.torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(energy.torch.cuda, "get_device_properties", lambda index: properties)


def test_nvml_reads_the_gpu_of_torch_in_joules(monkeypatch, one_gpu):
    handles = []
    module = _pynvml(lambda: 123_456)
    real = module.nvmlDeviceGetHandleByUUID
    module.nvmlDeviceGetHandleByUUID = lambda uuid: handles.append(uuid) or real(uuid)
    monkeypatch.setitem(sys.modules, "pynvml", module)
    found = energy._nvml()
    assert found.joules() == pytest.approx(123.456)  # NVML counts millijoules
    assert found.what == "NVML total energy of NVIDIA H100 80GB HBM3"
    assert handles == ["GPU-8a4f-stand-in"]  # the board torch computes on, by UUID


def test_nvml_falls_back_to_cudas_index_where_the_uuid_is_not_nvmls(monkeypatch, one_gpu):
    module = _pynvml(lambda: 1000)

    def unknown(uuid):
        raise NVMLError("Not Found")

    module.nvmlDeviceGetHandleByUUID = unknown
    handles = []
    module.nvmlDeviceGetHandleByIndex = lambda index: handles.append(index) or ("by index", index)
    monkeypatch.setitem(sys.modules, "pynvml", module)
    assert energy._nvml().joules() == pytest.approx(1.0)
    assert handles == [0]


def test_nvml_without_the_package_or_the_counter_skips_with_the_reason(monkeypatch, one_gpu):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml raises ImportError
    with pytest.raises(suite.SkipNotImplemented, match="needs nvidia-ml-py"):
        energy._nvml()
    monkeypatch.setitem(sys.modules, "pynvml", _pynvml(lambda: 0, supported=False))
    with pytest.raises(
        suite.SkipNotImplemented, match="counter is not readable here: Not Supported"
    ):
        energy._nvml()


def test_an_nvml_counter_that_moves_in_steps_reads_its_power(monkeypatch, one_gpu, clock):
    origin = clock.now
    interval = 0.02  # the counter updates every 20 ms, as a board's firmware does

    def millijoules():
        return clock.read(
            lambda now: int(300_000 * interval * ((now - origin) // interval))
        )  # 300 W

    monkeypatch.setitem(sys.modules, "pynvml", _pynvml(millijoules))
    monkeypatch.setattr(
        energy.skips, "require_device", lambda device: None
    )  # as on a machine with cuda
    found = energy.measure(
        lambda: clock.step(0.005),
        lambda: None,
        energy.counter("cuda"),
        min_seconds=0.3,
        min_updates=10,
    )
    assert found.updates >= 10
    assert found.watts == pytest.approx(
        300, rel=0.05
    )  # each update is seen at the end of the step it came in


# --- IOReport (macOS; unverified on hardware) -----------------------------------------------------------------


def _zeus(gpu_mj, cpu_mj):
    module = types.ModuleType("zeus_apple_silicon")

    class AppleEnergyMonitor:
        def get_cumulative_energy(self):
            return types.SimpleNamespace(gpu_mj=gpu_mj(), cpu_total_mj=cpu_mj, dram_mj=None)

    module.AppleEnergyMonitor = AppleEnergyMonitor
    return module


def test_ioreport_reads_the_gpu_for_mps_and_the_cpu_cores_for_the_cpu_on_macos(monkeypatch):
    energy.counter.cache_clear()
    monkeypatch.setitem(sys.modules, "zeus_apple_silicon", _zeus(lambda: 5_000, 7_000))
    monkeypatch.setattr(energy.sys, "platform", "darwin")
    monkeypatch.setattr(energy.skips, "require_device", lambda device: None)  # as on a Mac with mps
    assert energy.counter("mps").joules() == pytest.approx(5.0)
    assert energy.counter("cpu").joules() == pytest.approx(7.0)
    assert energy.counter("mps").what == "IOReport gpu_mj"
    energy.counter.cache_clear()


def test_ioreport_without_the_package_or_the_domain_skips_with_the_reason(monkeypatch):
    monkeypatch.setitem(sys.modules, "zeus_apple_silicon", None)
    with pytest.raises(suite.SkipNotImplemented, match="needs zeus-apple-silicon"):
        energy._ioreport("mps")
    monkeypatch.setitem(sys.modules, "zeus_apple_silicon", _zeus(lambda: None, 1))
    with pytest.raises(
        suite.SkipNotImplemented, match="IOReport has no gpu_mj counter on this Mac"
    ):
        energy._ioreport("mps")


# --- RAPL ------------------------------------------------------------------------------------------------------


def _zone(
    root: pathlib.Path, name: str, kind: str, microjoules: int, limit: int = 262_143_328_850
) -> pathlib.Path:
    zone = root / name
    zone.mkdir()
    (zone / "name").write_text(f"{kind}\n")
    (zone / "energy_uj").write_text(f"{microjoules}\n")
    (zone / "max_energy_range_uj").write_text(f"{limit}\n")
    return zone


def test_rapl_sums_the_sockets_and_undoes_a_wrap_around(tmp_path):
    socket0 = _zone(tmp_path, "intel-rapl:0", "package-0", 1_000_000, limit=5_000_000)
    socket1 = _zone(tmp_path, "intel-rapl:1", "package-1", 2_000_000)
    core = _zone(
        tmp_path, "intel-rapl:0:0", "core", 0
    )  # inside package-0: counting it would count twice
    found = energy._rapl(tmp_path)
    assert found.joules() == 0.0
    (socket0 / "energy_uj").write_text("500000\n")  # wrapped at 5 J: 4.5 J later
    (socket1 / "energy_uj").write_text("2500000\n")
    (core / "energy_uj").write_text("9000000\n")
    assert found.joules() == pytest.approx(4.5 + 0.5)
    assert found.what == "RAPL package energy (intel-rapl:0, intel-rapl:1)"


def test_rapl_unreadable_or_absent_skips_with_the_reason(tmp_path, monkeypatch):
    with pytest.raises(suite.SkipNotImplemented, match="no RAPL package domain"):
        energy._rapl(tmp_path)
    _zone(tmp_path, "intel-rapl:0", "package-0", 1)
    real = pathlib.Path.read_text

    def root_only(
        path, *args, **kwargs
    ):  # the tests run as root here; Linux 5.10+ gives others a 0400 file
        if path.name == "energy_uj":
            raise PermissionError(13, "Permission denied", str(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(pathlib.Path, "read_text", root_only)
    with pytest.raises(suite.SkipNotImplemented, match="readable by root only"):
        energy._rapl(tmp_path)


def test_the_cpu_on_linux_reads_rapl_and_elsewhere_says_it_has_no_counter(tmp_path, monkeypatch):
    energy.counter.cache_clear()
    monkeypatch.setattr(energy, "POWERCAP", tmp_path)
    monkeypatch.setattr(energy.sys, "platform", "linux")
    with pytest.raises(suite.SkipNotImplemented, match=f"no RAPL package domain under {tmp_path}"):
        energy.counter("cpu")
    monkeypatch.setattr(energy.sys, "platform", "freebsd14")
    with pytest.raises(
        suite.SkipNotImplemented, match="no energy counter is known for cpu on freebsd14"
    ):
        energy.counter("cpu")


def test_the_capacity_classes_report_joules_per_step_beside_the_throughput(monkeypatch):
    # 40 W on the real clock, as the steps are real
    monkeypatch.setattr(
        energy,
        "counter",
        lambda device: energy.Counter("stand-in", lambda: 40.0 * time.perf_counter(), 0.002),
    )
    monkeypatch.setattr(energy, "MIN_SECONDS", 0.2)
    monkeypatch.setattr(energy, "MIN_UPDATES", 5)
    monkeypatch.setattr(energy, "SHORT_STEP_WINDOW", 0.2)
    keys = [("cpu", "mlp", 8)]
    readings = {"inference": figures.capacity("inference", "InferenceCapacity", keys)}
    joules = benchmark_models.InferenceCapacity().track_joules_per_step(readings, "cpu", "mlp", 8)
    throughput = benchmark_models.InferenceCapacity().track_throughput(readings, "cpu", "mlp", 8)
    assert joules > 0 and throughput > 0
    assert isinstance(readings["inference"], measured.Table)
