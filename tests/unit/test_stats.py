"""Tests for harness.stats: speedups, the bootstrap interval, the noise floor and the verdict."""

from __future__ import annotations

import math

import pytest

from harness.stats import (
    MIN_NOISE_FLOOR_PCT,
    Verdict,
    bootstrap_ci,
    classify,
    geometric_mean,
    noise_floor_from_aa,
    quantile,
    row_stats,
    speedup_pct,
    summarize_ab,
)

# A clear 10% effect with small spread: every A round lies in 1.08..1.12, every B round in
# 0.99..1.01, so any resample's median(A)/median(B) - 1 lies in
# [1.08/1.01 - 1, 1.12/0.99 - 1] = [6.93%, 13.13%]: the interval cannot reach zero.
CLEAR_A = [1.10, 1.11, 1.09, 1.10, 1.12, 1.08, 1.10]
CLEAR_B = [1.00, 1.01, 0.99, 1.00, 1.01, 0.99, 1.00]
# Pure noise: B's rounds are A's, shuffled, so median(A) = median(B) = 1.00 and the point
# estimate is exactly 0; the spread is +-3%.
NOISE_A = [1.00, 1.02, 0.98, 1.01, 0.99, 1.03, 0.97]
NOISE_B = [0.99, 0.97, 1.01, 1.03, 1.00, 0.98, 1.02]


# ---------------------------------------------------------------- geometric mean, speedup


def test_geometric_mean_by_hand() -> None:
    assert geometric_mean([1.0, 4.0, 16.0]) == pytest.approx(4.0)  # cube root of 64
    assert geometric_mean([2.0, 0.5]) == pytest.approx(1.0)  # sqrt(1): +100% and -50% cancel
    assert geometric_mean(iter([3.0])) == pytest.approx(3.0)


@pytest.mark.parametrize("values", [[], [1.0, 0.0], [1.0, -2.0], [1.0, math.inf], [math.nan]])
def test_geometric_mean_refuses_what_has_no_logarithm(values: list[float]) -> None:
    with pytest.raises(ValueError):
        geometric_mean(values)


def test_speedup_sign_convention_positive_when_b_is_faster() -> None:
    assert speedup_pct(2.0, 1.0) == pytest.approx(100.0)  # B takes half the time: +100%
    assert speedup_pct(1.0, 2.0) == pytest.approx(-50.0)  # B takes twice the time: -50%
    assert speedup_pct(1.5, 1.5) == 0.0
    # A real pair: tanh float16 64x64 on an H200, direct timer (A) against graph capture (B).
    assert speedup_pct(0.036992, 0.001395) == pytest.approx((0.036992 / 0.001395 - 1) * 100)
    assert speedup_pct(0.036992, 0.001395) == pytest.approx(2551.756, abs=1e-3)


@pytest.mark.parametrize(("a", "b"), [(0.0, 1.0), (1.0, 0.0), (-1.0, 1.0), (math.nan, 1.0)])
def test_speedup_refuses_a_non_positive_latency(a: float, b: float) -> None:
    with pytest.raises(ValueError):
        speedup_pct(a, b)


def test_quantile_interpolates_linearly() -> None:
    # numpy.quantile([1, 2, 3, 4], q) with the default method: position q * 3, interpolated.
    assert quantile([1.0, 2.0, 3.0, 4.0], 0.5) == pytest.approx(2.5)
    assert quantile([1.0, 2.0, 3.0, 4.0], 0.25) == pytest.approx(1.75)
    assert quantile([1.0, 2.0, 3.0, 4.0], 0.0) == 1.0
    assert quantile([1.0, 2.0, 3.0, 4.0], 1.0) == 4.0
    assert quantile([7.0], 0.975) == 7.0


# ---------------------------------------------------------------- bootstrap


def test_bootstrap_is_deterministic_for_a_seed_and_uses_it() -> None:
    # Eleven irregular rounds and 200 resamples: the interpolated endpoints take many values
    # (18 distinct intervals over seeds 0..19), so an unseeded generator would show here.
    a = [1.00, 1.07, 0.95, 1.13, 0.91, 1.04, 0.98, 1.10, 0.93, 1.02, 1.06]
    b = [0.97, 1.05, 1.01, 0.92, 1.08, 0.99, 1.11, 0.94, 1.03, 0.96, 1.09]
    for seed in range(5):
        first = bootstrap_ci(a, b, seed=seed, n_resamples=200)
        assert all(bootstrap_ci(a, b, seed=seed, n_resamples=200) == first for _ in range(3))
    intervals = {bootstrap_ci(a, b, seed=s, n_resamples=200) for s in range(6)}
    assert len(intervals) > 1


def test_bootstrap_of_a_clear_effect_contains_the_median_and_excludes_zero() -> None:
    ci = bootstrap_ci(CLEAR_A, CLEAR_B, seed=0)
    assert ci is not None
    low, high = ci
    median = speedup_pct(1.10, 1.00)  # median(A) / median(B) - 1 = 10%
    assert low <= median <= high
    assert low > 0
    assert (1.08 / 1.01 - 1) * 100 <= low <= high <= (1.12 / 0.99 - 1) * 100


@pytest.mark.parametrize("seed", range(5))
def test_bootstrap_of_pure_noise_includes_zero(seed: int) -> None:
    ci = bootstrap_ci(NOISE_A, NOISE_B, seed=seed)
    assert ci is not None
    assert ci[0] < 0 < ci[1]


def test_bootstrap_needs_two_rounds_and_paired_sides() -> None:
    # One round has no spread: a point "interval" would exclude zero by construction.
    assert bootstrap_ci([2.0], [1.0], seed=0) is None
    with pytest.raises(ValueError):
        bootstrap_ci([1.0, 2.0], [1.0], seed=0)
    with pytest.raises(ValueError):
        bootstrap_ci(CLEAR_A, CLEAR_B, seed=0, confidence=1.0)


def test_bootstrap_agrees_with_scipy() -> None:
    scipy_stats = pytest.importorskip("scipy.stats")
    np = pytest.importorskip("numpy")
    ours = bootstrap_ci(CLEAR_A, CLEAR_B, seed=0)
    theirs = scipy_stats.bootstrap(
        (CLEAR_A, CLEAR_B), lambda a, b: (np.median(a) / np.median(b) - 1) * 100, paired=True,
        vectorized=False, method="percentile", n_resamples=2000, random_state=0,
    ).confidence_interval
    assert ours == pytest.approx((theirs.low, theirs.high), abs=0.5)  # other RNG: close only
    assert geometric_mean([0.824, 0.131, 0.193]) == pytest.approx(
        scipy_stats.gmean([0.824, 0.131, 0.193]))


# ---------------------------------------------------------------- classify


@pytest.mark.parametrize(
    ("ci", "median", "floor", "flagged", "verdict"),
    [
        ((2.0, 8.0), 5.0, 1.0, False, Verdict.FASTER),
        ((-8.0, -2.0), -5.0, 1.0, False, Verdict.SLOWER),
        # The interval excludes zero, but the effect is inside the floor: SAME.
        ((0.2, 0.8), 0.5, 1.0, False, Verdict.SAME),
        ((-0.8, -0.2), -0.5, 1.0, False, Verdict.SAME),
        ((1.0, 4.0), 2.5, 3.0, False, Verdict.SAME),  # an A/A floor of 3% beats a 2.5% effect
        ((0.2, 0.9), 0.6, 0.0, False, Verdict.SAME),  # a floor below 1% counts as 1%
        ((-1.0, 20.0), 10.0, 1.0, False, Verdict.SAME),  # a large median, interval holds 0
        ((None, None), 50.0, 1.0, False, Verdict.SAME),  # one round: no interval
        # Flagged rows are never faster or slower, however clear.
        ((2.0, 8.0), 5.0, 1.0, True, Verdict.UNRELIABLE),
        ((-8.0, -2.0), -5.0, 1.0, True, Verdict.UNRELIABLE),
    ],
)
def test_classify_each_branch(ci: tuple[float | None, float | None], median: float,
                              floor: float, flagged: bool, verdict: Verdict) -> None:
    assert classify(ci[0], ci[1], median, floor, flagged) is verdict


def test_unreliable_reads_as_same_flagged() -> None:
    assert Verdict.UNRELIABLE.value == "same (flagged)"
    assert {v.value for v in Verdict} == {"faster", "slower", "same", "same (flagged)"}


# ---------------------------------------------------------------- noise floor


def test_noise_floor_is_the_95th_percentile_of_aa_magnitudes() -> None:
    # 20 |speedups| 0.1, 0.2, ..., 2.0 over 4 rows, signs mixed: nearest rank ceil(0.95 * 20)
    # = 19, the 19th smallest magnitude is 1.9.
    values = [round(0.1 * i, 1) * (-1) ** i for i in range(1, 21)]
    rows = [values[i:i + 5] for i in range(0, 20, 5)]
    assert noise_floor_from_aa(rows) == pytest.approx(1.9)


def test_noise_floor_never_below_one_percent() -> None:
    assert noise_floor_from_aa([[0.1, -0.3], [0.5]]) == MIN_NOISE_FLOOR_PCT == 1.0
    assert noise_floor_from_aa([]) == 1.0
    assert noise_floor_from_aa([[], []]) == 1.0


# ---------------------------------------------------------------- rows and A/B


def test_row_stats_over_rounds() -> None:
    s = row_stats([1.1, 1.3, 1.2], [1.0, 1.0, 1.0], noise_floor_pct=1.0, seed=0)
    assert s.round_speedups_pct == pytest.approx((10.0, 30.0, 20.0))
    assert (s.median_speedup_pct, s.min_pct, s.max_pct) == pytest.approx((20.0, 10.0, 30.0))
    assert (s.a_ms, s.b_ms, s.rounds) == (1.2, 1.0, 3)
    assert s.ci_low_pct is not None and s.ci_low_pct > 0
    assert s.verdict is Verdict.FASTER


def test_row_stats_of_one_round_is_same_with_no_interval() -> None:
    s = row_stats([2.0], [1.0], noise_floor_pct=1.0, seed=0)
    assert (s.median_speedup_pct, s.ci_low_pct, s.ci_high_pct) == (100.0, None, None)
    assert s.verdict is Verdict.SAME


def test_summarize_ab_pairs_per_key_and_round() -> None:
    a = [{"x": 2.0, "y": 1.0, "a_only": 1.0, "apart": 1.0}, {"x": 2.0, "y": 1.0}]
    b = [{"x": 1.0, "y": 2.0, "b_only": 1.0}, {"x": 1.0, "y": 2.0, "apart": 1.0}]
    result = summarize_ab(a, b, noise_floor_pct=0.5, seed=0, flagged={"y"})
    by_key = dict(result.rows)
    assert list(by_key) == ["x", "y"]
    assert by_key["x"].median_speedup_pct == pytest.approx(100.0)
    assert by_key["y"].median_speedup_pct == pytest.approx(-50.0)
    assert by_key["x"].rounds == 2
    assert by_key["y"].verdict is Verdict.UNRELIABLE and by_key["y"].flagged
    # "apart" is on both sides, never in the same round: unpaired on each.
    assert result.unpaired_a == ("a_only", "apart")
    assert result.unpaired_b == ("apart", "b_only")
    # Ratios 2 and 0.5: geometric mean sqrt(2 * 0.5) = 1, a 0% speedup overall.
    assert result.geomean_speedup_pct == pytest.approx(0.0)
    assert result.flagged_rows == 1
    assert result.noise_floor_pct == 1.0  # clamped


def test_summarize_ab_of_nothing_paired_has_no_geomean() -> None:
    result = summarize_ab([{"x": 1.0}], [{"y": 1.0}], noise_floor_pct=1.0, seed=0)
    assert result.rows == () and result.geomean_speedup_pct is None
    with pytest.raises(ValueError):
        summarize_ab([{"x": 1.0}], [], noise_floor_pct=1.0, seed=0)
