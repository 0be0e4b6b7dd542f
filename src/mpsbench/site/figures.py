"""The figures page's charts, as matplotlib PNGs."""

from __future__ import annotations

import contextlib
import itertools
import operator
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from mpsbench.site.throughput import (
    CPU,
    KINDS,
    Pair,
    Point,
    ReleasePoint,
    Speedup,
    seed_batch,
)

DEVICE_COLORS = {"cpu": "#7f7f7f", "mps": "#1f77b4", "cuda": "#2ca02c"}
WIDTH = 0.38
Save = Callable[[str], Path]


@contextlib.contextmanager
def _figure(out: Path, **subplots: Any) -> Iterator[tuple[Any, Any]]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(layout="constrained", **subplots)
    yield fig, axes
    fig.savefig(out, dpi=110)
    plt.close(fig)


def _nothing(ax: Any, what: str) -> None:
    ax.text(
        0.5,
        0.5,
        f"no {what} results",
        ha="center",
        va="center",
        transform=ax.transAxes,
        color="#777",
    )
    ax.set(xticks=[], yticks=[])


def number(value: float) -> str:
    return f"{value:,.0f}" if value >= 1000 else f"{value:.4g}"


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.4g}"


def _fallback_footnote(points: Iterable[Point], model: str) -> str:
    seed = seed_batch(model)
    if seed is None:
        return "no seed batch size registered: the largest batch measured"
    if all(point.step.seed for point in points):
        return f"batch size {seed} (the seed's)"
    return f"* not at the seed's batch size {seed}: the largest batch measured"


def _device_bars(ax: Any, bars: Sequence[tuple[str, str, float, str]]) -> None:
    machines, devices, heights, labels = zip(*bars)
    colors = [DEVICE_COLORS.get(device, "#9467bd") for device in devices]
    ax.bar_label(ax.bar(range(len(bars)), heights, color=colors), labels=labels, fontsize=7)
    ax.set_xticks(range(len(bars)), [f"{m}\n{d}" for m, d in zip(machines, devices)], fontsize=8)
    ax.set_xlim(-0.6, max(len(bars), 3) - 0.4)  # a lone bar keeps its width among three


def _per_kind(
    model: str,
    bars: list[tuple[str, str, str, float, str]],
    ylabel: str,
    points: Iterable[Point],
    out: Path,
    baseline: float | None = None,
) -> Any:
    """Bars (kind, machine, device, height, label), a chart per kind."""
    with _figure(out, ncols=len(KINDS), figsize=(11, 4.5), squeeze=False) as (fig, axes):
        for ax, kind in zip(axes[0], KINDS):
            ax.set_title(f"{model} {kind}")
            if not (mine := sorted(bar[1:] for bar in bars if bar[0] == kind)):
                _nothing(ax, kind)
                continue
            _device_bars(ax, mine)
            if baseline is not None:
                ax.axhline(baseline, color="black", linewidth=0.8)
            ax.set_ylabel(ylabel)
            ax.margins(y=0.2)
        fig.supxlabel(_fallback_footnote(points, model), fontsize=8)
    return fig


def speedup(model: str, found: list[Speedup], out: Path) -> Any:
    bars = [
        (
            s.kind,
            s.machine,
            s.device,
            s.ratio,
            f"{s.ratio:.2f}x\n{s.gpu.step.batch_note} / cpu {s.cpu.step.batch_note}",
        )
        for s in found
    ]
    points = [p for s in found for p in (s.gpu, s.cpu)]
    return _per_kind(model, bars, "GPU speedup over cpu (samples/s ratio)", points, out, 1.0)


def machines(model: str, points: list[Point], out: Path) -> Any:
    bars = [
        (
            p.step.kind,
            p.machine,
            p.step.device,
            p.samples_per_second,
            f"{number(p.samples_per_second)}\n{p.step.batch_note}",
        )
        for p in points
    ]
    return _per_kind(model, bars, "samples/s (higher is better)", points, out)


def batches(
    model: str, found: list[tuple[tuple[str, str, str, str], list[tuple[int, float]]]], out: Path
) -> None:
    curves = dict(found)
    with _figure(out, ncols=len(KINDS), figsize=(11, 4.5), squeeze=False) as (_, axes):
        lines = sorted({(machine, device) for (_, _, machine, device) in curves})
        for ax, kind in zip(axes[0], KINDS):
            seen: set[int] = set()
            for index, (machine, device) in enumerate(lines):
                if points := curves.get((model, kind, machine, device)):
                    sizes, values = zip(*points)
                    seen.update(sizes)
                    ax.plot(
                        sizes,
                        values,
                        marker="o",
                        label=f"{machine} {device}",
                        color=f"C{index}",  # one colour per line in both charts
                        linestyle="--" if device == CPU else "-",
                    )
            ax.set_title(f"{model} {kind}")
            if not seen:
                _nothing(ax, kind)
                continue
            ax.set_xscale("log", base=2)
            ax.set_xticks(sorted(seen), [str(b) for b in sorted(seen)])
            ax.minorticks_off()
            ax.set(yscale="log", xlabel="batch size", ylabel="samples/s")
            ax.legend(fontsize=8)


def by_release(
    points: list[ReleasePoint], title: str, out: Path, ylabel: str, baseline: float | None
) -> None:
    with _figure(out, figsize=(11, 5)) as (_, ax):
        line_of = operator.attrgetter("model", "kind", "machine", "python")
        for key, group in itertools.groupby(sorted(points, key=line_of), line_of):
            line = sorted(group, key=lambda p: p.date_ms)
            when = [datetime.fromtimestamp(p.date_ms / 1000, tz=timezone.utc) for p in line]
            label = "{} {}, {}, python {}".format(*key)
            ax.plot(when, [p.ratio for p in line], marker="o", label=label)
            for moment, p in zip(when, line):
                ax.annotate(
                    p.torch_version,
                    (moment, p.ratio),
                    fontsize=7,
                    rotation=45,
                    textcoords="offset points",
                    xytext=(0, 6),
                )
        if baseline is not None:
            ax.axhline(baseline, color="black", linewidth=0.8)
        ax.set(ylabel=ylabel, title=title)
        ax.legend(fontsize=7)


def compile_pairs(found: list[Pair], out: Path) -> None:
    with _figure(out, figsize=(max(6.0, 1.2 * len(found)), 4.5)) as (_, ax):
        for offset, mode, color in (
            (-WIDTH / 2, "eager", "#7f7f7f"),
            (WIDTH / 2, "compiled", "#ff7f0e"),
        ):
            bars = ax.bar(
                [i + offset for i in range(len(found))],
                [getattr(p, mode) * 1e3 for p in found],
                WIDTH,
                color=color,
                label=mode,
            )
        ax.bar_label(bars, labels=[f"{p.speedup:.2f}x" for p in found], fontsize=7, padding=2)
        ax.set_xticks(
            range(len(found)),
            [f"{p.model}\n{p.kind}\n{p.machine} {p.device}" for p in found],
            fontsize=7,
        )
        ax.set(
            yscale="log",
            ylabel="ms per step (lower is better)",
            title="eager against torch.compile (inductor), seed batch, newest build per machine",
        )
        ax.legend()


def tokens(bars: list[tuple[str, str, float, str]], title: str, out: Path) -> None:
    with _figure(out, figsize=(max(6.5, 1.6 * len(bars)), 4.0)) as (_, ax):
        _device_bars(ax, bars)
        ax.set_ylabel("decoded tokens/s (higher is better)")
        ax.set_title(title, fontsize=10)
