"""An A/B result: its paired rows, its unpaired rows and the report that holds them."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from harness import stats
from harness.contract.boundary import NO_DEVICE_WORK

# what ab.md says its numbers are: a reader saw the medians' ratio and the speedup disagree in
# sign on a noisy row
SPEEDUP_SAID = ("A ms and B ms are medians over rounds; speedup % is the mean of the per-round "
                "log ratios ln(A/B) as (exp(mean) - 1) * 100, positive when B is faster.")
Key = tuple[str, str, str, int]  # (op, dtype, shape, occurrence): mm measures a key twice


def in_geomean(flags: Iterable[str]) -> bool:
    """Whether a row with these flags counts in a geometric mean (of an operator, a campaign,
    a report): not where its calls ran no kernel (NO_DEVICE_WORK), since its ratio is then the
    timer's own jitter. Every other flagged row counts, and the report says how many."""
    return NO_DEVICE_WORK not in flags


@dataclass(frozen=True)
class AbRow:
    op: str
    dtype: str
    shape: str
    occurrence: int
    stats: stats.RowStats
    flags: tuple[str, ...]  # "A:<marker>" / "B:<marker>" for every flag marker of either side


@dataclass(frozen=True)
class Unpaired:
    op: str
    dtype: str
    shape: str
    occurrence: int
    reason: str


@dataclass(frozen=True)
class AbReport:
    """An A/B of two sides (each a list of rounds); speedup_pct = (A_ms / B_ms - 1) * 100."""

    a_label: str
    b_label: str
    rows: tuple[AbRow, ...]
    unpaired: tuple[Unpaired, ...]
    geomean_speedup_pct: float | None
    noise_floor_pct: float
    direct_rows: int  # paired rows where either side carries DIRECT_MARKER
    notes: tuple[str, ...]
    method: stats.Method = stats.Method()
    geomean_ci_low_pct: float | None = None  # None: fewer than two rows, or one round
    geomean_ci_high_pct: float | None = None
    op_geomeans: tuple[tuple[str, stats.GeomeanStats], ...] = ()  # per operator, first seen
