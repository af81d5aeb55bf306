"""The geometric mean's interval counts the offset that every row of a round shares."""

from __future__ import annotations

import math
import random

import pytest

from harness.errors import UsageError
from harness.report import abjson
from harness.stats import geomean_stats, rows_geomean, summarize_ab
from harness.stats.geomean import round_half_width
from harness.stats.tdist import student_t_quantile

ROWS, ROUNDS = 5, 3


def aa_campaign(rng: random.Random, round_sd: float, row_sd: float
                ) -> tuple[list[dict[int, float]], list[dict[int, float]]]:
    """One seeded A/A of ROWS rows over ROUNDS rounds: each side's round has a process offset
    that all of its rows share (sd `round_sd`, as a fraction of log time) and each row its own
    noise (`row_sd`). Both sides run the same code: any interval excluding zero is false."""
    sides = []
    for _ in "AB":
        offsets = [rng.gauss(0.0, round_sd) for _ in range(ROUNDS)]
        sides.append([{row: math.exp(offsets[r] + rng.gauss(0.0, row_sd)) for row in range(ROWS)}
                      for r in range(ROUNDS)])
    return sides[0], sides[1]


def excludes_zero(low: float | None, high: float | None) -> bool:
    return low is not None and high is not None and (low > 0.0 or high < 0.0)


@pytest.mark.slow
def test_an_aa_with_shared_round_offsets_rarely_excludes_zero() -> None:
    # Pinned: an H100 A/A read addr -0.29% [-0.47, -0.12] over its rows while those rows moved
    # -1.3% to +1.0% together from round to round. With offsets 0.6% and row noise 0.2%, the
    # interval over rows alone excluded zero in most campaigns. The bound allows the seeded
    # simulation's own error (about 0.3 points at 4,000 campaigns).
    rng, trials = random.Random(7), 4000
    over_rows = both = 0
    for _ in range(trials):
        a, b = aa_campaign(rng, round_sd=0.006, row_sd=0.002)
        result = summarize_ab(a, b, noise_floor_pct=1.0)
        gm = result.geomean
        assert gm is not None
        both += excludes_zero(gm.ci_low_pct, gm.ci_high_pct)
        alone = geomean_stats([s.speedup_pct for _, s in result.rows], rounds=ROUNDS)
        assert alone is not None
        over_rows += excludes_zero(alone.ci_low_pct, alone.ci_high_pct)
    assert over_rows / trials > 0.5
    assert both / trials <= 0.055


@pytest.mark.slow
def test_independent_rows_keep_about_their_coverage() -> None:
    # No shared offset: the added rounds' term widens the interval, so it errs wide, not narrow.
    rng, trials = random.Random(11), 2000
    false = 0
    for _ in range(trials):
        a, b = aa_campaign(rng, round_sd=0.0, row_sd=0.004)
        gm = summarize_ab(a, b, noise_floor_pct=1.0).geomean
        assert gm is not None
        false += excludes_zero(gm.ci_low_pct, gm.ci_high_pct)
    assert false / trials <= 0.05


def test_round_half_width_is_the_t_interval_of_the_centred_round_means() -> None:
    # Two rows; rounds 0 and 1 shared +1 and -1 (in log units) above each row's own mean.
    rows = [{0: 3.0, 1: 1.0}, {0: 11.0, 1: 9.0}]
    assert round_half_width(rows, 0.95) == pytest.approx(
        student_t_quantile(0.975, 1) * math.sqrt(2.0) / math.sqrt(2.0))
    assert round_half_width([{0: 1.0}, {0: 2.0}], 0.95) is None  # one round
    # A row missing a round counts in the rounds it has, by id; offsets -1, 0, +1 (sd 1). Each
    # round weighs its share of the mean over rows: rounds 0 and 2 1/4 + 1/6, round 1 1/6.
    gapped = [{0: 1.0, 2: 3.0}, {0: 0.0, 1: 1.0, 2: 2.0}]
    squares = 2 * (1 / 4 + 1 / 6) ** 2 + (1 / 6) ** 2
    assert round_half_width(gapped, 0.95) == pytest.approx(
        student_t_quantile(0.975, round(1 / squares - 1, 6)) * math.sqrt(squares))


def test_rows_record_the_ids_of_the_rounds_they_paired_in() -> None:
    a = [{"x": 1.0, "y": 1.0}, {"x": 1.0}, {"x": 1.0, "y": 1.0}]
    b = [{"x": 1.0, "y": 1.0}, {"x": 1.0}, {"x": 1.0, "y": 1.0}]
    rows = dict(summarize_ab(a, b, noise_floor_pct=1.0, round_ids=[0, 2, 5]).rows)
    assert rows["x"].round_ids == (0, 2, 5) and rows["y"].round_ids == (0, 5)
    assert dict(summarize_ab(a, b, noise_floor_pct=1.0).rows)["y"].round_ids == (0, 2)
    with pytest.raises(ValueError, match="2 round ids for 3 rounds"):
        summarize_ab(a, b, noise_floor_pct=1.0, round_ids=[0, 1])


def test_round_ids_travel_through_ab_json_and_an_older_one_reads() -> None:
    a = [{("mm", "f16", "[1]", 1): 1.00, ("mm", "f16", "[2]", 1): 1.00}] * 3
    b = [{k: v * f for k, v in r.items()} for r, f in zip(a, (1.0, 1.01, 0.99), strict=True)]
    result = summarize_ab(a, b, noise_floor_pct=1.0, round_ids=[1, 2, 3])
    rows = [abjson.AbRow(*key, stats=s, flags=()) for key, s in result.rows]
    doc = abjson.AbDocument(caliber=abjson.Caliber({}), rows=tuple(rows))
    data = doc.to_json()
    assert [r["round_ids"] for r in data["rows"]] == [[1, 2, 3], [1, 2, 3]]
    back = abjson.parse(data)
    assert [r.stats.round_ids for r in back.rows] == [(1, 2, 3), (1, 2, 3)]
    for row in data["rows"]:
        del row["round_ids"]  # written before rounds were numbered: numbered in order
    older = abjson.parse(data)
    assert rows_geomean([r.stats for r in older.rows]) == rows_geomean([r.stats for r in rows])
    data["rows"][0]["round_ids"] = [1, 1, 2]
    with pytest.raises(UsageError, match=r"round_ids.*expected 3 distinct ids"):
        abjson.parse(data)


@pytest.mark.slow
@pytest.mark.parametrize("rounds_per_op", [(3,) * 11 + (6,), (2,) * 11 + (6,), (2,) * 6 + (6,) * 6],
                         ids=["11 at 3, 1 at 6", "11 at 2, 1 at 6", "6 at 2, 6 at 6"])
def test_operators_stopped_at_different_rounds_keep_the_coverage(rounds_per_op):
    # Pinned: with every round weighed alike, one operator of twelve running to round 6 while
    # the rest stopped at 3 (ROUNDS=auto) narrowed the interval below that of all stopping at
    # 3, and an A/A excluded zero in 14-22% of campaigns. 12 operators of 5 rows, a 1% offset a
    # round shared by all rows, 0.3% row noise.
    rng, trials, false = random.Random(1), 2000, 0
    for _ in range(trials):
        offsets = [rng.gauss(0.0, 0.01) for _ in range(max(rounds_per_op))]
        speedups, by_round = [], []
        for rounds in rounds_per_op:
            for _ in range(5):
                row = {r: offsets[r] + rng.gauss(0.0, 0.003) for r in range(rounds)}
                by_round.append({r: math.expm1(v) * 100 for r, v in row.items()})
                speedups.append(math.expm1(math.fsum(row.values()) / rounds) * 100)
        gm = geomean_stats(speedups, rounds=max(rounds_per_op), by_round=by_round)
        assert gm is not None
        false += excludes_zero(gm.ci_low_pct, gm.ci_high_pct)
    assert false / trials <= 0.055
