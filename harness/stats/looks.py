"""Verdicts that stay valid over repeated looks: alpha spent over each row's looks; pure."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from harness.stats import (
    MIN_NOISE_FLOOR_PCT,
    T_METHOD,
    Method,
    RowStats,
    adjust_rows,
    log_of_pct,
    pct_of_log,
)
from harness.stats.tdist import chi2_quantile, student_t_quantile, t_interval

DEFAULT = Method()
SPENDING = ("alpha spent over looks (Bonferroni: differences 6/(pi^2 k^2), same mostly at the "
            "last planned look)")
SAME_TAIL = 0.2  # of the equivalence alpha, what looks past the plan (a RESUME adding rounds) get
SAME_LAST = 0.55  # of it, what the last planned look (MAX_ROUNDS) gets when more than one is
# A futility projection errs toward going on: it takes the noise at its lower bound and the
# mean at whichever end of its bound helps the row, each one-sided at this confidence.
FUTILITY_BOUND = 0.95
NORMAL_975 = 1.959963984540054  # |x| of a normal noise is below this many sds 95% of the time


def share(look: int) -> float:
    """The share of alpha that look `look` (1, 2, ...) spends: 6 / (pi^2 k^2).

    The shares sum to 1 over any number of looks (sum of 1/k^2 is pi^2/6), so a campaign may
    be extended again and again without running out: look 1 spends 0.61 of alpha, look 2 0.15.
    """
    if look < 1:
        raise ValueError(f"look={look!r}; looks count from 1")
    return 6.0 / (math.pi ** 2 * look * look)


def same_share(look: int, planned: int = 1) -> float:
    """The share of the equivalence ("same") alpha that look `look` spends, of `planned` looks.

    The last planned look (an operator at MAX_ROUNDS) spends SAME_LAST, or 1 - SAME_TAIL when
    it is the only one; the planned looks before it share the rest, look k in proportion to
    k. A look of few rounds can hardly show an interval inside the floor (Student t of one or
    two degrees of freedom), so alpha spent there is mostly wasted; the shape is O'Brien and
    Fleming's (1979): little early, most at the end, as Lan and DeMets' (1983) spending
    functions allow when it is fixed before the data. A look j past the plan (a RESUME
    adding rounds) spends SAME_TAIL * 6 / (pi^2 j^2). The shares sum to at most 1 over any
    number of looks, so "same" claimed at any look is wrong at most (1 - confidence) / 2 of
    the time (Bonferroni over looks; each look a two one-sided tests equivalence test,
    Schuirmann 1987).
    """
    if look < 1 or planned < 1:
        raise ValueError(f"look={look!r}, planned={planned!r}; both count from 1")
    if look > planned:
        return SAME_TAIL * share(look - planned)
    if planned == 1:
        return 1.0 - SAME_TAIL
    if look == planned:
        return SAME_LAST
    return (1.0 - SAME_TAIL - SAME_LAST) * look / (planned * (planned - 1) / 2)


def spending_method(method: Method = DEFAULT) -> Method:
    """The method of a campaign judged at more than one look: the same t interval and BH q,
    with alpha spent over looks; its text names both."""
    return replace(method, name=f"{T_METHOD}, {SPENDING}")


def extended(looks: Sequence[Sequence[int]]) -> bool:
    """Whether any operator was judged at more than one number of rounds."""
    return any(len(k) > 1 for k in looks)


def monitored(row: RowStats, looks: Sequence[int], confidence: float, planned: int = 1
              ) -> RowStats:
    """The row judged as valid under monitoring, `looks` its operator's round counts so far.

    Look k (1, 2, ...) of n_k rounds takes the row's first min(n_k, its rounds) rounds. The
    row's p-value is min over looks of p_k / share(k), at most 1: under "no difference" it is
    at most a with chance at most a, whatever rule chose to add rounds (Bonferroni over looks).
    Its interval is the last look's at 1 - alpha * share(k), which every look's covers at once.
    `same` reads, at each look, another interval at 1 - alpha * same_share(k, planned) inside
    the floor's band: the least over the looks of its larger |log ratio|, as a speedup in %
    (stats.magnitude_pct), is `same_bound_pct`, so a row once shown equivalent stays so, as a
    row once called stays called; wrong at most (1 - confidence) / 2 over all looks, as one
    look's is today. A row missing from some rounds is taken as if its rounds were the first
    ones. Errs wide.
    """
    if not looks:
        raise ValueError("a row is judged at one look at least")
    logs = [log_of_pct(v) for v in row.round_speedups_pct]
    p_values, bounds = [], []
    for k, n in enumerate(looks, 1):
        seen = logs[:min(n, len(logs))]
        interval = t_interval(seen, confidence)
        if interval is not None:
            p_values.append(min(1.0, interval.p_value / share(k)))
        same = t_interval(seen, 1.0 - (1.0 - confidence) * same_share(k, planned))
        if same is not None:
            bounds.append(pct_of_log(max(-same.low, same.high)))  # its larger |log ratio|
    last = t_interval(logs, 1.0 - (1.0 - confidence) * share(len(looks)))
    p = min(p_values) if p_values else None
    low, high = (None, None) if last is None else (pct_of_log(last.low), pct_of_log(last.high))
    return replace(row, ci_low_pct=low, ci_high_pct=high, p_value=p, p_adjusted=p,
                   same_bound_pct=min(bounds) if bounds else None)


def judge(rows: Sequence[RowStats], looks: Sequence[Sequence[int]], *, noise_floor_pct: float,
          method: Method = DEFAULT, planned: int = 1) -> tuple[Method, list[RowStats]]:
    """The rows' method and verdicts, `looks[i]` the round counts row i's operator was judged at,
    `planned` the looks the campaign planned before it ran (1; MAX_ROUNDS - MIN_ROUNDS + 1 for
    ROUNDS=auto).

    Judged once (one look planned, no operator with two): adjust_rows with `method`, today's
    verdicts.
    Otherwise every row is `monitored` from its operator's first look and Benjamini-Hochberg
    runs over those p-values at the method's q: under "no row differs" the chance of any
    faster or slower call stays at most q however many times rounds were added.
    """
    if len(rows) != len(looks):
        raise ValueError(f"{len(rows)} rows, {len(looks)} operators' looks")
    if not extended(looks) and planned == 1:
        return method, adjust_rows(rows, noise_floor_pct=noise_floor_pct, method=method)
    spent = spending_method(method)
    return spent, adjust_rows([monitored(r, k, method.confidence, planned) for r, k in
                               zip(rows, looks, strict=True)],
                              noise_floor_pct=noise_floor_pct, method=spent)


def sd_of_floor(floor_pct: float) -> float:
    """The sd of per-round log ratios whose 95th percentile of |log ratio| is `floor_pct` (an
    A/A's floor, noisefloor's bands), normal noise assumed."""
    return log_of_pct(floor_pct) / NORMAL_975


def _half_width(sd: float, rounds: int, alpha: float) -> float:
    return student_t_quantile(1.0 - alpha / 2.0, rounds - 1) * sd / math.sqrt(rounds)


def futile_width(row: RowStats, looks: Sequence[int], most: int, *, planned: int,
                 confidence: float = DEFAULT.confidence, noise_sd: float | None = None
                 ) -> float | None:
    """The half-width in % that a row's same interval would reach at `most` rounds
    (MAX_ROUNDS) when by then it can be neither same nor called; None while it can be either.

    The row's noise is its rounds' sd at its one-sided FUTILITY_BOUND lower bound (chi-square
    with n - 1 degrees of freedom), or `noise_sd` (an A/A's, in log ratio) where that is less.
    At `most` rounds, one look a round after `looks`, the same interval's half-width is
    t(most - 1) x sd / sqrt(most) at that look's equivalence alpha (same_share), the calls'
    at its share. The mean it would have then is the mean of the rounds so far and of rounds
    to come at a truth FUTILITY_BOUND's t bound away from the mean so far, toward zero for
    `same` and away from it for a call. Same is out of reach when that mean plus the half-width
    passes the floor; a call when that mean is within the floor or the calls' half-width. Errs
    toward None: futility never reads a row same, it only stops adding rounds for it.
    """
    logs = [log_of_pct(v) for v in row.round_speedups_pct]
    n = len(logs)
    if row.flagged or n < 2 or n >= most:
        return None
    mean = math.fsum(logs) / n
    sd = math.sqrt(math.fsum((v - mean) ** 2 for v in logs) / (n - 1))
    low_sd = sd * math.sqrt((n - 1) / chi2_quantile(FUTILITY_BOUND, n - 1))
    if noise_sd is not None:
        low_sd = min(low_sd, noise_sd)
    last = len(looks) + most - (looks[-1] if looks else n)  # the look at `most` rounds
    alpha = 1.0 - confidence
    same = _half_width(low_sd, most, alpha * same_share(last, planned))
    call = _half_width(low_sd, most, alpha * share(last))
    moves = student_t_quantile(FUTILITY_BOUND, n - 1) * sd / math.sqrt(n)
    near = (n * abs(mean) + (most - n) * max(0.0, abs(mean) - moves)) / most
    far = (n * abs(mean) + (most - n) * (abs(mean) + moves)) / most
    floor = log_of_pct(max(MIN_NOISE_FLOOR_PCT, row.noise_floor_pct or MIN_NOISE_FLOOR_PCT))
    if near + same <= floor or far > max(floor, call):
        return None
    return pct_of_log(same)
