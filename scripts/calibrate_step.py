#!/usr/bin/env python3
"""One asv run of the calibration timeline at a time, for machines that cap a command's length.

scripts/calibrate runs every phase in one go; on a machine lent for ten
minutes a call, that does not fit. This runs the same asv commands one step
at a time in the same work folder (the same generated timeline, so the same
commits; results accumulate there), and the tables are then made from that
folder's results (docs/explanation/calibration.md says how each was made):

    scripts/calibrate-step --device cuda models rest    # the default selection on build A, in two invocations
    scripts/calibrate-step --device cuda a2 ab          # a second run of the same build, then A2 against B
    scripts/calibrate-step --device cpu --launch-method spawn default   # the Mac's process model, on Linux

Steps: default (this machine's plain default selection on A, without
MPSBENCH_DEVICES and preselected as scripts/bench does: what docs/explanation/budget.md
times), ops (the op rows of that selection alone), models (benchmark_models'
default selection on A), rest (every other module's on A), a2
(benchmark_models on A2, for the noise), ab / aa (asv continuous on mlp and
resnet50: A2 against B, with B's injected slowdown, or A against A2).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # scripts/: _checkout beside this file
from _checkout import use_checkout

use_checkout(__file__)

# The path set up above comes first: these imports must follow it.
from tools.calibration import calibrate as cal  # noqa: E402

from mpsbench.builds import machine  # noqa: E402
from mpsbench.core import asv as asv_names  # noqa: E402
from mpsbench.core import asvconf  # noqa: E402
from mpsbench.measure import devices, preselect, selection  # noqa: E402
from mpsbench.regressions import rule  # noqa: E402

STEPS = ("default", "ops", "models", "rest", "a2", "ab", "aa")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=devices.NAMES, required=True)
    parser.add_argument("--workdir", type=Path, default=Path(".asv/calibration"))
    # forkserver is Linux's launch method (asv.conf.json); spawn is the Mac's, measured here as its proxy (issue 32)
    parser.add_argument("--launch-method", choices=("forkserver", "spawn"), default="forkserver")
    parser.add_argument(
        "steps", nargs="+", choices=STEPS, metavar="STEP", help=f"one of {', '.join(STEPS)}"
    )
    args = parser.parse_args()
    workdir = args.workdir.resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    commits = cal.calibration_timeline(workdir)
    asvconf.load(asvconf.ROOT / asvconf.CONFIG).derive(workdir, workdir / "timeline", ["calib"])
    cal.suite_with_slowdown(workdir)
    name, _ = machine.write(f"calib-{args.device}")
    run = cal.Asv(workdir, name)
    run.env[selection.DEVICES_ENV] = args.device
    on_device = rf"\('{args.device}'"
    selections = {
        "models": rf"benchmark_models\..*{on_device}",
        "rest": rf"^(?!benchmark_models\.).*{on_device}",
    }
    for step in args.steps:
        started = time.perf_counter()
        if step in (
            "default",
            "ops",
        ):  # no MPSBENCH_DEVICES: the devices this machine has, as a plain run
            os.environ.pop(
                selection.DEVICES_ENV, None
            )  # the preselection reads this process's environment
            found = preselect.combinations(
                preselect.discover(Path(__file__).resolve().parents[1] / "benchmarks")
            )
            names = [
                name
                for name in preselect.selected(found)
                if step == "default" or name.startswith("benchmark_ops.")
            ]
            pattern = asv_names.pattern(names)
            print(
                f"{step}: asv will run {len(names)} of the suite's {len(found)} combinations",
                flush=True,
            )
            devices_asked = run.env.pop(selection.DEVICES_ENV)
            code, _, _ = run(
                "run",
                "--machine",
                name,
                "--launch-method",
                args.launch_method,
                "--record-samples",
                "-b",
                pattern,
                f"{commits['a']}^!",
            )
            run.env[selection.DEVICES_ENV] = devices_asked
        elif step in selections:
            code, _, _ = run(
                "run",
                "--machine",
                name,
                "--launch-method",
                args.launch_method,
                "--record-samples",
                "-b",
                selections[step],
                f"{commits['a']}^!",
            )
        elif step == "a2":
            code = 0
            run.run(commits["a2"], "-b", selections["models"])
        else:
            old, new = (
                (commits["a"], commits["a2"]) if step == "aa" else (commits["a2"], commits["b"])
            )
            code, _, out = run(
                "continuous",
                "--machine",
                name,
                "--launch-method",
                args.launch_method,
                "--factor",
                str(rule.factor(asvconf.load().thresholds)),
                "-b",
                rf"time_step\('{args.device}', '(mlp|{cal.INJECTED_MODEL})'",
                old,
                new,
                check=False,
            )
            (workdir / f"continuous-{step}.txt").write_text(out)
        print(f"{step}: exit {code}, {time.perf_counter() - started:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
