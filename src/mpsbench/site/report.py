"""The figures page (summary.md, summary.html) of a results directory."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from mpsbench.builds.timeline import Reader, pytorch_url
from mpsbench.core import asv, progress
from mpsbench.core.asvconf import AsvConf
from mpsbench.core.document import (
    Block,
    Cell,
    Flagged,
    Image,
    Link,
    Section,
    Table,
    to_html,
    to_markdown,
)
from mpsbench.core.errors import UserError
from mpsbench.measure import models, tolerances
from mpsbench.regressions import rule
from mpsbench.results import recorded
from mpsbench.site import figures, regressions_page
from mpsbench.site import throughput as tp
from mpsbench.site.figures import Save, ms, number

ERRORS = (
    "benchmark_patterns.Correctness.track_relative_error",
    "benchmark_patterns.ReportedCorrectness.track_relative_error",
)
DIFFERENCES = "benchmark_patterns.Determinism.track_largest_difference"
CORRECTNESS_BUILDS = 12
PREFILL = "benchmark_modern.LlmPrefill.time_prefill"
DECODE = "benchmark_modern.LlmDecode.time_decode"

log = progress.logger(__name__)
T = TypeVar("T")


def _table(columns: str, rows: Iterable[Sequence[Cell]], marked: list[str] | None = None) -> Table:
    return Table(columns.split(", "), [list(row) for row in rows], marked or [])


def _per_model(
    save: Save,
    name: str,
    what: str,
    items: Sequence[T],
    model: Callable[[T], str],
    draw: Callable[[str, list[T], Path], Any],
) -> list[Block]:
    drawn = sorted({model(item) for item in items}, key=lambda name: tp.ranked(name, models.NAMES))
    for each in drawn:
        draw(each, [item for item in items if model(item) == each], save(f"{name}_{each}.png"))
    return [Image(f"{name}_{each}.png", f"{each} {what}") for each in drawn]


def _builds(results: tp.Results, results_dir: Path, timeline: Reader, limit: float) -> list[Block]:
    rows = []
    for machine in results.machines:
        previous = tp.previous_build(results, machine, timeline)
        label = timeline.label(previous) if previous else "-"
        rows.append([machine, timeline.label(results.builds(machine)[-1]), label])
    return [
        f"{results.recorded.files} results files in {results_dir}; figures: each machine's newest"
        f" build; throughput: batch size over asv's median step time; regression factor {limit:g}"
        " (regressions_thresholds).",
        _table("machine, newest build, previous build", rows),
    ]


def _speedup(results: tp.Results, save: Save) -> list[Block]:
    if not (found := tp.speedups(results)):
        return ["No machine has both GPU and cpu results."]
    rows = [
        [
            s.model,
            s.kind,
            s.machine,
            s.device,
            s.gpu.step.batch_note,
            s.cpu.step.batch_note,
            number(s.gpu.samples_per_second),
            number(s.cpu.samples_per_second),
            f"{s.ratio:.2f}x",
        ]
        for s in found
    ]
    return [
        *_per_model(save, "speedup", "speedup over cpu", found, lambda s: s.model, figures.speedup),
        _table(
            "model, kind, machine, device, batch, cpu batch, samples/s, cpu samples/s, speedup",
            rows,
        ),
        tp.FALLBACK_NOTE,
    ]


def _machines(results: tp.Results, save: Save) -> list[Block]:
    points = tp.across_machines(results)
    rows = [
        [
            p.step.model,
            p.step.kind,
            p.machine,
            p.step.device,
            p.step.batch_note,
            number(p.samples_per_second),
            p.commit[:8],
        ]
        for p in points
    ]
    return [
        *_per_model(
            save,
            "machines",
            "across machines",
            points,
            lambda p: p.step.model,
            figures.machines,
        ),
        _table("model, kind, machine, device, batch, samples/s, build", rows),
        tp.FALLBACK_NOTE,
    ]


def _batches(results: tp.Results, save: Save) -> list[Block]:
    curves = sorted(tp.batch_curves(results).items())
    rows = [[*key, str(batch), number(value)] for key, values in curves for batch, value in values]
    images = _per_model(
        save,
        "batches",
        "throughput across batch sizes",
        curves,
        lambda curve: curve[0][0],
        figures.batches,
    )
    return [*images, _table("model, kind, machine, device, batch, samples/s", rows)]


def _release(
    save: Save,
    image: str,
    title: str,
    points: list[tp.ReleasePoint],
    none: str,
    note: str,
    ylabel: str,
    columns: str,
    baseline: float | None,
    value: Callable[[float], str],
) -> list[Block]:
    if not points:
        return [none]
    figures.by_release(points, title, save(image), ylabel, baseline)
    rows = [
        [
            Link(p.torch_version, p.link) if p.link else p.torch_version,
            p.python,
            p.machine,
            p.model,
            p.kind,
            value(p.ratio),
        ]
        for p in sorted(points, key=lambda p: (p.date_ms, p.python, p.machine))
    ]
    return [Image(image, title), note, _table(columns, rows)]


def _compile(results: tp.Results, save: Save) -> list[Block]:
    if not (found := tp.eager_and_compiled(results)):
        return ["No machine has compiled results beside eager ones (benchmark_compile)."]
    figures.compile_pairs(found, save("compile.png"))
    rows = [
        [
            p.machine,
            p.device,
            p.kind,
            p.model,
            ms(p.eager),
            ms(p.compiled),
            f"{p.speedup:.2f}x",
            "-" if p.compile_seconds is None else f"{p.compile_seconds:.1f}",
        ]
        for p in found
    ]
    return [
        Image("compile.png", "eager against compiled step times"),
        "Speedup: eager over compiled step time; compile s: the compiled step's first call.",
        _table("machine, device, kind, model, eager ms, compiled ms, speedup, compile s", rows),
    ]


def _correctness_cell(
    found: recorded.Recorded, machine: str, commit: str, row: recorded.Row
) -> Cell:
    if (measured := found.get(machine, commit, row)) is None:
        return Flagged("failed") if row in found.failed.get((machine, commit), ()) else "-"
    line = 0.0 if row.benchmark == DIFFERENCES else tolerances.tolerance(row.entry)
    shown = f"{measured.value:.2g}"
    return Flagged(shown) if measured.value > line else shown


def _correctness_key(row: recorded.Row) -> tuple[bool, str]:
    device, pattern, dtype = (param.strip("'") for param in row.params)
    difference = row.benchmark == DIFFERENCES
    return difference, f"{pattern} {dtype} on {device}: {'difference' if difference else 'error'}"


def _correctness(found: recorded.Recorded, timeline: Reader) -> list[Block]:
    blocks: list[Block] = []
    for machine in found.machines:
        builds = found.builds(machine)[-CORRECTNESS_BUILDS:]
        rows = {
            row
            for c in builds
            for row in found.values.get((machine, c), {}).keys()
            | found.failed.get((machine, c), set())
            if row.benchmark in (*ERRORS, DIFFERENCES)
        }
        if rows:
            cells = [
                [
                    _correctness_key(row)[1],
                    *(_correctness_cell(found, machine, c, row) for c in builds),
                ]
                for row in sorted(rows, key=_correctness_key)
            ]
            header = ["row", *map(timeline.version, builds)]
            blocks += [f"{machine}, its newest {len(builds)} builds:", Table(header, cells)]
    if not blocks:
        return ["No machine has correctness results (benchmark_patterns)."]
    limits = ", ".join(f"{dtype} {limit:g}" for dtype, limit in tolerances.TOLERANCES.items())
    return [
        f"Error: relative to float64, red past the dtype's tolerance ({limits}); difference:"
        " between identical calls, red unless 0; failed: asv recorded a failure, e.g. a crash"
        " (docs/explanation/instruments.md).",
        *blocks,
    ]


def _tokens(results: tp.Results, save: Save) -> list[Block]:
    sizes = models.LLAMA_GENERATION
    batch = sizes["batch"]
    rows = results.newest({PREFILL, DECODE})
    if not (decode := sorted(rows[DECODE].items())):
        return ["No machine has decode results (benchmark_modern.LlmDecode)."]
    figures.tokens(
        [
            (m, device, batch / seconds, f"{batch / seconds:.1f}")
            for (m, device, _), seconds in decode
        ],
        f"{models.LLAMA_NAME}: greedy decode after a {sizes['prompt_tokens']}-token prompt, batch {batch}",
        save("tokens.png"),
    )
    prefill = rows[PREFILL]
    table = [
        [*key, f"{batch / seconds:.1f}", ms(seconds), ms(prefill[key]) if key in prefill else "-"]
        for key, seconds in decode
    ]
    return [
        Image("tokens.png", "decode tokens per second"),
        f"Decode: {sizes['new_tokens']} new tokens through the KV cache; prefill: the prompt"
        " (time to first token).",
        _table("machine, device, model, tokens/s, ms/token, prefill ms", table),
    ]


def _changes(results: tp.Results, thresholds: dict[str, float], timeline: Reader) -> list[Block]:
    changes = tp.build_changes(results, timeline)
    log.info(f"newest build against the one before: {len(changes)} workloads")
    if not changes:
        return ["No machine has results for two builds of one timeline channel yet."]
    judged = [rule.judge(thresholds, c.row.entry, "seconds", c.before, c.after) for c in changes]
    moved = (rule.Decision.SLOWER, rule.Decision.FASTER)
    rows = [
        [
            c.machine,
            c.step.kind,
            c.step.model,
            c.step.device,
            str(c.step.batch),
            ms(c.before.value),
            ms(c.after.value),
            f"{c.ratio:.3f}",
            "" if j.label == rule.Decision.UNCHANGED else j.label,
        ]
        for c, j in zip(changes, judged)
    ]
    return [
        "Each machine's newest step time over its channel's build before, judged by the row's"
        " statistics and threshold (docs/explanation/site.md).",
        _table(
            "machine, kind, model, device, batch, old ms, new ms, new/old, change",
            rows,
            [j.label if j.decision in moved else "" for j in judged],
        ),
    ]


def pytorch_range(timeline: Reader, old: str | None, new: str) -> Cell:
    before = timeline.git_version(old) if old else None
    if not (before and (after := timeline.git_version(new))):
        return "git_version unknown"
    text = f"{after[:12]} (both builds)" if before == after else f"{before[:12]}...{after[:12]}"
    return Link(text, pytorch_url(before, after))


def _regressions(site: Path | None, timeline: Reader) -> list[Block]:
    if site is None:
        return ["Not read: pass --site with the published html_dir."]
    blocks: list[Block] = ["No regression: asv detected none, or none held up row by row."]
    if found := regressions_page.latest(site, timeline):
        rows = [
            [
                j["benchmark"],
                Link("graph", f"../{j['graph']}"),
                j["machine"] or "",
                j["verdict"],
                f"{rule.change_ratio(j['before'], j['after']):.2f}x",
                f"{j['old'][:8]}..{j['new'][:8]}" if j["old"] else j["new"][:8],
                pytorch_range(timeline, j["old"], j["new"]),
                Link("ops", f"../{j['explain']}") if j.get("explain") else "-",
            ]
            for j in found
        ]
        blocks = [
            "The site's Regressions tab, newest first, each jump judged by the row's statistics"
            " (docs/explanation/site.md); explain: the ops that changed, where bisect kept them.",
            _table(
                "benchmark, graph, machine, kind, after/before, builds, PyTorch commits, explain",
                rows,
            ),
        ]
    if aside := regressions_page.set_aside(site):
        rows = [
            [
                j["benchmark"],
                Link("graph", f"../{j['graph']}"),
                str(j["machine"]),
                j["verdict"],
                j["reason"],
            ]
            for j in aside[: regressions_page.LATEST * 5]
        ]
        blocks += [
            f"{len(aside)} jumps asv flagged are no regressions by the row's own rule:",
            _table("benchmark, graph, machine, verdict, why", rows),
        ]
    return blocks


def build(
    results_dir: Path,
    out_dir: Path,
    conf: AsvConf | None = None,
    site: Path | None = None,
    results: tp.Results | None = None,  # results_dir's, read already
) -> None:
    if results is None:
        results = tp.load(results_dir)
    if not (results_dir / asv.BENCHMARKS).is_file():  # e.g. the folder above: no param names
        raise UserError(
            f"{results_dir} holds no {asv.BENCHMARKS}: give the results directory itself"
        )
    thresholds = conf.thresholds if conf else {}
    timeline = Reader(conf.repo if conf else None)
    log.info(
        f"{results.recorded.files} results files, {len(results.machines)} machines, "
        f"{len(results.recorded.dates)} builds"
    )
    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []

    def save(name: str) -> Path:
        written.append(out_dir / name)
        log.info(f"writing {written[-1]}")
        return written[-1]

    each_python = recorded.load_each_python(results_dir, strict=False)
    gpu = tp.BY_RELEASE_DEVICE
    speedups, joules = f"{gpu.upper()} speedup over cpu by release", "Samples per joule by release"
    sections = {
        "Builds": _builds(results, results_dir, timeline, rule.factor(thresholds)),
        "GPU speedup over cpu": _speedup(results, save),
        speedups: _release(
            save,
            "speedup_by_release.png",
            speedups,
            tp.speedup_by_release(each_python, timeline),
            f"No build has both {gpu} and cpu results.",
            "Each build at its date, a line per Python; each version links to its release.",
            f"{gpu} speedup over cpu (samples/s ratio)",
            "torch, python, machine, model, kind, speedup",
            1.0,
            lambda ratio: f"{ratio:.2f}x",
        ),
        "Correctness by release": _correctness(results.recorded, timeline),
        joules: _release(
            save,
            "samples_per_joule.png",
            joules,
            tp.samples_per_joule(each_python, timeline),
            "No build has energy results (*Capacity.track_joules_per_step).",
            "The seed batch over the joules per step (cuda: NVML; mps: IOReport; Linux cpu: RAPL)"
            " by build date (docs/explanation/instruments.md).",
            "samples per joule (higher is better)",
            "torch, python, machine and device, model, kind, samples/J",
            None,
            number,
        ),
        "Across machines": _machines(results, save),
        "Throughput across batch sizes": _batches(results, save),
        "Eager against torch.compile": _compile(results, save),
        "Small Llama: tokens per second": _tokens(results, save),
        "Build over build": _changes(results, thresholds, timeline),
        "Latest regressions asv detected": _regressions(site, timeline),
    }
    title = "mpsbench: the seeds' figures"
    document = [Section(heading, blocks) for heading, blocks in sections.items()]
    save("summary.md").write_text(to_markdown(title, document), "utf-8")
    save("summary.html").write_text(to_html(title, document), "utf-8")
    log.info(f"done: {len(written)} files in {out_dir}")
