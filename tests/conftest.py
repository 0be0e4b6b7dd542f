"""Shared fixtures: a clean device-probe cache and workload cache for every test; the run's own caches."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from mpsbench.builds import install_build
from mpsbench.measure import correctness, devices, energy, llm, workloads


@pytest.fixture(autouse=True)
def _fresh_caches():
    devices.Device.availability.cache_clear()
    workloads.forget()
    llm.forget()  # a test's generation (or its stand-in) is not the next one's
    correctness.verify.cache_clear()  # a test that swaps a kernel checks again
    correctness.forget()
    energy.counter.cache_clear()  # a stand-in counter of one test is not the next one's
    yield
    devices.Device.availability.cache_clear()
    workloads.forget()


@pytest.fixture(scope="session", autouse=True)
def _build_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One build cache for the whole run, removed at its end: no test installs into the user's ~/.cache/mpsbench.

    MPSBENCH_CACHE reaches every process a test starts (asv's installs included); a test that needs a cache
    of its own sets another.
    """
    folder = tmp_path_factory.mktemp("build-cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(install_build.CACHE_ENV, str(folder))
        yield folder
    shutil.rmtree(folder, ignore_errors=True)  # builds are GBs: pytest keeps its last runs' folders


@pytest.fixture(scope="session")
def npm_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site's libraries as npm tarballs, fetched once per run (not the checkout's .asv/npm-cache)."""
    return tmp_path_factory.mktemp("npm-cache")
