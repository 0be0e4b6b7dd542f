"""The quiet gate's rule (measure/quiet.py) and the values it holds out of the record
(results/held.py).

The machine's state comes from stand-ins here; a real asv run through the gate is in
tests/test_quiet_run.py.
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

import pytest

from mpsbench.core import asv_saving
from mpsbench.core.errors import UserError
from mpsbench.fleet import doctor
from mpsbench.measure import host, quiet
from mpsbench.results import held, merge

QUIET = quiet.State(cores=2, others=0.05, load=0.3)
BUSY = quiet.State(cores=2, others=1.6, load=7.5)


def test_a_machine_whose_other_processes_take_more_than_the_share_of_its_cores_is_busy():
    assert quiet.problems(QUIET) == {}
    assert (
        quiet.problems(quiet.State(cores=2, others=quiet.OTHERS_SHARE * 2, load=9.0)) == {}
    )  # at the limit
    assert quiet.problems(BUSY) == {"load": "other processes used 1.6 of 2 cores (the limit: 0.5)"}
    assert quiet.problems(quiet.State(8, 1.0, 1.0)) == {}  # the share is of this machine's cores


def test_on_battery_or_throttled_a_mac_is_not_quiet_whatever_its_load():
    found = quiet.problems(
        quiet.State(10, 0.0, 0.2, battery=True, thermal="throttled: CPU_Speed_Limit = 60")
    )
    assert set(found) == {"power", "thermal"}
    assert found["thermal"] == "throttled: CPU_Speed_Limit = 60"
    assert quiet.problems(quiet.State(10, 0.0, 0.2, battery=False, thermal=None)) == {}


def test_a_state_goes_to_the_events_and_comes_back_as_it_was():
    event = {"event": "done", **BUSY.fields(), **QUIET.fields("_after")}
    assert quiet.State.of(event) == BUSY
    assert quiet.State.of(event, "_after") == QUIET
    assert quiet.State.of({"event": "done", "seconds": 1.0}) is None  # a run without the gate


def test_the_reading_is_all_cores_busy_time_less_this_runs_own(monkeypatch):
    busy = iter([100.0, 102.0])  # two cores fully busy over the window ...
    own = iter([10.0, 11.0])  # ... one core's worth of it ours
    monkeypatch.setattr(quiet, "_busy_seconds", lambda: next(busy))
    monkeypatch.setattr(quiet, "_used", lambda processes: next(own))
    monkeypatch.setattr(quiet.time, "sleep", lambda seconds: None)
    clock = iter([0.0, 1.0])
    monkeypatch.setattr(quiet.time, "monotonic", lambda: next(clock))
    monkeypatch.setattr(quiet.os, "cpu_count", lambda: 2)
    state = quiet.read(1.0, own=lambda: [])
    assert state.others == 1.0 and state.cores == 2


def test_a_real_reading_is_a_share_of_the_cores_and_the_load_average():
    state = quiet.read(0.2)
    assert 0.0 <= state.others <= state.cores + 0.5  # the clock and the cpu counters tick apart
    assert state.load is None or state.load >= 0.0


class Readings:
    """A stand-in reader: the given states in turn, the last one from then on; a clock that sleeping
    moves."""

    def __init__(self, *states: quiet.State) -> None:
        self.states, self.now, self.said = list(states), 0.0, []

    def read(self, window: float) -> quiet.State:
        self.now += window
        return self.states.pop(0) if len(self.states) > 1 else self.states[0]

    def gate(self, limit: float) -> quiet.Gate:
        return quiet.Gate(limit, self.read, self.said.append, lambda: self.now, self.sleep)

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_on_a_busy_machine_the_gate_waits_in_one_line_until_it_is_quiet():
    readings = Readings(BUSY, BUSY, BUSY, QUIET)
    fields = readings.gate(60).before("Training.time_step('cpu', 'mlp', 1)")
    assert len(readings.said) == 1
    assert readings.said[0].startswith("the machine is busy (other processes used 1.6 of 2 cores")
    assert "waiting up to 60 s" in readings.said[0] and quiet.WAIT in readings.said[0]
    assert fields["others"] == QUIET.others and fields["waited"] == pytest.approx(3 * quiet.POLL)


def test_a_wait_that_runs_out_is_said_once_and_not_repeated_while_the_machine_stays_busy():
    readings = Readings(BUSY)
    gate = readings.gate(10)
    first = gate.before("a")
    assert first["waited"] >= 10 and quiet.State.of(first) == BUSY  # measured busy: judged after
    gate.after()
    assert gate.before("b")["waited"] == 0.0
    assert len(readings.said) == 1
    readings.states = [QUIET, BUSY]  # quiet once: the next busy moment is waited for again
    gate.before("c")
    gate.before("d")
    assert len(readings.said) == 2


def test_a_quiet_reading_just_after_a_combination_stands_for_the_state_before_the_next():
    readings = Readings(QUIET, BUSY)
    gate = readings.gate(60)
    assert gate.after() == QUIET.fields("_after")
    assert quiet.State.of(gate.before("next")) == QUIET
    assert not readings.said


def test_with_no_wait_allowed_the_gate_only_reads():
    readings = Readings(BUSY)
    assert readings.gate(0).before("a")["waited"] == 0.0 and not readings.said


def test_the_spread_is_the_interquartile_range_over_the_median():
    assert quiet.spread(0.020, {"q_25": 0.019, "q_75": 0.021}, None) == pytest.approx(0.1)
    assert quiet.spread(1.0, None, [1.0, 1.0, 1.0, 1.0, 1.0]) == 0.0
    assert quiet.spread(1.0, None, [1.0, 2.0, 3.0, 4.0, 5.0]) == pytest.approx(
        3.0 / 3.0
    )  # quartiles 1.5, 4.5
    assert quiet.spread(5.0, None, None) is None  # a count or a memory peak: one sample, no spread


def test_the_judge_keeps_a_tight_value_taken_on_a_quiet_machine():
    tight = {"q_25": 0.0209, "q_75": 0.0213}
    assert quiet.judge(0.021, tight, None, QUIET, QUIET, None) == {}
    assert (
        quiet.judge(0.021, tight, None, None, None, 0.0205) == {}
    )  # no state known, close to the recorded


def test_the_judge_holds_a_value_the_machine_disturbed_and_says_each_reason():
    wide = {"q_25": 0.100, "q_75": 0.150}  # the 141 +- 50 ms
    found = quiet.judge(0.141, wide, None, BUSY, QUIET, 0.021)
    assert set(found) == {"load", "spread", "drift"}
    assert found["load"].endswith("before it")
    assert found["spread"].startswith("its samples spread 35%")
    assert (
        "+571% from this machine's recorded 0.021 of the same build (the limit: 25%)"
        in found["drift"]
    )
    assert set(quiet.judge(0.021, None, None, QUIET, BUSY, None)) == {"load"}


def test_a_wide_spread_measured_again_is_the_benchmarks_own_when_the_two_measurements_agree():
    wide = {"q_25": 0.8e-5, "q_75": 1.3e-5}
    assert set(quiet.judge(1.0e-5, wide, None, QUIET, QUIET, None)) == {"spread"}
    assert quiet.judge(1.0e-5, wide, None, QUIET, QUIET, None, first=1.1e-5) == {}
    found = quiet.judge(
        1.0e-5, wide, None, QUIET, QUIET, None, first=3.0e-5
    )  # one of the two was disturbed
    assert found["spread"].endswith("; -67% from its first measurement 3e-05")
    assert set(quiet.judge(1.0e-5, wide, None, BUSY, QUIET, None, first=1.0e-5)) == {"load"}


def test_a_tiny_rows_two_quiet_measurements_agree_within_its_own_spread():
    # a 0.5 ms row on a quiet machine: 62% then 56% spread, medians 25.2% apart (within the spread)
    wide = {"q_25": 0.3e-3, "q_75": 0.54e-3}  # 56% of 0.43e-3
    assert quiet.judge(0.43e-3, wide, None, QUIET, QUIET, None, first=0.5758e-3) == {}
    # twice the spread apart: one of the two was disturbed
    assert set(quiet.judge(0.43e-3, wide, None, QUIET, QUIET, None, first=1.5e-3)) == {"spread"}


@pytest.mark.parametrize("value", ["abc", "-1", "3601", "1.5"])
def test_a_wait_setting_outside_its_range_is_one_line_naming_it(monkeypatch, value):
    monkeypatch.setenv(quiet.WAIT, value)
    with pytest.raises(
        UserError,
        match=rf"^{quiet.WAIT}='{value}' is not a whole number from 0 to 3600$",
    ):
        quiet.wait_seconds()


def test_the_wait_setting_and_its_default(monkeypatch):
    monkeypatch.delenv(quiet.WAIT, raising=False)
    assert quiet.wait_seconds() == quiet.WAIT_DEFAULT
    monkeypatch.setenv(quiet.WAIT, " 0 ")
    assert quiet.wait_seconds() == 0


def test_doctor_judges_the_load_by_the_gates_rule(monkeypatch, capsys):
    monkeypatch.setattr(quiet, "read", lambda window: BUSY)
    monkeypatch.setattr(host, "busy_processes", lambda threshold: [("cc1plus", 4242, 95.0)])
    monkeypatch.setattr(doctor, "CHECKS", (doctor.check_load,))
    assert doctor.run(strict=True) == 1
    out = capsys.readouterr().out
    assert (
        "warn  load       other processes used 1.6 of 2 cores (the limit: 0.5); load average 7.5"
        in out
    )
    assert "warn  processes  busy on the cpu: cc1plus (pid 4242, 95%)" in out
    monkeypatch.setattr(quiet, "read", lambda window: QUIET)
    assert doctor.run(strict=True) == 0
    assert (
        "ok    load       other processes used 0.1 of 2 cores; load average 0.3"
        in capsys.readouterr().out
    )


# A scratch run as asv_saving leaves it: results (one file, three combinations) and the events with
# the states.
MACHINE, COMMIT = "vm", "a" * 40
NAME = "benchmark_models.Training.time_step"
COMBOS = [("'cpu'",), ("'mps'",), ("'cuda'",)]


def _scratch(root: Path, samples: list[list[float]], name: str = "scratch") -> Path:
    """asv's results file of the three combinations, each value the median of its samples, written
    by asv."""
    from asv.results import Results
    from asv.runner import BenchmarkResult

    scratch = root / name
    (scratch / "results" / MACHINE).mkdir(parents=True)
    (scratch / "results" / MACHINE / "machine.json").write_text(
        json.dumps({"machine": MACHINE, "version": 1})
    )
    entry = {
        "name": NAME,
        "params": [[combo[0] for combo in COMBOS]],
        "param_names": ["device"],
        "version": "1",
        "code": "",
        "type": "time",
        "unit": "seconds",
    }
    result = Results({"machine": MACHINE, "python": "3.11"}, {}, COMMIT, 0, "3.11", "env", {})
    result.add_result(
        entry,
        BenchmarkResult(
            result=[statistics.median(values) if values else math.nan for values in samples],
            samples=[values or None for values in samples],
            number=[1] * len(samples),
            errcode=0,
            stderr="",
            profile=None,
        ),
        record_samples=True,
    )
    result.save(str(scratch / "results"))
    return scratch


TIGHT = [0.0209, 0.0210, 0.0210, 0.0211, 0.0212]


def _events(scratch: Path, states: list[tuple[quiet.State, quiet.State]]) -> None:
    for combo, (before, after) in zip(COMBOS, states, strict=True):
        name = f"{NAME}({combo[0]})"
        asv_saving.event(
            scratch / "results",
            event="start",
            name=name,
            build=COMMIT,
            **before.fields(),
            waited=0.0,
        )
        asv_saving.event(
            scratch / "results",
            event="done",
            name=name,
            build=COMMIT,
            seconds=1.0,
            outcome="value",
            **after.fields("_after"),
        )


def _judged_values(folder: Path) -> dict[tuple[str, ...], float]:
    data = json.loads(next((folder / MACHINE).glob(f"{COMMIT[:8]}-*.json")).read_text())
    return {combo: columns["result"] for (_, combo), columns in merge.values(data).items()}


def test_a_disturbed_value_is_left_out_of_what_is_merged_and_kept_aside_with_its_reasons(tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    wide = [0.090, 0.110, 0.141, 0.160, 0.191]
    scratch = _scratch(tmp_path, [TIGHT, wide, TIGHT])
    _events(scratch, [(QUIET, QUIET), (QUIET, QUIET), (BUSY, QUIET)])
    out, found = held.judged(results, scratch)
    assert _judged_values(out) == {("'cpu'",): 0.021}  # the wide one and the busy one: not run
    assert {entry.name: set(entry.reasons) for entry in found} == {
        f"{NAME}('mps')": {"spread"},
        f"{NAME}('cuda')": {"load"},
    }
    lines = [json.loads(line) for line in held.trail(results).read_text().splitlines()]
    assert [(line["params"], line["value"], line["recorded"]) for line in lines] == [
        (["'mps'"], 0.141, False),
        (["'cuda'"], 0.021, False),
    ]
    assert (
        lines[1]["before"]["others"] == BUSY.others
        and lines[1]["after"]["others_after"] == QUIET.others
    )
    assert lines[0]["samples"] == wide and lines[0]["stats"]["q_75"] > lines[0]["stats"]["q_25"]
    assert lines[0]["machine"] == MACHINE and lines[0]["commit"] == COMMIT
    held.judged(results, scratch)  # judged again (each merge of the run): kept aside once
    assert len(held.trail(results).read_text().splitlines()) == 2


def test_a_held_value_never_replaces_or_removes_a_recorded_one(tmp_path):
    results = tmp_path / "results"
    recorded = _scratch(tmp_path / "before", [[0.020] * 5, [0.030] * 5, [0.040] * 5])
    assert merge.merge(results, [recorded / "results"]).copied
    scratch = _scratch(tmp_path, [[0.090] * 5, [0.0301] * 5, []])
    _events(scratch, [(QUIET, QUIET), (QUIET, QUIET), (QUIET, QUIET)])
    out, found = held.judged(
        results, scratch
    )  # as with --remeasure: the first drifted far from the recorded
    assert [set(entry.reasons) for entry in found] == [{"drift"}]
    report = merge.merge(results, [out], replace=True)
    assert _judged_values(results) == {("'cpu'",): 0.020, ("'mps'",): 0.0301, ("'cuda'",): 0.040}
    assert len(report.replaced) == 1  # the one value judged sound, audited


def test_accepting_a_busy_machine_records_the_value_and_notes_it_was_disturbed(tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    scratch = _scratch(tmp_path, [TIGHT] * 3)
    _events(scratch, [(BUSY, BUSY)] * 3)
    out, found = held.judged(results, scratch, accept=True)
    assert found == [] and len(_judged_values(out)) == 3
    assert [
        json.loads(line)["recorded"] for line in held.trail(results).read_text().splitlines()
    ] == [True] * 3


def test_the_ends_count_leaves_out_what_the_retry_recorded():
    first = held.Held(MACHINE, COMMIT, "a", {"load": "x", "spread": "y"}, "run-1")
    second = held.Held(MACHINE, COMMIT, "b", {"spread": "y"}, "run-1")
    assert held.still_held([first, second], {(MACHINE, COMMIT, "a")}) == (1, {"spread": 1})
    assert held.still_held([first, second, first], set()) == (2, {"load": 1, "spread": 2})


@pytest.mark.parametrize(
    ("name", "value", "says"),
    [
        (quiet.WAIT, "soon", "is not a whole number from 0 to 3600"),
        (
            quiet.ACCEPT_BUSY,
            "maybe",
            "is neither on (1, true, yes, on) nor off (0, false, no, off, or unset)",
        ),
    ],
)
def test_a_bad_gate_setting_stops_a_record_run_in_one_line_before_anything_runs(
    monkeypatch, tmp_path, capsys, name, value, says
):
    from mpsbench import cli

    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".asv-machine.json").write_text(
        json.dumps({"version": 1, "box": {"machine": "box"}})
    )
    monkeypatch.setenv(name, value)
    config = Path(__file__).resolve().parents[1] / "asv.conf.json"
    assert (
        cli.main(
            ["results", "record", "--config", str(config), "--machine", "box", "--", "release^!"]
        )
        == 2
    )
    assert capsys.readouterr().err == f"mpsbench: error: {name}={value!r} {says}\n"
    assert sorted(path.name for path in tmp_path.iterdir()) == [".asv-machine.json"]


def test_measured_again_as_wide_and_as_before_a_value_is_recorded_and_unlike_it_held_again(
    tmp_path,
):
    results = tmp_path / "results"
    results.mkdir()
    wide = [
        0.8e-5,
        0.9e-5,
        1.0e-5,
        1.2e-5,
        1.4e-5,
    ]  # a tiny op on a shared VM: 45% on a quiet machine
    first = _scratch(tmp_path, [TIGHT, wide, [3 * x for x in wide]], name="run-1")
    _events(first, [(QUIET, QUIET)] * 3)
    assert [entry.name for entry in held.judged(results, first)[1]] == [
        f"{NAME}('mps')",
        f"{NAME}('cuda')",
    ]
    retry = _scratch(tmp_path, [TIGHT, [1.05 * x for x in wide], wide], name="run-2")
    _events(retry, [(QUIET, QUIET)] * 3)
    out, found = held.judged(results, retry, again="run-1")
    assert set(_judged_values(out)) == {
        ("'cpu'",),
        ("'mps'",),
    }  # as wide, and agreeing: the benchmark's own
    assert [(entry.name, entry.run) for entry in found] == [(f"{NAME}('cuda')", "run-2")]
    assert "-67% from its first measurement" in found[0].reasons["spread"]


def test_the_retry_pass_says_each_value_it_measures_again(tmp_path, capsys):
    from mpsbench.core import asv_saving
    from mpsbench.results import watch

    events = tmp_path / asv_saving.EVENTS
    step = watch.Step("b", ("a(1)", "b(2)", "c(3)"), "every combination")
    again = watch.Watch([step], watch.Costs(tmp_path / "results", "box"), watch.Disk(tmp_path, {}))
    again.begin(step)
    again.hold(["a(1)", "b(2)"])
    held = again.remaining()
    again.retry(["a(1)", "b(2)"])
    assert again.remaining() < held  # the third is still to run, the retry is under way
    events.write_text(json.dumps({"event": "start", "name": "a(1)"}) + "\n")
    assert [line["event"] for line in again.poll(tmp_path)] == ["begin"]  # the wait and start-up
    with events.open("a") as out:
        out.write(json.dumps({"event": "done", "name": "a(1)", "outcome": "value", "seconds": 2.5}))
        out.write("\n" + '{"event": "start", "na')  # a line half written waits
    again.poll(tmp_path)
    assert "measured again 1 of 2: a(1): value" in capsys.readouterr().err
    with events.open("a") as out:
        out.write(
            'me": "b(2)"}\n' + json.dumps({"event": "done", "name": "b(2)", "outcome": "failed"})
        )
        out.write("\n")
    again.poll(tmp_path)
    assert "measured again 2 of 2: b(2): failed" in capsys.readouterr().err


def test_the_gates_lines_in_asvs_log_reach_the_terminal_once_each_and_whole(tmp_path, capsys):
    from mpsbench.results import record

    log = tmp_path / "results-asv.log"
    log.write_bytes(b"an earlier run: mpsbench quiet: not said again\n")
    relay = record._gate_lines(log, log.stat().st_size)
    with open(log, "ab") as asv_writing:
        asv_writing.write(b"[50.00%] \xc2\xb7\xc2\xb7\xc2\xb7 benchmark_models.x")
        asv_writing.write(b"mpsbench quiet: the machine is busy; waiting up to 120 s\n")
        asv_writing.write(b"asv's own line\nmpsbench quiet: a line still being wri")
    relay()
    relay()
    said = capsys.readouterr().err.splitlines()
    assert said == ["mpsbench record: the machine is busy; waiting up to 120 s"], said
    with open(log, "ab") as asv_writing:
        asv_writing.write(b"tten\n")
    relay()
    assert capsys.readouterr().err.splitlines() == ["mpsbench record: a line still being written"]
