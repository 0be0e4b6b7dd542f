"""Input patterns that broke before: silent wrong results, nondeterminism and leaks, one tracked row each.

A jump on ``Correctness.track_relative_error`` (past releases' layouts, which also guard every model timing:
suite.guard) or ``ReportedCorrectness.track_relative_error`` (the 2025-2026 reports) is a
silent-correctness regression; ``Determinism.track_largest_difference`` is how far identical calls of every
pattern drift apart; ``LeakPatterns.track_growth`` is the growth of the loops users found leaking on mps. The
patterns: docs/explanation/workloads.md, their tolerances docs/explanation/instruments.md. All are measured in one ``setup_cache``
(mpsbench.measure.measured).
"""

from mpsbench.measure import correctness, devices, leak, measured, tolerances

from .common import Lookup, measuring


@measured.deferred
def _measure_patterns():
    """The setup_cache of every class here: their first lookup measures every family (mpsbench.measure.measured)."""
    return measured.measure_families(
        {
            "correctness": measuring(correctness.measure, Correctness),
            "reported": measuring(correctness.measure_reported, ReportedCorrectness),
            "determinism": measuring(correctness.measure_determinism, Determinism),
            "leaks": measuring(leak.measure_patterns, LeakPatterns),
        }
    )


class Correctness(Lookup):
    """Relative error of each pattern on each device and dtype against float64 on the cpu."""

    kind = "correctness"  # its family in the shared setup_cache
    param_names = ("device", "pattern", "dtype")
    params = (devices.NAMES, correctness.NAMES, tolerances.DTYPES)
    version = "1"
    setup_cache = (
        _measure_patterns  # one key for every class here: asv keys a cache by where it is defined
    )

    def track_relative_error(self, readings, device, pattern, dtype):
        """max|device - reference| / max|reference|; the guard's tolerance per dtype is in docs/explanation/instruments.md."""
        return self.figure(readings, (device, pattern, dtype), "relative_error")

    track_relative_error.unit = tolerances.ERROR_UNIT


class ReportedCorrectness(Lookup):
    """The calls of the 2025-2026 reports, each in the dtypes its report showed wrong: the worst call's error.

    Identical calls back to back, then unrelated work (other sizes allocated, used and freed), then one more
    (correctness.reading); a pattern that crashed its process runs in a child, so a crash fails its row only.
    """

    kind = "reported"
    param_names = ("device", "pattern", "dtype")
    params = (devices.NAMES, correctness.REPORTED, tolerances.DTYPES)
    version = "1"
    setup_cache = _measure_patterns

    def track_relative_error(self, readings, device, pattern, dtype):
        """Largest max|device - reference| / max|reference| over the calls; tolerance per dtype:
        docs/explanation/instruments.md."""
        return self.figure(readings, (device, pattern, dtype), "relative_error")

    track_relative_error.unit = tolerances.ERROR_UNIT


class Determinism(Lookup):
    """Every pattern's identical calls on identical inputs, before and after unrelated work: bit-identical or not."""

    kind = "determinism"
    param_names = ("device", "pattern", "dtype")
    params = (devices.NAMES, tuple(correctness.PATTERNS), tolerances.DTYPES)
    version = "1"
    setup_cache = _measure_patterns

    def track_largest_difference(self, readings, device, pattern, dtype):
        """max|call - first call| / max|first call| over the later calls: 0 when every call is bit-identical."""
        return self.figure(readings, (device, pattern, dtype), "largest_difference")

    track_largest_difference.unit = tolerances.DIFFERENCE_UNIT


class LeakPatterns(Lookup):
    """Memory growth of each leak-prone loop, in MiB per 1,000 iterations (leak.py's least-squares slope)."""

    kind = "leaks"
    param_names = ("device", "pattern")
    params = (devices.NAMES, leak.PATTERN_NAMES)
    version = "1"
    setup_cache = _measure_patterns

    def track_growth(self, readings, device, pattern):
        """About 0 for a clean loop. cuda: memory_allocated; mps: current_allocated_memory; cpu: process RSS."""
        return self.figure(readings, (device, pattern), "growth")

    track_growth.unit = "MiB/1000 iterations"
