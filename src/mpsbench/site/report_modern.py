"""The figures page's issue-21 sections: eager against torch.compile, and the small Llama's tokens per second.

Each machine's newest build: compiled ``time_step`` beside the eager one at the seed batch (benchmark_models or
benchmark_modern); tokens/s is batch over ``LlmDecode.time_decode``, prefill the time to the first token.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from mpsbench.measure import models
from mpsbench.site import figures
from mpsbench.site.document import Cell, Image, Section, Table
from mpsbench.site.throughput import Results, seed_batch

COMPILED = {"training": "benchmark_compile.CompiledTraining", "inference": "benchmark_compile.CompiledInference"}
EAGER = {
    "training": ("benchmark_models.Training.time_step", "benchmark_modern.ModernTraining.time_step"),
    "inference": ("benchmark_models.Inference.time_step", "benchmark_modern.ModernInference.time_step"),
}
PREFILL = "benchmark_modern.LlmPrefill.time_prefill"
DECODE = "benchmark_modern.LlmDecode.time_decode"


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


def pairs(results: Results) -> list[Pair]:
    names = {f"{cls}.{method}" for cls in COMPILED.values() for method in ("time_step", "track_compile_seconds")}
    names |= {name for eager in EAGER.values() for name in eager}
    rows = results.newest(names)
    found = []
    for kind, cls in COMPILED.items():
        compile_seconds = {(m, p["device"], p["model"]): v for m, p, v in rows[f"{cls}.track_compile_seconds"]}
        eager = {(m, p["device"], p["model"], p["batch_size"]): v for name in EAGER[kind] for m, p, v in rows[name]}
        for machine, params, seconds in rows[f"{cls}.time_step"]:
            device, model = str(params["device"]), str(params["model"])
            twin = eager.get((machine, device, model, seed_batch(model)))
            if twin is not None:
                found.append(Pair(machine, kind, device, model, twin, seconds,
                                  compile_seconds.get((machine, device, model))))
    return sorted(found, key=lambda p: (p.machine, p.device, p.kind, p.model))


def plot_compile(found: list[Pair], out: Path) -> None:
    figures.compile_pairs([f"{p.model}\n{p.kind}\n{p.machine} {p.device}" for p in found], [p.eager * 1e3 for p in found],
                          [p.compiled * 1e3 for p in found], [p.speedup for p in found], out)


def compile_section(results: Results, save: figures.Save) -> Section:
    title = "Eager against torch.compile"
    found = pairs(results)
    if not found:
        return Section(title, ["No machine has compiled results beside eager ones (benchmark_compile)."])
    plot_compile(found, save("compile.png"))
    return Section(title, [
        Image("compile.png", "eager against compiled step times"),
        "Speedup is eager over compiled step time; compile time is the compiled step's first call.",
        Table(["machine", "device", "kind", "model", "eager ms", "compiled ms", "speedup", "compile s"],
              [[p.machine, p.device, p.kind, p.model, figures.ms(p.eager), figures.ms(p.compiled), f"{p.speedup:.2f}x",
                "-" if p.compile_seconds is None else f"{p.compile_seconds:.1f}"] for p in found]),
    ])


def tokens_section(results: Results, save: figures.Save) -> Section:
    sizes = models.LLAMA_GENERATION  # the fixed batch, prompt and token count the rows were measured at
    title = "Small Llama: tokens per second"
    rows = results.newest({PREFILL, DECODE})
    prefill = {(m, p["device"], p["model"]): v for m, p, v in rows[PREFILL]}
    decode = sorted((m, str(p["device"]), str(p["model"]), v) for m, p, v in rows[DECODE])
    if not decode:
        return Section(title, ["No machine has decode results (benchmark_modern.LlmDecode)."])
    figures.tokens([(m, d) for m, d, _, _ in decode], [sizes["batch"] / seconds for _, _, _, seconds in decode],
                   f"{models.LLAMA_NAME}: greedy decode after a {sizes['prompt_tokens']}-token prompt, batch {sizes['batch']}",
                   save("tokens.png"))
    table: list[list[Cell]] = [[m, d, model, f"{sizes['batch'] / seconds:.1f}", figures.ms(seconds),
                                figures.ms(prefill[(m, d, model)]) if (m, d, model) in prefill else "-"]
                               for m, d, model, seconds in decode]
    return Section(title, [
        Image("tokens.png", "decode tokens per second"),
        f"Decode: {sizes['new_tokens']} new tokens through the KV cache; prefill: the {sizes['prompt_tokens']}-token prompt "
        "(time to first token).",
        Table(["machine", "device", "model", "tokens/s", "ms/token", "prefill ms"], table),
    ])
