"""The one regression rule: decisions and their exit statuses, one threshold lookup, and a recorded row's change
(asv's thresholds, floors near zero, the row's own noise, asv's test)."""

from __future__ import annotations

import json
import random
from types import SimpleNamespace

import pytest
from asv.plugins.regressions import _GraphDataFilter
from asv_runner.statistics import compute_stats

from mpsbench.core import asvconf
from mpsbench.core.errors import UserError
from mpsbench.regressions import rule
from mpsbench.results.recorded import Measured

RULES = {".*": 0.05, r"benchmark_ops\..*": 0.2, r".*@nightly": 0.1}
STEP = "benchmark_models.Training.time_step('cpu', 'mlp', 8)"


def sampled(values: list[float]) -> Measured:
    """A value as asv records it from its samples: the median and asv_runner's statistics."""
    value, stats = compute_stats(values, 1)
    return Measured(value, stats, tuple(values))


def noisy(seed: int, centre: float, spread: float, count: int = 10) -> Measured:
    rng = random.Random(seed)
    return sampled([centre * (1 + rng.gauss(0, spread)) for _ in range(count)])


@pytest.mark.parametrize(
    "entry, branch",
    [
        (STEP, None),
        (STEP, "nightly"),
        ("benchmark_ops.MemoryBoundOps.time_forward('cpu', 'add')", None),
        ("benchmark_ops.MemoryBoundOps.time_forward('cpu', 'add')", "nightly"),
        ("other", "release"),
    ],
)
def test_the_fraction_is_the_one_asv_publish_uses(entry, branch):
    conf = SimpleNamespace(regressions_thresholds=RULES)
    graph = SimpleNamespace(params={"branch": branch} if branch else {})
    assert rule.threshold(RULES, entry, branch) == _GraphDataFilter(conf, None, {})._get_threshold(
        graph, {}, entry
    )


def test_the_fractions_come_from_asv_conf_json_and_a_bad_one_is_refused(tmp_path):
    config = tmp_path / "asv.conf.json"
    config.write_text(json.dumps({"regressions_thresholds": {".*": 0.05, "x.*": 0.3}}))
    assert rule.threshold(asvconf.load(config).thresholds, "xyz") == 0.3
    config.write_text(json.dumps({"regressions_thresholds": {".*": 0.05, "x.*": "wide"}}))
    with pytest.raises(
        UserError,
        match=r"regressions_thresholds\['x\.\*'\] must be a fraction >= 0, got 'wide'",
    ):
        asvconf.load(config)  # checked where it is read
    config.write_text(
        '{"regressions_thresholds": {".*": NaN}}'
    )  # JSON5 as asv reads it: NaN would judge nothing slower
    with pytest.raises(UserError, match=r"must be a fraction >= 0, got nan"):
        asvconf.load(config)  # checked where it is read


def test_compare_and_bisect_take_the_factor_the_site_and_alerts_judge_by(tmp_path):
    config = tmp_path / "asv.conf.json"
    config.write_text(json.dumps({"regressions_thresholds": RULES}))
    ops = "benchmark_ops.MemoryBoundOps.time_forward('cpu', 'add')"
    thresholds = asvconf.load(config).thresholds
    assert rule.factor(thresholds, ops) == pytest.approx(1.2) == 1 + rule.threshold(RULES, ops)
    assert rule.factor(thresholds, STEP) == pytest.approx(1.05)


def test_each_decision_has_its_exit_status_and_two_is_left_to_a_users_mistake():
    assert {decision.value: decision.exit_status for decision in rule.Decision} == {
        "slower": 1,
        "wrong": 1,
        "unchanged": 0,
        "faster": 0,
        "undecided": 3,
    }


@pytest.mark.parametrize(
    "a, b, p",
    [
        (
            [1.0, 2.0, 3.0],
            [4.0, 5.0, 6.0],
            2 / 20,
        ),  # the most extreme of C(6, 3) = 20 orderings, either tail
        (
            [1.0, 2.0, 3.0, 4.0],
            [1.5, 2.5, 3.5, 4.5],
            2 * 24 / 70,
        ),  # interleaved: U = 10 of 16; 24 of 70 orderings as far out
        ([1.0, 1.0, 1.0], [1.0, 1.0, 1.0], 1.0),  # ties count against significance
    ],
)
def test_the_mann_whitney_p_is_the_exact_one(a, b, p):
    assert rule.mann_whitney_p(a, b) == pytest.approx(min(1.0, p))


def test_recorded_samples_that_overlap_are_not_a_significant_change():
    old, new = sampled([0.10, 0.20, 0.30] * 4), sampled([0.11, 0.21, 0.31] * 4)
    assert rule.judge(RULES, STEP, "seconds", old, new).decision is not rule.Decision.SLOWER
    assert rule.judge(RULES, STEP, "seconds", sampled([0.10] * 12), sampled([0.13] * 12)).slower


def test_near_zero_values_are_judged_by_their_absolute_change():
    leak = "benchmark_instruments.TrainingInstruments.track_leak('cpu', 'lenet5')"
    # the "Infinityx": 0.00 -> 0.000839 MiB per 100 steps
    assert (
        rule.judge(RULES, leak, "MiB/100 steps", Measured(0.0), Measured(0.000839)).label
        == "below floor"
    )
    assert (
        rule.judge(RULES, leak, "MiB/100 steps", Measured(-0.856), Measured(-0.132)).label
        == "below floor"
    )
    grows = rule.judge(RULES, leak, "MiB/100 steps", Measured(0.0), Measured(12.0))
    assert grows.slower and grows.ratio == float("inf")
    fallback = "benchmark_instruments.TrainingInstruments.track_fallback_ops('mps', 'bert_base')"
    assert rule.judge(
        RULES, fallback, "ops", Measured(0.0), Measured(1.0)
    ).slower  # one new fallback op
    stays = rule.judge(RULES, fallback, "ops", Measured(0.0), Measured(0.0))
    assert (stays.label, stays.ratio) == ("unchanged", 1.0)  # 0 -> 0 reads 1.000x
    tiny = "benchmark_ops.MemoryBoundOps.time_forward('cpu', 'add')"
    assert (
        rule.judge(RULES, tiny, "seconds", Measured(2.0e-6), Measured(4.0e-6)).label
        == "below floor"
    )


def test_rates_are_worse_when_they_fall_and_never_judged_from_bare_medians():
    rate = "benchmark_models.TrainingCapacity.track_throughput('cpu', 'mlp', 8)"
    assert (
        rule.judge(RULES, rate, "samples/s", noisy(1, 1000.0, 0.01), noisy(2, 1300.0, 0.01)).label
        == "faster"
    )
    fell = rule.judge(RULES, rate, "samples/s", noisy(3, 1000.0, 0.01), noisy(4, 800.0, 0.01))
    assert fell.slower and fell.ratio == pytest.approx(1.25, rel=0.03)
    assert (
        rule.judge(RULES, rate, "samples/s", Measured(1000.0), Measured(800.0)).label
        == "no statistics"
    )


def test_a_noisy_row_is_marked_and_its_threshold_widens_with_its_spread():
    wide = rule.judge(RULES, STEP, "seconds", noisy(1, 0.1, 0.4), noisy(2, 0.15, 0.4))
    assert wide.label == "noisy" and wide.decision is rule.Decision.UNDECIDED

    # each build's samples spread +-0.003 s between its quartiles: twice the two half-IQRs is 0.012 s, 12% of 0.1 s
    def around(centre: float) -> Measured:
        return sampled([centre + offset for offset in (-0.006, -0.003, 0.0, 0.003, 0.006)] * 2)

    inside, outside = (
        rule.judge(RULES, STEP, "seconds", around(0.100), around(centre))
        for centre in (0.111, 0.113)
    )
    assert inside.threshold == outside.threshold == pytest.approx(0.12)  # not asv's 5% for this row
    assert inside.decision is rule.Decision.UNCHANGED  # 11% slower: past 5%, inside 12%
    assert outside.slower  # 13%


def test_a_large_change_on_a_noisy_row_is_still_a_change():
    # a 5x slowdown whose older build spread +-14%: beyond both builds' spread, so it counts
    assert rule.judge(
        RULES, STEP, "seconds", sampled([0.0018, 0.0021, 0.0024]), sampled([0.0101, 0.0101, 0.0101])
    ).slower


def test_identical_builds_with_realistic_noise_never_judge_slower():
    # 300 pairs of ten samples from one distribution (5% spread), as two identical builds record them
    verdicts = [
        rule.judge(
            RULES, STEP, "seconds", noisy(2 * k, 0.1, 0.05), noisy(2 * k + 1, 0.1, 0.05)
        ).label
        for k in range(300)
    ]
    assert "slower" not in verdicts and "faster" not in verdicts


def test_a_real_slowdown_with_the_same_noise_is_judged_slower():
    verdicts = [
        rule.judge(
            RULES, STEP, "seconds", noisy(2 * k, 0.1, 0.05), noisy(2 * k + 1, 0.13, 0.05)
        ).label
        for k in range(50)
    ]
    assert verdicts.count("slower") == len(verdicts)
