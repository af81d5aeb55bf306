"""A/B statistics: per-round speedups, a seeded bootstrap interval, the noise floor, a verdict."""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Collection, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum

MIN_NOISE_FLOOR_PCT = 1.0  # below this, a "difference" is within what clocks and caches move
AA_PERCENTILE = 95  # of |speedup| in an A/A campaign: the spread a null switch produces
N_RESAMPLES = 2000
CONFIDENCE = 0.95


class Verdict(Enum):
    """A row's verdict for side B against side A (A the off side); the value is what users read."""

    FASTER = "faster"  # B faster by more than noise; wrong at most as often as a 2.5% tail
    SLOWER = "slower"  # B slower by more than noise; the same bound, the other way
    SAME = "same"  # might or might not differ: the data cannot tell past the noise floor
    UNRELIABLE = "same (flagged)"  # timed under another regime on a side: never faster/slower


def geometric_mean(values: Iterable[float]) -> float:
    """The geometric mean of positive, finite values; ValueError for none or a bad one."""
    items = list(values)
    if not items:
        raise ValueError("geometric mean of no values")
    if not all(math.isfinite(v) and v > 0 for v in items):
        raise ValueError(f"geometric mean needs positive finite values, got {items!r}")
    return math.exp(math.fsum(math.log(v) for v in items) / len(items))


def speedup_pct(a_ms: float, b_ms: float) -> float:
    """`(A_ms / B_ms - 1) * 100`: positive when B is faster (takes less time) than A."""
    if not (math.isfinite(a_ms) and math.isfinite(b_ms) and a_ms > 0 and b_ms > 0):
        raise ValueError(f"latencies must be positive and finite, got A={a_ms!r} B={b_ms!r}")
    return (a_ms / b_ms - 1.0) * 100.0


def quantile(sorted_values: Sequence[float], q: float) -> float:
    """The q-quantile of sorted values, interpolated linearly (numpy's default, Hyndman-Fan 7)."""
    if not sorted_values:
        raise ValueError("quantile of no values")
    position = q * (len(sorted_values) - 1)
    low = math.floor(position)
    high = min(low + 1, len(sorted_values) - 1)
    fraction = position - low
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * fraction


def _median_ratio_pct(a: Sequence[float], b: Sequence[float], picks: Sequence[int]) -> float:
    return speedup_pct(statistics.median(a[i] for i in picks),
                       statistics.median(b[i] for i in picks))


def bootstrap_ci(a_rounds: Sequence[float], b_rounds: Sequence[float], *, seed: int,
                 n_resamples: int = N_RESAMPLES,
                 confidence: float = CONFIDENCE) -> tuple[float, float] | None:
    """A percentile bootstrap interval of `median(A) / median(B) - 1` in %, or None.

    Rounds are resampled with replacement as pairs (round i of A with round i of B): the
    interleaved schedule pairs them in time, so drift within a campaign cancels. The same seed
    gives the same interval. None for fewer than two rounds: one round has no spread to resample,
    and its "interval" would be a point that excludes zero by construction. With few rounds the
    interval is too narrow rather than too wide (it cannot reach past the observed rounds), which
    is why a verdict also needs the noise floor.
    """
    if len(a_rounds) != len(b_rounds):
        raise ValueError(f"rounds must pair: {len(a_rounds)} on A, {len(b_rounds)} on B")
    if not 0.0 < confidence < 1.0 or n_resamples < 1:
        raise ValueError(f"confidence={confidence!r} n_resamples={n_resamples!r}")
    n = len(a_rounds)
    if n < 2:
        return None
    rng = random.Random(seed)
    resampled = sorted(
        _median_ratio_pct(a_rounds, b_rounds, [rng.randrange(n) for _ in range(n)])
        for _ in range(n_resamples)
    )
    tail = (1.0 - confidence) / 2.0
    return quantile(resampled, tail), quantile(resampled, 1.0 - tail)


def classify(ci_low: float | None, ci_high: float | None, median: float,
             noise_floor_pct: float, flagged: bool) -> Verdict:
    """The verdict of one row: FASTER/SLOWER need the interval to exclude zero AND |median| to
    exceed the noise floor (never below MIN_NOISE_FLOOR_PCT), both the same way.

    Errs toward SAME: SAME means "might or might not differ", FASTER/SLOWER mean "differs, by
    more than noise". A flagged row (a side fell back to the direct timer or self-tuned a missing
    replay key) is UNRELIABLE whatever its numbers: its two sides were not timed alike, so its
    difference may be the regime's. No interval (one round) is SAME.
    """
    if flagged:
        return Verdict.UNRELIABLE
    if ci_low is None or ci_high is None:
        return Verdict.SAME
    floor = max(MIN_NOISE_FLOOR_PCT, noise_floor_pct)
    if ci_low > 0.0 and median > floor:
        return Verdict.FASTER
    if ci_high < 0.0 and median < -floor:
        return Verdict.SLOWER
    return Verdict.SAME


def noise_floor_from_aa(per_row_spreads: Iterable[Iterable[float]]) -> float:
    """The noise floor in % from an A/A campaign (AXIS=none: both sides identical).

    `per_row_spreads` holds, per row, its per-round speedups in % (RowStats.round_speedups_pct
    of an A/A summary). The floor is the AA_PERCENTILE-th percentile (nearest rank: the
    ceil(0.95 * n)-th smallest) of |speedup| over every row and round, and never below
    MIN_NOISE_FLOOR_PCT; no data gives that minimum. A null switch moves 95% of the
    measurements by less than this, so a smaller median effect is not told apart from noise.
    """
    magnitudes = sorted(abs(v) for row in per_row_spreads for v in row)
    if not magnitudes:
        return MIN_NOISE_FLOOR_PCT
    rank = math.ceil(AA_PERCENTILE / 100 * len(magnitudes))
    return max(MIN_NOISE_FLOOR_PCT, magnitudes[rank - 1])


@dataclass(frozen=True)
class RowStats:
    """One (op, dtype, shape, occurrence) of an A/B: latencies are medians over paired rounds."""

    a_ms: float
    b_ms: float
    median_speedup_pct: float  # median over rounds of each round's speedup_pct
    min_pct: float
    max_pct: float
    ci_low_pct: float | None  # None: fewer than two rounds
    ci_high_pct: float | None
    rounds: int
    flagged: bool
    verdict: Verdict
    round_speedups_pct: tuple[float, ...] = ()


def row_stats(a_rounds: Sequence[float], b_rounds: Sequence[float], *, noise_floor_pct: float,
              seed: int, flagged: bool = False) -> RowStats:
    """RowStats of one row from its paired per-round latencies (at least one pair)."""
    speedups = tuple(speedup_pct(a, b) for a, b in zip(a_rounds, b_rounds, strict=True))
    if not speedups:
        raise ValueError("a row needs at least one paired round")
    median = statistics.median(speedups)
    ci = bootstrap_ci(a_rounds, b_rounds, seed=seed)
    low, high = ci if ci is not None else (None, None)
    return RowStats(
        a_ms=statistics.median(a_rounds), b_ms=statistics.median(b_rounds),
        median_speedup_pct=median, min_pct=min(speedups), max_pct=max(speedups),
        ci_low_pct=low, ci_high_pct=high, rounds=len(speedups), flagged=flagged,
        verdict=classify(low, high, median, noise_floor_pct, flagged),
        round_speedups_pct=speedups)


@dataclass(frozen=True)
class AbResult:
    """Every paired row's stats, the keys seen on one side only, and the geometric mean."""

    rows: tuple[tuple[Hashable, RowStats], ...]
    unpaired_a: tuple[Hashable, ...]  # seen on A, never in the same round as on B
    unpaired_b: tuple[Hashable, ...]
    noise_floor_pct: float
    geomean_speedup_pct: float | None  # None: no row paired
    flagged_rows: int


def summarize_ab(rows_a_by_round: Sequence[Mapping[Hashable, float]],
                 rows_b_by_round: Sequence[Mapping[Hashable, float]], *,
                 noise_floor_pct: float, seed: int,
                 flagged: Collection[Hashable] = ()) -> AbResult:
    """Pair latencies per key and round (round i of A with round i of B) and compute RowStats.

    Each mapping is one round of one side: key -> latency in ms; the caller keeps only measured
    rows (successful, positive latency). Keys in `flagged` get Verdict.UNRELIABLE. The geometric
    mean is over every paired row, of its median A/B ratio (1 + median_speedup_pct / 100),
    given back as a speedup in %; flagged rows count in it and are counted in `flagged_rows`,
    for the renderer to say so. Every row is bootstrapped with the same seed, so a row's
    interval does not depend on which other rows ran.
    """
    if len(rows_a_by_round) != len(rows_b_by_round):
        raise ValueError(f"rounds must pair: {len(rows_a_by_round)} on A, "
                         f"{len(rows_b_by_round)} on B")
    keys = dict.fromkeys(k for side in (rows_a_by_round, rows_b_by_round) for r in side for k in r)
    rows: list[tuple[Hashable, RowStats]] = []
    unpaired_a: list[Hashable] = []
    unpaired_b: list[Hashable] = []
    for key in keys:
        pairs = [(a[key], b[key]) for a, b in zip(rows_a_by_round, rows_b_by_round, strict=True)
                 if key in a and key in b]
        if pairs:
            a_ms, b_ms = zip(*pairs, strict=True)
            rows.append((key, row_stats(a_ms, b_ms, noise_floor_pct=noise_floor_pct, seed=seed,
                                        flagged=key in flagged)))
            continue
        if any(key in a for a in rows_a_by_round):
            unpaired_a.append(key)
        if any(key in b for b in rows_b_by_round):
            unpaired_b.append(key)
    ratios = [1.0 + s.median_speedup_pct / 100.0 for _, s in rows]
    return AbResult(
        rows=tuple(rows), unpaired_a=tuple(unpaired_a), unpaired_b=tuple(unpaired_b),
        noise_floor_pct=max(MIN_NOISE_FLOOR_PCT, noise_floor_pct),
        geomean_speedup_pct=(geometric_mean(ratios) - 1.0) * 100.0 if ratios else None,
        flagged_rows=sum(1 for _, s in rows if s.flagged))
