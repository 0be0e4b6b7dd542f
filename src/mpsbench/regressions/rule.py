"""The regression rule for recorded rows (docs/explanation/site.md, instruments.md)."""

from __future__ import annotations

import enum
import functools
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from mpsbench.measure import tolerances
from mpsbench.results.recorded import Measured, unit


class Decision(str, enum.Enum):
    __str__ = str.__str__

    SLOWER = "slower"
    WRONG = "wrong"  # an error past its tolerance, or identical calls no longer bit-identical
    UNCHANGED = "unchanged"
    FASTER = "faster"
    UNDECIDED = "undecided"

    @property
    def exit_status(self) -> int:  # 2 is bad input
        return {Decision.SLOWER: 1, Decision.WRONG: 1, Decision.UNDECIDED: 3}.get(self, 0)


ASV_DEFAULT_THRESHOLD = 0.05  # what asv publish uses when no entry matches


def threshold(thresholds: Mapping[str, float], entry: str, branch: str | None = None) -> float:
    """As asv publish: the largest fraction whose regex matches ``entry@branch``, else 5%."""
    name = entry + (f"@{branch}" if branch else "")
    return max(
        (value for regex, value in thresholds.items() if re.match(regex, name)),
        default=ASV_DEFAULT_THRESHOLD,
    )


def factor(thresholds: Mapping[str, float], entry: str = "") -> float:
    return 1.0 + threshold(thresholds, entry)


NOISE_MULTIPLE = 2.0
NOISY = 0.10  # relative half-IQR above this: the row cannot show a change of a few percent
P_THRESHOLD = 0.002  # asv's significance level for two samples
CI = ("ci_99_a", "ci_99_b")


def noise(measured: Measured) -> float | None:
    """asv's relative half interquartile range; None without statistics."""
    from mpsbench.core.asv_internals import get_err

    stats = measured.stats
    if not stats or stats.get("q_25") is None or stats.get("q_75") is None or not measured.value:
        return None
    return abs(float(get_err(measured.value, stats)) / measured.value)


@functools.cache
def _orderings(m: int, n: int, u: int) -> int:
    if u < 0:
        return 0
    if not m or not n:
        return int(u == 0)
    return _orderings(m - 1, n, u - n) + _orderings(m, n - 1, u)


def mann_whitney_p(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided Mann-Whitney U p as asv's private test: exact up to 20 a side, else normal."""
    m, n = len(a), len(b)
    below = sum(x < y for x in a for y in b)
    ties = sum(x == y for x in a for y in b)
    u = min(max(below, m * n // 2), below + ties)  # the tie split nearest the middle
    tail = min(u, m * n - u)
    if max(m, n) <= 20:
        p = 2 * sum(_orderings(m, n, k) for k in range(tail + 1)) / math.comb(m + n, m)
    else:
        p = math.erfc(-(tail - m * n / 2) / math.sqrt(m * n * (m + n + 1) / 12) / math.sqrt(2))
    return min(1.0, p)


def _significant(old: Measured, new: Measured) -> bool | None:
    """asv's test (None without statistics): the U test where the samples can reach its level,
    else whether the 99% intervals are apart."""
    a, b = old.stats or {}, new.stats or {}
    for stats in (a, b):
        finite = (isinstance(v := stats.get(k), (int, float)) and math.isfinite(v) for k in CI)
        if not stats or stats.get("repeat") == 1 or not all(finite):
            return None
    x, y = old.samples or (), new.samples or ()
    if x and y and 1 / math.comb(len(x) + len(y), min(len(x), len(y))) < P_THRESHOLD:
        return mann_whitney_p(x, y) < P_THRESHOLD
    return not (a["ci_99_b"] >= b["ci_99_a"] and a["ci_99_a"] <= b["ci_99_b"])


@dataclass(frozen=True)
class Judgement:
    decision: Decision
    label: str  # the decision or a finer word: below floor, noisy, ...
    ratio: float  # new/old in the worse direction: above 1 is worse
    threshold: float  # the fraction this row needed
    reason: str

    @property
    def slower(self) -> bool:
        return self.decision is Decision.SLOWER

    @property
    def regressed(self) -> bool:
        return self.decision in (Decision.SLOWER, Decision.WRONG)


def change_ratio(before: float, after: float) -> float:
    """after/before; from 0 or below: inf if it grew, else 1."""
    return after / before if before > 0 else (math.inf if after > before else 1.0)


def _correctness(entry: str, unit_name: str, old: Measured, new: Measured) -> Judgement | None:
    change = f"{old.value:.3g} -> {new.value:.3g}"
    if unit_name == tolerances.ERROR_UNIT:
        limit = tolerances.tolerance(entry)
        bad, good, what = "wrong result", "fixed", f"relative error {change}, tolerance {limit:g}"
    elif unit_name == tolerances.DIFFERENCE_UNIT:
        limit, bad, good = 0.0, "nondeterministic", "deterministic"
        what = f"identical calls differ by {change} of their scale, where 0 is bit-identical"
    else:
        return None
    ratio = change_ratio(old.value, new.value)
    if new.value > limit >= old.value:
        return Judgement(Decision.WRONG, bad, ratio, limit, what)
    if old.value > limit >= new.value:
        return Judgement(Decision.FASTER, good, ratio, limit, what)
    side = "still past the line" if old.value > limit else "within the line"
    return Judgement(Decision.UNCHANGED, "unchanged", ratio, limit, f"{what}: {side}")


def judge(
    thresholds: Mapping[str, float],
    entry: str,
    unit_name: str,
    old: Measured,
    new: Measured,
    branch: str | None = None,
) -> Judgement:
    correctness = _correctness(entry, unit_name, old, new)
    if correctness is not None:
        return correctness
    found = unit(unit_name)
    before, after = (new.value, old.value) if found.higher_is_better else (old.value, new.value)
    worse, ratio = after - before, change_ratio(before, after)
    base = threshold(thresholds, entry, branch)
    spreads = [(m, s) for m in (old, new) if (s := noise(m)) is not None]
    errors = [s * abs(m.value) for m, s in spreads]
    # a change must exceed the two builds' IQRs end to end (docs/explanation/site.md)
    limit = max(base, NOISE_MULTIPLE * sum(errors) / before) if before > 0 else base

    def judged(decision: Decision, reason: str, label: str = "") -> Judgement:
        return Judgement(decision, label or decision.value, ratio, limit, reason)

    if abs(worse) < found.floor or worse == 0:
        return judged(
            Decision.UNCHANGED,
            f"changed by {abs(worse):.3g} {found.name}, within the floor {found.floor:g}",
            "below floor" if worse else "",
        )
    if found.higher_is_better and not errors:
        # asv keeps no statistics for track_ rates, and a bare median made false alarms
        return judged(
            Decision.UNDECIDED,
            "a rate with no recorded statistics: its timed row (time_*) is judged instead",
            "no statistics",
        )
    near_zero = abs(old.value) <= found.floor
    if not (near_zero or ratio > 1 + limit or ratio < 1 / (1 + limit)):
        spread = max((s for _, s in spreads), default=0.0)
        if spread > NOISY:
            return judged(
                Decision.UNDECIDED,
                f"{ratio:.3f}x within the row's noise: spread +-{spread:.0%} of the value"
                f" (noisy above +-{NOISY:.0%})",
                "noisy",
            )
        return judged(Decision.UNCHANGED, f"{ratio:.3f}x is within {1 + limit:.3g}x")
    if _significant(old, new) is False:
        return judged(
            Decision.UNDECIDED, "asv's test finds the two builds' values alike", "not significant"
        )
    how = (
        f"by {abs(worse):.3g} {found.name} from near zero"
        if near_zero
        else f"{ratio:.3f}x, beyond {1 + limit:.3g}x"
    )
    return judged(Decision.SLOWER if worse > 0 else Decision.FASTER, how)
