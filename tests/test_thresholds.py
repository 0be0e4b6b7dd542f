"""The one rule for a row's change: asv's thresholds, floors near zero, the row's own noise, asv's test."""

from __future__ import annotations

import json
import random
from types import SimpleNamespace

import pytest
from asv.plugins.regressions import _GraphDataFilter
from asv_runner.statistics import compute_stats

from mpsbench.regressions import factor, thresholds
from mpsbench.results.recorded import Measured

RULES = thresholds.Rules({".*": 0.05, r"benchmark_ops\..*": 0.2, r".*@nightly": 0.1})
STEP = "benchmark_models.Training.time_step('cpu', 'mlp', 8)"


def sampled(values: list[float]) -> Measured:
    """A value as asv records it from its samples: the median and asv_runner's statistics."""
    value, stats = compute_stats(values, 1)
    return Measured(value, stats, tuple(values))


def noisy(seed: int, centre: float, spread: float, count: int = 10) -> Measured:
    rng = random.Random(seed)
    return sampled([centre * (1 + rng.gauss(0, spread)) for _ in range(count)])


@pytest.mark.parametrize("entry, branch", [
    (STEP, None), (STEP, "nightly"), ("benchmark_ops.MemoryBoundOps.time_forward('cpu', 'add')", None),
    ("benchmark_ops.MemoryBoundOps.time_forward('cpu', 'add')", "nightly"), ("other", "release"),
])
def test_the_fraction_is_the_one_asv_publish_uses(entry, branch):
    conf = SimpleNamespace(regressions_thresholds=RULES.fractions)
    graph = SimpleNamespace(params={"branch": branch} if branch else {})
    assert RULES.fraction(entry, branch) == _GraphDataFilter(conf, None, {})._get_threshold(graph, {}, entry)


def test_the_fractions_come_from_asv_conf_json_and_a_bad_one_is_refused(tmp_path):
    config = tmp_path / "asv.conf.json"
    config.write_text(json.dumps({"regressions_thresholds": {".*": 0.05, "x.*": 0.3}}))
    assert thresholds.Rules.from_config(config).fraction("xyz") == 0.3
    config.write_text(json.dumps({"regressions_thresholds": {".*": 0.05, "x.*": "wide"}}))
    with pytest.raises(factor.FactorError, match=r"regressions_thresholds\['x\.\*'\] must be a fraction >= 0, got 'wide'"):
        thresholds.Rules.from_config(config)


def test_near_zero_values_are_judged_by_their_absolute_change():
    leak = "benchmark_instruments.TrainingInstruments.track_leak('cpu', 'lenet5')"
    # the "Infinityx": 0.00 -> 0.000839 MiB per 100 steps
    assert thresholds.judge(RULES, leak, "MiB/100 steps", Measured(0.0), Measured(0.000839)).verdict == "below floor"
    assert thresholds.judge(RULES, leak, "MiB/100 steps", Measured(-0.856), Measured(-0.132)).verdict == "below floor"
    grows = thresholds.judge(RULES, leak, "MiB/100 steps", Measured(0.0), Measured(12.0))
    assert grows.slower and grows.ratio == float("inf")
    fallback = "benchmark_instruments.TrainingInstruments.track_fallback_ops('mps', 'bert_base')"
    assert thresholds.judge(RULES, fallback, "ops", Measured(0.0), Measured(1.0)).slower  # one new fallback op
    assert thresholds.judge(RULES, fallback, "ops", Measured(0.0), Measured(0.0)).verdict == "unchanged"
    tiny = "benchmark_ops.MemoryBoundOps.time_forward('cpu', 'add')"
    assert thresholds.judge(RULES, tiny, "seconds", Measured(2.0e-6), Measured(4.0e-6)).verdict == "below floor"


def test_rates_are_worse_when_they_fall_and_never_judged_from_bare_medians():
    rate = "benchmark_models.TrainingCapacity.track_throughput('cpu', 'mlp', 8)"
    assert thresholds.judge(RULES, rate, "samples/s", noisy(1, 1000.0, 0.01), noisy(2, 1300.0, 0.01)).verdict == "faster"
    fell = thresholds.judge(RULES, rate, "samples/s", noisy(3, 1000.0, 0.01), noisy(4, 800.0, 0.01))
    assert fell.slower and fell.ratio == pytest.approx(1.25, rel=0.03)
    assert thresholds.judge(RULES, rate, "samples/s", Measured(1000.0), Measured(800.0)).verdict == "no statistics"


def test_a_noisy_row_is_marked_and_its_threshold_widens_with_its_spread():
    wide = thresholds.judge(RULES, STEP, "seconds", noisy(1, 0.1, 0.4), noisy(2, 0.15, 0.4))
    assert wide.verdict == "noisy"
    calm, spread = noisy(3, 0.1, 0.01), noisy(4, 0.1, 0.06)
    judged = thresholds.judge(RULES, STEP, "seconds", calm, spread)
    errors = thresholds.noise(calm) * calm.value + thresholds.noise(spread) * spread.value  # type: ignore[operator]
    assert judged.threshold == pytest.approx(thresholds.NOISE_MULTIPLE * errors / calm.value)
    assert judged.threshold > RULES.fraction(STEP)


def test_a_large_change_on_a_noisy_row_is_still_a_change():
    # a 5x slowdown whose older build spread +-14%: beyond both builds' spread, so it counts
    assert thresholds.judge(RULES, STEP, "seconds", sampled([0.0018, 0.0021, 0.0024]),
                            sampled([0.0101, 0.0101, 0.0101])).slower


def test_identical_builds_with_realistic_noise_never_judge_slower():
    # 300 pairs of ten samples from one distribution (5% spread), as two identical builds record them
    verdicts = [thresholds.judge(RULES, STEP, "seconds", noisy(2 * k, 0.1, 0.05), noisy(2 * k + 1, 0.1, 0.05)).verdict
                for k in range(300)]
    assert "slower" not in verdicts and "faster" not in verdicts


def test_a_real_slowdown_with_the_same_noise_is_judged_slower():
    verdicts = [thresholds.judge(RULES, STEP, "seconds", noisy(2 * k, 0.1, 0.05), noisy(2 * k + 1, 0.13, 0.05)).verdict
                for k in range(50)]
    assert verdicts.count("slower") == len(verdicts)
