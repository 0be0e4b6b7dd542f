"""cpu memory on every OS: psutil where importable, /proc on Linux, and a skip with the reason (never 0) elsewhere.

macOS is played by stand-ins: ``sys.platform`` set to ``darwin``, ``/proc``
made unreadable (a Mac has none), and psutil either a stand-in module or absent.
"""

from __future__ import annotations

import builtins
import sys
import types

import pytest

from mpsbench.measure import devices, figures, leak, measured, suite

MIB = devices.MIB


@pytest.fixture
def macos(monkeypatch):
    """This process as a Mac sees it: darwin, and no /proc/self/statm to read."""
    monkeypatch.setattr(sys, "platform", "darwin")
    real_open = builtins.open

    def no_proc(path, *args, **kwargs):
        if str(path).startswith("/proc/"):
            raise FileNotFoundError(2, "No such file or directory", str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", no_proc)


def _stand_in_psutil(rss_values):
    readings = iter(rss_values)

    class Process:
        def memory_info(self):
            return types.SimpleNamespace(rss=next(readings))

    return types.SimpleNamespace(Process=Process)


def test_psutil_reads_this_process_rss_here():
    import psutil

    reading = devices.rss()
    assert reading is not None and reading > 10 * MIB
    assert (
        abs(reading - psutil.Process().memory_info().rss) < 64 * MIB
    )  # the same counter, read twice


def test_linux_without_psutil_still_reads_proc(monkeypatch):
    if not sys.platform.startswith("linux"):
        pytest.skip("/proc/self/statm is Linux's")
    monkeypatch.setitem(sys.modules, "psutil", None)  # import psutil raises ImportError
    reading = devices.rss()
    assert reading is not None and reading > 10 * MIB


def test_macos_with_psutil_samples_the_cpu_peak(monkeypatch, macos):
    psutil = _stand_in_psutil([300 * MIB, 700 * MIB, 500 * MIB])
    monkeypatch.setitem(sys.modules, "psutil", psutil)
    assert devices.peaks_over(devices.get("cpu"), lambda probe: probe()) == (
        700 * MIB,
        None,
    )  # before, probe, after


def test_macos_without_psutil_skips_peak_memory_and_leak_with_the_reason(monkeypatch, macos):
    monkeypatch.setitem(sys.modules, "psutil", None)  # import psutil raises ImportError
    assert devices.rss() is None
    assert devices.peaks_over(devices.get("cpu"), lambda probe: probe()) == (
        None,
        None,
    )  # was 0: a 0.0 MiB point
    workload = types.SimpleNamespace(
        device=devices.get("cpu"), step=lambda probe=None: probe and probe()
    )
    with pytest.raises(
        suite.SkipNotImplemented, match="unreadable on darwin without psutil"
    ) as skipped:
        figures.peak_memory(workload)  # type: ignore[arg-type]
    assert (
        measured.outcome_of(skipped.value).skipped is not None
    )  # asv's n/a, not a failure and not 0
    with pytest.raises(suite.SkipNotImplemented, match="unreadable on darwin without psutil"):
        leak.reading("cpu")
