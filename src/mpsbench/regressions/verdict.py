"""compare's rule: a one-sided permutation test of B's fast mode against factor x A's, alpha split
over the looks (docs/explanation/the-rule.md)."""

from __future__ import annotations

import itertools
import math
import random
import statistics
from collections.abc import Callable
from dataclasses import dataclass

from mpsbench.regressions.rule import Decision

ALPHA = 0.05  # false-alarm rate over all looks of one comparison
CONFIDENCE = 0.95  # of the ratio's bootstrap interval
BOOTSTRAP = PERMUTATIONS = 2000  # permutations are drawn where there are more relabelings
CLUSTER = 1.5
MAX_ROUNDS = 20
MIN_ROUNDS = 5  # 5 a side apart give p = 1/252, under the first look's level; 4 give 1/70
FIRST_MARGIN = 1.25  # the first look's level over the smallest p its size can give
LOOK_EVERY = 2  # fewer later looks leave each a larger share of ALPHA
FEWEST = 4  # processes a side below which the permutation test decides nothing
EARLIEST, EARLY_ALPHA = 2, 0.0025  # early looks at EARLIEST .. min_rounds - 1, each at this level
SPREAD_FLOOR = 0.005  # a quiet GPU's A/A spread of log time
# looks past max_rounds: every EXTRA_EVERY rounds up to EXTRA_TIMES x, sharing EXTRA_ALPHA
EXTRA_ALPHA, EXTRA_EVERY, EXTRA_TIMES = 0.0075, 4, 3

SLOWER, UNCHANGED, FASTER, UNDECIDED = (
    Decision.SLOWER,
    Decision.UNCHANGED,
    Decision.FASTER,
    Decision.UNDECIDED,
)
QUIETER = "a quieter machine"  # compare adds --threads where it applies


@dataclass(frozen=True)
class Verdict:
    decision: Decision
    ratio: float  # fast mode(B) / fast mode(A)
    low: float  # bootstrap interval of the ratio
    high: float
    p_value: float  # one-sided p that B is slower than the factor times A
    alpha: float  # the level p was judged against
    noise: float  # the larger aa_noise
    reason: str  # for UNDECIDED also what to do

    @property
    def exit_code(self) -> int:
        return self.decision.exit_status


def schedule(min_rounds: int = MIN_ROUNDS, max_rounds: int = MAX_ROUNDS) -> dict[int, float]:
    """Every look (early, planned, extra) with its level, summing to ALPHA; the planned ones share
    what the others leave, the first what disjoint sides need (at most half), the rest alike
    (weighted Bonferroni)."""
    early = range(EARLIEST, min_rounds) if min_rounds <= MIN_ROUNDS else range(0)
    extra = range(max_rounds + EXTRA_EVERY, EXTRA_TIMES * max_rounds + 1, EXTRA_EVERY)
    planned = {min_rounds, *range(min_rounds + 1, max_rounds + 1, LOOK_EVERY), max_rounds}
    first, *rest = sorted(planned)
    total = ALPHA - EARLY_ALPHA * len(early) - EXTRA_ALPHA * bool(extra)
    try:
        reachable = FIRST_MARGIN / math.comb(2 * min_rounds, min_rounds)
    except (
        OverflowError
    ):  # from 515 rounds comb() is past a float; a level that small decides nothing
        reachable = 0.0
    level = min(total / 2, reachable) if rest else total
    return {
        **dict.fromkeys(early, EARLY_ALPHA),
        first: level,
        **dict.fromkeys(rest, (total - level) / max(1, len(rest))),
        **dict.fromkeys(extra, EXTRA_ALPHA / max(1, len(extra))),
    }


def per_look_alpha(min_rounds: int = MIN_ROUNDS, max_rounds: int = MAX_ROUNDS) -> float:
    """The smallest level of a planned look."""
    levels = schedule(min_rounds, max_rounds).items()
    return min(level for look, level in levels if min_rounds <= look <= max_rounds)


def fast_mode(values: list[float]) -> float:
    """The mean of the times within CLUSTER of the fastest: the processes contention spared."""
    return statistics.fmean([value for value in values if value <= CLUSTER * min(values)])


def ratio_interval(
    a: list[float], b: list[float], confidence: float = CONFIDENCE, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap interval of fast_mode(b) / fast_mode(a)."""
    rng = random.Random(seed)
    ratios = sorted(
        fast_mode(rng.choices(b, k=len(b))) / fast_mode(rng.choices(a, k=len(a)))
        for _ in range(BOOTSTRAP)
    )
    tail = (1 - confidence) / 2
    return ratios[int(tail * (BOOTSTRAP - 1))], ratios[int((1 - tail) * (BOOTSTRAP - 1))]


def permutation_p(a: list[float], b: list[float], scale: float, seed: int = 0) -> float:
    """One-sided p that B is slower than ``scale`` x A, over relabelings of the pooled processes."""
    pooled, size = [value * scale for value in a] + b, len(a)
    observed = fast_mode(b) / fast_mode(pooled[:size]) * (1 - 1e-12)  # an equal one counts
    if math.comb(len(pooled), size) <= PERMUTATIONS:  # every split, the observed one among them
        return statistics.fmean(
            fast_mode([v for i, v in enumerate(pooled) if i not in chosen])
            / fast_mode([pooled[i] for i in chosen])
            >= observed
            for chosen in map(set, itertools.combinations(range(len(pooled)), size))
        )
    rng, hits = random.Random(seed), 0
    for _ in range(PERMUTATIONS):
        rng.shuffle(pooled)
        hits += fast_mode(pooled[size:]) / fast_mode(pooled[:size]) >= observed
    return (1 + hits) / (1 + PERMUTATIONS)


def aa_noise(a: list[float]) -> float:
    """A's odd rounds against its even rounds, as a factor >= 1 (nan below 4 rounds)."""
    if len(a) < 4:
        return math.nan
    ratio = fast_mode(a[0::2]) / fast_mode(a[1::2])
    return max(ratio, 1 / ratio)


def t_tail(t: float, df: int) -> float:
    """P(T > t), Student's t, whole ``df`` (Abramowitz and Stegun 26.7.3-4)."""
    theta = math.atan(abs(t) / math.sqrt(df))
    cos2, term, total = math.cos(theta) ** 2, 1.0, 1.0
    for k in range(1, (df - 1) // 2 if df % 2 else df // 2):
        term *= (2 * k / (2 * k + 1) if df % 2 else (2 * k - 1) / (2 * k)) * cos2
        total += term
    sin_cos = math.sin(theta) * math.cos(theta) * total * (df > 1)
    inside = 2 / math.pi * (theta + sin_cos) if df % 2 else math.sin(theta) * total
    upper = (1 - inside) / 2
    return upper if t >= 0 else 1 - upper


Found = tuple[Decision, str]


def _decided(shown: str, factor: float, alpha: float, *tests: Callable[[], float]) -> Found | None:
    for decision, test, why in zip(
        (SLOWER, FASTER, UNCHANGED),
        tests,
        (
            f"p < {alpha:.4f}: B is slower than {factor:g} x A",
            f"B is faster than A / {factor:g} (p < {alpha:.4f})",
            f"B is faster than {factor:g} x A (p < {alpha:.4f}): below the factor",
        ),
    ):
        if test() < alpha:
            return decision, f"{shown}; {why}"
    return None


def _interval(a: list[float], b: list[float], factor: float) -> tuple[float, float, float, str]:
    ratio, (low, high) = fast_mode(b) / fast_mode(a), ratio_interval(a, b)
    return ratio, low, high, f"ratio {ratio:.3f} [{low:.3f}, {high:.3f}], factor {factor:g}"


def early_judge(
    a: list[float],
    b: list[float],
    factor: float,
    alpha: float = EARLY_ALPHA,
) -> Verdict:
    """A look before the permutation test can decide: t tests on log times, deciding only where
    each side's processes agree within the factor."""
    log_a, log_b = list(map(math.log, a)), list(map(math.log, b))
    difference, df = statistics.fmean(log_b) - statistics.fmean(log_a), len(a) + len(b) - 2
    squares = (len(a) - 1) * statistics.variance(log_a) + (len(b) - 1) * statistics.variance(log_b)
    error = max(math.sqrt(squares / df), SPREAD_FLOOR) * math.sqrt(1 / len(a) + 1 / len(b))
    margin = math.log(factor)
    p_value = t_tail((difference - margin) / error, df)
    ratio, low, high, shown = _interval(a, b, factor)
    spread = max(max(a) / min(a), max(b) / min(b))
    shown += (
        f", {len(a)} processes a side spread {spread:.3f}x, p {p_value:.4f} (early look, t test on"
        " log times)"
    )
    if spread > factor:
        found = UNDECIDED, f"{shown}; a build's processes differ by more than the factor"
    else:
        found = _decided(
            shown,
            factor,
            alpha,
            lambda: p_value,
            lambda: t_tail((-margin - difference) / error, df),
            lambda: t_tail((margin - difference) / error, df),
        ) or (UNDECIDED, f"{shown}; not yet far enough from the factor")
    decision, reason = found
    if decision == UNDECIDED:
        reason += ": the later looks decide"
    return Verdict(decision, ratio, low, high, p_value, alpha, math.nan, f"{decision}: {reason}")


def judge(
    a: list[float],
    b: list[float],
    factor: float,
    alpha: float = per_look_alpha(),
    quieter: str = QUIETER,
) -> Verdict:
    """Whether B is slower than A, from process times in round order."""
    fewest = min(len(a), len(b))
    p_value = permutation_p(a, b, factor)
    noise = max(aa_noise(a), aa_noise(b)) if fewest >= FEWEST else math.nan
    ratio, low, high, shown = _interval(a, b, factor)
    shown += f", A/A {noise:.3f}, p {p_value:.4f}"
    more = f"more rounds (--max-rounds) or {quieter}"
    found: Found | None
    if fewest < FEWEST:
        found = (
            UNDECIDED,
            f"{shown}; too few processes ({fewest} < {FEWEST} a side): allow more rounds"
            " (--max-rounds)",
        )
    elif found := _decided(
        shown,
        factor,
        alpha,
        lambda: p_value,
        lambda: permutation_p(b, a, factor),  # that A (scaled) is slower than B
        lambda: permutation_p(b, [value * factor for value in a], 1.0),
    ):
        # the test trusts every round alike: a decision must also clear the rounds' spread
        margin = {SLOWER: ratio / factor, FASTER: 1 / (ratio * factor)}.get(
            found[0], factor / ratio
        )
        if noise >= margin:
            found = (
                UNDECIDED,
                f"too noisy for {fewest} rounds: a build's rounds against themselves moved"
                f" {noise:.3f}x, more than the ratio's {margin:.3f}x distance from the factor"
                f" ({shown}); allow {more}",
            )
    elif noise > factor:
        found = (
            UNDECIDED,
            f"too noisy: a build's fast mode against itself moved {noise:.3f}x, more than the"
            f" factor {factor:g}; allow {more}",
        )
    else:
        found = (
            UNDECIDED,
            f"neither slower nor faster than {factor:g} x A at p < {alpha:.4f} ({shown}): a change"
            f" this close to the factor needs {more}",
        )
    decision, reason = found
    return Verdict(decision, ratio, low, high, p_value, alpha, noise, f"{decision}: {reason}")
