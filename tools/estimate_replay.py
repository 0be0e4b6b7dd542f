"""Replay one recorded run's costs file through the record run's Watch: what its plan and its time-left line would
have said at 10%, 50% and 90% of the combinations, against what the run actually took from there.

    python tools/estimate_replay.py RUN_COSTS.jsonl [HISTORY_COSTS.jsonl] [--no-table]

RUN_COSTS: the costs file of the run replayed (its "done" lines, in order; the time between two is the second's wall
time). HISTORY_COSTS: what the machine knew before (none: the measured table, or with --no-table each device's
average only). Prints a Markdown table.

    python tools/estimate_replay.py --said RUN.log

RUN.log: a real run's terminal, each line prefixed with its epoch time (``... | python3 -c 'import sys, time; [print(
f"{time.time():.1f}", l, end="", flush=True) for l in sys.stdin]'``): what its plan and its time-left lines said
against what was actually left until its last line (the last publish's), as a Markdown table.
"""

from __future__ import annotations

import itertools
import json
import logging
import re
import sys
import tempfile
from pathlib import Path

from mpsbench.core import asv, asv_saving
from mpsbench.results import record, watch


def replay(run: list[dict[str, object]], history: Path | None) -> list[tuple[int, float, float]]:
    """(combinations done, estimated left, actually left) after each combination; the first row is the plan's."""
    names = [str(line["name"]) for line in run]
    ats = [float(str(line["at"])) for line in run]
    walls = [float(str(run[0].get("wall", run[0]["seconds"])))] + [
        b - a for a, b in itertools.pairwise(ats)
    ]
    first = tuple(asv.matching(names, [record.FIRST_TIER]))
    rest = tuple(name for name in names if name not in first)
    steps = [
        step
        for step in (watch.Step("b", first, "first tier"), watch.Step("b", rest, "the rest"))
        if step.names
    ]
    order = [name for step in steps for name in step.names]
    took = dict(zip(names, walls, strict=True))
    with tempfile.TemporaryDirectory() as folder:
        results = Path(folder) / "results"
        results.mkdir()
        if history is not None:
            machine = str(json.loads(history.read_text().splitlines()[0])["machine"])
            watch.trail(results).write_text(history.read_text())
        else:
            machine = "replay"
        costs = watch.Costs(results, machine)
        costs.install = lambda installed: 0.0  # type: ignore[method-assign]  # the replay has
        costs.publish = lambda: 0.0  # type: ignore[method-assign]  # no start-up, no publish
        watching = watch.Watch(steps, costs, None)
        total = sum(took.values())
        rows = [(0, sum(estimate for _, _, estimate in watching._steps(steps, set())), total)]
        spent = 0.0
        for number, step in enumerate(steps):
            scratch = Path(folder) / f"scratch{number}"
            scratch.mkdir()
            watching.begin(step)
            clock = watching.began_at
            for name in step.names:
                events = [{"event": "start", "name": name, "at": clock}]
                clock += took[name]
                spent += took[name]
                events.append(
                    {
                        "event": "done",
                        "name": name,
                        "at": clock,
                        "seconds": took[name],
                        "outcome": "value",
                    }
                )
                with open(scratch / asv_saving.EVENTS, "a") as out:
                    out.write("".join(json.dumps(event) + "\n" for event in events))
                watching.poll(scratch)
                rows.append((order.index(name) + 1, watching.remaining(), total - spent))
    return rows


def seconds(said: str) -> float:
    """A duration as watch.clock writes it, in seconds."""
    units = {"h": 3600, "min": 60, "s": 1}
    return sum(float(n) * units[unit] for n, unit in re.findall(r"(\d+) (h|min|s)\b", said))


def said(log: Path) -> None:
    """The table of a real run's terminal: the plan's total and each time-left line against what followed."""
    lines = [
        line.split(" ", 1) for line in log.read_text().splitlines() if re.match(r"\d+\.?\d* ", line)
    ]
    end = float(lines[-1][0])
    plan = next(
        (float(t), seconds(x.split("in all about", 1)[1].split(",")[0]))
        for t, x in lines
        if "in all about" in x
    )
    tier = next(
        int(m[1]) for _, x in lines if (m := re.search(r"first tier: (\d+) combinations", x))
    )
    points = [
        (int(m[1]), int(m[2]), float(t), seconds(m[3]))
        for t, x in lines
        if (m := re.search(r" (\d+) of (\d+) combinations done .* about (.+?) left", x))
    ]
    total = points[-1][1] if points else 0
    print(
        f"{len(points)} of {total} combinations, {watch.clock(end - plan[0])} from the plan to the last line\n"
    )
    print("| point | the line said | actually left | said / actual |\n| --- | --- | --- | --- |")
    marks = [("the plan", 0, plan[0], plan[1]), *[(f"end of the first tier ({tier})", tier, 0, 0)]]
    marks += [(f"{pct}%", round(pct / 100 * total), 0, 0) for pct in (10, 25, 50, 75, 90)]
    for label, done, at, left in marks:
        if done:
            found = next((p for p in points if p[0] >= done), None)
            if found is None:
                continue
            label, at, left = (
                f"{label} ({found[0]} of {total})" if "%" in label else label,
                found[2],
                found[3],
            )
        actual = end - at
        if points and points[-1][0] < total:  # stopped: what was left is more than what followed
            print(
                f"| {label} | {watch.clock(left)} | more than {watch.clock(actual)} | under {left / actual:.2f} |"
            )
            continue
        print(f"| {label} | {watch.clock(left)} | {watch.clock(actual)} | {left / actual:.2f} |")


def main(argv: list[str]) -> None:
    if argv[:1] == ["--said"]:
        said(Path(argv[1]))
        return
    paths = [Path(arg) for arg in argv if not arg.startswith("--")]
    if "--no-table" in argv:
        watch.MEASURED_SECONDS.clear()
    run = [
        line
        for line in map(json.loads, paths[0].read_text().splitlines())
        if line.get("event", "done") == "done" and "at" in line
    ]
    rows = replay(run, paths[1] if len(paths) > 1 else None)
    count = len(run)
    first = len(asv.matching([str(line["name"]) for line in run], [record.FIRST_TIER]))
    print(
        f"{count} combinations ({first} in the first tier), {watch.clock(rows[0][2])} of wall time in all\n"
    )
    print(
        "| moment | done | estimated left | actually left | estimated / actual |\n|---|---|---|---|---|"
    )
    for label, fraction in (
        ("the plan", 0.0),
        ("end of first tier", first / count),
        ("10%", 0.1),
        ("50%", 0.5),
        ("90%", 0.9),
    ):
        done, estimated, actual = next(row for row in rows if row[0] >= round(fraction * count))
        if not actual:
            continue
        print(
            f"| {label} | {done} of {count} | {watch.clock(estimated)} | {watch.clock(actual)} |"
            f" {estimated / actual:.2f} |"
        )


if __name__ == "__main__":
    logging.getLogger("mpsbench").setLevel(
        logging.WARNING
    )  # the replay's own lines, not the watch's
    main(sys.argv[1:])
