"""Each machine's newest build against the build before it and the last one not flagged;
``--confirm`` re-measures timed alerts (docs/explanation/site.md)."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from mpsbench.builds import timeline
from mpsbench.context import Suite
from mpsbench.core import document, files
from mpsbench.core.errors import UserError
from mpsbench.regressions import rule
from mpsbench.results import recorded

TITLE = "mpsbench: the newest build is slower"
PREVIOUS, LAST_GOOD = "the build before", "the last build not flagged"
Compare = Callable[[str, str, str], int]  # (old commit, new commit, -b regex) -> exit status
VERDICTS = {
    rule.Decision.SLOWER.exit_status: "confirmed",
    rule.Decision.UNCHANGED.exit_status: "not confirmed",
    rule.Decision.UNDECIDED.exit_status: "undecided",
}
COLUMNS = [
    "machine",
    "benchmark",
    "params",
    "old",
    "new",
    "new/old",
    "against",
    "why",
    "builds and PyTorch commits",
]


@dataclass(frozen=True)
class Options:
    machines: tuple[str, ...] = ()  # default: every one
    build: str | None = None  # only machines whose newest build is this one
    summary: Path | None = None
    confirm: bool = False
    results: Path | None = None  # default: the config's results_dir


@dataclass(frozen=True)
class Alert:
    """One row slower, or wrong, on one machine's newest build."""

    machine: str
    row: recorded.Row
    unit: str
    old: str
    new: str
    against: str  # PREVIOUS or LAST_GOOD
    old_value: float
    new_value: float
    judgement: rule.Judgement
    upstream: str  # the PyTorch commit range
    confirmed: str = ""  # with --confirm: one of VERDICTS' values

    @property
    def params(self) -> str:
        return self.row.entry[len(self.row.benchmark) :]

    @property
    def raised(self) -> bool:
        return self.confirmed in ("", "confirmed")

    @property
    def ratio(self) -> str:
        return f"{self.judgement.ratio:.3f}" if self.judgement.slower else self.judgement.label

    def values(self) -> tuple[str, str]:
        scale, unit = (1e3, "ms") if self.unit == "seconds" else (1, self.unit)
        return f"{self.old_value * scale:.4g} {unit}", f"{self.new_value * scale:.4g} {unit}"

    def line(self) -> str:
        old, new = self.values()
        state = f" [{self.confirmed}]" if self.confirmed else ""
        kind = f"slower {self.ratio}x" if self.judgement.slower else self.ratio
        return (
            f"{kind}  {self.row.benchmark}{self.params} on {self.machine}: {old} -> {new}"
            f" against {self.against} ({self.judgement.reason}){state}; {self.upstream}"
        )


def _alert(
    suite: Suite, found: recorded.Recorded, machine: str, row: recorded.Row, lineage: list[str]
) -> Alert | None:
    unit = found.units.get(row.benchmark, "")
    measured = {b: value for b in lineage if (value := found.get(machine, b, row)) is not None}
    if len(measured) < 2:
        return None

    def judge(old: str, new: str) -> rule.Judgement:
        return rule.judge(suite.conf.thresholds, row.entry, unit, measured[old], measured[new])

    *older, new = measured
    good, previous = older[0], older[-1]
    for build in older[1:]:
        if not judge(good, build).regressed:
            good = build
    if good != previous and (judgement := judge(good, new)).regressed:
        old, against = good, LAST_GOOD
    elif (judgement := judge(previous, new)).regressed:
        old, against = previous, PREVIOUS
    else:
        return None
    try:
        upstream = suite.upstream_range(old, new)
    except UserError:  # a build the manifest does not name
        upstream = f"timeline commits {old[:12]}..{new[:12]} (not both in the manifest)"
    return Alert(
        machine,
        row,
        unit,
        old,
        new,
        against,
        measured[old].value,
        measured[new].value,
        judgement,
        upstream,
    )


def find(suite: Suite, options: Options) -> list[Alert]:
    """The rows slower on each machine's newest build, slowest first."""
    newest = (
        suite.timeline.commits[suite.name(options.build)] if options.build is not None else None
    )
    results = options.results or suite.conf.results
    found = recorded.load(results)
    for name in options.machines:
        if name not in found.machines:
            raise UserError(
                f"no machine {name!r} in {results}; machines there:"
                f" {', '.join(found.machines) or 'none'}"
            )
    alerts = []
    for machine in found.machines:
        new = found.builds(machine)[-1]
        if (options.machines and machine not in options.machines) or newest not in (None, new):
            continue
        # its own channel's builds: by date, a release could be judged against a nightly
        lineage = timeline.Reader(suite.timeline_path).lineage(new)
        if not lineage:
            raise UserError(
                f"the timeline {suite.timeline_path} has no commit {new[:12]}: run mpsbench"
                " timeline generate"
            )
        for row in found.values[(machine, new)]:
            if alert := _alert(suite, found, machine, row, lineage):
                alerts.append(alert)
    return sorted(alerts, key=lambda a: (-a.judgement.ratio, a.machine, a.row.entry))


def compare_command(suite: Suite, machine: str | None = None) -> Compare:
    """``mpsbench compare`` on this suite and machine, then ``explain --keep`` if slower."""

    def mpsbench(what: str, arguments: list[str]) -> int:
        print(f"mpsbench alert: {what}: mpsbench {' '.join(arguments)}", flush=True)
        # no console script need sit beside this interpreter (pip --target)
        command = [sys.executable, "-m", "mpsbench.cli", *arguments]
        return subprocess.run(command, check=False).returncode

    def run_compare(old: str, new: str, benchmark: str) -> int:
        arguments = [old, new, "-b", benchmark, "--manifest", str(suite.manifest_path)]
        arguments += ["--timeline", str(suite.timeline_path)]
        arguments += ["--machine", machine] if machine else []
        status = mpsbench("confirming", ["compare", *arguments])
        if status == rule.Decision.SLOWER.exit_status:
            mpsbench("explaining", ["explain", *arguments, "--keep"])
        return status

    return run_compare


def confirm(found: list[Alert], compare: Compare) -> list[Alert]:
    confirmed = []
    for alert in found:
        if not alert.row.benchmark.rpartition(".")[2].startswith(("time_", "timeraw_")):
            print(
                f"mpsbench alert: not confirming {alert.row.entry} on {alert.machine}: mpsbench"
                " compare re-measures only timed rows (time_*), and this one returns a value"
                f" ({alert.unit or 'no unit'}); kept as recorded",
                flush=True,
            )
            confirmed.append(alert)
            continue
        status = compare(alert.old, alert.new, "^" + re.escape(alert.row.entry) + "$")
        if status not in VERDICTS:
            raise UserError(
                f"mpsbench compare {alert.old[:12]} {alert.new[:12]} exited with status {status}"
                f" (expected {', '.join(map(str, VERDICTS))})"
            )
        confirmed.append(replace(alert, confirmed=VERDICTS[status]))
    return confirmed


def _confirmed(raised: list[Alert]) -> str:
    count = sum(alert.confirmed == "confirmed" for alert in raised)
    if not count:
        return "."
    if count == len(raised):
        return ", and confirmed by a fresh `mpsbench compare`."
    return (
        f"; {count} of them confirmed by a fresh `mpsbench compare`, the others kept as recorded"
        " (compare re-measures only time_ rows)."
    )


def markdown(alerts: list[Alert], compared: str) -> str:
    raised = [alert for alert in alerts if alert.raised]
    sections = []
    for title, slower, what in (
        ("Slower", True, "are slower"),
        ("Wrong results", False, "compute past their tolerance, or no longer repeat bit for bit,"),
    ):
        if not (mine := [a for a in raised if a.judgement.slower == slower]):
            continue
        rows: list[list[document.Cell]] = [
            [
                a.machine,
                a.row.benchmark,
                a.params,
                *a.values(),
                a.ratio,
                a.against,
                a.judgement.reason,
                a.upstream,
            ]
            for a in mine
        ]
        machines = sorted({alert.machine for alert in mine})
        said = (
            f"{len(mine)} rows on {len(machines)} machines ({', '.join(machines)}) {what} on the"
            f" newest build ({compared}), each judged by its own rule (docs/explanation/site.md"
            f" and instruments.md){_confirmed(mine)}"
        )
        table = document.Table(COLUMNS, rows, ["slower"] * len(rows))
        bisect = (
            "Confirm and bisect: `mpsbench compare OLD NEW -b ROW`, then"
            " `mpsbench bisect GOOD BAD -b ROW` (README)."
        )
        sections.append(document.Section(title, [said, table, bisect]))
    if not raised:
        sections.append(
            document.Section("Result", [f"No row is slower on the newest build ({compared})."])
        )
    if dropped := [alert for alert in alerts if not alert.raised]:
        table = document.Table(
            ["machine", "benchmark", "params", "recorded new/old", "fresh compare"],
            [
                [a.machine, a.row.benchmark, a.params, f"{a.judgement.ratio:.3f}", a.confirmed]
                for a in dropped
            ],
        )
        sections.append(document.Section("Not confirmed by a fresh compare", [table]))
    return document.to_markdown(
        TITLE if raised else TITLE.replace("is slower", "is not slower"), sections
    )


def check(suite: Suite, options: Options, compare: Compare | None = None) -> tuple[int, str]:
    """Prints the alerts, confirmed with ``compare`` where asked."""
    if options.confirm and len(options.machines) > 1:
        raise UserError(
            "--confirm measures on this machine: give at most one --machine, this machine's name"
        )
    results = options.results or suite.conf.results
    if options.summary is not None:  # never over a recorded file
        files.check_owned(
            options.summary,
            [files.Kept("the results folder", results, nothing_inside=True)],
            f"--summary {options.summary}",
        )
    found = find(suite, options)
    if options.confirm or compare is not None:
        machine = options.machines[0] if options.machines else None
        found = confirm(found, compare or compare_command(suite, machine))
    compared = f"each machine's newest build against {PREVIOUS} and {LAST_GOOD}" + (
        f", where the newest is {options.build}" if options.build else ""
    )
    for alert in found:
        print(alert.line())
    text = markdown(found, compared)
    if options.summary is not None:
        options.summary.write_text(text, encoding="utf-8")
    if raised := [alert for alert in found if alert.raised]:
        names = sorted({alert.machine for alert in raised})
        wrong = sum(not alert.judgement.slower for alert in raised)
        kinds = f"{len(raised) - wrong} rows slower" + (f", {wrong} wrong" if wrong else "")
        print(f"mpsbench alert: REGRESSION: {kinds} on {', '.join(names)}")
        return 1, text
    unconfirmed = f"; {len(found)} not confirmed by a fresh compare" if found else ""
    print(f"mpsbench alert: nothing slower ({compared}) in {results}{unconfirmed}")
    return 0, text
