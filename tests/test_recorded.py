"""Reading recorded results row by row: parameterized or not, every value and every failure asv recorded."""

from __future__ import annotations

import json
import math
import re
import shutil

import pytest
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


def test_raw_gives_a_results_file_as_written_and_names_a_file_that_is_no_json_object(tmp_path):
    name = "benchmark_host.Host.track_metal_version"
    asvresults.write_track(tmp_path, "m", "2" * 40, 0, name, ["x"], [[1, 2]], "ratio", {(1,): 3.0})
    (path,) = (tmp_path / "m").glob("2222*.json")
    data = recorded.raw(path)
    assert data["commit_hash"] == "2" * 40 and set(data) == set(json.loads(path.read_text()))
    row = dict(zip(data["result_columns"], data["results"][name]))
    assert row["result"][0] == 3.0 and math.isnan(row["result"][1])  # asv's NaN (not run) kept
    for text in ("[1, 2]", "{", "\xff"):
        path.write_bytes(text.encode("latin-1"))
        with pytest.raises(recorded.RecordedError, match=f"^{re.escape(str(path))}: "):
            recorded.raw(path)
    with pytest.raises(
        recorded.RecordedError, match=f"^{re.escape(str(tmp_path / 'gone.json'))}: "
    ):
        recorded.raw(tmp_path / "gone.json")


def test_a_machine_s_builds_are_its_readable_files_builds(tmp_path):
    name = "benchmark_host.Host.track_metal_version"
    for commit in ("3" * 40, "4" * 40):
        asvresults.write_track(tmp_path, "m", commit, 0, name, [], [], "ratio", {(): 1.0})
    (tmp_path / "m" / "55555555-existing-py.json").write_text("{")  # corrupt: skipped
    assert recorded.commits(tmp_path, "m") == {"3" * 40, "4" * 40}
    assert recorded.commits(tmp_path, "other") == set()
    assert recorded.full_hash(tmp_path, "m", "333") == "33333333"
    assert recorded.full_hash(tmp_path, "m", "9") is None
    assert recorded.machine_named(tmp_path / "m" / "machine.json") == "m"
