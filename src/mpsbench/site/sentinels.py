"""The figures page's correctness by release (issue 33).

A cell per row (pattern, dtype, device) and build, red where the row is past its line (its dtype's tolerance for an
error; 0 for the difference between identical calls) or where asv recorded it failed (a pattern that crashed its
process).
"""

from __future__ import annotations

from mpsbench.builds.timeline import Reader
from mpsbench.core.document import Block, Cell, Flagged, Section, Table
from mpsbench.measure import tolerances
from mpsbench.results import recorded

ERRORS = ("benchmark_patterns.Correctness.track_relative_error",
          "benchmark_patterns.ReportedCorrectness.track_relative_error")
DIFFERENCES = "benchmark_patterns.Determinism.track_largest_difference"
NEWEST = 12  # builds per machine, a column each


def _cell(found: recorded.Recorded, machine: str, commit: str, row: recorded.Row) -> Cell:
    measured = found.get(machine, commit, row)
    if measured is None:
        return Flagged("failed") if row in found.failed.get((machine, commit), ()) else "-"
    line = 0.0 if row.benchmark == DIFFERENCES else tolerances.tolerance(row.entry)
    return Flagged(f"{measured.value:.2g}") if measured.value > line else f"{measured.value:.2g}"


def _label(row: recorded.Row) -> str:
    device, pattern, dtype = (param.strip("'") for param in row.params)
    return f"{pattern} {dtype} on {device}: {'difference' if row.benchmark == DIFFERENCES else 'error'}"


def correctness_section(found: recorded.Recorded, timeline: Reader) -> Section:
    title = "Correctness by release"
    blocks: list[Block] = []
    for machine in found.machines:
        builds = found.builds(machine)[-NEWEST:]
        rows = {row for commit in builds for table in (found.values.get((machine, commit), {}), found.failed.get(
            (machine, commit), set())) for row in table if row.benchmark in (*ERRORS, DIFFERENCES)}
        if rows:
            ordered = sorted(rows, key=lambda row: (row.benchmark == DIFFERENCES, _label(row)))
            blocks += [f"{machine}, its newest {len(builds)} builds:",
                       Table(["row", *(timeline.version(commit) for commit in builds)],
                             [[_label(row), *(_cell(found, machine, commit, row) for commit in builds)] for row in ordered])]
    if not blocks:
        return Section(title, ["No machine has correctness results (benchmark_patterns)."])
    return Section(title, [
        "Each pattern's relative error against float64 (red past its dtype's tolerance: "
        + ", ".join(f"{dtype} {limit:g}" for dtype, limit in tolerances.TOLERANCES.items())
        + ") and the largest difference between its identical calls (red unless 0: not bit-identical);"
        " 'failed' is a row asv recorded failed, such as a pattern that crashed its process (docs/instruments.md).",
        *blocks,
    ])
