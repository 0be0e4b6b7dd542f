"""Benchmark identity is history: every recorded benchmark keeps its name, params and version.

asv keys results by a benchmark's name, its params and its version; change any of
them and the graph starts over with the earlier points hidden. ``tests/data/
benchmark_ids.json`` records every benchmark the suite has published, with what
identifies it. This test discovers the suite the way asv does (asv_runner's
``disc_benchmarks``) and requires every recorded benchmark to be found unchanged,
unless it is listed under ``retired`` with the reason it was removed on purpose;
a new benchmark must be recorded too. ``python tests/test_benchmark_identity.py``
appends the new ones (it never edits a recorded entry).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from asv_runner.discovery import disc_benchmarks

ROOT = Path(__file__).resolve().parents[1]
RECORD = ROOT / "tests" / "data" / "benchmark_ids.json"


def discovered() -> dict[str, dict[str, Any]]:
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    return {
        bench.name: {
            "version": bench.version,
            "param_names": list(bench.param_names),
            "params": bench.params,
        }
        for bench in disc_benchmarks(str(ROOT / "benchmarks"))
    }


def _record() -> dict[str, Any]:
    return json.loads(RECORD.read_text())


def test_every_recorded_benchmark_is_discovered_with_the_same_identity():
    record, found = _record(), discovered()
    retired = record["retired"]
    changed = {
        name: {"recorded": ident, "now": found.get(name)}
        for name, ident in record["benchmarks"].items()
        if name not in retired and found.get(name) != ident
    }
    assert changed == {}, (
        "a benchmark's name, params or version changed: its recorded history would be hidden"
    )


def test_retired_benchmarks_are_gone_and_say_why():
    record, found = _record(), discovered()
    for name, reason in record["retired"].items():
        assert name in record["benchmarks"], f"{name} was never recorded"
        assert name not in found, f"{name} is retired but still discovered"
        assert reason.strip()


def test_every_discovered_benchmark_is_recorded():
    unrecorded = sorted(set(discovered()) - set(_record()["benchmarks"]))
    assert unrecorded == [], "record new benchmarks with: python tests/test_benchmark_identity.py"


def record_new() -> list[str]:
    """Append the benchmarks not yet recorded; a recorded entry is never changed."""
    record, found = _record(), discovered()
    new = sorted(set(found) - set(record["benchmarks"]))
    for name in new:
        record["benchmarks"][name] = found[name]
    RECORD.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    return new


if __name__ == "__main__":
    for name in record_new():
        print(f"recorded {name}")
