"""When a change of one row counts as a regression: the one rule the alert, the report and the site use.

Direction from the unit, a floor per unit, asv's threshold widened by the row's noise, noisy rows marked
rather than alarmed on, no bare medians for rates, asv's significance test (docs/site.md says why for each).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

from mpsbench.regressions import factor
from mpsbench.results.recorded import Measured

# Units where more is better: asv's increases there are improvements.
HIGHER_IS_BETTER = frozenset({"samples/s", "images/s", "GFLOP/s", "GB/s", "samples"})
# The smallest absolute change worth judging, per unit, and why.
FLOORS = {
    # leak slopes: cpu readings are the process's RSS, which moves by allocator chunks;
    # the 2026-11-23 cpu run recorded -0.86 .. +0.45 MiB/100 steps for steps that do not leak
    "MiB/100 steps": 1.0,
    "ops": 1.0,  # fallback counts are whole ops: one new fallback op is a change, less is none
    "MiB": 1.0,  # peak and driver memory: below a MiB is allocator rounding
    "seconds": 5e-6,  # tiny ops: a few microseconds is a cpu's timer and dispatch jitter
    "fraction": 0.01,  # data-wait fraction of an epoch: one percentage point
}
# the change must exceed the two builds' interquartile ranges laid end to end (2 x the sum of the half-IQRs):
# docs/site.md, 0 of 2000 simulated A/A pairs beyond it
NOISE_MULTIPLE = 2.0
NOISY = 0.10  # relative half-IQR above this: the row cannot show a change of a few percent


@dataclass(frozen=True)
class Rules:
    """asv.conf.json's ``regressions_thresholds`` (fractions per regex) and the floors above."""

    fractions: dict[str, float]

    @classmethod
    def from_config(cls, config: Path | None) -> Rules:
        return cls(factor.thresholds(config) if config is not None else {})

    def fraction(self, entry: str, branch: str | None = None) -> float:
        """asv publish's rule: the largest fraction whose regex matches ``entry@branch``, else asv's 5%."""
        name = entry + (f"@{branch}" if branch else "")
        matching = [value for regex, value in self.fractions.items() if re.match(regex, name)]
        return max(matching) if matching else factor.ASV_DEFAULT_THRESHOLD


def noise(measured: Measured) -> float | None:
    """The relative half interquartile range asv recorded for the value, or None without statistics."""
    from asv_runner.statistics import get_err

    stats = measured.stats
    if not stats or stats.get("q_25") is None or stats.get("q_75") is None or not measured.value:
        return None
    return abs(float(get_err(measured.value, stats)) / measured.value)


def _significant(old: Measured, new: Measured) -> bool | None:
    """asv's test where both carry statistics with more than one sample; None where it cannot say."""
    from asv import _stats

    for measured in (old, new):
        stats = measured.stats
        if not stats or stats.get("repeat") == 1 or any(
                not isinstance(stats.get(key), (int, float)) or not math.isfinite(stats[key])
                for key in ("ci_99_a", "ci_99_b")):
            return None
    return bool(_stats.is_different(old.samples, new.samples, old.stats, new.stats))


@dataclass(frozen=True)
class Judgement:
    verdict: str  # slower, faster, unchanged, noisy, below floor, not significant or no statistics
    ratio: float  # new/old in the worse direction: above 1 is worse (inf from a zero baseline)
    threshold: float  # the fraction this row needed
    reason: str

    @property
    def slower(self) -> bool:
        return self.verdict == "slower"


def judge(rules: Rules, entry: str, unit: str, old: Measured, new: Measured, branch: str | None = None) -> Judgement:
    """How ``new`` compares with ``old`` for one row (the module's docstring says how)."""
    if unit in HIGHER_IS_BETTER:
        worse, before, after = old.value - new.value, new.value, old.value
    else:
        worse, before, after = new.value - old.value, old.value, new.value
    ratio = after / before if before > 0 else (math.inf if worse > 0 else 1.0)
    floor = FLOORS.get(unit, 0.0)
    base = rules.fraction(entry, branch)
    # the row's noise: asv_runner's half interquartile range of each build, side by side
    spreads = [(m, s) for m in (old, new) if (s := noise(m)) is not None]
    errors = [s * abs(m.value) for m, s in spreads]
    threshold = max(base, NOISE_MULTIPLE * sum(errors) / before) if before > 0 else base
    spread = max((s for _, s in spreads), default=0.0)
    if abs(worse) < floor or worse == 0:
        return Judgement("below floor" if worse else "unchanged", ratio, threshold,
                         f"changed by {abs(worse):.3g} {unit}, within the floor {floor:g}")
    if unit in HIGHER_IS_BETTER and not errors:
        # asv keeps no statistics for track_ rates: a bare median is what made the false alarms,
        # and each rate is the batch or bytes over a step time whose timed row is judged
        return Judgement("no statistics", ratio, threshold,
                         "a rate with no recorded statistics: its timed row (time_*) is judged instead")
    near_zero = abs(old.value) <= floor
    if not (near_zero or ratio > 1 + threshold or ratio < 1 / (1 + threshold)):
        if spread > NOISY:
            return Judgement("noisy", ratio, threshold,
                             f"{ratio:.3f}x within the row's noise: spread +-{spread:.0%} of the value"
                             f" (noisy above +-{NOISY:.0%})")
        return Judgement("unchanged", ratio, threshold, f"{ratio:.3f}x is within {1 + threshold:.3g}x")
    if _significant(old, new) is False:
        return Judgement("not significant", ratio, threshold, "asv's test finds the two builds' values alike")
    verdict = "slower" if worse > 0 else "faster"
    how = f"by {abs(worse):.3g} {unit} from near zero" if near_zero else f"{ratio:.3f}x, beyond {1 + threshold:.3g}x"
    return Judgement(verdict, ratio, threshold, how)
