"""Estimates that learn: a record run's plan and its time-left line from this machine's costs file (or, before any,
the measured table per device), corrected by the run's own pace; checked by simulating runs over fixed cost logs.
A skip says its reason once and is recorded, so that the next run does not redo it."""

from __future__ import annotations

import json
import random
import time
from collections.abc import Sequence
from pathlib import Path

import pytest
from tools import estimate_replay

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
    tmp_path: Path,
    steps: list[Step],
    took: dict[str, float],
    start_up: float,
    waits: Sequence[float] = (),
    held: set[str] | frozenset[str] = frozenset(),
    setup: float = 0.0,
    others: float = 0.0,
) -> list[tuple[float, float]]:
    """Run ``steps`` through a Watch on events whose clock says each combination took ``took`` (each step's
    start-up ``start_up``, each class's first in a pass ``setup`` more), the quiet gate waited the next of
    ``waits`` before it and held it where it is in ``held``, other processes using ``others`` of 2 cores after each;
    after a step with held values, a retry pass measures them again at the same cost.
    After each combination: (fraction done, estimated left / actually left)."""
    waited = [*waits, *[0.0] * 2 * sum(len(step.names) for step in steps)]
    results = tmp_path / "results"
    watching = Watch(steps, watch.Costs(results, "box"), watch.Disk(tmp_path, {}))
    passes = [(step, step.names) for step in steps]

    def cost(names: tuple[str, ...]) -> float:
        return (
            start_up
            + setup * len({watch.group(name) for name in names})
            + sum(map(took.get, names))
        )

    again = [tuple(name for name in names if name in held) for _, names in passes]
    total = sum(cost(names) for _, names in passes) + sum(cost(names) for names in again if names)
    total += sum(waited[: sum(len(names) for _, names in passes) + sum(map(len, again))])
    spent, done, seen, number = 0.0, 0, [], 0
    count = sum(len(step.names) for step in steps)

    def measure(names: tuple[str, ...], commit: str) -> None:
        nonlocal spent, done, number
        number += 1
        scratch = tmp_path / f"scratch{number}"
        scratch.mkdir()
        clock = watching.began_at + start_up
        spent += start_up
        classes: set[str] = set()
        for name in names:
            wait = waited.pop(0)
            clock += wait
            spent += wait
            events = [{"event": "start", "name": name, "at": clock, "waited": wait}]
            extra = setup * (watch.group(name) not in classes)
            classes.add(watch.group(name))
            clock += took[name] + extra
            spent += took[name] + extra
            events.append(
                {
                    "event": "done",
                    "name": name,
                    "at": clock,
                    "seconds": took[name] * 0.9,
                    "outcome": "value",
                    "build": commit,
                    **quiet.State(2, others, None).fields("_after"),
                }
            )
            with open(scratch / asv_saving.EVENTS, "a") as out:
                out.write("".join(json.dumps(event) + "\n" for event in events))
            watching.poll(scratch)
            if name in held and watching.current is not None and watching.current.tier != "again":
                watching.hold([name])
            done += 1
            left = total - spent
            if left > 0 and watching.current is not None and watching.current.tier != "again":
                seen.append((done / count, watching.remaining() / left))

    for step, names in passes:
        assert watching.begin(step)
        measure(names, step.commit)
        again = tuple(name for name in names if name in held)
        if again:
            watching.retry(again)
            watching.retry_waited(0.0, False)
            measure(again, step.commit)
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
    seen = _simulate(tmp_path, steps, took, start_up=16.0 * slower, others=2.0 * (slower > 1))
    first_tier_end = len(first) / (2 * len(names))
    for fraction in (0.1, 0.5, 0.9):
        if fraction >= first_tier_end:
            assert _at(seen, fraction) == pytest.approx(1.0, abs=0.25), (fraction, seen)


def test_before_any_history_an_unseen_class_leans_on_the_square_root_of_the_runs_pace(tmp_path):
    """No costs file and a load that slows the model steps 4x and the ops and the epochs 2x (the square root, as
    on the loaded VM): before any op has run, the ops lean on the square root of the run's pace, and each class's
    own combinations then correct its estimate."""
    names = _names(12)
    table = {watch.group(name): CLASSES[_pattern(name)] for name in names}
    rng = random.Random(7)
    took = {
        name: (4.0 if "models" in name else 2.0)
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
        seen = _simulate(tmp_path, steps, took, start_up=30.0, others=2.0)  # a load beside it
        watching = Watch(steps, watch.Costs(tmp_path / "results", "none"), watch.Disk(tmp_path, {}))
        ops = watch.cost_class(steps[1].names[0])
        assert watching.pace.ratio(ops) == 1.0  # nothing run: the table as it is
        for name in first[1:]:  # the first of a class pays its setup_cache: not learnt from
            watching.pace.note(watch.cost_class(name), took[name], table[watch.group(name)])
        training = watch.cost_class(first[-1])
        run = watching.pace.run_ratio()
    assert watching.pace.ratio(training) > 3.0 and run > 3.0
    assert watching.pace.ratio(ops) == pytest.approx(run**0.5)
    assert planned < sum(took.values())  # the plan knows nothing of the load
    for fraction in (len(first) / len(names), 0.75, 0.9):
        assert _at(seen, fraction) == pytest.approx(1.0, abs=0.25), (fraction, seen)


def test_on_a_busy_machine_the_gates_waits_and_the_held_values_retry_are_time_left(tmp_path):
    """A loaded run as the VM's was (docs/evidence/estimates.md): the model steps 2.5x their quiet time and the
    other classes 1.6x, the gate waiting 40-110 s before one combination in five, three values in four held, and
    each step's retry pass measuring them again with its classes' setup_cache: the time left stays within a
    quarter of what happens from the end of the first tier on."""
    names = _names(30)  # enough that the waits come about as often as their rate says
    _history(tmp_path / "results", names)
    rng = random.Random(45)
    took = {
        name: (2.5 if "models" in name else 1.6)
        * CLASSES[_pattern(name)]
        * rng.lognormvariate(0, 0.25)
        for name in names
    }
    waits = [rng.uniform(40, 110) if rng.random() < 0.2 else 0.0 for _ in range(2 * len(names))]
    held = {name for name in names if rng.random() < 0.75}
    first = tuple(name for name in names if "models" in name)
    steps = [
        Step("new", first, "first tier"),
        Step("new", tuple(n for n in names if n not in first), "the rest"),
    ]
    seen = _simulate(tmp_path, steps, took, 30.0, waits, held, setup=15.0, others=2.0)
    for fraction in (len(first) / len(names), 0.75, 0.9):
        assert _at(seen, fraction) == pytest.approx(1.0, abs=0.25), (fraction, seen)


def test_the_retry_of_held_values_and_the_publish_are_work_left(tmp_path):
    results = tmp_path / "results"
    watch.add(results, "box", [{"event": "publish", "seconds": 12.0}])
    names = ("x('cpu', 1)", "x('cpu', 2)", "x('cpu', 3)")
    step = Step("b", names, "every combination")
    watching = Watch([step], watch.Costs(results, "box"), watch.Disk(tmp_path, {}))
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
    again = watching._start_up(True) + one
    assert watching.remaining() - before >= again  # measured again, with a start-up
    watching.left.clear()  # the step measured, one of its three held, no wait seen: the retry runs
    watching.done = 3
    assert watching._retry({names[0]}, ()) == pytest.approx(again)
    watching.retry_waited(120.0, True)  # a retry's wait ran out: the next retry may too
    busy = 1 / 3  # no readings yet: the share of values held says how busy the machine is
    assert watching._retry({names[0]}, ()) == pytest.approx(busy * 120.0 + (1 - busy) * again)
    watching.busy_after = [True] * watch.RECENT  # the latest readings: busy
    assert watching._retry({names[0]}, ()) == pytest.approx(120.0)  # skipped after its wait
    watching.busy_after = [False] * watch.RECENT  # quiet now: measured again at once
    assert watching._retry({names[0]}, ()) == pytest.approx(again)
    assert watching.publish(0.1) == [] and watching.publish(20.0) == [
        {"event": "publish", "seconds": 20.0}
    ]


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
    watching = Watch([step], watch.Costs(results, "box"), watch.Disk(tmp_path, {}))
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
    watching = Watch([step], watch.Costs(results, "box"), watch.Disk(tmp_path, {}))
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


def test_a_replay_of_a_runs_costs_and_held_files_says_what_its_lines_said(tmp_path, monkeypatch):
    """tools/estimate_replay.py turns a real run's files into its estimates (to compare with what it took): a run
    with waits, holds, retry passes and publishes, replayed, says after each combination what its line said."""
    clock = estimate_replay._Clock(1000.0)
    monkeypatch.setattr(watch, "time", clock)
    results = tmp_path / "results"
    names = _names(3)
    first = tuple(name for name in names if "models" in name)
    steps = [
        Step("b", first, "first tier"),
        Step("b", tuple(n for n in names if n not in first), "the rest"),
    ]
    rng = random.Random(3)
    watching = Watch(steps, watch.Costs(results, "box"), watch.Disk(tmp_path, {}))
    said: list[float] = []
    held: dict[tuple[str, float], dict[str, object]] = {}  # with each value's before-reading
    number = 0

    def measure(names: tuple[str, ...], again: bool) -> None:
        nonlocal number
        number += 1
        scratch = tmp_path / f"scratch{number}"
        scratch.mkdir()
        clock.now += 20.0  # the start-up
        for name in names:
            waited = rng.choice([0.0, 0.0, 35.0, 120.0])  # 120 s: ran out, the machine still busy
            clock.now += waited
            before = quiet.State(2, 2.0 if waited == 120.0 else 0.0, None).fields()
            start = {"event": "start", "name": name, "at": clock.now, "waited": waited, **before}
            took = CLASSES[_pattern(name)] * rng.uniform(1, 3)
            clock.now += took
            done = {"event": "done", "name": name, "at": clock.now, "seconds": took * 0.9}
            with open(scratch / asv_saving.EVENTS, "a") as out:
                out.write(f"{json.dumps(start)}\n{json.dumps(done)}\n")
            watch.add(results, "box", watching.poll(scratch))
            if not again:
                said.append(watching.remaining())
            # a busy reading is always held, in a retry pass too (the held file has it again)
            if waited == 120.0 or (not again and rng.random() < 0.5):
                watching.hold([name])
                held[(name, clock.now)] = before

    for step in steps:
        watching.begin(step)
        measure(step.names, again=False)
        again = tuple(name for name, _ in held if name in step.names)
        if again:
            watching.retry(again)
            clock.now += 12.0
            watching.retry_waited(12.0, False)
            measure(again, again=True)
        clock.now += 4.0
        watch.add(results, "box", watching.publish(4.0))
    lines = [json.loads(text) for text in watch.trail(results).read_text().splitlines()]
    rows = estimate_replay.replay(lines, held, None)
    assert [left for _, left, _ in rows[1:]] == pytest.approx(said, abs=0.01)  # files keep ms
    assert rows[0][2] == pytest.approx(clock.now - 1000.0)  # the run's whole time, from its start


CAPACITY = "benchmark_models.InferenceCapacity.track_batch('cpu', 'm{}', 'training')"


def test_a_setup_cache_is_counted_once_a_pass_from_the_table_or_this_machines_runs(tmp_path):
    """InferenceCapacity's table has its setup_cache apart from its combinations: a pass of its n
    combinations is the setup plus n values; this machine's runs replace both, the first of the class
    in each pass (after its begin line) counted as the setup."""
    names = tuple(CAPACITY.format(i) for i in range(4))
    key = ("cpu", "benchmark_models.InferenceCapacity")
    fresh = watch.Costs(tmp_path / "none", "box")
    step = Step("b", names, "every combination")
    watching = Watch([step], fresh, watch.Disk(tmp_path, {}))
    table = watch.MEASURED_SECONDS["cpu"]["benchmark_models.InferenceCapacity"]
    start = fresh.install(True) + fresh.publish()
    assert watching._steps([step], set()).__next__()[2] == pytest.approx(
        start + watch.SETUP_SECONDS["cpu"][key[1]] + 4 * table
    )
    results = tmp_path / "results"
    for setup in (70.0, 80.0):
        watch.add(results, "box", [{"event": "begin", "installed": True, "seconds": 5.0}])
        walls = [setup, 0.5, 0.6]
        watch.add(
            results, "box", [{"name": n, "seconds": w, "wall": w} for n, w in zip(names, walls)]
        )
    learnt = watch.Costs(results, "box")
    assert learnt.setup(key) == pytest.approx(75.0 - 0.55)  # the firsts' median less the values'
    assert learnt.combination(names[0]) == pytest.approx(0.55)  # a first's wall is not a value
    assert learnt.combination(names[3]) == pytest.approx(0.55)


def test_a_class_leans_on_classes_as_long_and_a_setup_cache_on_its_benchmark_files_pace():
    """Load slows a long model step more than a short combination (mostly asv's own work): a class not
    yet run leans on the classes whose combinations take about as long; a setup_cache, which runs models,
    on its benchmark file's classes."""
    step, op, other_op = (
        "benchmark_models.Training.time_step('cpu', 'mlp', 8)",
        "benchmark_ops.MemoryBoundOps.time_forward('cpu', 'copy', 'float32', 'small')",
        "benchmark_ops.ComputeBoundOps.time_forward('cpu', 'mm', 'float32', 'small')",
    )
    capacity = CAPACITY.format(1)
    pace = watch.Pace({step: 6.0, op: 0.6, other_op: 0.9, capacity: 0.55})
    pace.note(watch.cost_class(step), 5 * 6.0 * 20, 6.0 * 20)  # 5x over 20 combinations
    for fresh in (op, capacity):
        # nothing as short has run: the square root of the run's pace, as far as the machine is busy
        assert pace.lean(watch.cost_class(fresh), 0.0, 1.0) == pytest.approx(
            pace.run_ratio() ** 0.5
        )
        assert pace.lean(watch.cost_class(fresh), 0.0, 0.0) == 1.0
    pace.note(watch.cost_class(op), 2 * 0.6 * 30, 0.6 * 30)  # 2x
    assert pace.ratio(watch.cost_class(other_op)) == pytest.approx(
        pace.ratio(watch.cost_class(capacity))
    )
    assert 1.7 < pace.ratio(watch.cost_class(capacity)) < 2.0  # the op's pace, not the model step's
    setup = pace.setup_ratio(watch.cost_class(capacity))
    assert setup == pace.run_ratio("benchmark_models.") and setup > 4.0


def test_a_start_up_and_a_publish_are_this_runs_own_once_it_has_one(tmp_path):
    names = ("x('cpu', 1)", "x('cpu', 2)")
    steps = [Step("b", names[:1], "first tier"), Step("b", names[1:], "the rest")]
    watching = Watch(steps, watch.Costs(tmp_path / "results", "box"), watch.Disk(tmp_path, {}))
    assert watching._start_up(True) == watch.STEP_START_SECONDS  # nothing run: the table
    assert watching._publish() == watch.PUBLISH_SECONDS
    watching.begin(steps[0])
    events = [{"event": "start", "name": names[0], "at": watching.began_at + 4.0}]
    events.append({**events[0], "event": "done", "at": watching.began_at + 6.0, "seconds": 2.0})
    (tmp_path / asv_saving.EVENTS).write_text("".join(json.dumps(e) + "\n" for e in events))
    watching.poll(tmp_path)
    watching.publish(1.5)
    assert watching._start_up(True) == pytest.approx(4.0)
    assert watching._publish() == pytest.approx(1.5)


def test_while_the_quiet_gate_waits_before_the_first_combination_the_minute_line_says_so(
    tmp_path, capsys, monkeypatch
):
    step = Step("b", ("x('cpu', 1)",), "every combination")
    watching = Watch([step], watch.Costs(tmp_path / "results", "box"), watch.Disk(tmp_path, {}))
    watching.begin(step)
    now = [time.monotonic()]
    monkeypatch.setattr(watch.time, "monotonic", lambda: now[0])
    now[0] += watch.LONG
    watching.poll(tmp_path)  # asv starting
    watching.gate_waits()  # the gate's line: the machine is busy, waiting up to 120 s
    now[0] += watch.LONG
    watching.poll(tmp_path)
    said = [line for line in capsys.readouterr().err.splitlines() if "so far" in line]
    assert "starting asv: 1 min 00 s so far" in said[0]
    assert "the quiet gate is waiting (above): 1 min 00 s so far" in said[1], said
