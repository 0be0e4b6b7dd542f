"""Alerts: each machine's newest build against the one before it, beyond the regression factor.

``mpsbench alert`` reads an asv results directory, compares the step times
of each machine's newest two builds (report.py's build-over-build table,
:func:`mpsbench.report.build_changes`) against the one regression factor
(:func:`mpsbench.factor.regression_factor`), and for every workload that got
slower names the benchmark, its params, the machine, the ratio and the
PyTorch commit range between the two builds (``mpsbench timeline range``).
It exits 1 when anything got slower, so a nightly job fails; ``--summary``
also writes the same as Markdown, for an issue body or a job summary.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mpsbench import factor, history, report, timeline
from mpsbench import manifest as mf

TITLE = "mpsbench: the newest build is slower"


class AlertError(ValueError):
    """The alert cannot be computed as asked (no results, a bad config): one line, exit status 2."""


@dataclass(frozen=True)
class Alert:
    """One workload that got slower on one machine, from one build to the next."""

    change: report.Change
    upstream: str  # the PyTorch commit range between the two builds, with a compare link

    @property
    def benchmark(self) -> str:
        return f"{report.CLASSES[self.change.workload.kind]}.{report.TIME}"

    @property
    def params(self) -> str:
        """As asv writes a parameterized benchmark's combination (and as ``asv run -b`` matches it)."""
        workload = self.change.workload
        return f"({workload.device!r}, {workload.model!r}, {workload.batch})"

    def line(self) -> str:
        c = self.change
        return (
            f"slower {c.ratio:.3f}x  {self.benchmark}{self.params} on {c.machine}:"
            f" {c.old_seconds * 1e3:.4g} -> {c.new_seconds * 1e3:.4g} ms per step; {self.upstream}"
        )


def _upstream(manifest: mf.Manifest, generated: timeline.Generated, old: str, new: str) -> str:
    try:
        return history.upstream_range(manifest, generated, old, new)
    except (history.HistoryError, mf.ManifestError):
        return f"timeline commits {old[:12]}..{new[:12]} (not both in the manifest)"


def find(
    results_dir: Path, limit: float, manifest: mf.Manifest, timeline_repo: Path,
    machines: list[str] | None = None, build: str | None = None,
) -> list[Alert]:
    """The workloads slower than ``limit`` (new/old) on each machine's newest build, slowest first.

    ``machines`` keeps only those machines; ``build`` (CHANNEL@ID or a commit
    hash) only machines whose newest build is that one, so that a machine
    that did not run tonight's build does not repeat an old alert.
    """
    try:
        results = report.load(results_dir)
    except report.ReportError as exc:
        raise AlertError(str(exc)) from None
    generated = timeline.compute(manifest, timeline_repo)
    newest = None
    if build is not None:
        name = history._resolve_ref(manifest, generated, build)[0]
        newest = generated.commits[name]
    found = [
        change for change in report.build_changes(results)
        if report.verdict(change.ratio, limit) == "slower"
        and (machines is None or change.machine in machines)
        and (newest is None or change.new == newest)
    ]
    found.sort(key=lambda change: (-change.ratio, change.machine, change.workload))
    return [Alert(change, _upstream(manifest, generated, change.old, change.new)) for change in found]


def markdown(alerts: list[Alert], limit: float, compared: str) -> str:
    """The alerts as a Markdown document (report.py's renderer), for an issue body or a job summary."""
    if not alerts:
        return report.to_markdown(TITLE.replace("is slower", "is not slower"), [
            report.Section("Result", [f"No workload is slower than the regression factor {limit:g} ({compared})."]),
        ])
    rows: list[list[report.Cell]] = []
    for alert in alerts:
        c = alert.change
        rows.append([
            c.machine, alert.benchmark, alert.params, f"{c.old_seconds * 1e3:.4g}", f"{c.new_seconds * 1e3:.4g}",
            f"{c.ratio:.3f}", alert.upstream,
        ])
    machines = sorted({alert.change.machine for alert in alerts})
    return report.to_markdown(TITLE, [report.Section("Slower than the regression factor", [
        f"{len(alerts)} workloads on {len(machines)} machines ({', '.join(machines)}) are slower on the newest build"
        f" than on the build before it, beyond the regression factor {limit:g}"
        f" (asv.conf.json regressions_thresholds; {compared}).",
        report.Table(["machine", "benchmark", "params", "old ms", "new ms", "new/old", "builds and PyTorch commits"],
                     rows, ["slower"] * len(rows)),
        "Bisect a range of builds with the bisect workflow, or locally:"
        " `asv find \"GOOD^..BAD\" \"BENCHMARK\"` (README, Bisecting).",
    ])])


def check(
    results_dir: Path, limit: float, manifest: mf.Manifest, timeline_repo: Path,
    machines: list[str] | None = None, build: str | None = None, summary: Path | None = None,
) -> tuple[int, str]:
    """:func:`find`, then one line per alert and a last line on stdout, and the Markdown in ``summary``.

    Returns the exit status (1 if anything is slower) and the Markdown.
    """
    found = find(results_dir, limit, manifest, timeline_repo, machines, build)
    compared = "each machine's newest two builds" + (f", where the newest is {build}" if build else "")
    for alert in found:
        print(alert.line())
    text = markdown(found, limit, compared)
    if summary is not None:
        summary.write_text(text, encoding="utf-8")
    if found:
        names = sorted({alert.change.machine for alert in found})
        print(f"mpsbench alert: REGRESSION: {len(found)} workloads slower than {limit:g}x on {', '.join(names)}")
        return 1, text
    print(f"mpsbench alert: nothing slower than {limit:g}x ({compared}) in {results_dir}")
    return 0, text


def cmd_alert(args: argparse.Namespace) -> int:
    try:
        config = factor.read_config(args.config)
        limit = factor.regression_factor(args.config)
    except factor.FactorError as exc:
        raise AlertError(str(exc)) from None
    results_dir = args.results or Path(str(config.get("results_dir", "results")))
    manifest = mf.load(args.manifest)
    return check(results_dir, limit, manifest, args.timeline, args.machine or None, args.build, args.summary)[0]


def add_subcommand(commands: Any) -> None:
    """Register ``mpsbench alert`` on the CLI's subparsers."""
    parser = commands.add_parser("alert", help="exit 1 if a machine's newest build is slower than the one before")
    parser.add_argument("--results", type=Path, default=None,
                        help="asv results directory (default: results_dir of --config)")
    parser.add_argument("--config", type=Path, default=factor.CONFIG,
                        help=f"asv.conf.json with the regression factor (default {factor.CONFIG})")
    parser.add_argument("--manifest", type=Path, default=history.MANIFEST, help=f"default {history.MANIFEST}")
    parser.add_argument("--timeline", type=Path, default=history.TIMELINE, help=f"default {history.TIMELINE}")
    parser.add_argument("--machine", action="append", default=[], help="only this machine (repeatable)")
    parser.add_argument("--build", help="only machines whose newest build is this one (CHANNEL@ID or hash)")
    parser.add_argument("--summary", type=Path, help="also write the alerts as Markdown to this file")
    parser.set_defaults(func=cmd_alert)
