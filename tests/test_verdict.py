"""The rule of `mpsbench compare` on synthetic process medians: no timing, no asv run."""

from __future__ import annotations

import random

import pytest

from mpsbench.regressions import verdict

FACTOR = 1.05


def _processes(center: float, spread: float, count: int, seed: int) -> list[float]:
    """Process medians scattered by +-spread (a fraction) around center, as a busy machine scatters processes."""
    rng = random.Random(seed)
    return [center * (1 + rng.uniform(-spread, spread)) for _ in range(count)]


def test_a_clear_slowdown_is_slower_with_its_interval_above_the_factor():
    a, b = _processes(10.0, 0.03, 8, 1), _processes(13.0, 0.03, 8, 2)
    found = verdict.judge(a, b, FACTOR)
    assert found.decision == verdict.SLOWER and found.exit_code == 1
    assert FACTOR < found.low <= found.ratio <= found.high
    assert found.p_value < found.alpha


def test_identical_builds_are_rarely_slower_even_when_processes_scatter_widely():
    # A test at level alpha alarms on identical builds alpha of the time: 0.0083 per look here, and the
    # interval must also clear the factor. 100 pairs of 10 processes scattered by +-15%: at most 2 alarms.
    alarms = [seed for seed in range(100)
              if verdict.judge(_processes(10.0, 0.15, 10, seed), _processes(10.0, 0.15, 10, seed + 1000),
                               FACTOR).decision == verdict.SLOWER]
    assert len(alarms) <= 2, alarms


def test_identical_quiet_builds_are_unchanged():
    a, b = _processes(10.0, 0.005, 6, 3), _processes(10.0, 0.005, 6, 4)
    found = verdict.judge(a, b, FACTOR)
    assert found.decision == verdict.UNCHANGED and found.exit_code == 0
    assert found.high < FACTOR


def test_faster_is_exit_0():
    found = verdict.judge(_processes(10.0, 0.01, 6, 5), _processes(7.0, 0.01, 6, 6), FACTOR)
    assert found.decision == verdict.FASTER and found.exit_code == 0


def test_a_change_inside_the_noise_is_undecided_with_what_to_do():
    a, b = _processes(10.0, 0.2, 6, 7), _processes(10.8, 0.2, 6, 8)
    found = verdict.judge(a, b, FACTOR)
    assert found.decision == verdict.UNDECIDED and found.exit_code == 3
    assert "--max-rounds" in found.reason or "quieter" in found.reason


def test_aa_noise_beyond_the_factor_is_named_as_the_reason():
    a = [10.0, 12.0, 10.0, 12.0, 10.0, 12.0]  # odd and even rounds differ by 1.2x
    found = verdict.judge(a, [11.0, 11.5, 11.2, 10.9, 11.1, 11.3], FACTOR)
    assert found.noise == pytest.approx(1.2)
    assert found.decision == verdict.UNDECIDED and "too noisy" in found.reason


def test_too_few_processes_decide_nothing():
    found = verdict.judge([10.0, 10.0, 10.1], [20.0, 20.0, 20.1], FACTOR)
    assert found.decision == verdict.UNDECIDED and "too few processes" in found.reason


def test_within_process_precision_does_not_make_a_shift_between_processes_significant():
    # Each side's processes are tight, but the two medians differ by less than the factor: not slower.
    found = verdict.judge([10.0, 10.01, 10.02, 10.0, 10.01], [10.3, 10.31, 10.3, 10.32, 10.31], FACTOR)
    assert found.decision == verdict.UNCHANGED


def test_the_per_look_level_splits_alpha_over_the_looks():
    assert verdict.per_look_alpha(5, 10) == pytest.approx(verdict.ALPHA / 6)
    # the exact test can still reach it at the first look: 5 a side, perfectly separated
    assert verdict.mann_whitney_p([1.0, 1.1, 1.2, 1.3, 1.4], [2.0, 2.1, 2.2, 2.3, 2.4]) < verdict.per_look_alpha(5, 10)


def test_the_interval_is_reproducible():
    a, b = _processes(10.0, 0.1, 7, 9), _processes(12.0, 0.1, 7, 10)
    assert verdict.ratio_interval(a, b) == verdict.ratio_interval(a, b)


def test_a_change_larger_than_the_aa_noise_is_slower_even_on_a_noisy_machine():
    a = [10.0, 12.0, 10.0, 12.0, 10.0, 12.0]  # A/A 1.2x, beyond the factor
    found = verdict.judge(a, [20.0, 21.0, 20.5, 21.5, 20.2, 21.2], FACTOR)
    assert found.noise == pytest.approx(1.2) and found.ratio > found.noise
    assert found.decision == verdict.SLOWER
