"""Shared fixtures: a clean device-probe cache and workload cache for every test."""

from __future__ import annotations

import pytest

from mpsbench.measure import correctness, devices, energy, workloads


@pytest.fixture(autouse=True)
def _fresh_caches():
    devices.Device.availability.cache_clear()
    workloads.forget()
    correctness.verify.cache_clear()  # a test that swaps a kernel checks again
    correctness.forget()
    energy.counter.cache_clear()  # a stand-in counter of one test is not the next one's
    yield
    devices.Device.availability.cache_clear()
    workloads.forget()
