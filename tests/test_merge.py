"""Merging results directories of several machines: nothing lost, nothing overwritten, problems named."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from tests import asvresults

from mpsbench import cli
from mpsbench.core.errors import UserError
from mpsbench.results import merge
from mpsbench.site import throughput

DEVICES, MODELS, BATCHES = ["cpu", "mps"], ["mlp"], [8]
COMMITS = ["1" * 40, "2" * 40, "3" * 40]
DAY_MS = 86400 * 1000


def _results(root: Path, machine: str, build: int, seconds: float, version: str = "1") -> Path:
    """One machine's results for build ``build`` (0, 1, 2), with the benchmarks.json asv writes beside them."""
    values = {("training", "time_step", "cpu", "mlp", 8): seconds}
    benchmarks = asvresults.write_results(
        root,
        machine,
        COMMITS[build],
        1767225600000 + build * DAY_MS,
        values,
        DEVICES,
        MODELS,
        BATCHES,
        version,
    )
    asvresults.write_benchmarks(root, benchmarks)
    return root / machine / f"{COMMITS[build][:8]}-existing-py.json"


def _snapshot(root: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(root)): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


@pytest.fixture
def machines(tmp_path):
    """Two runners' artifacts: m1 ran builds 0 and 1, m2 ran builds 1 and 2; the fleet already has m1's build 0."""
    a, b, fleet = tmp_path / "artifact-m1", tmp_path / "artifact-m2", tmp_path / "fleet"
    first = _results(a, "m1", 0, 0.010)
    (fleet / "m1").mkdir(parents=True)
    for path in (
        first,
        a / "m1" / "machine.json",
        a / "benchmarks.json",
    ):  # as an earlier night merged them
        shutil.copy(path, fleet / path.relative_to(a))
    _results(a, "m1", 1, 0.011)
    _results(b, "m2", 1, 0.020)
    _results(b, "m2", 2, 0.021)
    return fleet, a, b


def test_two_machines_with_overlapping_builds_merge_without_losing_a_file(machines):
    fleet, a, b = machines
    before = _snapshot(fleet)
    found = merge.merge(fleet, [a, b])
    assert found.clean
    assert found.identical == [
        str(fleet / "m1" / f"{COMMITS[0][:8]}-existing-py.json"),
        str(fleet / "m1" / "machine.json"),
    ]
    assert len(found.copied) == 4  # m1's build 1; m2's machine.json and its two builds
    after = _snapshot(fleet)
    assert all(after[name] == data for name, data in before.items())  # what was there is unchanged
    for artifact in (a, b):  # every file of every artifact is now in the fleet, byte for byte
        for name, data in _snapshot(artifact).items():
            if name != "benchmarks.json":
                assert after[name] == data, name
    loaded = throughput.load(fleet)  # asv reads the merged directory
    assert loaded.machines == ["m1", "m2"]
    assert loaded.builds("m1") == COMMITS[:2] and loaded.builds("m2") == COMMITS[1:]
    again = merge.merge(fleet, [a, b])
    assert (
        again.clean and not again.copied and _snapshot(fleet) == after
    )  # merging twice changes nothing


def test_a_differing_value_is_a_conflict_named_and_the_recorded_one_kept(machines, capsys):
    fleet, a, b = machines
    theirs = _results(a, "m1", 0, 0.099)  # the same build, other numbers: not the fleet's file
    ours = fleet / "m1" / theirs.name
    kept, incoming = ours.read_bytes(), theirs.read_bytes()
    assert cli.main(["results", "merge", str(fleet), str(a), str(b)]) == 1
    out = capsys.readouterr().out
    assert (
        f"conflict  {theirs}: benchmark_models.Training.time_step('cpu', 'mlp', 8): recorded 0.01,"
        " incoming 0.099; recorded kept"
    ) in out
    assert ours.read_bytes() == kept and theirs.read_bytes() == incoming
    assert (
        fleet / "m2" / f"{COMMITS[2][:8]}-existing-py.json"
    ).is_file()  # the rest is merged all the same
    assert "1 in conflict (recorded kept)" in out.splitlines()[-1]


def test_a_corrupt_file_is_reported_by_name_skipped_and_left_untouched(machines, capsys):
    fleet, a, b = machines
    corrupt = b / "m2" / f"{COMMITS[2][:8]}-existing-py.json"
    corrupt.write_text('{"version": 2, "results": {')  # a runner killed mid-write
    broken_machine = a / "m1" / "machine.json"
    broken_machine.write_text("[]")
    assert cli.main(["results", "merge", str(fleet), str(a), str(b)]) == 1
    out = capsys.readouterr().out
    assert f"corrupt   {corrupt}: Error parsing JSON in file '{corrupt}'" in out
    assert f"corrupt   {broken_machine}:" in out
    assert corrupt.read_text() == '{"version": 2, "results": {'
    assert not (fleet / "m2" / corrupt.name).exists()
    assert (fleet / "m2" / f"{COMMITS[1][:8]}-existing-py.json").is_file()
    assert "2 corrupt (skipped)" in out.splitlines()[-1]


def test_benchmarks_json_becomes_the_union_of_every_side(tmp_path):
    fleet, a = tmp_path / "fleet", tmp_path / "a"
    _results(fleet, "m1", 0, 0.01)
    _results(a, "m2", 0, 0.01)
    assert merge.merge(fleet, [a]).benchmarks == []  # the same suite: nothing to add
    data = json.loads((a / "benchmarks.json").read_text())
    data["benchmark_models.Extra.time_step"] = {
        **data["benchmark_models.Training.time_step"],
        "name": "Extra",
    }
    (a / "benchmarks.json").write_text(json.dumps(data))
    found = merge.merge(fleet, [a])
    merged = json.loads((fleet / "benchmarks.json").read_text())
    assert "benchmark_models.Extra.time_step" in merged and merged["version"] == 2
    assert found.benchmarks == ["added benchmark_models.Extra.time_step"]


def test_a_benchmark_version_that_differs_is_a_clear_error_and_nothing_is_written(machines, capsys):
    fleet, a, b = machines
    _results(b, "m2", 2, 0.021, version="2")  # m2 ran a suite whose benchmarks changed
    before = _snapshot(fleet)
    assert cli.main(["results", "merge", str(fleet), str(b)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(
        "mpsbench: error: benchmark benchmark_models.Training.time_step has "
        f"version 1 in {fleet / 'benchmarks.json'} but 2 in {b / 'benchmarks.json'}"
    )
    assert _snapshot(fleet) == before
    assert "--update-benchmarks when the sources ran the newer suite" in err[0]
    # sources that disagree with each other are an error, even when the sources may replace DEST's entries
    disagree = (
        f"version 1 in {a / 'benchmarks.json'} but 2 in {b / 'benchmarks.json'}: those machines ran"
    )
    with pytest.raises(UserError, match=disagree):
        merge.merge(fleet, [a, b], update_benchmarks=True)
    # a newer suite, all sources agreeing, replaces the fleet's definitions, each named
    found = merge.merge(fleet, [b], update_benchmarks=True)
    assert "replaced benchmark_models.Training.time_step (version 1 -> 2)" in found.benchmarks
    assert (
        json.loads((fleet / "benchmarks.json").read_text())["benchmark_models.Training.time_step"][
            "version"
        ]
        == "2"
    )


def test_only_the_named_machines_and_a_missing_source_is_one_line(machines, capsys):
    fleet, a, b = machines
    found = merge.merge(fleet, [a, b], machines=["m2"])
    assert {Path(name).parent.name for name in found.copied} == {"m2"}
    assert cli.main(["results", "merge", str(fleet), str(a / "nope")]) == 2
    assert (
        capsys.readouterr().err
        == f"mpsbench: error: results directory {a / 'nope'} does not exist\n"
    )


def test_a_machine_no_source_holds_is_one_line_and_nothing_is_written(machines, capsys):
    """--machine nosuch merged nothing with exit status 0: a misspelt machine's results were never merged."""
    fleet, a, b = machines
    before = _snapshot(fleet)
    assert (
        cli.main(
            [
                "results",
                "merge",
                str(fleet),
                str(a),
                str(b),
                "--machine",
                "m2",
                "--machine",
                "nosuch",
            ]
        )
        == 2
    )
    assert (
        capsys.readouterr().err
        == f"mpsbench: error: no machine 'nosuch' in {a}, {b}; machines there: m1, m2\n"
    )
    assert _snapshot(fleet) == before
    assert (
        cli.main(["results", "merge", str(fleet.parent / "new"), str(a), "--machine", "m2"]) == 2
    )  # m2's are in b
    assert not (fleet.parent / "new").exists()


def _values(path: Path) -> dict[str, object]:
    data = json.loads(path.read_text())
    return {
        name: dict(zip(data["result_columns"], row, strict=False)).get("result")
        for name, row in data["results"].items()
    }


def test_values_merge_one_by_one_keeping_recorded_adding_new_and_failures_only_where_nothing_was(
    tmp_path,
):
    fleet, run = tmp_path / "results", tmp_path / "scratch"
    values = {
        ("training", "time_step", "cpu", "mlp", 8): 0.009,
        ("inference", "time_step", "cpu", "mlp", 8): None,
        ("training", "time_step", "mps", "mlp", 8): float("nan"),
    }  # asv's NaN: skipped, or not selected
    asvresults.write_results(fleet, "m", COMMITS[0], 0, values, DEVICES, MODELS, BATCHES)
    target = fleet / "m" / f"{COMMITS[0][:8]}-existing-py.json"
    # the new run: cpu mlp 8 failed this time, mps got a value, and a new batch size (32) appeared
    again = {
        ("training", "time_step", "cpu", "mlp", 8): None,
        ("training", "time_step", "mps", "mlp", 8): 0.002,
        ("training", "time_step", "cpu", "mlp", 32): 0.03,
        ("inference", "time_step", "cpu", "mlp", 8): 0.004,
    }
    asvresults.write_results(run, "m", COMMITS[0], 0, again, DEVICES, MODELS, [8, 32])
    found = merge.merge(fleet, [run])
    assert found.clean and found.merged == [str(target)]
    assert _values(target) == {
        "benchmark_models.Training.time_step": [
            0.009,
            0.03,
            0.002,
            None,
        ],  # cpu 8 kept; cpu 32 and mps 8 added
        "benchmark_models.Inference.time_step": [0.004, None, None, None],
    }
    data = json.loads(target.read_text())
    assert dict(
        zip(
            data["result_columns"],
            data["results"]["benchmark_models.Training.time_step"],
            strict=False,
        )
    )["params"] == [["'cpu'", "'mps'"], ["'mlp'"], ["8", "32"]]
    loaded = throughput.load(fleet)  # asv still reads it
    assert loaded.builds("m") == [COMMITS[0]]
    assert not merge.audit_trail(fleet).exists()


def test_replace_re_measures_on_purpose_and_keeps_the_earlier_value_in_the_audit_trail(
    tmp_path, capsys
):
    fleet, run = tmp_path / "results", tmp_path / "scratch"
    asvresults.write_results(
        fleet,
        "m",
        COMMITS[0],
        0,
        {("training", "time_step", "cpu", "mlp", 8): 0.009},
        DEVICES,
        MODELS,
        BATCHES,
    )
    asvresults.write_results(
        run,
        "m",
        COMMITS[0],
        0,
        {("training", "time_step", "cpu", "mlp", 8): 0.0423},
        DEVICES,
        MODELS,
        BATCHES,
    )
    target = fleet / "m" / f"{COMMITS[0][:8]}-existing-py.json"
    assert cli.main(["results", "merge", str(fleet), str(run), "--replace"]) == 0
    assert _values(target)["benchmark_models.Training.time_step"] == [0.0423, None]
    trail = [json.loads(line) for line in merge.audit_trail(fleet).read_text().splitlines()]
    assert [(r["benchmark"], r["recorded"]["result"], r["by"]["result"]) for r in trail] == [
        ("benchmark_models.Training.time_step('cpu', 'mlp', 8)", 0.009, 0.0423)
    ]
    assert "1 values replaced on purpose" in capsys.readouterr().out


def test_a_run_recovers_what_a_killed_run_left_in_scratch_and_its_temporary_files(tmp_path):
    from mpsbench.results import record

    results = tmp_path / "results"
    asvresults.write_results(
        results,
        "m",
        COMMITS[0],
        0,
        {("training", "time_step", "cpu", "mlp", 8): 0.009},
        DEVICES,
        MODELS,
        BATCHES,
    )
    left = (
        record.scratch_root(results) / "20261123T000000-1"
    )  # killed after asv saved, before the merge
    asvresults.write_results(
        left / "results",
        "m",
        COMMITS[0],
        0,
        {("training", "time_step", "mps", "mlp", 8): 0.002},
        DEVICES,
        MODELS,
        BATCHES,
    )
    torn = (
        results / "m" / f".{COMMITS[0][:8]}-existing-py.json-{'ab' * 16}.tmp"
    )  # killed before a merge's rename
    torn.write_text('{"half')
    target = results / "m" / f"{COMMITS[0][:8]}-existing-py.json"
    record.recover(results)
    assert _values(target)["benchmark_models.Training.time_step"] == [0.009, 0.002]
    assert not torn.exists() and not left.exists()


def test_values_recorded_under_one_python_do_not_count_for_another(tmp_path):
    """A build measured under Python 3.10 and 3.12 has a results file per Python (asv's -E)."""
    from mpsbench.results import record

    commit = "ab" * 20
    asvresults.write_results(
        tmp_path,
        "box",
        commit,
        0,
        {("training", "time_step", "cpu", "mlp", 8): 0.009},
        ["cpu"],
        MODELS,
        BATCHES,
        python="3.10",
    )
    row = "benchmark_models.Training.time_step('cpu', 'mlp', 8)"
    from mpsbench.core import asv

    assert (
        asv.run_args(["-E", "virtualenv:3.12", "--launch-method", "spawn"]).environment
        == "virtualenv-py3.12"
    )
    assert asv.run_args(["--environment=virtualenv:3.10"]).environment == "virtualenv-py3.10"
    assert asv.run_args(["--launch-method", "spawn"]).environment == "*"
    assert record.recorded_names(tmp_path, "box", commit, "virtualenv-py3.12") == set()
    assert record.recorded_names(tmp_path, "box", commit, "virtualenv-py3.10") == {row}
    assert record.recorded_names(tmp_path, "box", commit) == {row}


def test_a_trail_line_a_kill_cut_costs_only_itself(tmp_path):
    """An append after a cut line starts a line of its own: the cut line alone is lost, not the next
    record too; appending nothing writes nothing."""
    trail = tmp_path / "results-held.jsonl"
    merge.append(trail, [])
    assert not trail.exists()
    trail.write_text('{"benchmark": "a", "value": 1}\n{"benchmark": "b", "val')  # killed mid-line
    merge.append(trail, [{"benchmark": "c", "value": 3}])
    assert [line["benchmark"] for line in merge.read_lines(trail)] == ["a", "c"]
    assert trail.read_text().endswith('\n{"benchmark": "c", "value": 3}\n')


def test_an_incoming_results_file_is_parsed_and_checked_once(machines, monkeypatch):
    fleet, a, b = machines
    parsed: list[Path] = []
    checked: list[object] = []
    raw, malformed = merge.recorded.raw, merge.malformed
    monkeypatch.setattr(merge.recorded, "raw", lambda path: parsed.append(path) or raw(path))
    monkeypatch.setattr(merge, "malformed", lambda data: checked.append(data) or malformed(data))
    found = merge.merge(fleet, [a, b])
    assert found.clean and len(found.copied) == 4
    incoming = [path for source in (a, b) for path in sorted(source.glob("*/*-existing-py.json"))]
    assert len(incoming) == 4 and all(parsed.count(path) == 1 for path in incoming), parsed
    assert len(checked) == len(incoming)  # nothing but the incoming files: none was merged into
