"""The one regression rule: the decisions, the units' directions and floors, the threshold each row is judged by.

Every command that says "slower" says it here: compare and bisect (verdict.py's test against :func:`factor`), and
alerts, the Regressions page, the report and ops-rank (recorded values, :func:`judge`: direction from the unit, a floor
per unit, asv's threshold widened by the row's noise, noisy rows marked rather than alarmed on, no bare medians for
rates, asv's significance test; docs/explanation/site.md says why for each). A correctness row's regression is "wrong": its error
past its dtype's tolerance, or identical calls no longer bit-identical (docs/explanation/instruments.md).
"""

from __future__ import annotations

import enum
import functools
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from mpsbench.core import asvconf
from mpsbench.measure import tolerances
from mpsbench.results.recorded import Measured, unit


class Decision(str, enum.Enum):
    """What a comparison of two builds decides; a ``str`` so that it prints and serializes as its word."""

    SLOWER = "slower"
    WRONG = "wrong"  # a correctness row past its tolerance, or identical calls that no longer agree bit for bit
    UNCHANGED = "unchanged"
    FASTER = "faster"
    UNDECIDED = "undecided"

    @property
    def exit_status(self) -> int:
        """A command's exit status for it: 1 slower or wrong, 3 undecided, 0 otherwise (2 is only a user's mistake)."""
        return {Decision.SLOWER: 1, Decision.WRONG: 1, Decision.UNDECIDED: 3}.get(self, 0)


ASV_DEFAULT_THRESHOLD = 0.05  # what asv publish uses when no entry matches


def threshold(thresholds: Mapping[str, float], entry: str, branch: str | None = None) -> float:
    """The fraction a row is judged by, everywhere, as asv publish judges: the largest whose regex matches
    ``entry@branch``, else asv's 5%."""
    name = entry + (f"@{branch}" if branch else "")
    return max(
        (value for regex, value in thresholds.items() if re.match(regex, name)),
        default=ASV_DEFAULT_THRESHOLD,
    )


def factor(thresholds: Mapping[str, float], entry: str = "", branch: str | None = None) -> float:
    """:func:`threshold` as compare, bisect and ``asv continuous --factor`` take it (0.05 -> 1.05)."""
    return 1.0 + threshold(thresholds, entry, branch)


def regression_factor(config: Path = asvconf.CONFIG, entry: str = "") -> float:
    return factor(asvconf.load(config).thresholds, entry)


# the change must exceed the two builds' interquartile ranges laid end to end (2 x the sum of the half-IQRs):
# docs/explanation/site.md, 0 of 2000 simulated A/A pairs beyond it
NOISE_MULTIPLE = 2.0
NOISY = 0.10  # relative half-IQR above this: the row cannot show a change of a few percent
P_THRESHOLD = 0.002  # asv's significance level for two samples


def noise(measured: Measured) -> float | None:
    """asv's relative half interquartile range of the value, or None without statistics."""
    from mpsbench.core.asv_internals import get_err

    stats = measured.stats
    if not stats or stats.get("q_25") is None or stats.get("q_75") is None or not measured.value:
        return None
    return abs(float(get_err(measured.value, stats)) / measured.value)


@functools.cache
def _orderings(m: int, n: int, u: int) -> int:
    """How many of the orderings of m values of one side and n of the other have U statistic ``u``."""
    if u < 0:
        return 0
    if not m or not n:
        return int(u == 0)
    return _orderings(m - 1, n, u - n) + _orderings(m, n - 1, u)


def mann_whitney_p(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided p of the Mann-Whitney U test: exact up to 20 values a side, else the normal approximation;
    ties split the least significant way (as asv's own test, which asv keeps private)."""
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
    """asv's test where both carry statistics of more than one sample (None where it cannot say): with samples enough
    for the U test to reach its level, the test; otherwise different only where the 99% intervals do not overlap."""
    for measured in (old, new):
        stats = measured.stats
        if (
            not stats
            or stats.get("repeat") == 1
            or any(
                not isinstance(stats.get(key), (int, float)) or not math.isfinite(stats[key])
                for key in ("ci_99_a", "ci_99_b")
            )
        ):
            return None
    if (
        old.samples
        and new.samples
        and 1
        / math.comb(len(old.samples) + len(new.samples), min(len(old.samples), len(new.samples)))
        < P_THRESHOLD
    ):
        return mann_whitney_p(old.samples, new.samples) < P_THRESHOLD
    a, b = old.stats, new.stats
    assert a is not None and b is not None  # checked above
    return not (a["ci_99_b"] >= b["ci_99_a"] and a["ci_99_a"] <= b["ci_99_b"])


@dataclass(frozen=True)
class Judgement:
    decision: Decision
    label: str  # the decision's word, or the finer one: below floor, noisy, not significant, no statistics
    ratio: float  # new/old in the worse direction: above 1 is worse (inf from a zero baseline)
    threshold: float  # the fraction this row needed
    reason: str

    @property
    def slower(self) -> bool:
        return self.decision is Decision.SLOWER

    @property
    def regressed(self) -> bool:  # what an alert raises and the Regressions page keeps
        return self.decision in (Decision.SLOWER, Decision.WRONG)


def _correctness(entry: str, unit_name: str, old: Measured, new: Measured) -> Judgement | None:
    """An error row judged by its dtype's tolerance, a difference row by bit-identity; None for any other row."""
    if unit_name == tolerances.ERROR_UNIT:
        limit = tolerances.tolerance(entry)
        labels, what = (
            ("wrong result", "fixed"),
            f"relative error {old.value:.3g} -> {new.value:.3g}, tolerance {limit:g}",
        )
    elif unit_name == tolerances.DIFFERENCE_UNIT:
        limit = 0.0
        labels, what = (
            ("nondeterministic", "deterministic"),
            (
                f"identical calls differ by {old.value:.3g} -> {new.value:.3g} of their scale, where 0 is bit-identical"
            ),
        )
    else:
        return None
    ratio = new.value / old.value if old.value > 0 else (math.inf if new.value > 0 else 1.0)
    if new.value > limit >= old.value:
        return Judgement(Decision.WRONG, labels[0], ratio, limit, what)
    if old.value > limit >= new.value:
        return Judgement(Decision.FASTER, labels[1], ratio, limit, what)
    side = "still past the line" if old.value > limit else "within the line"
    return Judgement(Decision.UNCHANGED, Decision.UNCHANGED.value, ratio, limit, f"{what}: {side}")


def judge(
    thresholds: Mapping[str, float],
    entry: str,
    unit_name: str,
    old: Measured,
    new: Measured,
    branch: str | None = None,
) -> Judgement:
    """How ``new`` compares with ``old`` for one recorded row (the module's docstring says how)."""
    correctness = _correctness(entry, unit_name, old, new)
    if correctness is not None:
        return correctness
    found = unit(unit_name)
    if found.higher_is_better:
        worse, before, after = old.value - new.value, new.value, old.value
    else:
        worse, before, after = new.value - old.value, old.value, new.value
    ratio = after / before if before > 0 else (math.inf if worse > 0 else 1.0)
    base = threshold(thresholds, entry, branch)
    # the row's noise: asv_runner's half interquartile range of each build, side by side
    spreads = [(m, s) for m in (old, new) if (s := noise(m)) is not None]
    errors = [s * abs(m.value) for m, s in spreads]
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
        # asv keeps no statistics for track_ rates: a bare median is what made the false alarms,
        # and each rate is the batch or bytes over a step time whose timed row is judged
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
