"""A noise floor per row: what a null switch moves a row by, by its A latency, from an A/A."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.stats import AA_PERCENTILE, MIN_NOISE_FLOOR_PCT, geometric_mean, magnitude_pct

BAND_DECADES = 0.5  # a band of A latency spans half a decade (x3.16)
# Measurements (rows x rounds) a band needs for its AA_PERCENTILE-th percentile to be more than
# its largest value; a band with fewer joins the next slower one (the slowest, the one before).
MIN_BAND_SAMPLES = 20
BANDS = "noise_floor_bands"  # the caliber's key (ab.json) for a model's bands
BAND_NUMBERS = ("lo_ms", "hi_ms", "a_ms", "floor_pct")  # a band's numbers; "samples" counts


@dataclass(frozen=True)
class Band:
    """A/A rows of one range of A latency and the floor they give."""

    lo_ms: float  # the fastest and slowest A latency of its rows
    hi_ms: float
    a_ms: float  # the geometric mean A latency of its rows: where its floor is pinned
    floor_pct: float  # after making the floors non-increasing with latency; >= the minimum
    samples: int  # |per-round speedups| behind it


@dataclass(frozen=True)
class NoiseModel:
    """A noise floor by A latency: bands ordered fastest first, floors non-increasing."""

    bands: tuple[Band, ...]

    def at(self, a_ms: float) -> float:
        """The floor of a row whose A latency is `a_ms`, in %, never below the minimum.

        Between two bands' latencies the floor is interpolated linearly in log latency; a row
        faster than the fastest band takes its floor, one slower than the slowest band its.
        """
        if not self.bands:
            return MIN_NOISE_FLOOR_PCT
        if not (math.isfinite(a_ms) and a_ms > 0):
            return self.bands[0].floor_pct  # no latency to place it by: the highest floor
        x = math.log(a_ms)
        points = [(math.log(b.a_ms), b.floor_pct) for b in self.bands]
        if x <= points[0][0]:
            return points[0][1]
        for (x0, y0), (x1, y1) in zip(points, points[1:], strict=False):
            if x <= x1:
                return y0 + (y1 - y0) * (x - x0) / (x1 - x0)
        return points[-1][1]

    def outside(self, a_ms: float) -> bool:
        """Whether `a_ms` lies outside the A/A's latencies: its floor is extrapolated."""
        return bool(self.bands) and not self.bands[0].lo_ms <= a_ms <= self.bands[-1].hi_ms

    def to_json(self) -> list[dict[str, Any]]:
        return [{"lo_ms": b.lo_ms, "hi_ms": b.hi_ms, "a_ms": b.a_ms, "floor_pct": b.floor_pct,
                 "samples": b.samples} for b in self.bands]

    @classmethod
    def from_json(cls, bands: Iterable[Mapping[str, Any]]) -> NoiseModel:
        return cls(tuple(Band(float(b["lo_ms"]), float(b["hi_ms"]), float(b["a_ms"]),
                              float(b["floor_pct"]), int(b["samples"])) for b in bands))

    @property
    def text(self) -> str:
        """The bands as a report states them: "7.0% at 0.0050 ms, 1.0% at 5.0 ms"."""
        return ", ".join(f"{b.floor_pct:.1f}% at {b.a_ms:.2g} ms" for b in self.bands)


def model_of(caliber: Mapping[str, Any]) -> NoiseModel | None:
    """The noise floor by A latency that a caliber records; None where it records one floor."""
    bands = caliber.get(BANDS)
    return NoiseModel.from_json(bands) if bands else None


def _percentile(magnitudes: Sequence[float]) -> float:
    """The AA_PERCENTILE-th percentile by nearest rank, as stats.noise_floor_from_aa takes it."""
    ordered = sorted(magnitudes)
    return ordered[math.ceil(AA_PERCENTILE / 100 * len(ordered)) - 1]


def _groups(rows: list[tuple[float, tuple[float, ...]]]
            ) -> list[list[tuple[float, tuple[float, ...]]]]:
    """The rows, fastest first, in half-decade bands of at least MIN_BAND_SAMPLES each."""
    by_band: dict[int, list[tuple[float, tuple[float, ...]]]] = {}
    for row in sorted(rows):
        by_band.setdefault(math.floor(math.log10(row[0]) / BAND_DECADES), []).append(row)
    groups: list[list[tuple[float, tuple[float, ...]]]] = []
    pending: list[tuple[float, tuple[float, ...]]] = []
    for band in by_band.values():
        pending += band
        if sum(len(r[1]) for r in pending) >= MIN_BAND_SAMPLES:
            groups.append(pending)
            pending = []
    if pending and groups:
        groups[-1] += pending
    elif pending:
        groups.append(pending)
    return groups


def fit(rows: Iterable[tuple[float, Sequence[float]]]) -> NoiseModel:
    """The noise floor by A latency of an A/A campaign's rows, each (A ms, per-round speedups %).

    Rows are binned by A latency in half-decade bands (merged until each holds
    MIN_BAND_SAMPLES measurements); a band's floor is the AA_PERCENTILE-th percentile of
    magnitude_pct (|log ratio| as a %) over its rows and rounds, never below
    MIN_NOISE_FLOOR_PCT. Floors are then made non-increasing with latency by raising a faster
    band to any slower band's floor: the model never calls a short row quieter than a longer
    one measured. Rows without a latency or a round (or with a round no latency could give)
    are left out; none left gives a model without bands (the minimum everywhere).
    """
    kept = [(a, tuple(s)) for a, s in rows if math.isfinite(a) and a > 0 and s
            and all(math.isfinite(v) and v > -100.0 for v in s)]
    raw = []
    for group in _groups(kept):
        magnitudes = [magnitude_pct(v) for _, s in group for v in s]
        raw.append(Band(lo_ms=group[0][0], hi_ms=group[-1][0],
                        a_ms=geometric_mean(a for a, _ in group),
                        floor_pct=max(MIN_NOISE_FLOOR_PCT, _percentile(magnitudes)),
                        samples=len(magnitudes)))
    bands: list[Band] = []
    for band in reversed(raw):  # slowest first: carry the highest floor seen toward the fast end
        floor = max(band.floor_pct, bands[-1].floor_pct if bands else 0.0)
        bands.append(Band(band.lo_ms, band.hi_ms, band.a_ms, floor, band.samples))
    return NoiseModel(tuple(reversed(bands)))
