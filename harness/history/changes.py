"""Change points in a row's series: ruptures finds steps, a weighted Welch test keeps them."""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from harness.stats.welch import weighted_welch

# A step smaller than this is never reported, however sure: on a GPU a 1-2% move comes and goes
# with clocks and placement; the simulation (scripts/history_simulate.py) measures both sides.
FLOOR_PCT = 2.5
MAX_P = 0.001  # each candidate is tested on its own; a series has up to a few dozen
MIN_SIZE = 3  # points a segment needs on each side of a step
WINDOW = 12  # points each side of a step that its test reads (older ones may hold other steps)
PENALTY = 3.0  # times log(n), on a series scaled to unit night-to-night noise
MEDIAN_EFFICIENCY = math.pi / 2  # a median's variance over a mean's, for normal rounds


@dataclass(frozen=True)
class Options:
    """How steps are searched for and kept."""

    floor_pct: float = FLOOR_PCT
    max_p: float = MAX_P
    min_size: int = MIN_SIZE
    window: int = WINDOW
    penalty: float = PENALTY


@dataclass(frozen=True)
class Point:
    """One night's value of a row: its median latency, the variance of its log (None: one
    round, no noise of its own), and what identifies it (record, time, stack)."""

    when: str
    latency_ms: float
    log_var: float | None
    record_id: int
    attrs: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Change:
    """A step: the first point after it, its size in % with an interval, and its test's p."""

    index: int
    first: Point
    before_ms: float
    after_ms: float
    step_pct: float
    low_pct: float
    high_pct: float
    p_value: float


def night_variance(points: Sequence[Point]) -> float:
    """The night-to-night variance of log latency beyond each night's own noise, from the
    median absolute successive difference (robust to the steps themselves)."""
    logs = [math.log(p.latency_ms) for p in points]
    diffs = [b - a for a, b in zip(logs, logs[1:], strict=False)]
    if len(diffs) < 2:
        return 0.0
    mad = statistics.median(abs(d) for d in diffs) * 1.4826
    own = [p.log_var for p in points if p.log_var is not None]
    return max(mad * mad / 2.0 - (statistics.fmean(own) if own else 0.0), 0.0)


def _variances(points: Sequence[Point]) -> list[float]:
    """Each point's variance: its own (from its rounds, as the variance of their median) drawn
    halfway to the series' typical one, plus the night-to-night variance. Three rounds guess a
    variance badly, and a night that guessed low must not outweigh the rest."""
    tau2 = night_variance(points)
    own = [p.log_var * MEDIAN_EFFICIENCY for p in points if p.log_var is not None]
    typical = statistics.median(own) if own else 0.0
    floor = 1e-10  # a row that never varies still has the timer's resolution
    return [max((typical if p.log_var is None else
                 0.5 * (p.log_var * MEDIAN_EFFICIENCY + typical)) + tau2, floor)
            for p in points]


def candidates(logs: Sequence[float], variances: Sequence[float], opts: Options) -> list[int]:
    """The indices where ruptures' PELT search (least squares) puts a step, on the series scaled to
    unit noise; the first point after each step."""
    n = len(logs)
    if n < 2 * opts.min_size:
        return []
    # Imported here, not at the top: ruptures pulls in scipy (seconds of start-up), and every
    # harness command imports this module through the CLI; only a search needs it.
    import numpy as np  # noqa: PLC0415
    import ruptures  # noqa: PLC0415

    scale = math.sqrt(statistics.median(variances))
    signal = (np.asarray(logs) - logs[0]) / scale
    # KernelCPD's linear kernel is the least-squares cost of Pelt(model="l2") in compiled code:
    # the same steps, in milliseconds rather than seconds over a year of nights.
    algo = ruptures.KernelCPD(kernel="linear", min_size=opts.min_size, jump=1).fit(signal)
    return [int(b) for b in algo.predict(pen=opts.penalty * math.log(n)) if b < n]


def find_changes(points: Sequence[Point], opts: Options | None = None) -> list[Change]:
    """The steps of one series ordered by time; each candidate must pass the weighted Welch
    test at `max_p` and be at least `floor_pct` in size."""
    opts = opts or Options()
    if any(p.latency_ms <= 0 for p in points):
        points = [p for p in points if p.latency_ms > 0]
    logs = [math.log(p.latency_ms) for p in points]
    variances = _variances(points)
    found = candidates(logs, variances, opts)
    edges = [0, *found, len(points)]
    changes = []
    for k, at in enumerate(found):
        lo, hi = max(edges[k], at - opts.window), min(edges[k + 2], at + opts.window)
        test = weighted_welch(logs[lo:at], variances[lo:at], logs[at:hi], variances[at:hi])
        if test is None:
            continue
        step = math.expm1(test.diff) * 100.0
        if test.p_value > opts.max_p or abs(step) < opts.floor_pct:
            continue
        half = 1.96 * test.se
        changes.append(Change(at, points[at], _median(points[lo:at]),
                              _median(points[at:hi]), step, math.expm1(test.diff - half) * 100,
                              math.expm1(test.diff + half) * 100, test.p_value))
    return changes


def _median(points: Sequence[Point]) -> float:
    return statistics.median(p.latency_ms for p in points)
