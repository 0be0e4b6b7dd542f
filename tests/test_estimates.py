"""Estimates that learn: a record run's plan and its time-left line from this machine's costs file (or, before any,
the measured table per device), corrected by the run's own pace; checked by simulating runs over fixed cost logs.
A skip says its reason once and is recorded, so that the next run does not redo it."""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

import pytest

from mpsbench.core import asv_saving
from mpsbench.measure import quiet
from mpsbench.results import record, watch
from mpsbench.results.watch import Step, Watch

# A cost log as a 2-core machine writes it: a few benchmarks with very different costs per combination
CLASSES = {
    "benchmark_models.Training.time_step('cpu', 'm{}', 8)": 20.0,
    "benchmark_models.Inference.time_step('cpu', 'm{}', 8)": 8.0,
    "benchmark_ops.ComputeBoundOps.time_forward('cpu', 'op{}', 'float32', 'small')": 1.5,
    "benchmark_epoch.Epoch.time_epoch('cpu', 'm{}', 8, 0, 'tiny')": 45.0,
}


def _names(count: int) -> list[str]:
    return [pattern.format(i) for pattern in CLASSES for i in range(count)]


def _history(results: Path, names: list[str]) -> None:
    """One earlier run of each combination, at its class's cost."""
    watch.add(
        results,
        "box",
        [
            {
                "event": "done",
                "name": name,
                "build": "old",
                "outcome": "value",
                "seconds": CLASSES[_pattern(name)] * 0.7,
                "wall": CLASSES[_pattern(name)],
            }
            for name in names
        ],
    )


def _pattern(name: str) -> str:
    return next(pattern for pattern in CLASSES if name.startswith(pattern.split("{")[0]))


def _simulate(
    tmp_path: Path, steps: list[Step], took: dict[str, float], start_up: float
) -> list[tuple[float, float]]:
    """Run ``steps`` through a Watch on events whose clock says each combination took ``took`` (and each step's
    start-up ``start_up``); after each combination: (fraction done, estimated left / actually left)."""
    results = tmp_path / "results"
    watching = Watch(steps, watch.Costs(results, "box"), None)
    total = start_up * len(steps) + sum(took[name] for step in steps for name in step.names)
    spent, done, seen = 0.0, 0, []
    count = sum(len(step.names) for step in steps)
    for number, step in enumerate(steps):
        scratch = tmp_path / f"scratch{number}"
        scratch.mkdir()
        assert watching.begin(step)
        clock = watching.began_at + start_up  # the events' own clock
        spent += start_up
        for name in step.names:
            events = [{"event": "start", "name": name, "at": clock}]
            clock += took[name]
            spent += took[name]
            events.append(
                {
                    "event": "done",
                    "name": name,
                    "at": clock,
                    "seconds": took[name] * 0.9,
                    "outcome": "value",
                    "build": step.commit,
                }
            )
            with open(scratch / asv_saving.EVENTS, "a") as out:
                out.write("".join(json.dumps(event) + "\n" for event in events))
            watching.poll(scratch)
            done += 1
            left = total - spent
            if left > 0:
                seen.append((done / count, watching.remaining() / left))
    return seen


def _at(seen: list[tuple[float, float]], fraction: float) -> float:
    return next(ratio for done, ratio in seen if done >= fraction)


@pytest.mark.parametrize("slower", [1.0, 3.0, 6.0], ids=["as-before", "3x-loaded", "6x-loaded"])
def test_time_left_is_within_a_quarter_from_the_first_tier_on_whatever_the_load(tmp_path, slower):
    """History from a quiet run; this run `slower` times slower, with per-combination noise and per-class drift."""
    names = _names(10)
    _history(tmp_path / "results", names)
    rng = random.Random(45)
    drift = {
        pattern: rng.uniform(0.8, 1.25) for pattern in CLASSES
    }  # a class slowed more than another
    took = {
        name: CLASSES[_pattern(name)] * slower * drift[_pattern(name)] * rng.lognormvariate(0, 0.25)
        for name in names
    }
    first = tuple(name for name in names if "models" in name)
    steps = [
        Step("new", first, "first tier"),
        Step("new", tuple(n for n in names if n not in first), "the rest"),
        Step("older", tuple(names), "every combination"),
    ]
    took.update({name: took[name] for name in names})
    seen = _simulate(tmp_path, steps, took, start_up=16.0 * slower)
    first_tier_end = len(first) / (2 * len(names))
    for fraction in (0.1, 0.5, 0.9):
        if fraction >= first_tier_end:
            assert _at(seen, fraction) == pytest.approx(1.0, abs=0.25), (fraction, seen)


def test_before_any_history_a_class_learns_its_own_pace_and_lends_it_to_no_other(tmp_path):
    """No costs file: the table is right for the ops and the epochs, but the model steps run 3x
    slower (a load that slows long steps more than short ones): what is left after them is not
    scaled by their ratio, and each class's own combinations correct its estimate."""
    names = _names(12)
    table = {watch.group(name): CLASSES[_pattern(name)] for name in names}
    rng = random.Random(7)
    took = {
        name: (3.0 if "models" in name else 1.0)
        * CLASSES[_pattern(name)]
        * rng.lognormvariate(0, 0.25)
        for name in names
    }
    first = tuple(name for name in names if "models" in name)
    steps = [
        Step("new", first, "first tier"),
        Step("new", tuple(n for n in names if n not in first), "the rest"),
    ]
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(watch.MEASURED_SECONDS, "cpu", table)
        planned = sum(map(watch.Costs(tmp_path / "results", "box").combination, names))
        seen = _simulate(tmp_path, steps, took, start_up=30.0)
        watching = Watch(steps, watch.Costs(tmp_path / "results", "none"), None)
        for name in first[1:]:  # the first of a class pays its setup_cache: not learnt from
            watching.pace.note(watching.pace.key(name), took[name], table[watch.group(name)])
        ops = watching.pace.key(steps[1].names[0])
        training = watching.pace.key(first[-1])
    assert watching.pace.ratio(ops) == 1.0 and watching.pace.ratio(training) > 2.0
    assert planned < sum(took.values())  # the plan knows nothing of the load
    for fraction in (len(first) / len(names), 0.75, 0.9):
        assert _at(seen, fraction) == pytest.approx(1.0, abs=0.25), (fraction, seen)


def test_the_retry_of_held_values_and_the_publish_are_work_left(tmp_path):
    results = tmp_path / "results"
    watch.add(results, "box", [{"event": "publish", "seconds": 12.0}])
    names = ("x('cpu', 1)", "x('cpu', 2)", "x('cpu', 3)")
    step = Step("b", names, "every combination")
    watching = Watch([step], watch.Costs(results, "box"), None)
    assert "publishing the site after each step" in watching.plan()
    watching.begin(step)
    events = [{"event": "start", "name": names[0], "at": watching.began_at + 1}]
    events.append({**events[0], "event": "done", "at": watching.began_at + 3, "seconds": 2.0})
    (tmp_path / asv_saving.EVENTS).write_text("".join(json.dumps(e) + "\n" for e in events))
    watching.poll(tmp_path)
    before = watching.remaining()
    one = watching.estimates.combination(names[1])
    assert before >= 2 * one + 12.0  # two still to run and the site after them
    watching.hold([names[0]])  # every value measured so far held: a busy machine
    wait = quiet.wait_seconds()
    assert watching.remaining() - before == pytest.approx(wait)  # the gate's wait, then left
    watching.left.clear()  # the step measured, one of its three held: the retry likely runs
    again = one + watching._start_up(True)
    assert watching._retry() == pytest.approx(wait / 3 + 2 / 3 * again)
    assert watching.publish(0.1) == [] and watching.publish(20.0) == [
        {"event": "publish", "seconds": 20.0}
    ]


def test_a_retry_that_found_the_machine_still_busy_costs_its_wait_from_then_on(
    tmp_path, monkeypatch
):
    now = [1000.0]
    monkeypatch.setattr(watch.time, "monotonic", lambda: now[0])
    names = tuple(f"x('cpu', {i})" for i in range(4))
    steps = [Step("b", names[:2], "first tier"), Step("b", names[2:], "the rest")]
    watching = Watch(steps, watch.Costs(tmp_path / "results", "box"), None)
    watching.begin(steps[0])
    watching.left.clear()  # both measured, both held
    watching.hold(names[:2])
    watching.done = 2
    rest = next(watching._steps(steps[1:], {"b"}))[2]
    assert watching.remaining() > 2 * watching.estimates.combination(names[0]) + rest - 1e-9
    watching.retry(names[:2])
    now[0] += 120.0  # the gate's whole wait, and the machine still busy
    watching.still_busy()
    watching.begin(steps[1])
    watching.hold([names[2]])
    held = watching.remaining()
    watching.held.clear()
    assert held - watching.remaining() == pytest.approx(120.0)  # the wait, not the values again


def test_an_estimate_is_the_combinations_wall_time_as_learnt_and_its_benchmarks_on_the_same_device(
    tmp_path,
):
    results = tmp_path / "results"
    cpu = "benchmark_models.Training.time_step('cpu', 'mlp', 8)"
    watch.add(
        results,
        "box",
        [{"name": cpu, "seconds": 2.0, "wall": 9.0, "build": "b", "outcome": "value"}],
    )
    costs = watch.Costs(results, "box")
    assert costs.combination(cpu) == 9.0 == costs.combination(cpu.replace("8)", "32)"))
    assert costs.source([cpu, cpu.replace("8)", "32)")]) == watch.WHERE_MEASURED
    mps = "benchmark_models.Training.time_step('mps', 'mlp', 1024)"
    assert (
        costs.source([mps]) == watch.WHERE_BUDGET
    )  # another device's is not learnt from the cpu's


def test_the_wall_time_counts_what_a_combination_waited_for_and_the_start_up_is_learnt(tmp_path):
    results = tmp_path / "results"
    step = Step("b", ("x('cpu', 1)", "x('cpu', 2)"), "every combination")
    watching = Watch([step], watch.Costs(results, "box"), None)
    watching.begin(step)
    t = watching.began_at
    events = [
        {"event": "start", "name": "x('cpu', 1)", "at": t + 20},
        {"event": "done", "name": "x('cpu', 1)", "at": t + 23, "seconds": 3.0, "outcome": "value"},
        {"event": "start", "name": "x('cpu', 2)", "at": t + 33},  # a setup_cache between the two
        {"event": "done", "name": "x('cpu', 2)", "at": t + 35, "seconds": 2.0, "outcome": "value"},
    ]
    (tmp_path / asv_saving.EVENTS).write_text("".join(json.dumps(event) + "\n" for event in events))
    lines = watching.poll(tmp_path)
    assert [(line.get("event"), line.get("wall", line.get("seconds"))) for line in lines] == [
        ("begin", 20.0),
        ("done", 3.0),
        ("done", 12.0),
    ]
    watch.add(results, "box", lines)
    learnt = watch.Costs(results, "box")
    assert learnt.combination("x('cpu', 2)") == 12.0 and learnt.install(True) == 20.0


def test_a_skip_says_its_reason_once_and_the_next_run_counts_it_as_recorded(tmp_path, capsys):
    results = tmp_path / "results"
    names = ("a('cpu', 1)", "a('cpu', 2)", "a('cpu', 3)")
    step = Step("commit1", names, "every combination")
    watching = Watch([step], watch.Costs(results, "box"), None)
    watching.begin(step)
    events = [
        {
            "event": "done",
            "name": name,
            "build": "commit1",
            "seconds": 1.0,
            "outcome": "skipped",
            "reason": "torch 1.13.1 has no torch.compile (2.0 and later)",
        }
        for name in names[:2]
    ]
    events.append(
        {"event": "done", "name": names[2], "build": "commit1", "seconds": 1.0, "outcome": "value"}
    )
    (tmp_path / asv_saving.EVENTS).write_text("".join(json.dumps(event) + "\n" for event in events))
    watch.add(results, "box", watching.poll(tmp_path))
    said = [line for line in capsys.readouterr().err.splitlines() if "combinations done" in line]
    assert "a('cpu', 1): skipped: torch 1.13.1 has no torch.compile (2.0 and later)" in said[0]
    assert "a('cpu', 2): skipped (as above)" in said[1] and "no torch.compile" not in said[1]
    assert watch.skipped(results, "box", "commit1") == {
        name: "torch 1.13.1 has no torch.compile (2.0 and later)" for name in names[:2]
    }
    assert (
        watch.skipped(results, "box", "commit2") == {}
        and watch.skipped(results, "other", "commit1") == {}
    )
    (results / "box").mkdir(parents=True)
    assert record.recorded_names(results, "box", "commit1") == set(
        names[:2]
    )  # the value's file is asv's, none here


def test_a_skips_reason_is_read_from_what_its_process_printed():
    said = "loading\nasv: skipped: SkipNotImplemented('cpu is not usable here: no') \n"
    assert asv_saving.skip_reason(said) == "cpu is not usable here: no"
    assert asv_saving.skip_reason("asv: skipped: NotImplementedError() ") == "no reason given"
    assert asv_saving.skip_reason(None) == "no reason given"


def test_a_long_start_up_says_so_once_a_minute_with_what_the_cache_grew_by(
    tmp_path, capsys, monkeypatch
):
    holds = [0]  # the build cache's bytes, as asv installs
    monkeypatch.setattr(watch, "free", lambda folder: 100 * 10**9)
    monkeypatch.setattr(watch, "used", lambda folder: holds[0])
    build = watch.Build("b", 5 * 10**9, "measured", False, 2 * 10**9, ("download.pytorch.org",))
    step = Step("b", ("x('cpu', 1)",), "every combination")
    disk = watch.Disk(tmp_path, {"b": build})
    watching = Watch([step], watch.Costs(tmp_path / "results", "box"), disk)
    watching.begin(step)
    now = [time.monotonic()]
    monkeypatch.setattr(watch.time, "monotonic", lambda: now[0])
    for grown in (1.2, 2.5):
        now[0] += watch.LONG
        holds[0] = int(grown * 10**9)
        watching.poll(tmp_path)
    said = [
        line
        for line in capsys.readouterr().err.splitlines()
        if "installing" in line and "so far" in line
    ]
    assert len(said) == 2 and "grown by 1.2 GB" in said[0] and "grown by 2.5 GB" in said[1]
