"""The figures page's issue-21 sections: eager against torch.compile, and the small Llama's tokens per second.

Read from the same asv results as the seeds' figures (mpsbench.site.report), each
machine's newest build. Eager against compiled: benchmark_compile's
``time_step`` beside the eager ``time_step`` of the same device and model at
the model's seed batch size (benchmark_models for the seeds' models,
benchmark_modern for the others), with the compile time. Tokens per second:
``LlmDecode.time_decode`` is seconds per decoded token at batch 1, so its
inverse; ``LlmPrefill.time_prefill`` is the time to the first token.
"""

from __future__ import annotations

import ast
import itertools
from dataclasses import dataclass
from pathlib import Path

from mpsbench.measure import models
from mpsbench.site import document, report

COMPILED = {"training": "benchmark_compile.CompiledTraining", "inference": "benchmark_compile.CompiledInference"}
EAGER = {
    "training": ("benchmark_models.Training.time_step", "benchmark_modern.ModernTraining.time_step"),
    "inference": ("benchmark_models.Inference.time_step", "benchmark_modern.ModernInference.time_step"),
}
PREFILL = "benchmark_modern.LlmPrefill.time_prefill"
DECODE = "benchmark_modern.LlmDecode.time_decode"
Row = tuple[str, str, dict[str, object], float]  # machine, commit, params by name, value


def read(results_dir: Path, names: set[str]) -> dict[str, list[Row]]:
    """Every finite positive value of the named benchmarks, each machine's newest build only."""
    from asv import results as asv_results

    param_names = report._param_names(results_dir)
    found: dict[str, list[Row]] = {name: [] for name in names}
    newest: dict[str, tuple[int, str]] = {}
    for result in asv_results.iter_results(str(results_dir)):
        machine, commit = result.params["machine"], result.commit_hash
        newest[machine] = max(newest.get(machine, (0, "")), (int(result.date or 0), commit))
        keys = set(result.get_all_result_keys())
        for name in names & keys:
            params = result.get_result_params(name)
            order = param_names.get(name) or ()
            values = result.get_result_value(name, params) or []
            for combination, value in zip(itertools.product(*params), values):
                number = report._number(value)
                if number is not None:
                    named = dict(zip(order, (ast.literal_eval(text) for text in combination)))
                    found[name].append((machine, commit, named, number))
    return {name: [row for row in rows if newest[row[0]][1] == row[1]] for name, rows in found.items()}


@dataclass(frozen=True)
class Pair:
    machine: str
    kind: str
    device: str
    model: str
    eager: float  # seconds per step
    compiled: float
    compile_seconds: float | None

    @property
    def speedup(self) -> float:
        return self.eager / self.compiled


def pairs(results_dir: Path) -> list[Pair]:
    names = {f"{cls}.{method}" for cls in COMPILED.values() for method in ("time_step", "track_compile_seconds")}
    names |= {name for eager in EAGER.values() for name in eager}
    rows = read(results_dir, names)
    found = []
    for kind, cls in COMPILED.items():
        compile_seconds = {(m, p["device"], p["model"]): v for m, _, p, v in rows[f"{cls}.track_compile_seconds"]}
        eager = {(m, p["device"], p["model"], p["batch_size"]): v for name in EAGER[kind] for m, _, p, v in rows[name]}
        for machine, _, params, seconds in rows[f"{cls}.time_step"]:
            device, model = str(params["device"]), str(params["model"])
            twin = eager.get((machine, device, model, report.seed_batch(model)))
            if twin is not None:
                found.append(Pair(machine, kind, device, model, twin, seconds,
                                  compile_seconds.get((machine, device, model))))
    return sorted(found, key=lambda p: (p.machine, p.device, p.kind, p.model))


def plot_compile(found: list[Pair], out: Path) -> None:
    plt = report._pyplot()
    fig, ax = plt.subplots(figsize=(max(6.0, 1.2 * len(found)), 4.5), layout="constrained")
    width = 0.38
    labels = [f"{p.model}\n{p.kind}\n{p.machine} {p.device}" for p in found]
    for offset, mode, color in ((-width / 2, "eager", "#7f7f7f"), (width / 2, "compiled", "#ff7f0e")):
        values = [getattr(p, mode) * 1e3 for p in found]
        bars = ax.bar([i + offset for i in range(len(found))], values, width, color=color, label=mode)
        if mode == "compiled":
            ax.bar_label(bars, labels=[f"{p.speedup:.2f}x" for p in found], fontsize=7, padding=2)
    ax.set_xticks(range(len(found)), labels, fontsize=7)
    ax.set_yscale("log")
    ax.set_ylabel("ms per step (lower is better)")
    ax.set_title("eager against torch.compile (inductor), seed batch, newest build per machine")
    ax.legend()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def compile_section(results_dir: Path, save: report.Save) -> document.Section:
    title = "Eager against torch.compile"
    found = pairs(results_dir)
    if not found:
        return document.Section(title, ["No machine has compiled results beside eager ones (benchmark_compile)."])
    plot_compile(found, save("compile.png"))
    return document.Section(title, [
        document.Image("compile.png", "eager against compiled step times"),
        "Speedup is eager over compiled step time; compile time is the compiled step's first call.",
        document.Table(["machine", "device", "kind", "model", "eager ms", "compiled ms", "speedup", "compile s"],
                     [[p.machine, p.device, p.kind, p.model, report._ms(p.eager), report._ms(p.compiled),
                       f"{p.speedup:.2f}x", "-" if p.compile_seconds is None else f"{p.compile_seconds:.1f}"]
                      for p in found]),
    ])


def tokens_section(results_dir: Path, save: report.Save) -> document.Section:
    sizes = models.LLAMA_GENERATION  # the fixed batch, prompt and token count the rows were measured at

    title = "Small Llama: tokens per second"
    rows = read(results_dir, {PREFILL, DECODE})
    prefill = {(m, p["device"], p["model"]): v for m, _, p, v in rows[PREFILL]}
    decode = sorted(((m, str(p["device"]), str(p["model"]), v) for m, _, p, v in rows[DECODE]))
    if not decode:
        return document.Section(title, ["No machine has decode results (benchmark_modern.LlmDecode)."])
    plt = report._pyplot()
    fig, ax = plt.subplots(figsize=(max(6.5, 1.6 * len(decode)), 4.0), layout="constrained")
    speeds = [sizes['batch'] / seconds for _, _, _, seconds in decode]
    bars = ax.bar(range(len(decode)), speeds, color=[report.DEVICE_COLORS.get(d, "#9467bd") for _, d, _, _ in decode])
    ax.bar_label(bars, labels=[f"{s:.1f}" for s in speeds], fontsize=8)
    ax.set_xticks(range(len(decode)), [f"{m}\n{d}" for m, d, _, _ in decode], fontsize=8)
    ax.set_ylabel("decoded tokens/s (higher is better)")
    ax.set_title(f"{models.LLAMA_NAME}: greedy decode after a {sizes['prompt_tokens']}-token prompt, batch {sizes['batch']}",
                 fontsize=10)  # the title fits the narrowest figure (one or two machines)
    fig.savefig(save("tokens.png"), dpi=110)
    plt.close(fig)
    table: list[list[document.Cell]] = [[m, d, model, f"{sizes['batch'] / seconds:.1f}", report._ms(seconds),
              "-" if (m, d, model) not in prefill else report._ms(prefill[(m, d, model)])]
             for m, d, model, seconds in decode]
    return document.Section(title, [
        document.Image("tokens.png", "decode tokens per second"),
        f"Decode: {sizes['new_tokens']} new tokens through the KV cache; prefill: the {sizes['prompt_tokens']}-token prompt "
        "(time to first token).",
        document.Table(["machine", "device", "model", "tokens/s", "ms/token", "prefill ms"], table),
    ])
