"""The statistical rule of ``mpsbench compare``: is build B slower than build A?

Each process contributes its fastest sample (contention only ever adds time); a side's statistic is its fast mode;
a one-sided permutation test against the regression factor decides, its alpha spent over the sequential loop's looks.
docs/explanation/the-rule.md ("The rule") says why, with the trials and simulations that chose it. Before the permutation test can
decide (2 to MIN_ROUNDS - 1 processes a side) an early look may stop a pair whose processes agree within the factor and
lie far apart relative to it (:func:`early_judge`); past --max-rounds, with time budget left, extra looks share a
reserved part of the level (:func:`schedule`; docs/explanation/loop.md).
"""

from __future__ import annotations

import itertools
import math
import random
import statistics
from dataclasses import dataclass

ALPHA = 0.05  # family-wise false-alarm rate over all looks of one comparison
CONFIDENCE = 0.95  # of the ratio's bootstrap interval (reported)
BOOTSTRAP = 2000  # resamples
PERMUTATIONS = 2000  # relabelings: all of them when there are no more, else this many drawn
CLUSTER = 1.5  # a side's fast mode: its process times within this factor of its fastest
MAX_ROUNDS = 20
# at 5 processes a side, sides that do not overlap give p = 1/252, under the first look's level (1.25 x that):
# a clear change is decided there; 4 a side would give only 1/70
MIN_ROUNDS = 5
FIRST_MARGIN = 1.25  # the first look's level over the smallest p its size can give
LOOK_EVERY = 2  # rounds between the later looks: fewer looks leave each a larger share of ALPHA
FEWEST = 4  # processes a side below which the permutation test decides nothing
# The early looks: Student's t on the log process times at rounds EARLIEST .. min_rounds - 1 (min_rounds at most
# MIN_ROUNDS), each at EARLY_ALPHA
# (exact for normal log times; tools/verdict_simulation.py checks the measured distributions). The spread it assumes is
# at least SPREAD_FLOOR (as a standard deviation of log time): fresh processes' A/A spread on a quiet GPU, below which
# two or three processes that happen to agree must not count as certainty.
EARLIEST = 2
EARLY_ALPHA = 0.0025
SPREAD_FLOOR = 0.005
# Past --max-rounds an undecided pair with time budget left goes on: a look every EXTRA_EVERY rounds, up to EXTRA_TIMES x
# max_rounds in all, the looks sharing EXTRA_ALPHA equally. The planned looks (min_rounds .. max_rounds) share the rest.
EXTRA_ALPHA = 0.0075
EXTRA_EVERY = 4
EXTRA_TIMES = 3

SLOWER, UNCHANGED, FASTER, UNDECIDED = "slower", "unchanged", "faster", "undecided"
EXIT_CODES = {UNCHANGED: 0, FASTER: 0, SLOWER: 1, UNDECIDED: 3}
QUIETER = "a quieter machine"  # what else would decide; compare adds --threads where it applies


@dataclass(frozen=True)
class Verdict:
    decision: str  # SLOWER, UNCHANGED, FASTER or UNDECIDED
    ratio: float  # fast mode(B) / fast mode(A)
    low: float  # bootstrap interval of the ratio
    high: float
    p_value: float  # one-sided permutation p that B is slower than the factor times A
    alpha: float  # the per-look level p was judged against
    noise: (
        float  # A/A: A's odd rounds against its even rounds, as a factor >= 1 (nan below 4 rounds)
    )
    reason: str  # why, in words; for UNDECIDED also what to do

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.decision]


def looks(min_rounds: int = MIN_ROUNDS, max_rounds: int = MAX_ROUNDS) -> list[int]:
    """The rounds at which the loop may stop: min_rounds, the next one, then every LOOK_EVERY, and max_rounds."""
    return sorted({min_rounds, *range(min_rounds + 1, max_rounds + 1, LOOK_EVERY), max_rounds})


def early_looks(min_rounds: int = MIN_ROUNDS) -> list[int]:
    """The rounds before the first planned look at which :func:`early_judge` may stop a pair: none where --min-rounds
    asks for more processes than MIN_ROUNDS before judging (at most MIN_ROUNDS - EARLIEST early looks)."""
    return list(range(EARLIEST, min_rounds)) if min_rounds <= MIN_ROUNDS else []


def extra_looks(max_rounds: int = MAX_ROUNDS) -> list[int]:
    """The looks past ``max_rounds`` that time budget left may buy: every EXTRA_EVERY rounds up to EXTRA_TIMES x."""
    return list(range(max_rounds + EXTRA_EVERY, EXTRA_TIMES * max_rounds + 1, EXTRA_EVERY))


def planned_alpha(min_rounds: int = MIN_ROUNDS, max_rounds: int = MAX_ROUNDS) -> float:
    """What the planned looks share: ALPHA less the early looks' and the extra looks' parts."""
    return (
        ALPHA
        - EARLY_ALPHA * len(early_looks(min_rounds))
        - EXTRA_ALPHA * bool(extra_looks(max_rounds))
    )


def alphas(min_rounds: int = MIN_ROUNDS, max_rounds: int = MAX_ROUNDS) -> dict[int, float]:
    """Each planned look's level, summing to :func:`planned_alpha`: a weighted Bonferroni split, which holds however the
    looks depend on each other. The first look gets what sides that do not overlap need (at most half); the later
    ones share the rest."""
    rounds, total = looks(min_rounds, max_rounds), planned_alpha(min_rounds, max_rounds)
    if len(rounds) == 1:
        return {rounds[0]: total}
    first = min(total / 2, FIRST_MARGIN / math.comb(2 * min_rounds, min_rounds))
    return {rounds[0]: first, **{look: (total - first) / (len(rounds) - 1) for look in rounds[1:]}}


def schedule(min_rounds: int = MIN_ROUNDS, max_rounds: int = MAX_ROUNDS) -> dict[int, float]:
    """Every look of one comparison and its level, early, planned and extra, summing to ALPHA (Bonferroni)."""
    extra = extra_looks(max_rounds)
    return {
        **{look: EARLY_ALPHA for look in early_looks(min_rounds)},
        **alphas(min_rounds, max_rounds),
        **{look: EXTRA_ALPHA / len(extra) for look in extra},
    }


def judge_at(
    look: int,
    min_rounds: int,
    a: list[float],
    b: list[float],
    factor: float,
    alpha: float,
    quieter: str = QUIETER,
) -> Verdict:
    """The judgement a look of :func:`schedule` makes: early (:func:`early_judge`) before ``min_rounds``, else
    :func:`judge`."""
    if look < min_rounds:
        return early_judge(a, b, factor, alpha, quieter)
    return judge(a, b, factor, alpha, quieter)


def per_look_alpha(min_rounds: int = MIN_ROUNDS, max_rounds: int = MAX_ROUNDS) -> float:
    """What a single judgement outside the sequential loop is held to: the smallest look's level."""
    return min(alphas(min_rounds, max_rounds).values())


def fast_mode(values: list[float]) -> float:
    """The mean of the process times within CLUSTER of the fastest: the processes contention spared."""
    bound = CLUSTER * min(values)
    return statistics.fmean([value for value in values if value <= bound])


def ratio_interval(
    a: list[float], b: list[float], confidence: float = CONFIDENCE, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap interval of fast_mode(b) / fast_mode(a), each side resampled on its own."""
    rng = random.Random(seed)
    ratios = sorted(
        fast_mode(rng.choices(b, k=len(b))) / fast_mode(rng.choices(a, k=len(a)))
        for _ in range(BOOTSTRAP)
    )
    tail = (1 - confidence) / 2
    return ratios[int(tail * (BOOTSTRAP - 1))], ratios[int((1 - tail) * (BOOTSTRAP - 1))]


def permutation_p(a: list[float], b: list[float], scale: float, seed: int = 0) -> float:
    """One-sided p that B is slower than ``scale`` x A: the share of relabelings of the pooled processes
    (every one, or PERMUTATIONS drawn with a fixed seed) whose fast-mode ratio is at least the observed one."""
    pooled = [value * scale for value in a] + list(b)
    size = len(a)
    observed = (
        fast_mode(b) / fast_mode(pooled[:size]) * (1 - 1e-12)
    )  # a relabeling equal to it counts
    if math.comb(len(pooled), size) <= PERMUTATIONS:
        splits = [
            fast_mode([pooled[i] for i in range(len(pooled)) if i not in chosen])
            / fast_mode([pooled[i] for i in chosen])
            >= observed
            for chosen in map(set, itertools.combinations(range(len(pooled)), size))
        ]
        return sum(splits) / len(splits)  # the observed split is one of them: p >= 1/len
    rng = random.Random(seed)
    hits = 0
    for _ in range(PERMUTATIONS):
        rng.shuffle(pooled)
        hits += fast_mode(pooled[size:]) / fast_mode(pooled[:size]) >= observed
    return (1 + hits) / (1 + PERMUTATIONS)


def aa_noise(a: list[float]) -> float:
    """A against itself: the fast mode of its odd rounds over its even rounds, as a factor >= 1 (nan below 4)."""
    if len(a) < 4:
        return float("nan")
    ratio = fast_mode(a[0::2]) / fast_mode(a[1::2])
    return max(ratio, 1 / ratio)


def t_tail(t: float, df: int) -> float:
    """P(T > t) for Student's t with ``df`` (a whole number) degrees of freedom: the closed forms of Abramowitz and
    Stegun 26.7.3 and 26.7.4."""
    theta = math.atan(abs(t) / math.sqrt(df))
    cos2, term, total = math.cos(theta) ** 2, 1.0, 1.0
    if df % 2:  # odd: (2/pi) (theta + sin cos (1 + 2/3 cos^2 + ...))
        for k in range(1, (df - 1) // 2):
            term *= 2 * k / (2 * k + 1) * cos2
            total += term
        inside = (
            2 / math.pi * (theta + (math.sin(theta) * math.cos(theta) * total if df > 1 else 0.0))
        )
    else:  # even: sin (1 + 1/2 cos^2 + 1*3/(2*4) cos^4 + ...)
        for k in range(1, df // 2):
            term *= (2 * k - 1) / (2 * k) * cos2
            total += term
        inside = math.sin(theta) * total
    upper = (1 - inside) / 2
    return upper if t >= 0 else 1 - upper


def early_judge(
    a: list[float],
    b: list[float],
    factor: float,
    alpha: float = EARLY_ALPHA,
    quieter: str = QUIETER,
) -> Verdict:
    """An early look, with too few processes for the permutation test: Student's t on the log process times, their
    spread taken as at least SPREAD_FLOOR, one-sided against the factor in each direction; it decides only where every
    process of each side lies within the factor of that side's fastest (no contended process among them)."""
    if min(len(a), len(b)) < EARLIEST:
        raise ValueError("an early look needs at least two processes a side")
    log_a, log_b = [math.log(value) for value in a], [math.log(value) for value in b]
    difference = statistics.fmean(log_b) - statistics.fmean(log_a)
    df = len(a) + len(b) - 2
    pooled = math.sqrt(
        (
            sum((v - statistics.fmean(log_a)) ** 2 for v in log_a)
            + sum((v - statistics.fmean(log_b)) ** 2 for v in log_b)
        )
        / df
    )
    error = max(pooled, SPREAD_FLOOR) * math.sqrt(1 / len(a) + 1 / len(b))
    margin = math.log(factor)
    p_value = t_tail((difference - margin) / error, df)
    ratio = fast_mode(b) / fast_mode(a)
    low, high = ratio_interval(a, b)
    spread = max(max(a) / min(a), max(b) / min(b))
    shown = (
        f"ratio {ratio:.3f} [{low:.3f}, {high:.3f}], factor {factor:g}, {len(a)} processes a side spread"
        f" {spread:.3f}x, p {p_value:.4f} (early look, t test on log times)"
    )

    def verdict(decision: str, reason: str) -> Verdict:
        return Verdict(
            decision, ratio, low, high, p_value, alpha, float("nan"), f"{decision}: {reason}"
        )

    if spread > factor:
        return verdict(
            UNDECIDED,
            f"{shown}; a build's processes differ by more than the factor: the later looks decide",
        )
    if p_value < alpha:
        return verdict(SLOWER, f"{shown}; p < {alpha:.4f}: B is slower than {factor:g} x A")
    if t_tail((-margin - difference) / error, df) < alpha:
        return verdict(FASTER, f"{shown}; B is faster than A / {factor:g} (p < {alpha:.4f})")
    if t_tail((margin - difference) / error, df) < alpha:
        return verdict(
            UNCHANGED,
            f"{shown}; B is faster than {factor:g} x A (p < {alpha:.4f}): below the factor",
        )
    return verdict(
        UNDECIDED, f"{shown}; not yet far enough from the factor: the later looks decide"
    )


def judge(
    a: list[float],
    b: list[float],
    factor: float,
    alpha: float = per_look_alpha(),
    quieter: str = QUIETER,
) -> Verdict:
    """Decide whether B is slower than A from each side's process times (seconds, in round order)."""
    if min(len(a), len(b)) < 2:
        raise ValueError("judge needs at least two processes a side")
    ratio = fast_mode(b) / fast_mode(a)
    low, high = ratio_interval(a, b)
    p_value = permutation_p(a, b, factor)
    noise = aa_noise(a)
    rounds = (len(a), len(b))
    shown = f"ratio {ratio:.3f} [{low:.3f}, {high:.3f}], factor {factor:g}, A/A {noise:.3f}, p {p_value:.4f}"

    def verdict(decision: str, reason: str) -> Verdict:
        return Verdict(decision, ratio, low, high, p_value, alpha, noise, f"{decision}: {reason}")

    if min(rounds) < FEWEST:
        return verdict(
            UNDECIDED,
            f"{shown}; too few processes ({min(rounds)} < {FEWEST} a side): allow more rounds"
            " (--max-rounds)",
        )
    if p_value < alpha:
        return verdict(SLOWER, f"{shown}; p < {alpha:.4f}: B is slower than {factor:g} x A")
    # the other way round: p that A (scaled) is slower than B, i.e. that B is faster than it
    if permutation_p(b, a, factor) < alpha:
        return verdict(FASTER, f"{shown}; B is faster than A / {factor:g} (p < {alpha:.4f})")
    if permutation_p(b, [value * factor for value in a], 1.0) < alpha:
        return verdict(
            UNCHANGED,
            f"{shown}; B is faster than {factor:g} x A (p < {alpha:.4f}): below the factor",
        )
    if not math.isnan(noise) and noise > factor:
        why = (
            f"too noisy: A's fast mode against itself moved {noise:.3f}x, more than the factor {factor:g}; allow"
            f" more rounds (--max-rounds) or {quieter}"
        )
    else:
        why = (
            f"neither slower nor faster than {factor:g} x A at p < {alpha:.4f} ({shown}): a change this"
            f" close to the factor needs more rounds (--max-rounds) or {quieter}"
        )
    return verdict(UNDECIDED, why)
