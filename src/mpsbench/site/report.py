"""The seeds' figures and a summary, regenerated from an asv results directory.

``python -m mpsbench.site.report RESULTS_DIR OUT_DIR`` (or ``mpsbench report``) reads
asv's results files and writes, with matplotlib:

- ``speedup_<model>.png``: training and inference speedup of each GPU device
  over ``cpu`` on the same machine and build (Apple's chart);
- ``machines_<model>.png``: one bar per machine and device for the same
  workload (the VGG16 chart that compared M1s with RTX cards);
- ``batches_<model>.png``: throughput across batch sizes per device (the BERT
  batch-size chart);
- ``summary.md`` and ``summary.html``: the numbers behind every figure, a
  build-over-build table of the newest two builds with changes beyond the
  regression factor highlighted, and the latest regressions asv detected with
  the PyTorch commit range of each.

Every figure uses each machine's newest build and the model's seed batch size
(``models.ModelSpec.seed_batch_size``); where a device has no result at that
size, the largest batch it has is used and the figure says so. Throughput is
batch size over asv's median step time (``time_step``), or asv's
``*Capacity.track_throughput`` where no step time was recorded; a speedup is the ratio
of throughputs, which is the ratio of step times when the batches are equal.
"""

from __future__ import annotations

import argparse
import ast
import itertools
import json
import math
import re
import subprocess
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mpsbench import command, progress
from mpsbench.regressions import factor
from mpsbench.site.document import Block, Cell, Image, Link, Section, Table, to_html, to_markdown

SUITE = "benchmark_models"
CLASSES = {"training": f"{SUITE}.Training", "inference": f"{SUITE}.Inference"}
KINDS = tuple(CLASSES)
TIME = "time_step"
THROUGHPUT = "track_throughput"
# Where each metric lives: time_step in Training/Inference, throughput in their *Capacity classes.
METRIC_CLASS_SUFFIX = {TIME: "", THROUGHPUT: "Capacity"}
PARAM_NAMES = ("device", "model", "batch_size")  # the classes' param_names, when benchmarks.json is absent
CPU = "cpu"
LATEST_REGRESSIONS = 20  # rows in the summary's regressions table
COMPARE_URL = "https://github.com/pytorch/pytorch/compare/{old}...{new}"
GIT_VERSION = re.compile(r"^git_version:\s*([0-9a-fA-F]{7,40})\s*$", re.MULTILINE)
DEVICE_COLORS = {"cpu": "#7f7f7f", "mps": "#1f77b4", "cuda": "#2ca02c"}
KIND_COLORS = {"training": "#d62728", "inference": "#1f77b4"}


class ReportError(Exception):
    """The report cannot be made as asked: the message says why, in one line."""


log = progress.logger(__name__)


# --- reading results -------------------------------------------------------


@dataclass(frozen=True, order=True)
class Workload:
    """What one number measures, independent of where and on which build."""

    kind: str
    model: str
    device: str
    batch: int


@dataclass
class Results:
    """Step times and throughputs per machine, build and workload."""

    seconds: dict[tuple[str, str, Workload], float] = field(default_factory=dict)
    throughput: dict[tuple[str, str, Workload], float] = field(default_factory=dict)
    dates: dict[str, int] = field(default_factory=dict)  # commit -> commit date (ms), asv's build order
    files: int = 0
    _by_build: dict[tuple[str, str], set[Workload]] = field(default_factory=dict, repr=False)

    @property
    def machines(self) -> list[str]:
        return sorted({machine for machine, _, _ in itertools.chain(self.seconds, self.throughput)})

    def builds(self, machine: str) -> list[str]:
        """The machine's builds with results, oldest first."""
        found = {commit for m, commit, _ in itertools.chain(self.seconds, self.throughput) if m == machine}
        return sorted(found, key=lambda commit: (self.dates.get(commit, 0), commit))

    def workloads(self, machine: str, commit: str) -> set[Workload]:
        if not self._by_build:  # built once: the figures ask for every machine, model and device
            for m, c, w in itertools.chain(self.seconds, self.throughput):
                self._by_build.setdefault((m, c), set()).add(w)
        return self._by_build.get((machine, commit), set())

    def samples_per_second(self, machine: str, commit: str, workload: Workload) -> float | None:
        key = (machine, commit, workload)
        if key in self.seconds:
            return workload.batch / self.seconds[key]
        return self.throughput.get(key)


def _param_names(results_dir: Path) -> dict[str, tuple[str, ...]]:
    """Each benchmark's param names, from the benchmarks.json that asv run writes."""
    try:
        benchmarks = json.loads((results_dir / "benchmarks.json").read_text())
    except (OSError, ValueError):
        return {}
    return {name: tuple(b.get("param_names", ())) for name, b in benchmarks.items() if isinstance(b, dict)}


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) and value > 0 else None


def load(results_dir: Path, python: str | None = None) -> Results:
    """Read every results file under ``results_dir`` through asv's own reader (``python``: only its)."""
    from asv import results as asv_results  # asv is what wrote them; it also reads them best

    if not results_dir.is_dir():
        raise ReportError(f"results directory {results_dir} does not exist")
    names = _param_names(results_dir)
    found = Results()
    for result in asv_results.iter_results(str(results_dir)):
        if python is not None and result.params.get("python") != python:
            continue
        found.files += 1
        machine, commit = result.params["machine"], result.commit_hash
        found.dates[commit] = int(result.date or 0)
        keys = set(result.get_all_result_keys())
        for kind, cls in CLASSES.items():
            for metric, table in ((TIME, found.seconds), (THROUGHPUT, found.throughput)):
                name = f"{cls}{METRIC_CLASS_SUFFIX[metric]}.{metric}"
                if name not in keys:
                    continue
                params = result.get_result_params(name)
                order = names.get(name) or PARAM_NAMES
                values = result.get_result_value(name, params) or []
                for combination, value in zip(itertools.product(*params), values):
                    number = _number(value)
                    if number is None:
                        continue
                    named = dict(zip(order, (ast.literal_eval(text) for text in combination)))
                    workload = Workload(kind, str(named["model"]), str(named["device"]), int(named["batch_size"]))
                    table[(machine, commit, workload)] = number
    return found


# --- builds: labels and PyTorch commits from the timeline repository ------


class Timeline:
    """The repository asv walks: one commit per PyTorch build, ``git_version: HASH`` in each message.

    Read from the commits rather than the manifest on purpose: a recorded run
    (docs/results/*, the fleet's results branch) keeps the timeline it was
    measured against (a bundle), and the manifest of today may no longer name
    its builds; the commit message is the one record that travels with them.
    """

    def __init__(self, repo: Path | None) -> None:
        self.repo = repo if repo is not None and _is_git(repo) else None
        self._messages: dict[str, str] = {}

    def _git(self, *args: str) -> str:
        if self.repo is None:
            return ""
        done = subprocess.run(["git", "-C", str(self.repo), *args], capture_output=True, text=True, check=False)
        return done.stdout if done.returncode == 0 else ""

    def message(self, commit: str) -> str:
        if commit not in self._messages:
            self._messages[commit] = self._git("log", "-1", "--format=%B", commit)
        return self._messages[commit]

    def git_version(self, commit: str) -> str | None:
        """The PyTorch commit the build was made from, as the timeline wrote it in the message."""
        found = GIT_VERSION.search(self.message(commit))
        return found.group(1) if found else None

    def parent(self, commit: str) -> str | None:
        return self._git("rev-parse", "--verify", "--quiet", f"{commit}^").strip() or None

    def label(self, commit: str) -> str:
        subject = self.message(commit).split("\n", 1)[0].strip()
        return f"{commit[:8]} {subject}".strip()


def _is_git(repo: Path) -> bool:
    bare = (repo / "HEAD").is_file() and (repo / "objects").is_dir()
    return (repo / ".git").exists() or bare


def timeline_from_config(config: Path | None) -> Timeline:
    """The repository named by asv.conf.json's ``repo``, resolved from the config's folder."""
    if config is None or not config.is_file():
        return Timeline(None)
    repo = factor.read_config(config).get("repo")
    if not isinstance(repo, str) or "://" in repo:
        return Timeline(None)
    return Timeline((config.parent / repo).resolve())


# --- choosing what to plot -------------------------------------------------


def seed_batch(model: str) -> int | None:
    """The batch size of the measurement that motivated the model (models.py), if it is registered."""
    from mpsbench.measure import models  # imports torch: only when a report is made

    spec = models.REGISTRY.get(model)
    return spec.seed_batch_size if spec else None


@dataclass(frozen=True)
class Point:
    """One plotted value: where, which build, which batch, and whether that batch is the seed's."""

    machine: str
    commit: str
    workload: Workload
    samples_per_second: float
    seed: bool


def pick(results: Results, machine: str, commit: str, kind: str, model: str, device: str) -> Point | None:
    """The seed-batch measurement, else the largest batch measured for that device."""
    batches = sorted(w.batch for w in results.workloads(machine, commit)
                     if (w.kind, w.model, w.device) == (kind, model, device))
    if not batches:
        return None
    seed = seed_batch(model)
    batch = seed if seed in batches else batches[-1]
    workload = Workload(kind, model, device, batch)
    value = results.samples_per_second(machine, commit, workload)
    return None if value is None else Point(machine, commit, workload, value, batch == seed)


def models_in(results: Results) -> list[str]:
    from mpsbench.measure import models

    present = {w.model for machine in results.machines for c in results.builds(machine)
               for w in results.workloads(machine, c)}
    return [m for m in models.NAMES if m in present] + sorted(present - set(models.NAMES))


def devices_in(results: Results, machine: str, commit: str, model: str) -> list[str]:
    from mpsbench.measure import devices

    present = {w.device for w in results.workloads(machine, commit) if w.model == model}
    return [d for d in devices.NAMES if d in present] + sorted(present - set(devices.NAMES))


@dataclass(frozen=True)
class Speedup:
    machine: str
    commit: str
    kind: str
    model: str
    device: str
    gpu: Point
    cpu: Point

    @property
    def ratio(self) -> float:
        return self.gpu.samples_per_second / self.cpu.samples_per_second


def speedups(results: Results) -> list[Speedup]:
    """(a) each GPU device over cpu, per model, machine (newest build) and kind."""
    found = []
    for model in models_in(results):
        for machine in results.machines:
            commit = results.builds(machine)[-1]
            for device in devices_in(results, machine, commit, model):
                if device == CPU:
                    continue
                for kind in KINDS:
                    gpu = pick(results, machine, commit, kind, model, device)
                    cpu = pick(results, machine, commit, kind, model, CPU)
                    if gpu and cpu:
                        found.append(Speedup(machine, commit, kind, model, device, gpu, cpu))
    return found


def across_machines(results: Results) -> list[Point]:
    """(b) the same workload on every machine and device (each machine's newest build)."""
    found = []
    for model in models_in(results):
        for kind in KINDS:
            for machine in results.machines:
                commit = results.builds(machine)[-1]
                for device in devices_in(results, machine, commit, model):
                    point = pick(results, machine, commit, kind, model, device)
                    if point:
                        found.append(point)
    return found


def batch_curves(results: Results) -> dict[tuple[str, str, str, str], list[tuple[int, float]]]:
    """(c) (model, kind, machine, device) -> [(batch, samples/s)] on the machine's newest build."""
    curves: dict[tuple[str, str, str, str], list[tuple[int, float]]] = {}
    for machine in results.machines:
        commit = results.builds(machine)[-1]
        for workload in sorted(results.workloads(machine, commit)):
            value = results.samples_per_second(machine, commit, workload)
            if value is not None:
                key = (workload.model, workload.kind, machine, workload.device)
                curves.setdefault(key, []).append((workload.batch, value))
    return {key: sorted(points) for key, points in curves.items()}


@dataclass(frozen=True)
class Change:
    machine: str
    old: str
    new: str
    workload: Workload
    old_seconds: float
    new_seconds: float

    @property
    def ratio(self) -> float:
        """New step time over old: above the factor is slower."""
        return self.new_seconds / self.old_seconds


def build_changes(results: Results) -> list[Change]:
    """(d) step times of each machine's newest two builds, side by side."""
    found = []
    for machine in results.machines:
        builds = results.builds(machine)
        if len(builds) < 2:
            continue
        old, new = builds[-2], builds[-1]
        for workload in sorted(results.workloads(machine, new)):
            old_key, new_key = (machine, old, workload), (machine, new, workload)
            if old_key in results.seconds and new_key in results.seconds:
                found.append(Change(machine, old, new, workload, results.seconds[old_key], results.seconds[new_key]))
    return found


def verdict(ratio: float, limit: float) -> str:
    if ratio > limit:
        return "slower"
    if ratio < 1 / limit:
        return "faster"
    return ""


# --- regressions asv detected ----------------------------------------------


@dataclass(frozen=True)
class Regression:
    benchmark: str
    params: str
    old_commit: str | None
    new_commit: str
    before: float
    after: float
    revision: int
    graph: str = ""  # the row's graph, relative to the site's root
    verdict: str = "slower"  # thresholds.judge's, where regressions_page judged it
    reason: str = ""

    @property
    def ratio(self) -> float:
        return self.after / self.before if self.before else math.inf


def regressions(site: Path, timeline: Timeline) -> list[Regression]:
    """The jumps in asv's published regressions.json, newest first."""
    try:
        detected = json.loads((site / "regressions.json").read_text())["regressions"]
        index = json.loads((site / "index.json").read_text())
        revision_to_hash = index["revision_to_hash"]
    except (OSError, ValueError, KeyError) as exc:
        raise ReportError(f"{site} holds no readable regressions.json and index.json: publish first ({exc})") from None
    from mpsbench.site import regressions_page

    found = []
    for name, graph_path, _graph_params, index_of_params, _last, _best, jumps in detected:
        benchmark = name.split("(", 1)[0]
        machine = {"machine": regressions_page.graph_param(graph_path, "machine") or ""}
        params = regressions_page.url_params(index, benchmark, index_of_params)
        for old_revision, new_revision, before, after in jumps:
            new = revision_to_hash[str(new_revision)]
            # None: the jump is one commit, whose parent is the build before it
            old = revision_to_hash[str(old_revision)] if old_revision is not None else timeline.parent(new)
            commits = f"{old}-{new}" if old_revision is not None else new
            found.append(Regression(name, machine["machine"], old, new, float(before), float(after),
                                    int(new_revision), regressions_page.graph_url(benchmark, {**machine, **params},
                                                                                  commits)))
    found.sort(key=lambda r: (-r.revision, -r.ratio, r.benchmark))
    return found[:LATEST_REGRESSIONS]


# --- figures ---------------------------------------------------------------


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")  # files only: no display needed
    import matplotlib.pyplot as plt

    return plt


def _nothing(ax: Any, what: str) -> None:
    ax.text(0.5, 0.5, f"no {what} results", ha="center", va="center", transform=ax.transAxes, color="#777")
    ax.set_xticks([])
    ax.set_yticks([])


def _batch_note(point: Point) -> str:
    return f"bs {point.workload.batch}" + ("" if point.seed else "*")


def _fallback_footnote(points: Iterable[Point], model: str) -> str:
    seed = seed_batch(model)
    if seed is None:
        return "no seed batch size is registered for this model: the largest batch measured is shown"
    if all(point.seed for point in points):
        return f"batch size {seed} (the seed's)"
    return f"* not measured at the seed's batch size {seed}: the largest batch measured is shown"


def plot_speedup(model: str, found: list[Speedup], out: Path) -> None:
    plt = _pyplot()
    groups = sorted({(s.machine, s.device) for s in found})
    fig, ax = plt.subplots(figsize=(max(6.0, 2.4 * len(groups)), 4.5), layout="constrained")
    width = 0.38
    for offset, kind in ((-width / 2, "training"), (width / 2, "inference")):
        mine = [s for s in found if s.kind == kind]
        if not mine:
            continue
        positions = [groups.index((s.machine, s.device)) + offset for s in mine]
        bars = ax.bar(positions, [s.ratio for s in mine], width, color=KIND_COLORS[kind], label=kind)
        ax.bar_label(bars, labels=[f"{s.ratio:.2f}x\n{_batch_note(s.gpu)} / cpu {_batch_note(s.cpu)}" for s in mine],
                     fontsize=7, padding=2)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(groups)), [f"{machine}\n{device}" for machine, device in groups])
    ax.set_xlim(-0.6, len(groups) - 0.4)  # a lone bar keeps its width
    ax.set_ylabel("speedup over cpu (samples/s ratio)")
    ax.set_title(f"{model}: GPU speedup over cpu, newest build per machine")
    ax.margins(y=0.25)
    ax.legend()
    fig.supxlabel(_fallback_footnote([p for s in found for p in (s.gpu, s.cpu)], model), fontsize=8)
    fig.savefig(out, dpi=110)
    plt.close(fig)


def plot_machines(model: str, points: list[Point], out: Path) -> None:
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(KINDS), figsize=(11, 4.5), layout="constrained", squeeze=False)
    for ax, kind in zip(axes[0], KINDS):
        mine = sorted((p for p in points if p.workload.kind == kind), key=lambda p: (p.machine, p.workload.device))
        ax.set_title(f"{model} {kind}")
        if not mine:
            _nothing(ax, kind)
            continue
        bars = ax.bar(range(len(mine)), [p.samples_per_second for p in mine],
                      color=[DEVICE_COLORS.get(p.workload.device, "#9467bd") for p in mine])
        ax.bar_label(bars, labels=[f"{_fmt(p.samples_per_second)}\n{_batch_note(p)}" for p in mine], fontsize=7)
        ax.set_xticks(range(len(mine)), [f"{p.machine}\n{p.workload.device}" for p in mine], fontsize=8)
        ax.set_xlim(-0.6, max(len(mine), 3) - 0.4)  # a lone bar keeps a bar's width
        ax.set_ylabel("samples/s (higher is better)")
        ax.margins(y=0.2)
    fig.supxlabel(_fallback_footnote(points, model), fontsize=8)
    fig.savefig(out, dpi=110)
    plt.close(fig)


def plot_batches(model: str, curves: dict[tuple[str, str, str, str], list[tuple[int, float]]], out: Path) -> None:
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(KINDS), figsize=(11, 4.5), layout="constrained", squeeze=False)
    lines = sorted({(machine, device) for (m, _, machine, device) in curves if m == model})
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, kind in zip(axes[0], KINDS):
        batches_seen: set[int] = set()
        for index, (machine, device) in enumerate(lines):
            points = curves.get((model, kind, machine, device))
            if not points:
                continue
            batches, values = zip(*points)
            batches_seen.update(batches)
            ax.plot(batches, values, marker="o", label=f"{machine} {device}", color=colors[index % len(colors)],
                    linestyle="--" if device == CPU else "-")  # dashed: the cpu baseline
        ax.set_title(f"{model} {kind}")
        if not batches_seen:
            _nothing(ax, kind)
            continue
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(sorted(batches_seen), [str(b) for b in sorted(batches_seen)])
        ax.minorticks_off()
        ax.set_xlabel("batch size")
        ax.set_ylabel("samples/s")
        ax.legend(fontsize=8)
    fig.savefig(out, dpi=110)
    plt.close(fig)


# --- the whole report ------------------------------------------------------


FALLBACK_NOTE = "bs N*: not the seed's batch size, which that device has no result for: its largest batch."


def _fmt(value: float) -> str:
    return f"{value:,.0f}" if value >= 1000 else f"{value:.4g}"


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.4g}"


Save = Callable[[str], Path]  # names a file of the output folder, announces and records it


def _builds_section(results: Results, results_dir: Path, timeline: Timeline, limit: float) -> Section:
    rows: list[list[Cell]] = []
    for machine in results.machines:
        builds = results.builds(machine)
        rows.append([machine, timeline.label(builds[-1]), timeline.label(builds[-2]) if len(builds) > 1 else "-"])
    return Section("Builds", [
        f"From {results.files} results files in {results_dir}; every figure uses each machine's newest build. "
        f"Throughput is batch size over asv's median step time. Regression factor {limit:g} "
        "(asv.conf.json regressions_thresholds).",
        Table(["machine", "newest build", "previous build"], rows),
    ])


def _speedup_section(results: Results, save: Save) -> Section:
    found = speedups(results)
    if not found:
        return Section("GPU speedup over cpu", ["No machine has both GPU and cpu results."])
    blocks: list[Block] = []
    for model in sorted({s.model for s in found}, key=models_in(results).index):
        plot_speedup(model, [s for s in found if s.model == model], save(f"speedup_{model}.png"))
        blocks.append(Image(f"speedup_{model}.png", f"{model} speedup over cpu"))
    blocks.append(Table(
        ["model", "kind", "machine", "device", "batch", "cpu batch", "samples/s", "cpu samples/s", "speedup"],
        [[s.model, s.kind, s.machine, s.device, _batch_note(s.gpu), _batch_note(s.cpu),
          _fmt(s.gpu.samples_per_second), _fmt(s.cpu.samples_per_second), f"{s.ratio:.2f}x"] for s in found],
    ))
    blocks.append(FALLBACK_NOTE)
    return Section("GPU speedup over cpu", blocks)


def _machines_section(results: Results, save: Save) -> Section:
    points = across_machines(results)
    blocks: list[Block] = []
    for model in models_in(results):
        mine = [p for p in points if p.workload.model == model]
        if mine:
            plot_machines(model, mine, save(f"machines_{model}.png"))
            blocks.append(Image(f"machines_{model}.png", f"{model} across machines"))
    blocks.append(Table(
        ["model", "kind", "machine", "device", "batch", "samples/s", "build"],
        [[p.workload.model, p.workload.kind, p.machine, p.workload.device, _batch_note(p),
          _fmt(p.samples_per_second), p.commit[:8]] for p in points],
    ))
    blocks.append(FALLBACK_NOTE)
    return Section("Across machines", blocks)


def _batches_section(results: Results, save: Save) -> Section:
    curves = batch_curves(results)
    blocks: list[Block] = []
    for model in models_in(results):
        if any(key[0] == model for key in curves):
            plot_batches(model, curves, save(f"batches_{model}.png"))
            blocks.append(Image(f"batches_{model}.png", f"{model} throughput across batch sizes"))
    blocks.append(Table(
        ["model", "kind", "machine", "device", "batch", "samples/s"],
        [[model, kind, machine, device, str(batch), _fmt(value)]
         for (model, kind, machine, device), values in sorted(curves.items()) for batch, value in values],
    ))
    return Section("Throughput across batch sizes", blocks)


def _judged(changes: list[Change], results_dir: Path, rules: Any) -> list[str]:
    """Each change's verdict by the one rule (mpsbench.regressions.thresholds), from the statistics asv recorded."""
    from mpsbench.regressions import thresholds
    from mpsbench.results import recorded

    found = recorded.load(results_dir, strict=False)
    verdicts = []
    for c in changes:
        w = c.workload
        row = recorded.Row(f"{CLASSES[w.kind]}.{TIME}", (repr(w.device), repr(w.model), str(w.batch)))
        old, new = found.get(c.machine, c.old, row), found.get(c.machine, c.new, row)
        judged = thresholds.judge(rules, row.entry, "seconds", old, new) if old and new else None
        verdicts.append(judged.verdict if judged and judged.verdict != "unchanged" else "")
    return verdicts


def _changes_section(results: Results, results_dir: Path, rules: Any) -> Section:
    changes = build_changes(results)
    log.info(f"comparing each machine's newest two builds: {len(changes)} workloads")
    if not changes:
        return Section("Build over build", ["No machine has results for two builds yet."])
    verdicts = _judged(changes, results_dir, rules)
    return Section("Build over build", [
        "Step time of each machine's newest build over its previous one, each row judged with the statistics asv "
        "recorded and its own threshold (docs/site.md); slower and faster are highlighted, noisy and not "
        "significant are said.",
        Table(["machine", "kind", "model", "device", "batch", "old ms", "new ms", "new/old", "change"],
              [[c.machine, c.workload.kind, c.workload.model, c.workload.device, str(c.workload.batch),
                _ms(c.old_seconds), _ms(c.new_seconds), f"{c.ratio:.3f}", mark]
               for c, mark in zip(changes, verdicts)],
              [mark if mark in ("slower", "faster") else "" for mark in verdicts]),
    ])


def build(results_dir: Path, out_dir: Path, config: Path | None = None, site: Path | None = None) -> list[Path]:
    """Write the figures, summary.md and summary.html into ``out_dir``; return the files written.

    ``config`` (default: ./asv.conf.json if present) gives the regression
    factor and the timeline repository; ``site`` (the published html_dir) the
    regressions asv detected.
    """
    from mpsbench.regressions import thresholds

    log.info(f"reading results from {results_dir}")
    results = load(results_dir)
    config = config if config is not None else (factor.CONFIG if factor.CONFIG.is_file() else None)
    # without any asv.conf.json, asv's own default threshold applies
    limit = factor.regression_factor(config) if config is not None else 1 + factor.ASV_DEFAULT_THRESHOLD
    timeline = timeline_from_config(config)
    log.info(f"{results.files} results files, {len(results.machines)} machines, {len(results.dates)} builds")
    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []

    def save(name: str) -> Path:
        path = out_dir / name
        log.info(f"writing {path}")
        written.append(path)
        return path

    sections = [
        _builds_section(results, results_dir, timeline, limit),
        _speedup_section(results, save),
        _by_release_section(results_dir, timeline, save),
        _machines_section(results, save),
        _batches_section(results, save),
        *_modern_sections(results_dir, save),
        _changes_section(results, results_dir, thresholds.Rules.from_config(config)),
        _regressions_section(site, timeline),
    ]
    title = "mpsbench: the seeds' figures"
    save("summary.md").write_text(to_markdown(title, sections), encoding="utf-8")
    save("summary.html").write_text(to_html(title, sections), encoding="utf-8")
    log.info(f"done: {len(written)} files in {out_dir}")
    return written


def _pytorch_cell(timeline: Timeline, old: str | None, new: str) -> Cell:
    old_version = timeline.git_version(old) if old else None
    new_version = timeline.git_version(new)
    if not (old_version and new_version):
        return "git_version unknown"
    if old_version == new_version:  # two builds of one upstream commit: nothing to compare
        return Link(f"{new_version[:12]} (both builds)", f"https://github.com/pytorch/pytorch/commit/{new_version}")
    return Link(f"{old_version[:12]}...{new_version[:12]}", COMPARE_URL.format(old=old_version, new=new_version))


def set_aside(site: Path) -> list[dict[str, Any]]:
    """The jumps asv found that regressions_page judged not to be regressions, with the reason for each."""
    from mpsbench.site import regressions_page

    try:
        judged = json.loads((site / regressions_page.JUDGED).read_text())
    except (OSError, ValueError):
        return []
    return [j for j in judged if j.get("verdict") != "slower"]


# --- MPS speedup over cpu by release ----------------------------------------------

RELEASE_URL = "https://github.com/pytorch/pytorch/releases/tag/v{version}"
UPSTREAM_COMMIT_URL = "https://github.com/pytorch/pytorch/commit/{git_version}"
BY_RELEASE_DEVICE = "mps"


@dataclass(frozen=True)
class ReleasePoint:
    """One build's mps-over-cpu speedup for a model, under one Python on one machine."""

    python: str
    machine: str
    kind: str
    model: str
    torch_version: str
    date_ms: int
    link: str  # the PyTorch release page; a nightly or local build: its upstream commit
    ratio: float


def _build_link(timeline: Timeline, commit: str, torch_version: str) -> str:
    if re.search(r"^kind: release$", timeline.message(commit), re.MULTILINE):
        return RELEASE_URL.format(version=torch_version)
    git_version = timeline.git_version(commit)
    return UPSTREAM_COMMIT_URL.format(git_version=git_version) if git_version else ""


def speedup_by_release(results_dir: Path, timeline: Timeline, device: str = BY_RELEASE_DEVICE) -> list[ReleasePoint]:
    """Every build's ``device`` speedup over cpu (seed batch, as in the speedup figure), per Python."""
    from asv import results as asv_results

    pythons = sorted({str(r.params.get("python")) for r in asv_results.iter_results(str(results_dir))})
    found = []
    for python in pythons:
        results = load(results_dir, python)
        for machine in results.machines:
            for commit in results.builds(machine):
                found_version = re.search(r"^torch_version:\s*(\S+)", timeline.message(commit), re.MULTILINE)
                version = found_version.group(1) if found_version else commit[:8]
                for model, kind in itertools.product(models_in(results), KINDS):
                    gpu = pick(results, machine, commit, kind, model, device)
                    cpu = pick(results, machine, commit, kind, model, CPU)
                    if gpu and cpu:
                        found.append(ReleasePoint(
                            python, machine, kind, model, version, results.dates.get(commit, 0),
                            _build_link(timeline, commit, version), gpu.samples_per_second / cpu.samples_per_second,
                        ))
    return found


def plot_by_release(points: list[ReleasePoint], out: Path) -> None:
    """Speedup along the builds' dates, one line per model, kind, machine and Python; releases named."""
    from datetime import datetime, timezone

    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(11, 5), layout="constrained")
    for key in sorted({(p.model, p.kind, p.machine, p.python) for p in points}):
        line = sorted((p for p in points if (p.model, p.kind, p.machine, p.python) == key), key=lambda p: p.date_ms)
        when = [datetime.fromtimestamp(p.date_ms / 1000, tz=timezone.utc) for p in line]
        ax.plot(when, [p.ratio for p in line], marker="o", label=f"{key[0]} {key[1]}, {key[2]}, python {key[3]}")
        for moment, point in zip(when, line):
            ax.annotate(point.torch_version, (moment, point.ratio), fontsize=7, rotation=45,
                        textcoords="offset points", xytext=(0, 6))
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_ylabel(f"{BY_RELEASE_DEVICE} speedup over cpu (samples/s ratio)")
    ax.set_title(f"{BY_RELEASE_DEVICE.upper()} speedup over cpu by release")
    ax.legend(fontsize=7)
    fig.savefig(out, dpi=110)
    plt.close(fig)


def _by_release_section(results_dir: Path, timeline: Timeline, save: Save) -> Section:
    title = f"{BY_RELEASE_DEVICE.upper()} speedup over cpu by release"
    points = speedup_by_release(results_dir, timeline)
    if not points:
        return Section(title, [f"No build has both {BY_RELEASE_DEVICE} and cpu results."])
    plot_by_release(points, save("speedup_by_release.png"))
    return Section(title, [
        Image("speedup_by_release.png", title),
        "Each build at its date; each line one Python (the era needs two: no Python has wheels for every"
        " release), so a build measured under both shows the seam. Each version links to its PyTorch release.",
        Table(["torch", "python", "machine", "model", "kind", "speedup"],
              [[Link(p.torch_version, p.link) if p.link else p.torch_version, p.python, p.machine, p.model,
                p.kind, f"{p.ratio:.2f}x"] for p in sorted(points, key=lambda p: (p.date_ms, p.python))]),
    ])


def _modern_sections(results_dir: Path, save: Save) -> list[Section]:
    """Eager against compiled, and the Llama's tokens/s (mpsbench.site.report_modern, which builds on this module)."""
    from mpsbench.site import report_modern

    return [report_modern.compile_section(results_dir, save), report_modern.tokens_section(results_dir, save)]


def _regressions_section(site: Path | None, timeline: Timeline) -> Section:
    title = "Latest regressions asv detected"
    if site is None:
        return Section(title, ["Not read: pass --site with the published html_dir."])
    found = regressions(site, timeline)
    blocks: list[Block] = []
    if not found:
        blocks.append("No regression: asv detected none, or none held up row by row (below).")
    else:
        rows: list[list[Cell]] = []
        for r in found:
            builds = f"{r.old_commit[:8]}..{r.new_commit[:8]}" if r.old_commit else r.new_commit[:8]
            rows.append([r.benchmark, Link("graph", f"../{r.graph}"), r.params, f"{r.ratio:.2f}x", builds,
                         _pytorch_cell(timeline, r.old_commit, r.new_commit)])
        blocks += [
            "From the site's regressions.json (the Regressions tab and the regressions.xml feed hold the same),"
            " after each jump was judged row by row with its recorded statistics (docs/site.md); newest first.",
            Table(["benchmark", "graph", "machine", "after/before", "builds", "PyTorch commits"], rows),
        ]
    aside = set_aside(site)
    if aside:
        blocks += [
            f"{len(aside)} jumps asv's single threshold flagged are not regressions by the row's own rule:",
            Table(["benchmark", "graph", "machine", "verdict", "why"],
                  [[j["benchmark"], Link("graph", f"../{j['graph']}"), str(j["machine"]), j["verdict"], j["reason"]]
                   for j in aside[:LATEST_REGRESSIONS * 5]]),
        ]
    return Section(title, blocks)


# --- command line ----------------------------------------------------------


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("results_dir", type=Path, help="asv's results directory (results_dir in asv.conf.json)")
    parser.add_argument("out_dir", type=Path, help="where the PNGs, summary.md and summary.html go")
    parser.add_argument("--config", type=Path, default=None,
                        help="asv.conf.json: the regression factor and the timeline repository "
                             "(default: ./asv.conf.json if present)")
    parser.add_argument("--site", type=Path, default=None,
                        help="the published html_dir, to list the regressions asv detected")


ERRORS = (ReportError, factor.FactorError)  # the user's mistakes: one line, exit 2 (mpsbench.command)


def run(args: argparse.Namespace) -> int:
    build(args.results_dir, args.out_dir, args.config, args.site)
    return 0


def add_subcommand(commands: Any) -> None:
    """Register ``mpsbench report`` on the CLI's subparsers (the CLI's errors include ERRORS)."""
    parser = commands.add_parser("report", help="figures and a summary from an asv results directory")
    _arguments(parser)
    parser.set_defaults(func=run)


def main(argv: Sequence[str] | None = None) -> int:
    parser = command.OneLineParser(prog="python -m mpsbench.site.report", description=__doc__.split("\n", 1)[0])
    _arguments(parser)
    parser.set_defaults(func=run)
    return command.run(parser, argv, ERRORS)


if __name__ == "__main__":
    # Run the imported module, not __main__: report_modern builds its sections from mpsbench.site.report's
    # classes, and a second copy of this module (as __main__) would not recognise them as its own.
    from mpsbench.site import report as imported

    sys.exit(imported.main())
