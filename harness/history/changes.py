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
MAX_P = 0.002  # each candidate is tested on its own; a series has up to a few dozen
MIN_SIZE = 3  # points a segment needs on each side of a step
WINDOW = 12  # points each side of a step that its test reads (older ones may hold other steps)
PENALTY = 3.0  # times log(n), on a series scaled to unit night-to-night noise


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
    """One night's value of a row (`night_value` of its rounds) and what identifies it (record,
    time, stack). A point whose attrs carry non-empty "flags" (every round timed while the
    device throttled, self-tuned or rescued: queries.UNSTEADY) is shown but never read as, or
    against, a step."""

    when: str
    latency_ms: float
    record_id: int
    attrs: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Change:
    """A step: the first point after it (`index` in the series given) and the read point before
    it, its size in % with an interval, and its test's p."""

    index: int
    first: Point
    before: Point
    before_ms: float
    after_ms: float
    step_pct: float
    low_pct: float
    high_pct: float
    p_value: float


def night_value(latencies: Sequence[float]) -> float:
    """A night's value of a row: its fastest round. Timing noise is one-sided (a busy host, a
    clock not yet up, the tuner's slower config in that round's process all add time, nothing
    takes it away), so the fastest of a night's rounds is the row's best estimate; a median of
    three is thrown by two slow rounds, the fastest only by three."""
    return min(latencies)


def night_variance(points: Sequence[Point]) -> float:
    """The variance of a night's log value, as the series shows it between nights: from the
    median absolute difference of successive nights, which a step or an odd slow night barely
    moves. It holds each night's own round-to-round noise as it reaches the fastest round; three
    rounds guess that poorly themselves, and a row whose rounds the tuner splits between two
    configs would read its slow config's spread."""
    logs = [math.log(p.latency_ms) for p in points]
    diffs = [b - a for a, b in zip(logs, logs[1:], strict=False)]
    if len(diffs) < 2:
        return 0.0
    mad = statistics.median(abs(d) for d in diffs) * 1.4826
    return mad * mad / 2.0


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


def readable(point: Point) -> bool:
    """Whether a point is read for steps: a positive value, not flagged."""
    return point.latency_ms > 0 and not point.attrs.get("flags")


def find_changes(points: Sequence[Point], opts: Options | None = None) -> list[Change]:
    """The steps of one series ordered by time; each candidate must pass the weighted Welch
    test at `max_p` and be at least `floor_pct` in size. Only `readable` points are searched;
    each change's index is its first point's in `points`."""
    opts = opts or Options()
    where = [i for i, p in enumerate(points) if readable(p)]
    read = [points[i] for i in where]
    logs = [math.log(p.latency_ms) for p in read]
    floor = 1e-10  # a row that never varies still has the timer's resolution
    variances = [max(night_variance(read), floor)] * len(read)
    found = candidates(logs, variances, opts)
    edges = [0, *found, len(read)]
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
        changes.append(Change(where[at], read[at], read[at - 1], _median(read[lo:at]),
                              _median(read[at:hi]), step, math.expm1(test.diff - half) * 100,
                              math.expm1(test.diff + half) * 100, test.p_value))
    return changes


def _median(points: Sequence[Point]) -> float:
    return statistics.median(p.latency_ms for p in points)
