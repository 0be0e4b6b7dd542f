#!/usr/bin/env python3
"""Repeat `mpsbench compare` and `mpsbench bisect` on known builds, with a busy loop on one core beside them.

``--no-busy-loop`` leaves the loop out: issue 31's trials run under real load instead (another clone's
``scripts/test`` beside them, started by whoever runs the trials), which each record's load average shows.

The trials of issue #23 (docs/explanation/the-rule.md): the builds come from
scripts/make-slowed-wheels, added to a manifest of their own (docs/explanation/the-rule.md
says how). Each trial starts a one-core busy loop, runs the real command line,
stops the loop (by its pid) and appends one JSON line: the case, the exit
status, whether the answer was right, the wall time and the verdict line.
Cases cycle in the order given until --trials each or --until (UTC HH:MM),
so that every case gets trials when time runs short; a case may cap its own
count (NAME:COMMAND:RULE:N). Each record also keeps the load average before
and after the trial and the commit of the checkout that ran it.

    scripts/regression-trials --manifest M --timeline T -b "Training.time_step\\('cpu', 'mlp', 32\\)" \\
        --case "slow13:compare exam@n2 exam@s1:exit=1" --case "aa:compare exam@n1 exam@n2:exit=0,3" \\
        --case "bisect:bisect exam@n1 exam@s2:names=exam@s1" --trials 10 --out trials.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

BUSY = "while True: pass"


def right(rule: str, code: int, output: str) -> bool:
    """'exit=1' or 'exit=0,3': the exit status is one of these; 'names=B': bisect named B."""
    kind, _, value = rule.partition("=")
    if kind == "exit":
        return code in {int(part) for part in value.split(",")}
    if kind == "names":
        return code == 0 and f"first bad build: {value} " in output
    raise SystemExit(f"regression-trials: unknown rule {rule!r} (exit=N[,M] or names=CHANNEL@ID)")


def trial(
    mpsbench: str,
    case: str,
    command: str,
    rule: str,
    common: list[str],
    log: Path,
    busy_loop: bool = True,
) -> dict[str, object]:
    load_before = os.getloadavg()[0]
    busy = subprocess.Popen([sys.executable, "-c", BUSY if busy_loop else "pass"])
    started = time.monotonic()
    try:
        own = shlex.split(command)
        if "-b" in own:  # the case names its own row: the common -b would override it
            common = [
                arg
                for index, arg in enumerate(common)
                if "-b" not in common[max(0, index - 1) : index + 1]
            ]
        done = subprocess.run([mpsbench, *own, *common], capture_output=True, text=True)
    finally:
        busy.kill()  # only the loop this trial started
        busy.wait()
    wall = time.monotonic() - started
    output = done.stdout + done.stderr
    with open(log, "a") as handle:
        handle.write(
            f"=== {case}: mpsbench {command} ({wall:.0f} s, exit {done.returncode})\n{output}\n"
        )
    lines = [
        line
        for line in output.splitlines()
        if line.startswith(("verdict:", "first bad build:", "mpsbench: error"))
    ]
    return {
        "case": case,
        "command": f"mpsbench {command}",
        "exit": done.returncode,
        "right": right(rule, done.returncode, output),
        "wall_s": round(wall, 1),
        "answer": lines[-1] if lines else output.strip().splitlines()[-1:],
        "finished": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "load_before": round(load_before, 2),
        "load_after": round(os.getloadavg()[0], 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--case", action="append", required=True, help="NAME:COMMAND:RULE[:MOST_TRIALS]"
    )
    parser.add_argument("-b", "--bench", required=True)
    parser.add_argument("--manifest", required=True)
    parser.add_argument("--timeline", required=True)
    parser.add_argument("--trials", type=int, default=10, help="per case")
    parser.add_argument("--until", help="UTC HH:MM: start no trial after it")
    parser.add_argument("--out", type=Path, default=Path("trials.jsonl"))
    parser.add_argument(
        "--no-busy-loop",
        dest="busy_loop",
        action="store_false",
        help="no busy loop of our own: the load is whatever else runs (record it)",
    )
    parser.add_argument("--mpsbench", default=str(Path(sys.executable).with_name("mpsbench")))
    args = parser.parse_args(argv)
    cases = [case.split(":", 3) for case in args.case]
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parent,
    ).stdout.strip()
    common = ["-b", args.bench, "--manifest", args.manifest, "--timeline", args.timeline]
    log = args.out.with_suffix(".log")
    for number in range(args.trials):
        for name, command, rule, *most in cases:
            if most and number >= int(most[0]):
                continue
            if args.until and datetime.now(timezone.utc).strftime("%H:%M") >= args.until:
                return 0
            record = trial(args.mpsbench, name, command, rule, common, log, args.busy_loop)
            record["trial"] = number + 1
            record["commit"] = commit
            with open(args.out, "a") as handle:
                handle.write(json.dumps(record) + "\n")
            print(json.dumps(record), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
