"""Where one benchmark process's setup goes on this machine: tools/breakdown_probe.py in a fresh process per row.

    python3 tools/h100/setup_parts.py OUT.jsonl "benchmark_models.Training.time_step('cuda', 'resnet50', 128)" ...
"""

import itertools
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def benchmark_id(row: str) -> str:
    """asv's "name-index" of a row written as name(params)."""
    name, _, rest = row.partition("(")
    module, cls, _ = name.split(".")
    sys.path.insert(0, str(ROOT))
    klass = getattr(__import__(f"benchmarks.{module}", fromlist=[cls]), cls)
    wanted = eval("(" + rest)  # the row's params, as asv writes them
    for index, params in enumerate(itertools.product(*klass.params)):
        if params == wanted:
            return f"{name}-{index}"
    raise SystemExit(f"no combination {wanted} of {name}")


def main() -> None:
    out = Path(sys.argv[1])
    with out.open("a") as log:
        for row in sys.argv[2:]:
            ident = benchmark_id(row)
            done = subprocess.run([sys.executable, str(ROOT / "tools/breakdown_probe.py"), str(ROOT / "benchmarks"),
                                   ident, "5", str(time.time())], capture_output=True, text=True, cwd=ROOT)
            line = done.stdout.strip().splitlines()[-1] if done.returncode == 0 and done.stdout.strip() else None
            record = {"row": row, "exit": done.returncode, **(json.loads(line) if line else {"err": done.stderr[-800:]})}
            log.write(json.dumps(record) + "\n")
            print(json.dumps(record), flush=True)


if __name__ == "__main__":
    main()
