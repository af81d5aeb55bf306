"""The geometric mean of an A/B's rows, with an interval that counts what a round shares.

Every row of a round is timed in the same pair of processes (a campaign's workers serve all of a
round's operators on a side), so whatever moves a process moves all of them alike: on an H100
A/A, addr's five rows moved -1.3% to +1.0% together from round to round. An interval over rows
alone cannot see that offset (every row's mean holds the same share of it) and read addr -0.29%
[-0.47, -0.12] in an A/A. The interval here adds the spread of the rounds' shared offsets to the
spread from row to row.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from harness.stats.tdist import CONFIDENCE, student_t_quantile, t_interval


@dataclass(frozen=True)
class GeomeanStats:
    """The geometric mean of rows' speedups with its interval (None: fewer than two rows or
    one round)."""

    speedup_pct: float
    ci_low_pct: float | None
    ci_high_pct: float | None
    rows: int


def pct_of_log(log_ratio: float) -> float:
    """A log ratio log(A / B) as a speedup in %: (exp(log_ratio) - 1) * 100.

    Capped at exp(700) rather than overflowing: an interval that wide says nothing anyway.
    """
    return math.expm1(min(log_ratio, 700.0)) * 100.0


def log_of_pct(pct: float) -> float:
    """A speedup in % as its log ratio log(A / B); the inverse of pct_of_log."""
    return math.log1p(pct / 100.0)


def round_half_width(by_round: Sequence[Mapping[int, float]], confidence: float) -> float | None:
    """The half-width, in log ratio, that the rounds' shared offsets give a mean over rows.

    `by_round` holds each row's per-round log ratios by round id. A round's offset is the mean,
    over the rows it timed, of each row's log ratio less that row's own mean. Its weight is its
    share of the mean over rows (each row's mean holds 1 / its rounds of each of its rounds),
    so a round only a few rows reached counts for little: where most operators of a ROUNDS=auto
    campaign stopped at 2 or 3 rounds and one ran to 6, the offsets of the first rounds make up
    nearly all of the mean. The half-width is t * sd(offsets) * sqrt(sum of squared weights),
    on 1 / (that sum) - 1 degrees of freedom (rounds - 1 where every row has every round), and
    at least one. None below two rounds."""
    offsets: dict[int, list[float]] = {}
    weights: dict[int, float] = {}
    rows = [row for row in by_round if row]
    for row in rows:
        mean = math.fsum(row.values()) / len(row)
        for r, value in row.items():
            offsets.setdefault(r, []).append(value - mean)
            weights[r] = weights.get(r, 0.0) + 1.0 / (len(row) * len(rows))
    shared = [math.fsum(v) / len(v) for v in offsets.values()]
    if len(shared) < 2:
        return None
    centre = math.fsum(shared) / len(shared)
    sd = math.sqrt(math.fsum((s - centre) ** 2 for s in shared) / (len(shared) - 1))
    squares = math.fsum(w * w for w in weights.values())
    df = max(1.0, round(1.0 / squares - 1.0, 6))  # rounded: equal rounds give exactly R - 1
    return student_t_quantile(1.0 - (1.0 - confidence) / 2.0, df) * sd * math.sqrt(squares)


def geomean_stats(speedups_pct: Sequence[float], confidence: float = CONFIDENCE, *,
                  rounds: int | None = None,
                  by_round: Sequence[Mapping[int, float]] | None = None) -> GeomeanStats | None:
    """The geometric mean of rows' speedups in % and an interval on the mean of their logs.

    Rows, not rounds, are the unit of the mean: the interval is for the typical shape's effect,
    so it holds the spread from shape to shape as well as each row's own noise. With `by_round`
    (each row's per-round speedups in %, by round id, in the order of `speedups_pct`) its
    half-width is the root of the sum of squares of the rows' t half-width and that of the
    rounds' shared offsets (round_half_width): both kinds of spread count, and a switch that
    does nothing gets no interval that excludes zero from an offset all of a round's rows took.

    `rounds` is the most paired rounds behind any of the speedups (None: not known). With one,
    there is no interval: every row's A and B then come from one pair of runs, and whatever
    moves a whole run moves every row alike, unseen by the spread over rows. None for no rows.
    """
    if not speedups_pct:
        return None
    logs = [log_of_pct(s) for s in speedups_pct]
    mean = math.fsum(logs) / len(logs)
    interval = None if rounds is not None and rounds < 2 else t_interval(logs, confidence)
    low = high = None
    if interval is not None:
        half = interval.high - interval.mean
        shared = None if by_round is None else round_half_width(
            [{r: log_of_pct(v) for r, v in row.items()} for row in by_round], confidence)
        half = half if shared is None else math.hypot(half, shared)
        low, high = pct_of_log(mean - half), pct_of_log(mean + half)
    return GeomeanStats(speedup_pct=pct_of_log(mean), ci_low_pct=low, ci_high_pct=high,
                        rows=len(logs))
