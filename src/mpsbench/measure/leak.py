"""How fast the memory held after each step grows, in workloads and pytorch issues' loops."""

from __future__ import annotations

import gc
import itertools
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from mpsbench.measure import devices, measured, models, skips
from mpsbench.measure.optional_torch import F, nn, torch
from mpsbench.measure.workloads import Workload

Step = Callable[[], object]
STEPS_SMALL = 200  # ms a step even on a cpu
STEPS_LARGE = 50  # about a second a step
PER = 100  # steps


def steps_for(workload: Workload) -> int:
    return STEPS_LARGE if workload.spec.large else STEPS_SMALL


def reading(device: str) -> int:
    """Bytes held now (cpu: RSS, no stand-in for mps's heaps), else a skip."""
    found = devices.get(device)
    if (current := found.memory().current) is None:
        raise skips.SkipNotImplemented(
            f"no memory reading for {device}: {found.no_reading_reason()}"
        )
    return current


def slope_mib_per_100_steps(readings: Sequence[float]) -> float:
    if len(readings) < 2:
        raise ValueError(f"a slope needs at least 2 readings, got {len(readings)}")
    return statistics.linear_regression(range(len(readings)), readings).slope * PER / devices.MIB


def record(step: Step, device: str, steps: int) -> list[int]:
    gc.collect()  # warm-up's garbage is not growth
    synchronize = devices.get(device).synchronize
    synchronize()
    readings = []
    for _ in range(steps):
        step()
        synchronize()  # buffers are freed once the device is done
        readings.append(reading(device))
    return readings


def measure(workload: Workload, steps: int | None = None) -> float:
    return slope_mib_per_100_steps(
        record(workload.step, workload.device, steps or steps_for(workload))
    )


PATTERN_PER = 1000  # iterations
PATTERN_WARM_UP = 50  # a few cycles below
PATTERN_ITERATIONS = 300  # enough for a line through RSS noise
SIZES = (32, 40, 48, 56, 64)
LENGTHS = (17, 33, 64, 100, 128)


@dataclass(frozen=True)
class Pattern:
    name: str
    issue: str
    make: Callable[[str], Step]
    min_torch: tuple[int, int] = (1, 12)


def _seeded() -> torch.Generator:
    return torch.Generator().manual_seed(models.SEED)


def _sgd_step(model: nn.Module, loss: Callable[[], torch.Tensor]) -> Step:
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

    def step() -> object:
        optimizer.zero_grad(set_to_none=True)
        value = loss()
        value.backward()  # type: ignore[no-untyped-call]
        optimizer.step()
        return value.detach()

    return step


def _lstm(device: str) -> Step:
    gen = _seeded()
    lstm = nn.LSTM(64, 128, num_layers=2, batch_first=True).to(device)
    head = nn.Linear(128, 10).to(device)
    x = torch.randn(16, 32, 64, generator=gen).to(device)
    target = models.random_ints(gen, 10, 16).to(device)
    return _sgd_step(
        nn.ModuleList([lstm, head]),
        lambda: F.cross_entropy(head(lstm(x)[0][:, -1]), target),
    )


def _varying_sizes(device: str) -> Step:
    gen = _seeded()
    model = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(16, 16, 3, padding=1),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(16, 10),
    ).to(device)
    cycle = itertools.cycle(
        [torch.randn(8, 3, side, side, generator=gen).to(device) for side in SIZES]
    )
    target = models.random_ints(gen, 10, 8).to(device)
    return _sgd_step(model, lambda: F.cross_entropy(model(next(cycle)), target))


def _maxpool(device: str) -> Step:
    pool = nn.MaxPool2d(2)
    x = torch.randn(8, 16, 64, 64, generator=_seeded()).to(device).requires_grad_(True)

    def step() -> object:
        x.grad = None
        pool(x).sum().backward()
        return x.grad

    return step


def _varying_sdpa(device: str) -> Step:
    gen = _seeded()
    cycle = itertools.cycle(
        [torch.randn(3, 4, 8, length, 64, generator=gen).to(device) for length in LENGTHS]
    )

    def step() -> object:
        q, k, v = next(cycle)
        with torch.no_grad():
            return F.scaled_dot_product_attention(q, k, v)

    return step


PATTERNS: dict[str, Pattern] = {
    pattern.name: pattern
    for pattern in (
        Pattern("lstm_training", "pytorch#145374", _lstm),
        Pattern("varying_input_sizes", "pytorch#132596", _varying_sizes),
        Pattern("maxpool2d", "pytorch#125217", _maxpool),
        Pattern("varying_length_sdpa", "pytorch#152550", _varying_sdpa, (2, 0)),
    )
}
PATTERN_NAMES: tuple[str, ...] = tuple(PATTERNS)


def growth(device: str, name: str, iterations: int | None = None) -> float:
    """MiB per :data:`PATTERN_PER` iterations."""
    skips.require_device(device)
    pattern = PATTERNS[name]
    skips.require_torch(pattern.min_torch, name)
    devices.get(device).seed(models.SEED)
    step = pattern.make(device)
    for _ in range(PATTERN_WARM_UP):
        step()
    readings = record(step, device, iterations or PATTERN_ITERATIONS)
    return slope_mib_per_100_steps(readings) * PATTERN_PER / PER


def measure_patterns(benchmark: str, keys: list[measured.Key]) -> measured.Table:
    return measured.measure(benchmark, keys, growth, {"growth": float})
