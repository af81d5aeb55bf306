"""The noise floor per row: its model from an A/A's rows, and verdicts judged against it."""

from __future__ import annotations

import math
import random

import pytest

from harness import stats
from harness.stats import noisefloor
from harness.stats.noisefloor import Band, NoiseModel

SMALL_MS, LARGE_MS = 0.005, 5.0
SMALL_SD, LARGE_SD = 0.025, 0.0007  # per-side log sd: |round speedup| ~7% and ~0.2% at the 95th


def _rounds(rng, rows, rounds, effect=None):
    """Each side's rounds {key: ms}: a row is (key, A ms, per-side log sd); `effect` maps a key
    to how much slower B is (1.03: 3%)."""
    effect = effect or {}
    a_rounds, b_rounds = [], []
    for _ in range(rounds):
        a_rounds.append({k: ms * math.exp(rng.gauss(0, sd)) for k, ms, sd in rows})
        b_rounds.append({k: ms * effect.get(k, 1.0) * math.exp(rng.gauss(0, sd))
                         for k, ms, sd in rows})
    return a_rounds, b_rounds


def _suite(rng, small=40, large=10):
    rows = [(("add", "f32", f"s{i}"), SMALL_MS * rng.uniform(0.8, 1.25), SMALL_SD)
            for i in range(small)]
    return rows + [(("mm", "f32", f"l{i}"), LARGE_MS * rng.uniform(0.8, 1.25), LARGE_SD)
                   for i in range(large)]


@pytest.fixture
def aa():
    """A/A (3 rounds): 40 microsecond rows swinging ~7% a round, 10 millisecond rows ~0.2%."""
    rng = random.Random(20250101)
    rows = _suite(rng)
    a, b = _rounds(rng, rows, 3)
    return rows, a, b, stats.summarize_ab(a, b, noise_floor_pct=stats.MIN_NOISE_FLOOR_PCT)


def _model(result):
    return noisefloor.fit((s.a_ms, s.round_speedups_pct) for _, s in result.rows)


def test_the_floor_follows_latency_high_for_short_rows_and_the_minimum_for_long(aa):
    model = _model(aa[3])
    assert 5.0 < model.at(SMALL_MS) < 9.0
    assert model.bands[-1].floor_pct == stats.MIN_NOISE_FLOOR_PCT  # ~0.2% measured: 1%
    assert model.at(LARGE_MS) < 1.1  # just faster than the band's centre: a hair above
    fast, slow = model.bands
    halfway = math.sqrt(fast.a_ms * slow.a_ms)  # in log latency: the floor is halfway too
    assert model.at(halfway) == pytest.approx((fast.floor_pct + slow.floor_pct) / 2)
    assert model.at(1e-5) == model.bands[0].floor_pct  # beyond the A/A: its nearest band
    assert model.at(1e3) == model.bands[-1].floor_pct
    assert model.outside(1e3) and not model.outside(model.bands[0].lo_ms)


def test_a_real_3pct_effect_on_a_large_row_is_called_where_the_suite_floor_hid_it(aa):
    """On two H200s one suite floor read 6.86% and hid a 3% regression on a large shape."""
    rows, _, _, result = aa
    rng = random.Random(7)
    slow = {k: 1.03 for k, ms, _ in rows if ms > 1.0 and k[2] in ("l0", "l1", "l2")}
    a, b = _rounds(rng, rows, 3, effect=slow)
    model = _model(result)
    per_row = stats.summarize_ab(a, b, noise_floor_pct=stats.MIN_NOISE_FLOOR_PCT,
                                 floor_at=model.at)
    verdicts = {k: s.verdict for k, s in per_row.rows}
    assert {k for k, v in verdicts.items() if v is stats.Verdict.SLOWER} == set(slow)
    assert stats.Verdict.FASTER not in verdicts.values()
    floors = {k: s.noise_floor_pct for k, s in per_row.rows}
    assert all(floors[k] < 1.2 for k in slow)
    assert all(floors[k] > 5.0 for k in verdicts if k[0] == "add")
    suite = stats.noise_floor_from_aa(s.round_speedups_pct for _, s in result.rows)
    assert suite > 5.0  # one floor for the suite: the microsecond rows' swing
    one_floor = stats.summarize_ab(a, b, noise_floor_pct=suite)
    assert not any(s.verdict is stats.Verdict.SLOWER for _, s in one_floor.rows)


def test_the_aa_fed_back_as_a_campaign_calls_no_row(aa):
    _, a, b, result = aa
    again = stats.summarize_ab(a, b, noise_floor_pct=1.0, floor_at=_model(result).at)
    assert not [k for k, s in again.rows
                if s.verdict in (stats.Verdict.FASTER, stats.Verdict.SLOWER)]


def test_a_band_with_few_measurements_joins_the_next_slower_one():
    rows = [(0.001, (9.0,))] + [(0.01, (2.0, -2.0, 1.5))] * 10  # 1 + 30 measurements
    (band,) = noisefloor.fit(rows).bands
    assert band.samples == 31 and band.lo_ms == 0.001 and band.hi_ms == 0.01


def test_floors_never_rise_with_latency_a_slow_noisy_band_raises_the_faster_ones():
    rows = [(0.001, (1.5,) * 20), (0.1, (4.0,) * 20), (10.0, (2.0,) * 20)]
    assert [b.floor_pct for b in noisefloor.fit(rows).bands] == [4.0, 4.0, 2.0]


def test_no_measured_row_gives_the_minimum_everywhere():
    model = noisefloor.fit([(0.0, (5.0,)), (1.0, ())])
    assert model.bands == () and model.at(1.0) == stats.MIN_NOISE_FLOOR_PCT


def test_a_model_round_trips_through_json():
    model = NoiseModel((Band(0.004, 0.006, 0.005, 7.0, 40), Band(4.0, 6.0, 5.0, 1.0, 30)))
    assert NoiseModel.from_json(model.to_json()) == model
    assert model.text == "7.0% at 0.005 ms, 1.0% at 5 ms"


def test_adjust_rows_judges_each_row_against_its_own_floor():
    row = stats.row_stats([1.0, 1.0, 1.0], [0.97, 0.971, 0.969], noise_floor_pct=5.0)
    assert row.noise_floor_pct == 5.0 and row.verdict is stats.Verdict.SAME
    (kept,) = stats.adjust_rows([row], noise_floor_pct=1.0)
    assert kept.verdict is stats.Verdict.SAME and kept.noise_floor_pct == 5.0
    (older,) = stats.adjust_rows([row.__class__(**{**row.__dict__, "noise_floor_pct": None})],
                                 noise_floor_pct=1.0)
    assert older.verdict is stats.Verdict.FASTER and older.noise_floor_pct == 1.0
