"""Replay one recorded run's costs file through the record run's Watch: what its plan and its time-left line would
have said at 10%, 50% and 90% of the combinations, against what the run actually took from there.

    python tools/estimate_replay.py RUN_COSTS.jsonl [RUN_HELD.jsonl [HISTORY_COSTS.jsonl]] [--no-table] [--log RUN.log]

RUN_COSTS: the costs file of the run replayed (`.asv/results-costs.jsonl` of a run with no history: its start-ups,
combinations with their times and the gate's waits, and publishes, in order). RUN_HELD: its held values
(`.asv/results-held.jsonl`), so that the replay holds what the run held and measures it again in the retry passes the
run had. HISTORY_COSTS: what the machine knew before (none: the measured table, or with --no-table each device's
average only). RUN.log: its terminal, time-stamped as for --said, for the run's real end. Prints a Markdown table.

    python tools/estimate_replay.py --said RUN.log

RUN.log: a real run's terminal, each line prefixed with its epoch time (``... | python3 -c 'import sys, time; [print(
f"{time.time():.1f}", l, end="", flush=True) for l in sys.stdin]'``): what its plan and its time-left lines said
against what was actually left until its last line (the last publish's), as a Markdown table.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from unittest import mock

from mpsbench.core import asv, asv_saving
from mpsbench.results import record, watch


class _Clock:
    """The record run's clocks, set by the replay to each event's time."""

    def __init__(self, now: float) -> None:
        self.now = now

    def monotonic(self) -> float:
        return self.now

    def time(self) -> float:
        return self.now


def _passes(lines: list[dict[str, Any]]) -> list[tuple[float, list[dict[str, Any]], float]]:
    """The run's asv passes, each (its start-up, its combinations' lines, the publish after it)."""
    passes: list[tuple[float, list[dict[str, Any]], float]] = []
    for line in lines:
        if line.get("event") == "begin":
            passes.append((float(line["seconds"]), [], 0.0))
        elif line.get("event") == "publish" and passes:
            start_up, done, publish = passes[-1]
            passes[-1] = (start_up, done, publish + float(line["seconds"]))
        elif line.get("event", "done") == "done" and "at" in line and passes:
            passes[-1][1].append(line)
    return [entry for entry in passes if entry[1]]


def replay(
    lines: list[dict[str, Any]],
    held: Mapping[tuple[str, float], Mapping[str, Any]],
    history: Path | None,
    until: float = 0.0,
) -> list[tuple[int, float, float]]:
    """(combinations done, estimated left, actually left) after each combination of a first pass,
    the first row the plan's: the run's passes (each step, then its retry pass of what the gate
    held), start-ups, waits and publishes as its costs file has them, on the record run's Watch."""
    passes = _passes(lines)
    seen: set[str] = set()
    steps, kinds = [], []
    for _, done, _ in passes:
        names = tuple(str(line["name"]) for line in done)
        again = bool(seen) and set(names) <= seen
        kinds.append(again)
        if not again:
            first = all(asv.matching([name], [record.FIRST_TIER]) for name in names)
            tier = "first tier" if first else "the rest" if seen else "every combination"
            steps.append(watch.Step("b", names, tier))
        seen |= set(names)
    first_line = passes[0][1][0]
    clock = _Clock(
        float(first_line["at"]) - float(first_line["wall"]) - float(first_line.get("waited", 0.0))
    )
    clock.now -= passes[0][0]
    # the record run's clocks are the events' own
    with mock.patch.object(watch, "time", clock), tempfile.TemporaryDirectory() as folder:
        results, cache = Path(folder) / "results", Path(folder) / "cache"
        results.mkdir()
        cache.mkdir()  # empty: the replay installs nothing
        machine = "replay"
        if history is not None:
            machine = str(json.loads(history.read_text().splitlines()[0])["machine"])
            watch.trail(results).write_text(history.read_text())
        watching = watch.Watch(steps, watch.Costs(results, machine), watch.Disk(cache, {}))
        plan = sum(estimate for _, _, estimate in watching._steps(steps, set()))
        marks: list[tuple[int, float, float]] = []  # done, estimate, at
        step_index, count, end = 0, 0, clock.now
        for number, ((start_up, done, publish), again) in enumerate(zip(passes, kinds)):
            begun = float(done[0]["at"]) - float(done[0]["wall"])
            begun -= float(done[0].get("waited", 0.0)) + start_up
            names = tuple(str(line["name"]) for line in done)
            if again:
                watching.retry(names)
                waited = max(0.0, begun - clock.now)
                clock.now = begun
                watching.retry_waited(waited, False)
            else:
                clock.now = max(clock.now, begun)
                watching.begin(steps[step_index])
                step_index += 1
            scratch = Path(folder) / f"scratch{number}"
            scratch.mkdir()
            for line in done:
                at = float(line["at"])  # a pass's first started its wall before its end
                start = {**held.get((str(line["name"]), at), {}), "event": "start"}
                start.update(name=line["name"], at=at - float(line["wall"]))
                start["waited"] = float(line.get("waited", 0.0))  # the reading it ended on: held's
                with open(scratch / asv_saving.EVENTS, "a") as out:
                    out.write(json.dumps(start) + "\n" + json.dumps(line) + "\n")
                clock.now = at
                watching.poll(scratch)
                if not again:  # what its line said, before the record judged its value
                    count += 1
                    marks.append((count, watching.remaining(), at))
                if (str(line["name"]), at) in held:
                    watching.hold([str(line["name"])])
            if publish:
                clock.now += publish
                watching.publish(publish)
            end = clock.now
    end = max(end, until)  # the run's real end: a last retry's wait leaves no line in the files
    began = float(first_line["at"]) - float(first_line["wall"]) - passes[0][0]
    return [(0, plan, end - began), *((n, left, end - at) for n, left, at in marks)]


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
    lines = [json.loads(text) for text in paths[0].read_text().splitlines() if text.strip()]
    held = {  # each held value's before-reading, as its start event had it
        (str(entry["name"]), float(entry["after"]["at"])): entry.get("before") or {}
        for entry in map(json.loads, paths[1].read_text().splitlines() if len(paths) > 1 else [])
        if isinstance(entry.get("after"), dict) and "at" in entry["after"]
    }
    until = 0.0
    if "--log" in argv:  # the run's terminal, time-stamped as for --said: its last line is its end
        stamped = Path(argv[argv.index("--log") + 1]).read_text().split()
        until = max(float(word) for word in stamped if re.fullmatch(r"1\d{9}\.\d", word))
        paths = [path for path in paths if str(path) != argv[argv.index("--log") + 1]]
    rows = replay(lines, held, paths[2] if len(paths) > 2 else None, until)
    count = rows[-1][0]
    first = len(asv.matching([str(x["name"]) for x in lines if "at" in x], [record.FIRST_TIER]))
    print(f"{count} combinations, {watch.clock(rows[0][2])} from the first start-up to the end\n")
    print(
        "| point | estimated left | actually left | estimated / actual |\n| --- | --- | --- | --- |"
    )
    marks = [("the plan", 0), ("end of the first tier", min(first, count))]
    marks += [(f"{pct}%", round(pct / 100 * count)) for pct in (10, 25, 50, 75, 90)]
    for label, done in marks:
        number, estimated, actual = next(row for row in rows if row[0] >= done)
        if not actual:
            continue
        print(
            f"| {label} ({number} of {count}) | {watch.clock(estimated)} | {watch.clock(actual)} |"
            f" {estimated / actual:.2f} |"
        )


if __name__ == "__main__":
    logging.getLogger("mpsbench").setLevel(
        logging.WARNING
    )  # the replay's own lines, not the watch's
    main(sys.argv[1:])
