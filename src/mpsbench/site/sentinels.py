"""The figures page's sentinels (issue 33): correctness by release, and samples per joule by release.

Correctness: a cell per row (pattern, dtype, device) and build, red where the row is past its line (its dtype's
tolerance for an error; 0 for the difference between identical calls) or where asv recorded it failed (a pattern
that crashed its process). Energy: the batch over benchmark_models' recorded joules per step, at the model's seed
batch, along the builds' dates.
"""

from __future__ import annotations

from pathlib import Path

from mpsbench.builds.timeline import Reader
from mpsbench.core.document import Block, Cell, Flagged, Image, Link, Section, Table
from mpsbench.measure import tolerances
from mpsbench.results import recorded
from mpsbench.site import figures
from mpsbench.site import throughput as tp

ERRORS = ("benchmark_patterns.Correctness.track_relative_error",
          "benchmark_patterns.ReportedCorrectness.track_relative_error")
DIFFERENCES = "benchmark_patterns.Determinism.track_largest_difference"
ENERGY = {"benchmark_models.TrainingCapacity.track_joules_per_step": "training",
          "benchmark_models.InferenceCapacity.track_joules_per_step": "inference"}
NEWEST = 12  # builds per machine, a column each


def _version(timeline: Reader, commit: str) -> str:
    return str(timeline.build(commit).get("torch_version") or commit[:8])


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
                       Table(["row", *(_version(timeline, commit) for commit in builds)],
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


def samples_per_joule(results_dir: Path, timeline: Reader) -> list[tp.ReleasePoint]:
    """Every build's samples per joule at each model's seed batch, per Python, machine and device."""
    names = recorded.param_names(results_dir)
    found = []
    for python, each in sorted(recorded.load_each_python(results_dir, strict=False).items()):
        for (machine, commit), rows in each.values.items():
            for row, measured in rows.items():
                if row.benchmark not in ENERGY or row.benchmark not in names or measured.value <= 0:
                    continue
                params = recorded.named(row, names[row.benchmark])
                if params["batch_size"] == tp.seed_batch(str(params["model"])):
                    found.append(tp.ReleasePoint(
                        python, f"{machine} {params['device']}", ENERGY[row.benchmark], str(params["model"]),
                        _version(timeline, commit), each.dates.get(commit, 0), timeline.link(commit),
                        params["batch_size"] / measured.value))
    return found


def energy_section(results_dir: Path, timeline: Reader, save: figures.Save) -> Section:
    title = "Samples per joule by release"
    points = samples_per_joule(results_dir, timeline)
    if not points:
        return Section(title, ["No build has energy results (benchmark_models' *Capacity.track_joules_per_step)."])
    figures.by_release(points, title, save("samples_per_joule.png"), "samples per joule (higher is better)", None)
    return Section(title, [
        Image("samples_per_joule.png", title),
        "The seed batch over the joules per step the device's own counter read (cuda: NVML, the board; mps: IOReport,"
        " the GPU; a Linux cpu: RAPL, the packages), along the builds' dates (docs/instruments.md, Energy).",
        Table(["torch", "python", "machine and device", "model", "kind", "samples/J"],
              [[Link(p.torch_version, p.link) if p.link else p.torch_version, p.python, p.machine, p.model, p.kind,
                figures.number(p.ratio)] for p in sorted(points, key=lambda p: (p.date_ms, p.python, p.machine))]),
    ])
