"""A/B statistics: rows and geometric means from per-round log ratios, their verdicts."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Collection, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import Enum
from typing import Generic, TypeVar

from harness.stats.geomean import GeomeanStats, geomean_stats, log_of_pct, pct_of_log
from harness.stats.tdist import CONFIDENCE, benjamini_hochberg, t_interval

MIN_NOISE_FLOOR_PCT = 1.0  # below this, a "difference" is within what clocks and caches move
# Above this a floor cannot mean "the same": rows 25% apart are not alike, and an A/A that moved
# rows further only says that host or that number of rounds cannot tell them apart.
MAX_NOISE_FLOOR_PCT = 25.0
AA_PERCENTILE = 95  # of |speedup| in an A/A campaign: the spread a null switch produces
FDR_Q = 0.05
T_METHOD = "t interval on per-round log ratios"
_Key = TypeVar("_Key", bound=Hashable)  # a row's pairing key
_Group = TypeVar("_Group", bound=Hashable)  # what group_geomeans groups keys by


class Verdict(Enum):
    """A row's verdict for side B against side A (A the off side); the value is what users read."""

    FASTER = "faster"  # B faster beyond the noise floor; of rows so called, at most q false
    SLOWER = "slower"  # B slower beyond the noise floor; the same bound, the other way
    SAME = "same"  # the whole interval lies inside +-noise floor: no difference that matters
    INCONCLUSIVE = "inconclusive"  # neither: the data cannot tell; more rounds would
    FLAGGED = "flagged"  # timed under another regime on a side: never faster/slower/same


class OpVerdict(str, Enum):
    """An operator's verdict, in the order a suite report lists them: regressions first. A
    verdict, not a state: written to JSON and compared as its value."""

    SLOWER = Verdict.SLOWER.value
    FAILED = "failed"  # no paired row
    PENDING = "pending"  # no paired row yet, none of its units failed: a resume runs them
    INCONCLUSIVE = Verdict.INCONCLUSIVE.value
    FLAGGED = Verdict.FLAGGED.value  # every row timed under another regime on a side
    SAME = Verdict.SAME.value
    FASTER = Verdict.FASTER.value
    SKIPPED = "skipped"  # no row: pytest skipped every unit
    EXCLUDED = "excluded"  # left out by EXCLUDE

    def __str__(self) -> str:
        return str.__str__(self)


OP_VERDICTS = tuple(OpVerdict)


MAX_ROUNDS_STOP = "MAX_ROUNDS ({most}) reached with rows undecided"  # ROUNDS=auto's last stop


def hit_max_rounds(reason: str | None) -> bool:
    """Whether an operator's stop reason says ROUNDS=auto ran it to MAX_ROUNDS undecided."""
    return bool(reason) and str(reason).startswith(MAX_ROUNDS_STOP.split("{")[0])


def operator_verdict(row_verdicts: Sequence[str], failed: bool, pending: bool = False,
                     skipped: bool = False, excluded: bool = False) -> OpVerdict:
    """An operator's verdict from its rows': excluded (left out by EXCLUDE) before all of
    them; skipped (no row, pytest skipped every unit), pending (no paired row yet, none of its
    units having failed: a resume runs them), failed (no paired row, or `failed`), slower (any
    row slower), faster (any faster, none slower), inconclusive (any row that more rounds would
    decide), same (any row same, the rest flagged), else flagged (every row flagged)."""
    if excluded:  # left out of the campaign by EXCLUDE: its rows are not compared
        return OpVerdict.EXCLUDED
    if skipped and not failed and not row_verdicts:
        return OpVerdict.SKIPPED
    if pending and not failed and not row_verdicts:
        return OpVerdict.PENDING
    if failed or not row_verdicts:
        return OpVerdict.FAILED
    for verdict in (Verdict.SLOWER, Verdict.FASTER, Verdict.INCONCLUSIVE, Verdict.SAME):
        if verdict.value in row_verdicts:
            return OpVerdict(verdict.value)
    return OpVerdict.FLAGGED


@dataclass(frozen=True)
class Method:
    """How rows were judged: the interval, its confidence and the false-discovery rate q."""

    name: str = T_METHOD
    confidence: float = CONFIDENCE
    fdr_q: float | None = FDR_Q  # None: no false-discovery control (an older harness)

    def __post_init__(self) -> None:
        if not 0.0 < self.confidence < 1.0:
            raise ValueError(f"confidence={self.confidence!r}; expected 0 < confidence < 1")
        if self.fdr_q is not None and not 0.0 < self.fdr_q <= 1.0:
            raise ValueError(f"fdr_q={self.fdr_q!r}; expected 0 < q <= 1")

    @property
    def text(self) -> str:
        """The method as reports print it: "t interval on per-round log ratios, 95%, BH q=0.05"."""
        bh = "" if self.fdr_q is None else f", BH q={self.fdr_q:g}"
        return f"{self.name}, {self.confidence * 100:g}%{bh}"


# ---------------------------------------------------------------- numbers


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


def magnitude_pct(speedup: float) -> float:
    """How far a speedup in % is from none, either way, as the speedup of that factor.

    +100% (B twice as fast) and -50% (B twice as slow) are both 100: the distance is
    |log(A / B)|, so a slowdown counts as much as the speedup of the same factor.
    """
    return pct_of_log(abs(log_of_pct(speedup)))


def floor_band(noise_floor_pct: float) -> tuple[float, float]:
    """The speedups in % a noise floor holds, (low, high): B within a factor 1 + floor/100
    of A either way, so symmetric in log ratio; a 5% floor is -4.76..+5%, 100% is -50..+100%."""
    return pct_of_log(-log_of_pct(noise_floor_pct)), noise_floor_pct


# ---------------------------------------------------------------- verdicts


def classify(ci_low: float | None, ci_high: float | None, effect_pct: float, *,
             p_adjusted: float | None, noise_floor_pct: float, flagged: bool,
             q: float = FDR_Q, same_bound: float | None = None) -> Verdict:
    """The verdict of one row from its interval and effect in % and its BH-adjusted p.

    The floor (never below MIN_NOISE_FLOOR_PCT) is a band symmetric in log ratio (floor_band):
    B within a factor 1 + floor/100 of A either way. FASTER/SLOWER need all of: the interval
    excludes zero, the effect lies beyond the band on that side, and the adjusted p is at
    most q. SAME needs the whole interval inside the band: an equivalence test, wrong at most
    (1 - confidence) / 2 of the time per row; where `same_bound` is given (another interval's
    larger |log ratio| as a speedup in %, magnitude_pct), SAME needs it within the floor
    instead. Anything else is INCONCLUSIVE, and so is a row with no interval (one round). Errs
    toward INCONCLUSIVE. A flagged row (a side fell back to the direct timer or self-tuned a
    missing replay key) is FLAGGED whatever its numbers: its sides were not timed alike, so
    its difference may be the regime's.
    """
    if flagged:
        return Verdict.FLAGGED
    if ci_low is None or ci_high is None:
        return Verdict.INCONCLUSIVE
    floor = max(MIN_NOISE_FLOOR_PCT, noise_floor_pct)
    low, high = floor_band(floor)
    if (low <= ci_low and ci_high <= high) if same_bound is None else same_bound <= floor:
        return Verdict.SAME
    discovered = p_adjusted is not None and p_adjusted <= q
    if discovered and ci_low > 0.0 and effect_pct > high:
        return Verdict.FASTER
    if discovered and ci_high < 0.0 and effect_pct < low:
        return Verdict.SLOWER
    return Verdict.INCONCLUSIVE


def noise_floor_from_aa(per_row_spreads: Iterable[Iterable[float]]) -> float:
    """The noise floor in % from an A/A campaign (AXIS=none: both sides identical).

    `per_row_spreads` holds, per row, its per-round speedups in % (RowStats.round_speedups_pct
    of an A/A summary). The floor is the AA_PERCENTILE-th percentile (nearest rank: the
    ceil(0.95 * n)-th smallest) of their magnitude_pct (a round B took twice as long counts as
    one it took half as long) over every row and round, and never below MIN_NOISE_FLOOR_PCT;
    no data gives that minimum. A null switch moves 95% of the measurements by less than this,
    either way, so a smaller effect is not told apart from noise.
    """
    magnitudes = sorted(magnitude_pct(v) for row in per_row_spreads for v in row)
    if not magnitudes:
        return MIN_NOISE_FLOOR_PCT
    rank = math.ceil(AA_PERCENTILE / 100 * len(magnitudes))
    return max(MIN_NOISE_FLOOR_PCT, magnitudes[rank - 1])


# ---------------------------------------------------------------- rows and A/B


@dataclass(frozen=True)
class RowStats:
    """One (op, dtype, shape, occurrence) of an A/B; latencies are medians over paired rounds."""

    a_ms: float
    b_ms: float
    speedup_pct: float  # geometric mean over rounds of A_r / B_r, as a speedup in %
    min_pct: float
    max_pct: float
    ci_low_pct: float | None  # None: fewer than two rounds
    ci_high_pct: float | None
    rounds: int
    flagged: bool
    verdict: Verdict
    round_speedups_pct: tuple[float, ...] = ()
    p_value: float | None = None  # t test of mean log ratio = 0; None: no interval
    p_adjusted: float | None = None  # Benjamini-Hochberg over the campaign's tested rows
    noise_floor_pct: float | None = None  # the floor its verdict used; None: not recorded
    # where an interval other than ci decides `same` (alpha spent over looks): its larger |bound|
    same_bound_pct: float | None = None
    # the round of each of round_speedups_pct, as the A/B numbered them; () where not recorded
    round_ids: tuple[int, ...] = ()


def row_stats(a_rounds: Sequence[float], b_rounds: Sequence[float], *, noise_floor_pct: float,
              flagged: bool = False, method: Method = Method(),
              round_ids: Sequence[int] = ()) -> RowStats:
    """RowStats of one row from its paired per-round latencies (at least one pair).

    The row alone is its own family: its adjusted p is its p. summarize_ab adjusts over every
    row of a campaign and classifies again. The row records its floor (at least the minimum).
    """
    pairs = list(zip(a_rounds, b_rounds, strict=True))
    if not pairs:
        raise ValueError("a row needs at least one paired round")
    speedups = tuple(speedup_pct(a, b) for a, b in pairs)
    logs = [math.log(a / b) for a, b in pairs]
    interval = t_interval(logs, method.confidence)
    low, high, p = ((None, None, None) if interval is None else
                    (pct_of_log(interval.low), pct_of_log(interval.high), interval.p_value))
    effect = pct_of_log(math.fsum(logs) / len(logs))
    return RowStats(
        a_ms=statistics.median(a_rounds), b_ms=statistics.median(b_rounds),
        speedup_pct=effect, min_pct=min(speedups), max_pct=max(speedups),
        ci_low_pct=low, ci_high_pct=high, rounds=len(speedups), flagged=flagged,
        verdict=classify(low, high, effect, p_adjusted=p, noise_floor_pct=noise_floor_pct,
                         flagged=flagged, q=method.fdr_q or 1.0),
        round_speedups_pct=speedups, p_value=p, p_adjusted=p,
        noise_floor_pct=max(MIN_NOISE_FLOOR_PCT, noise_floor_pct), round_ids=tuple(round_ids))


def rows_geomean(rows: Sequence[RowStats],
                 confidence: float = CONFIDENCE) -> GeomeanStats | None:
    """geomean_stats of the rows' speedups, knowing their rounds: no interval at one round, and
    the rounds' shared offsets in it (a row without round_ids numbers its rounds in order)."""
    return geomean_stats([s.speedup_pct for s in rows], confidence,
                         rounds=max((s.rounds for s in rows), default=0),
                         by_round=[dict(zip(s.round_ids or range(len(s.round_speedups_pct)),
                                            s.round_speedups_pct, strict=True)) for s in rows])


@dataclass(frozen=True)
class AbResult(Generic[_Key]):
    """Every paired row's stats, the keys seen on one side only, and the geometric means."""

    rows: tuple[tuple[_Key, RowStats], ...]
    unpaired_a: tuple[_Key, ...]  # seen on A, never in the same round as on B
    unpaired_b: tuple[_Key, ...]
    noise_floor_pct: float
    geomean: GeomeanStats | None  # None: no row paired
    flagged_rows: int
    method: Method = Method()
    groups: tuple[tuple[Hashable, GeomeanStats], ...] = ()  # per group (operator), first seen


def adjust_rows(rows: Sequence[RowStats], *, noise_floor_pct: float,
                method: Method = Method()) -> list[RowStats]:
    """The rows with Benjamini-Hochberg adjusted p-values over the family and verdicts again.

    The family is every row with a p-value that is not flagged: a flagged row is never called
    different, so it is not tested. With method.fdr_q None the p-values stay unadjusted. Each
    row is judged against its own floor where it records one, else against `noise_floor_pct`.
    """
    raw = [None if s.flagged else s.p_value for s in rows]
    adjusted = benjamini_hochberg(raw) if method.fdr_q is not None else tuple(raw)
    out = []
    for s, p in zip(rows, adjusted, strict=True):
        floor = max(MIN_NOISE_FLOOR_PCT, noise_floor_pct if s.noise_floor_pct is None
                    else s.noise_floor_pct)
        out.append(replace(s, p_adjusted=p, noise_floor_pct=floor, verdict=classify(
            s.ci_low_pct, s.ci_high_pct, s.speedup_pct, p_adjusted=p, noise_floor_pct=floor,
            flagged=s.flagged, q=method.fdr_q or 1.0, same_bound=s.same_bound_pct)))
    return out


def summarize_ab(rows_a_by_round: Sequence[Mapping[_Key, float]],
                 rows_b_by_round: Sequence[Mapping[_Key, float]], *,
                 noise_floor_pct: float, flagged: Collection[_Key] = (),
                 method: Method = Method(),
                 group: Callable[[_Key], Hashable] | None = None,
                 floor_at: Callable[[float], float] | None = None,
                 unmeasured: Collection[_Key] = (),
                 round_ids: Sequence[int] | None = None) -> AbResult[_Key]:
    """Pair latencies per key and round (round i of A with round i of B) and compute RowStats.

    Each mapping is one round of one side: key -> latency in ms; the caller keeps only measured
    rows (successful, positive latency). Keys in `flagged` get Verdict.FLAGGED. The verdicts
    control the false-discovery rate over every tested row (adjust_rows). The geometric mean is
    over every paired row's speedup (geomean_stats), per `group(key)` too when given; flagged
    rows count in it and are counted in `flagged_rows`, for the renderer to say so. Keys in
    `unmeasured` (rows whose ratio is the timer's jitter, not a kernel's time) are flagged and
    left out of every geometric mean.

    `floor_at` gives a row's noise floor from its A latency (its median over rounds, in ms);
    without it every row gets `noise_floor_pct`. `round_ids` numbers the rounds (default 0, 1,
    ...): each row records the ids of the rounds it paired in.
    """
    if len(rows_a_by_round) != len(rows_b_by_round):
        raise ValueError(f"rounds must pair: {len(rows_a_by_round)} on A, "
                         f"{len(rows_b_by_round)} on B")
    ids = list(range(len(rows_a_by_round)) if round_ids is None else round_ids)
    if len(ids) != len(rows_a_by_round):
        raise ValueError(f"{len(ids)} round ids for {len(rows_a_by_round)} rounds")
    keys = dict.fromkeys(k for side in (rows_a_by_round, rows_b_by_round) for r in side for k in r)
    paired: list[tuple[_Key, RowStats]] = []
    unpaired_a: list[_Key] = []
    unpaired_b: list[_Key] = []
    for key in keys:
        pairs = [(a[key], b[key], r) for a, b, r
                 in zip(rows_a_by_round, rows_b_by_round, ids, strict=True)
                 if key in a and key in b]
        if pairs:
            a_ms, b_ms, paired_ids = zip(*pairs, strict=True)
            floor = floor_at(statistics.median(a_ms)) if floor_at else noise_floor_pct
            paired.append((key, row_stats(a_ms, b_ms, noise_floor_pct=floor,
                                          flagged=key in flagged or key in unmeasured,
                                          method=method, round_ids=paired_ids)))
            continue
        if any(key in a for a in rows_a_by_round):
            unpaired_a.append(key)
        if any(key in b for b in rows_b_by_round):
            unpaired_b.append(key)
    adjusted = adjust_rows([s for _, s in paired], noise_floor_pct=noise_floor_pct,
                           method=method)
    rows = tuple((key, s) for (key, _), s in zip(paired, adjusted, strict=True))
    timed = tuple((key, s) for key, s in rows if key not in unmeasured)
    return AbResult(
        rows=rows, unpaired_a=tuple(unpaired_a), unpaired_b=tuple(unpaired_b),
        noise_floor_pct=max(MIN_NOISE_FLOOR_PCT, noise_floor_pct),
        geomean=rows_geomean([s for _, s in timed], method.confidence),
        flagged_rows=sum(1 for _, s in rows if s.flagged), method=method,
        groups=group_geomeans(timed, group, method.confidence) if group else ())


def group_geomeans(rows: Sequence[tuple[_Key, RowStats]], group: Callable[[_Key], _Group],
                   confidence: float = CONFIDENCE) -> tuple[tuple[_Group, GeomeanStats], ...]:
    """rows_geomean per group(key) of the rows, groups in first-seen order."""
    by_group: dict[_Group, list[RowStats]] = {}
    for key, s in rows:
        by_group.setdefault(group(key), []).append(s)
    return tuple((g, gm) for g, v in by_group.items() if (gm := rows_geomean(v, confidence)))
