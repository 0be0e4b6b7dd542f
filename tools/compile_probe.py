"""Eager against torch.compile per model and kind, one compile each: the full sweep's compile rows, cheaply.

benchmark_compile's classes compile once per asv process (twice per
combination: time_step and track_compile_seconds), which is what the default
selection pays for its mlp rows; measuring every model that way costs
minutes of compiling per row. This builds each workload with the suite's own
code (workloads.build, warm-up, timing.time_steps: warm-up, synchronize
around every call, median), compiled with inductor's caches cold
(compiled.prepare's folder), and prints one line of JSON per (model, kind):
eager and compiled seconds per step, compile seconds (the first call).

    python -m tools.compile_probe --device cuda resnet50 vit_b_16 llama_small bert_base   # docs/explanation/workloads.md

Run from the checkout's root; it puts src/ on the path, so a bare checkout with torch is enough.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))


def main(argv: list[str] | None = None) -> int:
    from mpsbench.core import errors
    from mpsbench.measure import compiled, devices, models, skips, timing, workloads

    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("models", nargs="+", help=f"of: {', '.join(models.REGISTRY)}")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--kinds", default="training,inference")
    parser.add_argument(
        "--seconds",
        type=float,
        default=2.0,
        help="timed seconds per measurement (at least 5 calls)",
    )
    args = parser.parse_args(argv)
    reason: str | None
    try:
        device = devices.get(args.device).availability()
    except errors.UserError as exc:  # an unknown device: the line names the choices
        reason = str(exc)
    else:
        reason = f"{args.device} is not usable here: {device.reason}"
        if device.usable:
            reason = skips.compile_unsupported(args.device)
    if reason is not None:
        print(f"compile_probe: {reason}", file=sys.stderr)
        return 2
    compiled.cold_caches()
    for model in args.models:
        spec = models.get(model)
        for kind in args.kinds.split(","):
            names = compiled.TRAINING_NAMES if kind == "training" else compiled.INFERENCE_NAMES
            if model not in names:
                continue
            row: dict[str, object] = {
                "device": args.device,
                "model": model,
                "kind": kind,
                "batch": spec.seed_batch_size,
            }
            for mode in ("eager", "compiled"):
                begin = time.perf_counter()
                try:
                    workload = workloads.build(
                        kind, args.device, model, spec.seed_batch_size, compiled=mode == "compiled"
                    )
                    workload.warm_up()
                    found = timing.time_steps(workload, min_calls=5, min_seconds=args.seconds)
                except Exception as exc:  # one model's failure is a row, not the end of the probe
                    row[f"{mode}_error"] = (
                        f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:300]}"
                    )
                    continue
                finally:
                    workloads.forget()
                    devices.get(args.device).empty_cache()
                row[f"{mode}_seconds"] = found.seconds_per_step
                row[f"{mode}_calls"] = found.calls
                if mode == "compiled":
                    row["compile_seconds"] = workload.first_step_seconds
                    row["compiled_total_seconds"] = time.perf_counter() - begin
                del workload
            if "eager_seconds" in row and "compiled_seconds" in row:
                row["speedup"] = row["eager_seconds"] / row["compiled_seconds"]  # type: ignore[operator]
            print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
