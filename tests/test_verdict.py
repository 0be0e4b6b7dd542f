"""The rule of `mpsbench compare` on synthetic process medians: no timing, no asv run."""

from __future__ import annotations

import random

import pytest
from tools import verdict_simulation as simulation

from mpsbench.regressions import compare, verdict

FACTOR = 1.05


def _processes(center: float, spread: float, count: int, seed: int) -> list[float]:
    """Process medians scattered by +-spread (a fraction) around center, as a busy machine scatters processes."""
    rng = random.Random(seed)
    return [center * (1 + rng.uniform(-spread, spread)) for _ in range(count)]


def _contended(center: float, count: int, seed: int, fast_share: float = 0.5) -> list[float]:
    """Bimodal process medians as on the 2-core VM beside a one-core busy loop: a process that ran alone
    scatters by +-8% around center; one whose thread shared the busy core runs 1.8 to 3.5x slower."""
    rng = random.Random(seed)
    return [
        center
        * (1 + rng.uniform(-0.08, 0.08))
        * (1 if rng.random() < fast_share else rng.uniform(1.8, 3.5))
        for _ in range(count)
    ]


def _planned(low: int = verdict.MIN_ROUNDS, high: int = verdict.MAX_ROUNDS) -> dict[int, float]:
    """verdict.schedule's planned looks, from --min-rounds to --max-rounds, with their levels."""
    return {
        look: alpha for look, alpha in verdict.schedule(low, high).items() if low <= look <= high
    }


def _sequential(a: list[float], b: list[float]) -> verdict.Verdict:
    """What compare decides: a look at each planned look, at its level, stopping at the first decision."""
    for look, alpha in _planned().items():
        found = verdict.judge(a[:look], b[:look], FACTOR, alpha)
        if found.decision != verdict.UNDECIDED:
            break
    return found


def test_a_clear_slowdown_is_slower_with_its_interval_above_the_factor():
    a, b = _processes(10.0, 0.03, 8, 1), _processes(13.0, 0.03, 8, 2)
    found = verdict.judge(a, b, FACTOR)
    assert found.decision == verdict.SLOWER and found.exit_code == 1
    assert FACTOR < found.low <= found.ratio <= found.high
    assert found.p_value < found.alpha


def test_a_13x_slowdown_under_contention_is_found_in_the_fast_mode():
    # Half of each side's processes ran 1.8-3.5x slow: the medians of the mixtures say little, the
    # fast modes say 1.3x. 20 comparisons with fixed seeds, each up to 20 processes a side.
    found = [
        _sequential(_contended(3.0, 20, seed), _contended(3.9, 20, seed + 500)).decision
        for seed in range(20)
    ]
    assert found.count(verdict.SLOWER) >= 18, found


def test_identical_contended_builds_are_never_slower_even_after_unlucky_draws():
    # 20 A/A pairs of the same mixture, and the worst split: B drew one fast process in ten, A nine.
    found = [
        _sequential(_contended(3.0, 20, seed), _contended(3.0, 20, seed + 700)).decision
        for seed in range(20)
    ]
    assert verdict.SLOWER not in found, found
    rng = random.Random(5)
    a = [3.0 * (1 + rng.uniform(-0.08, 0.08)) for _ in range(9)] + [8.0]
    b = [3.0 * (1 + rng.uniform(-0.08, 0.08))] + [3.0 * rng.uniform(1.8, 3.5) for _ in range(9)]
    assert verdict.judge(a, b, FACTOR, verdict.per_look_alpha()).decision != verdict.SLOWER


def test_identical_builds_are_rarely_slower_even_when_processes_scatter_widely():
    # A test at level alpha alarms on identical builds alpha of the time (0.0063 per look here, against
    # the factor, not against 1): 100 pairs of 10 processes scattered by +-15%: at most 1 alarm.
    alarms = [
        seed
        for seed in range(100)
        if verdict.judge(
            _processes(10.0, 0.15, 10, seed), _processes(10.0, 0.15, 10, seed + 1000), FACTOR
        ).decision
        == verdict.SLOWER
    ]
    assert len(alarms) <= 1, alarms


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
    assert "--max-rounds" in found.reason


def test_aa_noise_beyond_the_factor_is_named_as_the_reason():
    a = [
        10.0,
        12.0,
        10.0,
        12.0,
        10.0,
        12.0,
    ]  # odd and even rounds differ by 1.2x, inside one fast mode
    found = verdict.judge(a, [11.0, 11.5, 11.2, 10.9, 11.1, 11.3], FACTOR)
    assert found.noise == pytest.approx(1.2)
    assert found.decision == verdict.UNDECIDED and "too noisy" in found.reason


def test_too_few_processes_decide_nothing():
    found = verdict.judge([10.0, 10.0, 10.1], [20.0, 20.0, 20.1], FACTOR)
    assert found.decision == verdict.UNDECIDED and "too few processes" in found.reason


def test_within_process_precision_does_not_make_a_shift_between_processes_significant():
    # Each side's processes are tight, but the two differ by less than the factor: not slower.
    found = verdict.judge(
        [10.0, 10.01, 10.02, 10.0, 10.01, 10.0], [10.3, 10.31, 10.3, 10.32, 10.31, 10.3], FACTOR
    )
    assert found.decision == verdict.UNCHANGED


def test_the_looks_spend_alpha_and_each_can_decide():
    assert list(_planned(5, 20)) == [5, 6, 8, 10, 12, 14, 16, 18, 20]
    assert list(_planned(4, 5)) == [4, 5]
    # a sole planned look has all that the early and extra looks leave
    assert _planned(6, 6) == {6: verdict.ALPHA - verdict.EXTRA_ALPHA}
    for low, high in ((5, 20), (4, 5), (5, 40), (6, 20), (6, 6), (40, 40)):
        early = {5: [2, 3, 4], 4: [2, 3]}.get(low, [])
        planned = _planned(low, high)
        assert list(planned) == sorted({low, *range(low + 1, high + 1, 2), high})
        assert sum(planned.values()) == pytest.approx(
            verdict.ALPHA - verdict.EARLY_ALPHA * len(early) - verdict.EXTRA_ALPHA
        )
        # early, planned and extra looks together: the family-wise level, however the looks depend
        every = verdict.schedule(low, high)
        assert sum(every.values()) == pytest.approx(verdict.ALPHA)
        assert list(every) == [*early, *planned, *range(high + 4, 3 * high + 1, 4)]
        assert all(every[look] == verdict.EARLY_ALPHA for look in early)
        assert all(alpha > 0 for alpha in every.values())
    levels = _planned()
    # the first look (5 a side) can decide: 5 processes that do not overlap give 1/252, below its level
    separated = verdict.permutation_p([1.0, 1.1, 1.2, 1.3, 1.0], [2.0, 2.1, 2.2, 2.3, 2.0], FACTOR)
    assert separated == pytest.approx(1 / 252) and separated < levels[5] < 2 / 252
    assert (
        verdict.schedule(4, 8)[4] > 1 / 70
    )  # a first look at 4 a side (--min-rounds 4) can decide too
    # every later look can too: the drawn test's smallest p, 1 / (1 + PERMUTATIONS), is below its level
    assert all(alpha > 2 / (1 + verdict.PERMUTATIONS) for alpha in levels.values())
    assert verdict.per_look_alpha() == min(levels.values())


def test_the_most_rounds_the_command_line_accepts_still_get_a_schedule():
    # from 515 a side comb(2n, n) no longer converts to a float: the first look gets level 0, which the
    # sampled test's smallest p, 1 / (1 + PERMUTATIONS), could not reach anyway
    for rounds in (514, 515, compare.MOST_ROUNDS):
        every = verdict.schedule(rounds, rounds)
        assert sum(every.values()) == pytest.approx(verdict.ALPHA)
    assert 0 < verdict.schedule(514, 516)[514] < 1e-300
    assert verdict.schedule(515, 517)[515] == 0.0


def test_identical_builds_alarm_no_more_often_than_under_the_previous_looks():
    # the same seeded draws judged under both schedules (tools/verdict_simulation.py runs thousands; docs/explanation/the-rule.md)
    for name, trials in (("h100", 60), ("cpu-contended", 30)):
        draw = simulation.DISTRIBUTIONS[name]
        now = [simulation.compare_trial(draw, 1.0, seed, None) for seed in range(trials)]
        before = [
            simulation.compare_trial(draw, 1.0, seed, simulation.PREVIOUS) for seed in range(trials)
        ]
        alarms = [
            sum(decision == verdict.SLOWER for decision, _ in found) for found in (now, before)
        ]
        assert alarms[0] <= alarms[1] and alarms[0] == 0, (name, now)
    # on the quiet GPU every identical pair is unchanged at an early look, before the first planned one
    quiet = [
        simulation.compare_trial(simulation.DISTRIBUTIONS["h100"], 1.0, seed, None)
        for seed in range(20)
    ]
    assert all(
        decision == verdict.UNCHANGED and rounds < verdict.MIN_ROUNDS for decision, rounds in quiet
    ), quiet


def test_a_65_percent_change_on_a_quiet_gpu_is_slower_at_the_first_look():
    found = [
        simulation.compare_trial(simulation.DISTRIBUTIONS["h100"], 1.065, seed, None)
        for seed in range(40)
    ]
    assert all(decision == verdict.SLOWER for decision, _ in found), found
    assert sum(rounds <= verdict.MIN_ROUNDS for _, rounds in found) >= 36, (
        found
    )  # the previous rule: 6 at the least
    assert sum(rounds < verdict.MIN_ROUNDS for _, rounds in found) >= 10, (
        found
    )  # an early look stopped these
    assert max(rounds for _, rounds in found) <= 8, found


def test_the_permutation_p_is_exact_for_small_sides_and_reproducible_for_large():
    # 4 a side, perfectly separated: the observed split is 1 of C(8, 4) = 70
    assert verdict.permutation_p(
        [1.0, 1.0, 1.0, 1.0], [2.0, 2.1, 2.2, 2.3], FACTOR
    ) == pytest.approx(1 / 70)
    assert verdict.permutation_p(
        [2.0, 2.1, 2.2, 2.3], [1.0, 1.0, 1.0, 1.0], FACTOR
    ) == pytest.approx(1)
    a, b = _contended(3.0, 15, 1), _contended(3.3, 15, 2)
    assert verdict.permutation_p(a, b, FACTOR) == verdict.permutation_p(a, b, FACTOR)


def test_the_fast_mode_is_the_mean_of_the_processes_near_the_fastest():
    assert verdict.fast_mode([3.0, 3.2, 9.0, 8.0, 3.1]) == pytest.approx(3.1)
    assert verdict.fast_mode([10.0, 11.0, 12.0]) == pytest.approx(11.0)  # quiet: every process


def test_the_interval_is_reproducible():
    a, b = _processes(10.0, 0.1, 7, 9), _processes(12.0, 0.1, 7, 10)
    assert verdict.ratio_interval(a, b) == verdict.ratio_interval(a, b)


def test_a_change_far_larger_than_the_aa_noise_is_slower_even_on_a_noisy_machine():
    a = [10.0, 12.0, 10.0, 12.0, 10.0, 12.0]  # A/A 1.2x, beyond the factor
    found = verdict.judge(a, [20.0, 21.0, 20.5, 21.5, 20.2, 21.2], FACTOR)
    assert found.noise == pytest.approx(1.2) and found.ratio > found.noise
    assert found.decision == verdict.SLOWER


def test_student_t_tail_matches_the_tables():
    # one-sided 0.005 critical values of Student's t (any table): df 1, 2, 4, 6
    for t, df in ((63.657, 1), (9.925, 2), (4.604, 4), (3.707, 6)):
        assert verdict.t_tail(t, df) == pytest.approx(0.005, abs=2e-5)
    assert verdict.t_tail(0.0, 3) == pytest.approx(0.5)
    assert verdict.t_tail(-2.0, 5) == pytest.approx(1 - verdict.t_tail(2.0, 5))


def test_an_early_look_stops_a_pair_far_apart_relative_to_the_factor_and_the_spread():
    found = verdict.early_judge(
        [37.0, 37.2], [42.0, 42.2], FACTOR
    )  # 13% against 5%, both sides within 0.5%
    assert found.decision == verdict.SLOWER and found.p_value < verdict.EARLY_ALPHA
    assert (
        verdict.early_judge([37.0, 37.2, 37.1], [37.1, 37.0, 37.2], FACTOR).decision
        == verdict.UNCHANGED
    )
    assert verdict.early_judge([42.0, 42.2], [37.0, 37.2], FACTOR).decision == verdict.FASTER
    # 8.4% against 5% takes a third process a side: at two the t test's 2 degrees of freedom need twice the distance
    assert verdict.early_judge([37.0, 37.2], [40.1, 40.3], FACTOR).decision == verdict.UNDECIDED
    assert (
        verdict.early_judge([37.0, 37.2, 37.1], [40.1, 40.3, 40.2], FACTOR).decision
        == verdict.SLOWER
    )


def test_an_early_look_never_decides_on_processes_that_disagree_or_agree_too_well():
    # a build whose processes differ by more than the factor (a contended one among them): the later looks decide
    found = verdict.early_judge([3.0, 3.0, 6.0], [9.0, 9.1, 9.0], FACTOR)
    assert found.decision == verdict.UNDECIDED and "differ by more than the factor" in found.reason
    # two processes a side that happen to agree exactly: the spread is taken as at least SPREAD_FLOOR, so 6% against a
    # factor of 5% is not certainty at two processes
    assert verdict.early_judge([1.0, 1.0], [1.06, 1.06], FACTOR).decision == verdict.UNDECIDED


@pytest.mark.parametrize("name", ["h100", "h200-forked"])
def test_the_early_looks_keep_their_level_on_the_quiet_gpu_at_the_factor(name):
    # B exactly at the factor: "slower" is the false alarm the early looks must keep under their share of alpha
    draw = simulation.DISTRIBUTIONS[name]
    alarms = 0
    for seed in range(400):
        rng = random.Random(seed)
        a = [draw(rng) for _ in range(4)]
        b = [draw(rng) * FACTOR for _ in range(4)]
        alarms += any(
            verdict.early_judge(a[:look], b[:look], FACTOR).decision == verdict.SLOWER
            for look in verdict.schedule()
            if look < verdict.MIN_ROUNDS
        )
    assert alarms <= 6, (
        alarms
    )  # 3 looks at 0.0025: 0.0075 expected, 3 of 400; 6 is its binomial 95% bound


def test_few_rounds_whose_own_spread_exceeds_the_effect_decide_nothing():
    # --min-rounds 4 --max-rounds 4 on a busy machine: B's 4 processes all lie beyond 1.05 x A's, so the
    # permutation test alone passes its level, but A's odd and even rounds differ by more than B sits
    # beyond the factor: the rule refuses, and the same rounds without that spread decide
    alpha = verdict.schedule(4, 4)[4]
    b = [1.30, 1.31, 1.32, 1.30]
    noisy = verdict.judge([1.00, 1.20, 1.01, 1.19], b, FACTOR, alpha)
    assert noisy.p_value < alpha and noisy.ratio > FACTOR
    assert noisy.noise > noisy.ratio / FACTOR
    assert noisy.decision == verdict.UNDECIDED and "too noisy for 4 rounds" in noisy.reason
    assert "--max-rounds" in noisy.reason
    clean = verdict.judge([1.00, 1.01, 1.00, 1.01], b, FACTOR, alpha)
    assert clean.decision == verdict.SLOWER and clean.p_value == noisy.p_value
    # "unchanged" too, and B's own rounds count: all of B below 1.05 x A, but B's odd and even rounds
    # 1.07x apart, farther than B sits below the factor
    a = [1.0, 1.0, 1.01, 1.0]
    assert verdict.judge(a, [1.0, 1.01, 1.0, 1.0], FACTOR, alpha).decision == verdict.UNCHANGED
    spread_b = verdict.judge(a, [0.97, 1.04, 0.97, 1.04], FACTOR, alpha)
    assert spread_b.p_value > alpha and spread_b.noise == pytest.approx(1.04 / 0.97)
    assert spread_b.decision == verdict.UNDECIDED and "too noisy for 4 rounds" in spread_b.reason
