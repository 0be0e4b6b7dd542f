"""The site's first screen: each machine's newest seed step times and GPU speedups."""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, urlencode

from mpsbench.builds.timeline import Reader
from mpsbench.core.asv_internals import human_value
from mpsbench.measure import devices, models
from mpsbench.regressions import rule
from mpsbench.results import recorded
from mpsbench.site import patches
from mpsbench.site import throughput as tp

ANCHOR = '<div id="summarygrid-display"'
MARK = "mpsbench-landing"
SEEDS = {"training": models.NAMES, "inference": models.INFERENCE_NAMES}
NONE = '<td class="dim">-</td>'


@dataclass(frozen=True)
class Value:
    step: tp.Step
    seconds: float
    spread: float | None  # rule.noise

    @property
    def samples_per_second(self) -> float:
        return self.step.batch / self.seconds


@dataclass(frozen=True)
class Line:
    kind: str
    model: str
    values: dict[str, Value]

    def speedup(self, gpu: str) -> float | None:
        if gpu in self.values and tp.CPU in self.values:
            return self.values[gpu].samples_per_second / self.values[tp.CPU].samples_per_second
        return None


@dataclass(frozen=True)
class Machine:
    machine: str
    commit: str
    build: str
    devices: list[str]
    lines: list[Line]
    missing: list[str]  # "model kind" with no value

    @property
    def gpus(self) -> list[str]:
        return [device for device in self.devices if device != tp.CPU]


def summarize(results: tp.Results, timeline: Reader) -> list[Machine]:
    """Each machine with a timed seed row, at its newest such build."""
    found = []
    for machine in results.recorded.machines:
        builds = [c for c in results.builds(machine) if (machine, c) in results.timed]
        if not builds:
            continue
        newest = builds[-1]
        timed = {step: measured for step, (_, measured) in results.timed[machine, newest].items()}
        lines, missing = [], []
        for kind, names in SEEDS.items():
            for model in names:
                values = {
                    device: Value(step, timed[step].value, rule.noise(timed[step]))
                    for device in devices.NAMES
                    if (step := tp.chosen(timed, kind, model, device))
                }
                if values:
                    lines.append(Line(kind, model, values))
                else:
                    missing.append(f"{model} {kind}")
        present = [d for d in devices.NAMES if any(d in line.values for line in lines)]
        found.append(Machine(machine, newest, timeline.label(newest), present, lines, missing))
    return found


def graph_link(machine: str, step: tp.Step) -> str:
    params = {
        "machine": machine,
        "p-device": repr(step.device),
        "p-model": repr(step.model),
        "p-batch_size": step.batch,
    }
    return f"#{tp.CLASSES[step.kind]}.{tp.TIME}?{urlencode(params, quote_via=quote, safe='')}"


def _cell(machine: str, value: Value | None) -> str:
    if value is None:
        return NONE
    step = value.step
    spread = f" <small>± {value.spread:.0%}</small>" if value.spread is not None else ""
    title = (
        f"{step.kind} step of {step.model} on {step.device}, batch {step.batch}:"
        f" {value.samples_per_second:,.0f} samples/s; open its graph"
    )
    return (
        f'<td><a href="{html.escape(graph_link(machine, step))}" title="{html.escape(title)}">'
        f"{human_value(value.seconds, 'seconds')}</a>{spread}"
        f' <small class="dim">{step.batch_note}</small></td>'
    )


def _machine_html(summary: Machine) -> str:
    gpus = summary.gpus if tp.CPU in summary.devices else []
    labels = ["model", "step", *summary.devices, *(f"{gpu}/cpu" for gpu in gpus)]
    rows = "".join(
        f"<tr><td>{html.escape(line.model)}</td><td>{line.kind}</td>"
        + "".join(_cell(summary.machine, line.values.get(device)) for device in summary.devices)
        + "".join(
            NONE if r is None else f"<td><b>{r:.2f}x</b></td>" for r in map(line.speedup, gpus)
        )
        + "</tr>"
        for line in summary.lines
    )
    notes = []
    if not gpus:
        notes.append(
            f"Only {', '.join(summary.devices)} measured here: a speedup needs a GPU beside cpu."
        )
    if any(not value.step.seed for line in summary.lines for value in line.values.values()):
        notes.append(tp.FALLBACK_NOTE)
    if summary.missing:
        notes.append(f"No value yet on this build: {', '.join(summary.missing)}.")
    return (
        f"<h3>{html.escape(summary.machine)} <small>newest build: {html.escape(summary.build)}</small></h3>"
        '<table class="table table-condensed table-striped"><thead><tr>'
        + "".join(f"<th>{label}</th>" for label in labels)
        + f"</tr></thead><tbody>{rows}</tbody></table>"
        + "".join(f'<p class="dim">{html.escape(note)}</p>' for note in notes)
    )


STYLE = (
    f"#{MARK}{{padding:10px 20px 0 20px;max-width:1100px}}#{MARK} table{{width:auto}}"
    f"#{MARK} :is(td,th){{padding:3px 14px 3px 0;text-align:right}}"
    f"#{MARK} :is(td,th):nth-child(-n+2){{text-align:left}}"
    f"#{MARK} .dim{{color:#777}}"
    f"#{MARK} h3{{margin-top:12px}}"
)


def to_html(summaries: list[Machine], figures: str) -> str:
    body = "".join(map(_machine_html, summaries)) or (
        "<p>No seed model's training or inference step is recorded yet.</p>"
    )
    return (
        f'<div id="{MARK}"><style>{STYLE}</style>'
        "<h2>Training and inference step time per device</h2>"
        "<p>Each seed model's median step time ± half the interquartile range (training: forward,"
        " loss, backward, optimizer step; inference: forward) at its seed batch on each machine's"
        " newest build; speedup: GPU samples/s over cpu's. Each time links to its graph.</p>"
        f'{body}<p>More: <a href="{html.escape(figures)}">Figures</a>;'
        " below, asv's grid.</p><hr></div>"
    )


def measured_params(found: recorded.Recorded) -> dict[str, list[list[str]]]:
    combinations: dict[str, set[tuple[str, ...]]] = {}
    for rows in found.values.values():
        for row in rows:
            if row.benchmark in found.units:  # in benchmarks.json
                combinations.setdefault(row.benchmark, set()).add(row.params)
    return {name: [sorted(set(axis)) for axis in zip(*each)] for name, each in combinations.items()}


def write(html_dir: Path, results: tp.Results, timeline: Reader, figures: str) -> list[Machine]:
    """The summary atop asv's grid; the measured params in index.json."""
    summaries = summarize(results, timeline)
    patches.insert_once(
        html_dir,
        f'id="{MARK}"',
        re.compile(re.escape(ANCHOR) + "[^>]*>"),
        f"{ANCHOR}>",
        "\n" + to_html(summaries, figures),
    )
    with patches.index_json(html_dir) as index:
        index[patches.MEASURED_KEY] = measured_params(results.recorded)
    return summaries
