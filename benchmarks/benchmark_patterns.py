"""Input patterns that broke before: silent wrong results and leaks, one tracked row each (issue 21).

A jump on ``Correctness.track_relative_error`` is a silent-correctness regression (the same patterns guard
every model timing: suite.guard); ``LeakPatterns.track_growth`` is the growth of the loops users found
leaking on mps. The patterns: docs/workloads.md. Both are measured in one ``setup_cache`` (mpsbench.measure.measured).
"""

from mpsbench.measure import correctness, devices, leak_patterns, measured


def _measure_patterns(self):
    """The setup_cache of both classes: one spawned interpreter measures both families."""
    return measured.measure_families({
        "correctness": measured.of(Correctness, correctness.measure),
        "leaks": measured.of(LeakPatterns, leak_patterns.measure),
    })


_measure_patterns.timeout = 1800  # four leak loops per device, each a few seconds; the patterns milliseconds


class Correctness(measured.Lookup):
    """Relative error of each pattern on each device and dtype against float64 on the cpu."""

    kind = "correctness"  # its family in the shared setup_cache
    param_names = ("device", "pattern", "dtype")
    params = (devices.NAMES, correctness.NAMES, correctness.DTYPES)
    version = "1"
    setup_cache = _measure_patterns  # one key for both classes: asv keys a cache by where it is defined

    track_relative_error = measured.track(
        "relative_error", "relative error",
        "max|device - reference| / max|reference|; the guard's tolerance per dtype is in docs/instruments.md.")


class LeakPatterns(measured.Lookup):
    """Memory growth of each leak-prone loop, in MiB per 1,000 iterations (leak.py's least-squares slope)."""

    kind = "leaks"
    param_names = ("device", "pattern")
    params = (devices.NAMES, leak_patterns.NAMES)
    version = "1"
    setup_cache = _measure_patterns

    track_growth = measured.track(
        "growth", "MiB/1000 iterations",
        "About 0 for a clean loop. cuda: memory_allocated; mps: current_allocated_memory; cpu: process RSS.")
