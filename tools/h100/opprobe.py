"""Where an op row's process goes on a GPU host: torch's import, the device's start, then each op's case (inputs and
warm-up) and 20 samples at the large size in float32 (the cuda default's op rows). Prints JSON.

    python3 tools/h100/opprobe.py > opprobe.json
"""

import json
import time

STARTED = time.perf_counter()


def main() -> None:
    import torch

    from mpsbench.measure import ops, timing

    imported = time.perf_counter()
    torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    per_op: dict[str, dict[str, float]] = {}
    out = {"import": imported - STARTED, "cuda init": time.perf_counter() - imported, "ops": per_op}
    for training, names in ((False, ops.COMPUTE_NAMES + ops.MEMORY_NAMES), (True, ops.BACKWARD_NAMES)):
        for name in names:
            begin = time.perf_counter()
            case = ops.OpCase(ops.get(name), "cuda", "float32", "large", training)
            case.warm_up()
            built = time.perf_counter()
            median, _ = timing.median_seconds(case.run, "cuda", case.calls_per_sample, 3, 0.0, 20)
            per_op[f"{name}{' forward+backward' if training else ''}"] = {
                "prepare": round(built - begin, 4), "20 samples": round(time.perf_counter() - built, 4),
                "per call ms": round(median * 1e3, 4)}
            del case
            torch.cuda.empty_cache()
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
