"""Reading recorded results row by row: parameterized or not, every value and every failure asv recorded."""

from __future__ import annotations

import shutil

from tests import asvresults

from mpsbench.results import record, recorded

RUN = (
    asvresults.RECORDED / "cpu-2026-11-23"
)  # a real asv run: Environment.track_cpu_threads has no params
MACHINE = "debian-x86-64-2cpu"
THREADS = recorded.Row("benchmark_models.Environment.track_cpu_threads", ())


def test_an_unparameterized_benchmark_s_value_is_read(tmp_path):
    shutil.copytree(RUN, tmp_path / "results")
    found = recorded.load(tmp_path / "results")
    for build in found.builds(MACHINE):
        threads = found.get(MACHINE, build, THREADS)
        assert (
            threads is not None and threads.value == 2.0
        )  # the VM's 2 cores, as the file holds [2]
        assert (
            threads.stats is None and threads.samples is None
        )  # a track_ row: asv keeps no statistics
        # the same reading decides what a record run still has to measure
        assert THREADS.entry in record.recorded_names(tmp_path / "results", MACHINE, build)
    assert found.units[THREADS.benchmark] == "threads"


def test_an_unparameterized_benchmark_that_failed_counts_as_failed(tmp_path):
    name = "benchmark_host.Host.track_metal_version"
    asvresults.write_track(
        tmp_path, "m", "1" * 40, 0, name, [], [], "framework version", {(): None}
    )
    found = recorded.load(tmp_path)
    assert found.failed[("m", "1" * 40)] == {recorded.Row(name, ())}
    assert found.values[("m", "1" * 40)] == {}
