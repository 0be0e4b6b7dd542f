"""The statistical rule of ``mpsbench compare``: is build B slower than build A?

Each benchmark process contributes ONE observation, the median of its samples.
Samples within a process share its memory layout, thread placement and warm-up,
so they scatter far less than processes do (on a busy 2-core machine identical
builds differ by 10-15% between processes and by 1% within one): a test over
within-process samples calls identical builds different. Over process medians:

- the ratio is median(B) / median(A), with a percentile bootstrap interval
  (processes resampled within each side; a fixed seed, so a verdict can be
  reproduced from its numbers);
- the A/A noise is the same ratio between A's odd and even rounds, as a factor
  >= 1: what the machine does to one build measured twice;
- the test is asv's own two-sided Mann-Whitney U on the two lists of medians,
  at ALPHA split over every look the sequential loop may take (Bonferroni),
  so stopping at the first decisive round does not inflate false alarms.

Decision, with f the one regression factor (mpsbench.regressions.factor):
- SLOWER when p < alpha per look, the interval's low end exceeds f, and the
  ratio exceeds the A/A noise (B moved more than A moved against itself);
- UNCHANGED when the interval's high end is below f (FASTER when it is below 1/f);
- UNDECIDED otherwise, with the reason and what would decide it.
"""

from __future__ import annotations

import math
import random
import statistics
from dataclasses import dataclass

ALPHA = 0.05  # family-wise false-alarm rate over all looks of one comparison
CONFIDENCE = 0.95  # of the ratio's bootstrap interval
BOOTSTRAP = 2000  # resamples
MAX_ROUNDS = 10
# The exact test's smallest two-sided p with 5 processes a side is 2/252 = 0.0079, just under
# ALPHA over the 6 looks of rounds 5..10: fewer rounds could never reach a verdict of SLOWER.
MIN_ROUNDS = 5
FEWEST = 4  # processes a side below which nothing is decided: the interval and A/A mean little with fewer

SLOWER, UNCHANGED, FASTER, UNDECIDED = "slower", "unchanged", "faster", "undecided"
EXIT_CODES = {UNCHANGED: 0, FASTER: 0, SLOWER: 1, UNDECIDED: 3}


@dataclass(frozen=True)
class Verdict:
    decision: str  # SLOWER, UNCHANGED, FASTER or UNDECIDED
    ratio: float  # median(B) / median(A)
    low: float  # bootstrap interval of the ratio
    high: float
    p_value: float  # two-sided Mann-Whitney U over process medians
    alpha: float  # the per-look level p was judged against
    noise: float  # A/A: A's odd rounds against its even rounds, as a factor >= 1 (nan below 4 rounds)
    rounds: tuple[int, int]  # processes of A and of B
    reason: str  # why, in words; for UNDECIDED also what to do

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.decision]


def per_look_alpha(min_rounds: int = MIN_ROUNDS, max_rounds: int = MAX_ROUNDS) -> float:
    """ALPHA shared by every round at which the loop may stop (one look per round from min_rounds on)."""
    return ALPHA / max(1, max_rounds - min_rounds + 1)


def mann_whitney_p(a: list[float], b: list[float]) -> float:
    from asv._stats import mann_whitney_u  # asv's own test: exact for up to 20 a side, ties counted conservatively

    return float(mann_whitney_u(a, b)[1])


def ratio_interval(a: list[float], b: list[float], confidence: float = CONFIDENCE, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of median(b) / median(a), each side resampled on its own."""
    rng = random.Random(seed)
    ratios = sorted(
        statistics.median(rng.choices(b, k=len(b))) / statistics.median(rng.choices(a, k=len(a)))
        for _ in range(BOOTSTRAP)
    )
    tail = (1 - confidence) / 2
    return ratios[int(tail * (BOOTSTRAP - 1))], ratios[int((1 - tail) * (BOOTSTRAP - 1))]


def aa_noise(a: list[float]) -> float:
    """A against itself: median of its odd rounds over its even rounds, as a factor >= 1 (nan below 4)."""
    if len(a) < 4:
        return float("nan")
    ratio = statistics.median(a[0::2]) / statistics.median(a[1::2])
    return max(ratio, 1 / ratio)


def judge(a: list[float], b: list[float], factor: float, alpha: float | None = None) -> Verdict:
    """Decide whether B is slower than A from each side's per-process medians (seconds, in round order)."""
    alpha = per_look_alpha() if alpha is None else alpha
    if min(len(a), len(b)) < 2:
        raise ValueError("judge needs at least two processes a side")
    ratio = statistics.median(b) / statistics.median(a)
    low, high = ratio_interval(a, b)
    p_value = mann_whitney_p(a, b)
    noise = aa_noise(a)
    rounds = (len(a), len(b))
    shown = f"ratio {ratio:.3f} [{low:.3f}, {high:.3f}], factor {factor:g}, A/A {noise:.3f}, p {p_value:.4f}"
    beyond_noise = math.isnan(noise) or ratio > noise  # nan: no A/A yet, the factor alone
    if min(rounds) < FEWEST:
        return Verdict(UNDECIDED, ratio, low, high, p_value, alpha, noise, rounds,
                       f"undecided: {shown}; too few processes ({min(rounds)} < {FEWEST} a side): allow more rounds")
    if p_value < alpha and low > factor and beyond_noise:
        return Verdict(SLOWER, ratio, low, high, p_value, alpha, noise, rounds,
                       f"slower: {shown}; p < {alpha:.4f}, the whole interval above the factor, the ratio above A/A")
    if high < 1 / factor:
        return Verdict(FASTER, ratio, low, high, p_value, alpha, noise, rounds,
                       f"faster: {shown}; the whole interval is below 1/{factor:g}")
    if high < factor:
        return Verdict(UNCHANGED, ratio, low, high, p_value, alpha, noise, rounds,
                       f"unchanged: {shown}; the whole interval is below the factor")
    if not math.isnan(noise) and noise > factor and not beyond_noise:
        why = (f"too noisy: A against itself moved {noise:.3f}x, more than the factor {factor:g}; run on a quieter"
               " machine or compare a row with longer steps")
    elif low > factor:
        why = (f"too few processes for the test (p {p_value:.4f}, needs < {alpha:.4f}): allow more rounds"
               " (--max-rounds)")
    else:
        why = (f"the interval [{low:.3f}, {high:.3f}] straddles the factor {factor:g}: a change this size needs more"
               " rounds (--max-rounds) or a quieter machine")
    return Verdict(UNDECIDED, ratio, low, high, p_value, alpha, noise, rounds, f"undecided: {why}")
