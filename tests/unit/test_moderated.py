"""Each row's variance moderated by the campaign's other rows (stats.moderated, looks.judge)."""

from __future__ import annotations

import math
import random

import pytest

from harness import stats
from harness.stats import looks, moderated

EULER = 0.5772156649015329
ZETA3 = 1.2020569031595942


def test_the_polygamma_functions_match_their_closed_forms():
    assert moderated.digamma(1.0) == pytest.approx(-EULER, abs=1e-11)
    assert moderated.digamma(0.5) == pytest.approx(-EULER - 2 * math.log(2), abs=1e-11)
    assert moderated.digamma(101.0) == pytest.approx(
        -EULER + math.fsum(1 / k for k in range(1, 101)), abs=1e-11)
    assert moderated.trigamma(1.0) == pytest.approx(math.pi ** 2 / 6, rel=1e-10)
    assert moderated.trigamma(0.5) == pytest.approx(math.pi ** 2 / 2, rel=1e-10)
    assert moderated.tetragamma(1.0) == pytest.approx(-2 * ZETA3, rel=1e-9)
    for y in (1e-8, 0.02, 0.7, 1.0, 5.0, 300.0, 1e9):
        assert moderated.trigamma(moderated.trigamma_inverse(y)) == pytest.approx(y, rel=1e-6)
    with pytest.raises(ValueError):
        moderated.trigamma(0.0)
    with pytest.raises(ValueError):
        moderated.trigamma_inverse(-1.0)


def _draws(rng: random.Random, rows: int, d0: float, s0_sq: float, d: int = 2,
           ms: float = 0.01) -> list[tuple[float, float, float]]:
    """Rows whose true variance is d0 s0^2 / chi2(d0) and whose sample variance has d df."""
    out = []
    for _ in range(rows):
        true = d0 * s0_sq / (2 * rng.gammavariate(d0 / 2, 1.0))
        out.append((true * 2 * rng.gammavariate(d / 2, 1.0) / d, float(d), ms))
    return out


def test_the_prior_is_recovered_from_rows_drawn_from_it(monkeypatch):
    monkeypatch.setattr(moderated, "MAX_PRIOR_DF", math.inf)
    found = moderated.priors(_draws(random.Random(5), 20_000, d0=3.0, s0_sq=4e-5))
    assert found[0].df == pytest.approx(3.0, rel=0.1)
    assert found[0].var == pytest.approx(4e-5, rel=0.1)
    assert found[0].df_cap == 40_000
    # rows whose variances differ no more than their sampling: every row gets the prior's
    same = moderated.priors(_draws(random.Random(6), 5_000, d0=1e9, s0_sq=4e-5))
    assert same[0].df > 10  # 26: at 2 df a row, the moments pin a large d0 only loosely


def test_the_prior_degrees_of_freedom_are_capped_so_a_row_keeps_its_own_weight():
    found = moderated.priors(_draws(random.Random(5), 2_000, d0=1e9, s0_sq=4e-5))
    assert found[0].df == moderated.MAX_PRIOR_DF
    var, df = found[0].moderate(1e-3, 2.0)  # a row 25 times the prior: a third of its own
    assert df == moderated.MAX_PRIOR_DF + 2
    assert var == pytest.approx((4 * found[0].var + 2 * 1e-3) / 6)


def test_the_prior_trends_with_latency():
    rng = random.Random(8)
    slow = _draws(rng, 400, d0=4.0, s0_sq=1e-6, ms=10.0)
    fast = _draws(rng, 400, d0=4.0, s0_sq=1e-4, ms=0.001)
    found = moderated.priors(slow + fast)
    assert found[0].var == pytest.approx(1e-6, rel=0.3)
    assert found[-1].var == pytest.approx(1e-4, rel=0.3)


def test_too_few_rows_or_rows_left_out_get_no_prior():
    rows = _draws(random.Random(1), moderated.MIN_PRIOR_ROWS - 1, d0=4.0, s0_sq=1e-5)
    assert moderated.priors(rows) == [None] * len(rows)
    rows = [None, *_draws(random.Random(1), moderated.MIN_PRIOR_ROWS, d0=4.0, s0_sq=1e-5)]
    found = moderated.priors(rows)
    assert found[0] is None and all(p is not None for p in found[1:])


def _quiet_campaign(rows: int, seed: int = 3) -> list[stats.RowStats]:
    """An A/A's rows of 3 rounds at 0.3% noise, a microsecond to a millisecond each."""
    rng = random.Random(seed)
    out = []
    for i in range(rows):
        ms = 0.001 * 10 ** (3 * i / rows)
        b = [ms * math.exp(rng.gauss(0.0, 0.003)) for _ in range(3)]
        out.append(stats.row_stats([ms] * 3, b, noise_floor_pct=1.0))
    return out


def test_a_campaign_of_quiet_rows_reads_more_of_them_same():
    rows = _quiet_campaign(40)
    alone = stats.adjust_rows(rows, noise_floor_pct=1.0)
    method, judged = looks.judge(rows, [[3]] * len(rows), noise_floor_pct=1.0)
    same = [sum(r.verdict is stats.Verdict.SAME for r in v) for v in (alone, judged)]
    assert same[1] > same[0]
    assert not any(r.verdict in (stats.Verdict.FASTER, stats.Verdict.SLOWER) for r in judged)
    assert method.name.startswith(stats.T_METHOD + ", variance moderated over 40 rows")
    assert "95%, BH q=0.05" in method.text


def test_a_row_whose_rounds_disagree_is_not_called_on_the_quiet_rows_noise():
    # an A/A row of an H100 campaign: its rounds read -2.97, +0.47 and -3.01%, among quiet rows
    odd = stats.row_stats([1.0] * 3, [1 / 0.9703, 1 / 1.0047, 1 / 0.9699], noise_floor_pct=1.0)
    rows = [*_quiet_campaign(40), odd]
    _, judged = looks.judge(rows, [[3]] * len(rows), noise_floor_pct=1.0)
    assert judged[-1].verdict is stats.Verdict.INCONCLUSIVE
    assert judged[-1].ci_low_pct < judged[-1].speedup_pct < judged[-1].ci_high_pct


def test_an_operator_alone_is_judged_on_its_own_rows_as_before():
    rows = _quiet_campaign(moderated.MIN_PRIOR_ROWS - 1)
    method, judged = looks.judge(rows, [[3]] * len(rows), noise_floor_pct=1.0)
    assert method == stats.Method()
    assert judged == stats.adjust_rows(rows, noise_floor_pct=1.0)


def test_a_flagged_row_is_left_out_of_the_prior_and_stays_flagged():
    rows = _quiet_campaign(moderated.MIN_PRIOR_ROWS)
    flagged = stats.row_stats([1.0] * 3, [0.5, 0.9, 1.2], noise_floor_pct=1.0, flagged=True)
    found = looks.row_priors([*rows, flagged])
    assert found[-1] is None and all(found[:-1])
    _, judged = looks.judge([*rows, flagged], [[3]] * (len(rows) + 1), noise_floor_pct=1.0)
    assert judged[-1].verdict is stats.Verdict.FLAGGED


def test_ties_get_the_moderated_spread_not_a_point_interval():
    rows = _quiet_campaign(20)
    tie = stats.row_stats([1.0] * 3, [1.0] * 3, noise_floor_pct=1.0)
    _, judged = looks.judge([*rows, tie], [[3]] * 21, noise_floor_pct=1.0)
    assert judged[-1].ci_low_pct < 0.0 < judged[-1].ci_high_pct
    assert judged[-1].verdict is stats.Verdict.SAME
