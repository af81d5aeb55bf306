"""A seeded simulation of nightly series with real rows' noise: false alarms and detection."""

from __future__ import annotations

import math
import random
import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.history.changes import Options, Point, find_changes
from harness.history.folders import read_folder

BANDS = ((0.0, 0.01), (0.01, 0.03), (0.03, 0.10), (0.10, math.inf))  # a row's round-to-round sd


def row_noise(directory: Path) -> list[float]:
    """Each row's (and side's) round-to-round sd of log latency in a campaign folder."""
    rounds: dict[tuple[str, str, str, str], list[float]] = defaultdict(list)
    for row in read_folder(directory).rows:
        if row.latency_ms and row.latency_ms > 0:
            rounds[(row.op, row.dtype, row.shape, row.side)].append(math.log(row.latency_ms))
    return sorted(statistics.stdev(v) for v in rounds.values() if len(v) >= 2)


@dataclass(frozen=True)
class Trial:
    """One simulated series: its noise, whether it raised a change, and whether one was found
    within `tolerance` nights of the injected step."""

    sd: float
    alarmed: bool
    found: bool


def _series(rng: random.Random, sd: float, nights: int, rounds: int, step_at: int,
            step_pct: float) -> list[Point]:
    points = []
    for night in range(nights):
        shift = math.log1p(step_pct / 100.0) if night >= step_at else 0.0
        logs = [shift + rng.gauss(0.0, sd) for _ in range(rounds)]
        var = statistics.variance(logs) / rounds if rounds >= 2 else None
        points.append(Point(f"night{night:03d}", math.exp(statistics.median(logs)), var, night))
    return points


def run_trials(sds: Sequence[float], trials: int, step_pct: float, seed: int = 0,
               nights: int = 30, step_at: int = 20, rounds: int = 3, tolerance: int = 2,
               opts: Options | None = None) -> list[Trial]:
    """`trials` series, each with the noise of a real row drawn in turn; a step of `step_pct`
    from night `step_at` (0: an A/A series, where any change is a false alarm)."""
    rng = random.Random(seed)
    opts = opts or Options()
    out = []
    for i in range(trials):
        sd = sds[i % len(sds)]
        found = find_changes(_series(rng, sd, nights, rounds, step_at, step_pct), opts)
        hit = any(abs(c.index - step_at) <= tolerance and c.step_pct * step_pct > 0
                  for c in found)
        out.append(Trial(sd, bool(found), hit))
    return out


def rate(trials: Sequence[Trial], what: str, low: float = 0.0, high: float = math.inf
         ) -> tuple[float, int]:
    """(share of trials with `what` true, count) among those whose sd lies in [low, high)."""
    chosen = [t for t in trials if low <= t.sd < high]
    if not chosen:
        return math.nan, 0
    return sum(getattr(t, what) for t in chosen) / len(chosen), len(chosen)
