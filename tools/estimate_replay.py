"""Replay one recorded run's costs file through the record run's Watch: what its plan and its time-left line would
have said at 10%, 50% and 90% of the combinations, against what the run actually took from there.

    python tools/estimate_replay.py RUN_COSTS.jsonl [HISTORY_COSTS.jsonl] [--no-table]

RUN_COSTS: the costs file of the run replayed (its "done" lines, in order; the time between two is the second's wall
time). HISTORY_COSTS: what the machine knew before (none: the measured table, or with --no-table each device's
average only). Prints a Markdown table.
"""

from __future__ import annotations

import itertools
import json
import logging
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
        watching = watch.Watch(steps, watch.Costs(results, machine), None)
        total = sum(took.values())
        planned = sum(estimate for _, _, estimate in watching._steps(steps, set()))
        # the replay has no start-up and no publish
        unpaid = watching.estimates.install(True) + watching.estimates.publish()
        rows = [(0, planned - len(steps) * unpaid, total)]
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
                left = watching.remaining().seconds - (len(steps) - number) * watching.published
                rows.append((order.index(name) + 1, left, total - spent))
    return rows


def main(argv: list[str]) -> None:
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
