"""Offline simulation of compare's and bisect's decisions: process times drawn from measured distributions, no asv.

    .venv/bin/python -m tools.verdict_simulation [--trials N] [--seed S] [--workers W]

Each trial draws one process time a build a round (interleaved, as asv runs them) from a distribution the docs measured,
and runs the package's own loop over it: compare.measure and bisection.search with a stand-in Session (:class:`Drawn`)
whose rounds come from the draws instead of asv. Two schedules of looks are judged on the same draws: the previous one
(rounds 6, 8 .. 20, 0.05 / 8 each) and verdict.schedule (early looks at 2 to 4, the planned ones at 5, 6, 8 .. 20, extra
ones every 4 rounds up to 60 while an undecided pair could still be decided: a simulation has no time limit). What it
prints, per distribution and scenario: how often each decision came (a wrong one is "slower" at or below the factor,
"unchanged" or "faster" above it), the rounds it took and how many stopped at an early look, and for bisect the
processes it cost, beside the previous order (up to 4 candidates spread over the line a pass, the rule of commit
ee92223, re-created in :func:`previous_bisect`).
docs/explanation/the-rule.md ("Deciding early") keeps the previous output; docs/evidence/loop.md this one, with command and date.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import math
import random
import statistics
from collections import Counter
from collections.abc import Callable, Generator, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field

from mpsbench.regressions import bisection, compare, fresh, verdict

FACTOR = 1.05  # asv.conf.json's regressions_thresholds, as compare reads it
Draw = Callable[[random.Random], float]  # one process's fastest sample, seconds


def _h100(rng: random.Random) -> float:
    # the H100 trials (git show 82c6217:docs/explanation/the-rule.md, "On the H100"):
    # one build's processes 115.21-116.14 ms (bert_base, 64), resnet50's alike: +-0.3%
    return 0.116 * (1 + rng.gauss(0, 0.003))


def _h200_forked(rng: random.Random) -> float:
    # a probe on a datacenter GPU: 8 children forked from one warm parent, bert_base inference at 64, each
    # child's step median 37.1-37.7 ms (1.016x); taken as +-0.5% (a standard deviation), wider than _h100's
    return 0.0373 * (1 + rng.gauss(0, 0.005))


def _cpu_one_thread(rng: random.Random) -> float:
    # docs/explanation/the-rule.md, "--threads 1" beside a busy loop: each process's fastest sample 1.76-2.17 ms over 8 processes
    return 0.00195 * (1 + rng.gauss(0, 0.06))


def _cpu_contended(rng: random.Random) -> float:
    # docs/explanation/the-rule.md, "The rule": half the processes ran alone (+-8%),
    # the others shared the busy core (1.8-3.5x slower)
    fast = 0.003 * rng.lognormvariate(0, 0.04)
    return fast if rng.random() < 0.5 else fast * rng.uniform(1.8, 3.5)


DISTRIBUTIONS: dict[str, Draw] = {
    "h100": _h100,
    "h200-forked": _h200_forked,
    "cpu-threads1": _cpu_one_thread,
    "cpu-contended": _cpu_contended,
}
SCENARIOS = {
    "identical": 1.0,
    "4% slower": 1.04,
    "at the factor": FACTOR,
    "6% slower": 1.06,
    "6.5% slower": 1.065,
    "7.3% slower": 1.073,
    "1.3x slower": 1.3,
}
# the change each machine's trials bisected
BISECTED = {"h100": 1.065, "h200-forked": 1.073, "cpu-threads1": 1.3, "cpu-contended": 1.3}
PREVIOUS = {
    look: verdict.ALPHA / 8 for look in range(6, 21, 2)
}  # the schedule before issue 31: 8 looks, Bonferroni


@contextlib.contextmanager
def schedule(levels: dict[int, float] | None) -> Iterator[None]:
    """Run the package's loop under ``levels`` (round -> alpha) instead of verdict.schedule; None: the committed one.

    Also replaces the bootstrap interval, which is reported but decides nothing, by the ratio itself: it is most of a
    judgement's time, and the decisions (the permutation tests) stay the package's own.
    """
    saved = verdict.schedule, verdict.ratio_interval
    if levels is not None:
        verdict.schedule = lambda min_rounds=0, max_rounds=0: dict(levels)
    verdict.ratio_interval = lambda a, b, *_, **__: (
        (verdict.fast_mode(b) / verdict.fast_mode(a),) * 2
    )
    try:
        yield
    finally:
        verdict.schedule, verdict.ratio_interval = saved


@dataclass
class Drawn:
    """A stand-in fresh.Session: each build's process times drawn from ``draw`` scaled by its ``slowdown``."""

    draw: Draw
    slowdown: dict[str, float]
    rng: random.Random
    min_rounds: int = verdict.MIN_ROUNDS
    max_rounds: int = verdict.MAX_ROUNDS
    factor: float = FACTOR
    quieter: str = verdict.QUIETER
    minutes: float = fresh.TIME_BUDGET_MINUTES
    deadline: float = math.inf  # a simulation is never out of time unless a test sets one
    samples: dict[str, int] = field(
        default_factory=dict
    )  # as fresh.Session's: SAMPLES a drawn process

    def rounds(
        self, builds: list[fresh.Named], most: int
    ) -> Generator[dict[str, list[float]], None, None]:
        times: dict[str, list[float]] = {build.name: [] for build in builds}
        self.samples = {build.name: 0 for build in builds}
        for number in range(most):
            order = (
                builds if number % 2 == 0 else builds[::-1]
            )  # asv reverses the order every round
            for build in order:
                times[build.name].append(self.draw(self.rng) * self.slowdown[build.name])
                self.samples[build.name] += fresh.SAMPLES
            yield {name: list(values) for name, values in times.items()}


def compare_trial(
    draw: Draw, ratio: float, seed: int, levels: dict[int, float] | None
) -> tuple[str, int]:
    """One compare of A against B = ratio x A: its decision and the rounds it took."""
    session = Drawn(
        draw,
        {"A": 1.0, "B": ratio},
        random.Random(seed),
        min_rounds=min(levels) if levels else verdict.MIN_ROUNDS,
    )
    a, b = fresh.Named("A", "a"), fresh.Named("B", "b")
    with schedule(levels):
        measured = compare.measure(session, [a, b], [("A", "B")])  # type: ignore[arg-type]
    return measured.verdicts[("A", "B")].decision, len(measured.times["A"])


LINE = [
    f"c{index}" for index in range(1, 7)
]  # the 6 builds between GOOD and BAD of an 8-build line


def changed_line(first_bad: int, ratio: float) -> tuple[dict[str, float], list[str]]:
    """The slowdowns of GOOD, the line and BAD with the change at ``first_bad`` (0..6: LINE's index, 6 is BAD)."""
    between = [*LINE, "BAD"]
    return {
        "GOOD": 1.0,
        **{name: ratio if index >= first_bad else 1.0 for index, name in enumerate(between)},
    }, between


def bisect_trial(draw: Draw, ratio: float, first_bad: int, seed: int) -> tuple[str, int]:
    """bisection.search over the 8-build line: what it named ('?' for nothing) and the processes it cost."""
    slowdown, between = changed_line(first_bad, ratio)
    session = Drawn(draw, slowdown, random.Random(seed))
    named = {name: fresh.Named(name, name) for name in ["GOOD", *between]}
    state = bisection.Search(list(between))
    with schedule(None):
        unresolved = bisection.search(session, named["GOOD"], named["BAD"], named, state)  # type: ignore[arg-type]
    return ("?" if unresolved else state.between[state.high]), state.processes


def previous_bisect(draw: Draw, ratio: float, first_bad: int, seed: int) -> tuple[str, int]:
    """The order before issue 31: GOOD, BAD and up to 4 candidates spread over what is left, a pass, under the previous
    schedule (its own code at ee92223: bisection._spread and the pass loop, the classification unchanged)."""
    slowdown, between = changed_line(first_bad, ratio)
    session = Drawn(draw, slowdown, random.Random(seed), min_rounds=6)
    named = {name: fresh.Named(name, name) for name in ["GOOD", *between]}
    good, bad = named["GOOD"], named["BAD"]
    low, high, processes, confirmed = -1, len(between) - 1, 0, False
    with schedule(PREVIOUS):
        while not (confirmed and high - low == 1):
            left = between[low + 1 : high]
            candidates = (
                left if len(left) <= 4 else [left[(i + 1) * len(left) // 5] for i in range(4)]
            )
            pairs = [("GOOD", "BAD")] + [
                p for name in candidates for p in (("GOOD", name), (name, "BAD"))
            ]
            step = compare.measure(
                session,  # type: ignore[arg-type]
                [good, *(named[n] for n in candidates), bad],
                pairs,
                done=bisection._step_decided("GOOD", "BAD", candidates, confirmed),
            )
            processes += sum(len(values) for values in step.times.values())
            if not confirmed and step.verdicts[("GOOD", "BAD")].decision != verdict.SLOWER:
                return "?", processes
            confirmed = True
            for name in candidates:
                found = _previous_classify(
                    step.verdicts[("GOOD", name)], step.verdicts[(name, "BAD")]
                )
                if found is None:
                    return "?", processes
                if found == "bad":
                    high = between.index(name)
                    break
                low = between.index(name)
    return between[high], processes


def _previous_classify(vs_good: verdict.Verdict, vs_bad: verdict.Verdict) -> str | None:
    if vs_good.decision == verdict.SLOWER:
        return "bad"
    return "good" if vs_bad.decision == verdict.SLOWER else None


def _compare_job(job: tuple[str, float, int, bool]) -> tuple[str, int]:
    name, ratio, seed, previous = job
    return compare_trial(DISTRIBUTIONS[name], ratio, seed, PREVIOUS if previous else None)


def _bisect_job(job: tuple[str, float, int, int, bool]) -> tuple[str, int]:
    name, ratio, first_bad, seed, previous = job
    run = previous_bisect if previous else bisect_trial
    return run(DISTRIBUTIONS[name], ratio, first_bad, seed)


def _quiet() -> None:
    logging.getLogger("mpsbench").setLevel(
        logging.WARNING
    )  # compare's round lines, thousands of them


def summarize(results: list[tuple[str, int]]) -> str:
    decisions = Counter(decision for decision, _ in results)
    rounds = [count for _, count in results]
    early = sum(count < verdict.MIN_ROUNDS for count in rounds)
    return (
        ", ".join(f"{decision} {decisions[decision]}" for decision in sorted(decisions))
        + f"; rounds mean {statistics.fmean(rounds):.2f}, median {statistics.median(rounds):g}, max {max(rounds)};"
        f" stopped at an early look {early}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--trials", type=int, default=2000, help="compares of identical builds per distribution"
    )
    parser.add_argument(
        "--others", type=int, default=500, help="compares per distribution of each other scenario"
    )
    parser.add_argument(
        "--bisects",
        type=int,
        default=70,
        help="bisects per distribution (spread over the 7 places)",
    )
    parser.add_argument("--seed", type=int, default=31)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--only", choices=sorted(DISTRIBUTIONS), action="append", help="these distributions only"
    )
    parser.add_argument(
        "--scenario", choices=list(SCENARIOS), action="append", help="these compare scenarios only"
    )
    args = parser.parse_args(argv)
    _quiet()
    with ProcessPoolExecutor(args.workers, initializer=_quiet) as pool:
        for name in args.only or DISTRIBUTIONS:
            for scenario in args.scenario or SCENARIOS:
                ratio = SCENARIOS[scenario]
                trials = args.trials if ratio == 1.0 else args.others
                for previous in (True, False):  # the same draws (seeds) under both schedules
                    jobs = [
                        (name, ratio, args.seed * 1_000_003 + trial, previous)
                        for trial in range(trials)
                    ]
                    found = list(pool.map(_compare_job, jobs, chunksize=20))
                    label = "previous (6, 8 .. 20)" if previous else "committed (2 .. 60)"
                    print(
                        f"compare {name:13} {scenario:13} {label:26} {trials} trials: {summarize(found)}",
                        flush=True,
                    )
            for previous in (True, False) if args.bisects else ():
                lines = [
                    (name, BISECTED[name], trial % 7, args.seed * 1_000_003 + trial, previous)
                    for trial in range(args.bisects)
                ]
                found = list(pool.map(_bisect_job, lines, chunksize=5))
                right = sum(
                    named == [*LINE, "BAD"][trial % 7] for trial, (named, _) in enumerate(found)
                )
                wrong = sum(
                    named not in ("?", [*LINE, "BAD"][trial % 7])
                    for trial, (named, _) in enumerate(found)
                )
                cost = [processes for _, processes in found]
                label = "previous (4 a pass)" if previous else "committed (probes)"
                print(
                    f"bisect  {name:13} {BISECTED[name]:g}x{'':8} {label:26} {args.bisects} trials: right {right},"
                    f" wrong {wrong}, undecided {args.bisects - right - wrong}; processes mean {statistics.fmean(cost):.1f}"
                    f" (from {min(cost)} to {max(cost)})",
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
