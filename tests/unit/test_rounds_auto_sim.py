"""scripts/rounds_auto_sim.py: ROUNDS=auto keeps the false-call rate and stops early on effects."""

from __future__ import annotations

import pytest

from harness import stats
from tests import scripts

pytest.importorskip("numpy")
pytestmark = pytest.mark.slow  # simulations: about 20 s of CPU together


@pytest.fixture(scope="module")
def sim():
    return scripts.load("rounds_auto_sim")


def test_adaptive_a_a_campaigns_call_no_more_than_q(sim):
    # 40 seeded A/A campaigns of 300 rows, 2-10% noise, looked at after every round up to 6
    # (200 campaigns, normal and t(3): 0.000 and 0.000; scripts/rounds_auto_sim.py)
    assert sim.false_call_rate(1, 40) <= stats.FDR_Q
    assert sim.false_call_rate(2, 40, heavy=True) <= stats.FDR_Q


def test_a_large_effect_stops_at_min_rounds_and_a_5pct_one_is_found_before_max(sim):
    rounds, called, _ = sim.by_effect(1, 5, 50.0)
    assert (rounds, called) == (2.0, 1.0)
    rounds, called, _ = sim.by_effect(1, 5, 5.0)
    assert called == 1.0 and 2.0 < rounds < 6.0
    rounds, called, same = sim.by_effect(1, 5, 0.0)
    assert called == 0.0 and same > 0.3  # 0.54: half the A/A rows at 0.5% noise read same


def test_adaptive_a_a_reads_more_rows_same_than_three_fixed_rounds(sim):
    # 10 campaigns of 100 rows at 0.1-2% noise: 0.558 same with ROUNDS=auto, 0.473 with 3
    # fixed rounds (the same draws)
    auto, fixed, rounds = sim.a_a_same(1, 10)
    assert auto > fixed > 0.3
    assert rounds <= 6.0


def test_rows_a_floor_apart_are_rarely_read_same_however_often_looked_at(sim):
    # every row 1% slower (the floor), no drift: 0.013 of 4000 rows read same (200 campaigns
    # of seed 7: 0.0153). The rule's bound is (1 - confidence) / 2 = 0.025.
    assert sim.same_at_the_floor(1, 40) <= 0.025


def test_futility_stops_microsecond_rows_early_without_losing_a_same_or_a_call(sim):
    # 5 A/A campaigns of 20 operators, each with one row at 1.5-6% noise and four at 0.1-0.3%:
    # 6.00 rounds an operator without futility, 5.20 with it; 0.800 of rows same either way
    off_rounds, off_same, off_called = sim.micro_mix(1, 5, rules=False)
    on_rounds, on_same, on_called = sim.micro_mix(1, 5, rules=True)
    assert off_rounds == 6.0 and on_rounds < 5.5
    assert on_same == off_same and on_called == off_called == 0.0
    # every row 10% faster at 2% noise: futility stops none that a call was in reach of
    assert sim.by_effect(1, 5, 10.0, sd=0.02, rules=True)[1] == \
        sim.by_effect(1, 5, 10.0, sd=0.02, rules=False)[1]


def test_operators_of_unchanged_code_and_source_stop_at_their_first_look(sim):
    # two FlagGems commits: 16 of 20 operators unchanged, 4 changed by 5% on every row: 2.57
    # rounds an operator, 0.164 of rows called
    rounds, _, called = sim.micro_mix(1, 5, rules=True, effect_pct=5.0, unchanged=16)
    assert rounds < 3.0 and called >= 0.15  # the 4 changed operators' rows are 0.2 of all
