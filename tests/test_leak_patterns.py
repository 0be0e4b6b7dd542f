"""Leak patterns: leak.py's slope per 1,000 iterations; a loop that keeps 1 MiB an iteration shows as about 1,000."""

from __future__ import annotations

import contextlib
import ctypes
import math

import pytest
import torch
from benchmarks import benchmark_patterns, common

from mpsbench.measure import leak


def _keeps_a_mebibyte(device):
    kept = []

    def step():
        kept.append(torch.ones(256 * 1024, device=device))  # 1 MiB of float32, never freed
        return kept[-1]

    return step


def _give_freed_heap_back() -> None:
    """glibc keeps freed heap pages resident: tests before this one may leave enough that 60 MiB
    of new tensors reuse them and the RSS does not grow. malloc_trim hands them back first."""
    with contextlib.suppress(OSError, AttributeError):  # not glibc: nothing to hand back this way
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def test_a_leaking_loop_grows_by_its_leak(monkeypatch):
    monkeypatch.setitem(
        leak.PATTERNS, "lstm_training", leak.Pattern("lstm_training", "stand-in", _keeps_a_mebibyte)
    )
    _give_freed_heap_back()
    growth = leak.growth("cpu", "lstm_training", iterations=60)
    assert growth == pytest.approx(
        1000, rel=0.2
    )  # MiB per 1,000 iterations: the RSS grows 1 MiB an iteration


def test_every_pattern_is_tracked_on_the_cpu_in_the_full_sweep(monkeypatch):
    monkeypatch.setenv("MPSBENCH_FULL", "1")
    monkeypatch.setattr(leak, "PATTERN_ITERATIONS", 20)
    monkeypatch.setattr(leak, "PATTERN_WARM_UP", 5)
    readings = {"leaks": common.measuring(leak.measure_patterns, benchmark_patterns.LeakPatterns)()}
    bench = benchmark_patterns.LeakPatterns()
    for name in leak.PATTERN_NAMES:
        assert math.isfinite(bench.track_growth(readings, "cpu", name))
    with pytest.raises(NotImplementedError):  # asv's n/a: no mps on this machine
        bench.track_growth(readings, "mps", "maxpool2d")
