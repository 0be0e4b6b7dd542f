"""Input patterns that broke before: silent wrong results, nondeterminism and leaks, one tracked row each.

A jump on ``Correctness.track_relative_error`` (past releases' layouts, which also guard every model timing:
suite.guard) or ``ReportedCorrectness.track_relative_error`` (the 2025-2026 reports) is a
silent-correctness regression; ``Determinism.track_largest_difference`` is how far identical calls of every
pattern drift apart; ``LeakPatterns.track_growth`` is the growth of the loops users found leaking on mps. The
patterns: docs/explanation/workloads.md, their tolerances docs/explanation/instruments.md. All are measured in one ``setup_cache``
(mpsbench.measure.measured).
"""

from mpsbench.measure import correctness, devices, leak, measured, tolerances


@measured.deferred
def _measure_patterns():
    """The setup_cache of every class here: their first lookup measures every family (mpsbench.measure.measured)."""
    return measured.measure_families(
        {
            "correctness": measured.of(Correctness, correctness.measure),
            "reported": measured.of(ReportedCorrectness, correctness.measure_reported),
            "determinism": measured.of(Determinism, correctness.measure_determinism),
            "leaks": measured.of(LeakPatterns, leak.measure_patterns),
        }
    )


class Correctness(measured.Lookup):
    """Relative error of each pattern on each device and dtype against float64 on the cpu."""

    kind = "correctness"  # its family in the shared setup_cache
    param_names = ("device", "pattern", "dtype")
    params = (devices.NAMES, correctness.NAMES, tolerances.DTYPES)
    version = "1"
    setup_cache = (
        _measure_patterns  # one key for every class here: asv keys a cache by where it is defined
    )

    track_relative_error = measured.track(
        "relative_error",
        tolerances.ERROR_UNIT,
        "max|device - reference| / max|reference|; the guard's tolerance per dtype is in docs/explanation/instruments.md.",
    )


class ReportedCorrectness(measured.Lookup):
    """The calls of the 2025-2026 reports, each in the dtypes its report showed wrong: the worst call's error.

    Identical calls back to back, then unrelated work (other sizes allocated, used and freed), then one more
    (correctness.reading); a pattern that crashed its process runs in a child, so a crash fails its row only.
    """

    kind = "reported"
    param_names = ("device", "pattern", "dtype")
    params = (devices.NAMES, correctness.REPORTED, tolerances.DTYPES)
    version = "1"
    setup_cache = _measure_patterns

    track_relative_error = measured.track(
        "relative_error",
        tolerances.ERROR_UNIT,
        "Largest max|device - reference| / max|reference| over the calls; tolerance per dtype: docs/explanation/instruments.md.",
    )


class Determinism(measured.Lookup):
    """Every pattern's identical calls on identical inputs, before and after unrelated work: bit-identical or not."""

    kind = "determinism"
    param_names = ("device", "pattern", "dtype")
    params = (devices.NAMES, tuple(correctness.PATTERNS), tolerances.DTYPES)
    version = "1"
    setup_cache = _measure_patterns

    track_largest_difference = measured.track(
        "largest_difference",
        tolerances.DIFFERENCE_UNIT,
        "max|call - first call| / max|first call| over the later calls: 0 when every call is bit-identical.",
    )


class LeakPatterns(measured.Lookup):
    """Memory growth of each leak-prone loop, in MiB per 1,000 iterations (leak.py's least-squares slope)."""

    kind = "leaks"
    param_names = ("device", "pattern")
    params = (devices.NAMES, leak.PATTERN_NAMES)
    version = "1"
    setup_cache = _measure_patterns

    track_growth = measured.track(
        "growth",
        "MiB/1000 iterations",
        "About 0 for a clean loop. cuda: memory_allocated; mps: current_allocated_memory; cpu: process RSS.",
    )
