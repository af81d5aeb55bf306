"""Queries over the store, each returning typed frozen rows (never SQL outside this module)."""

from __future__ import annotations

import json
import math
import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, func, select

from harness import axes
from harness.contract.boundary import (
    CLOCKS_THROTTLED_MARKER,
    DEVICE_WORK_MS,
    FLAG_MARKERS,
    NO_DEVICE_WORK,
    REPLAY_FALLBACK_MARKER,
    RESCUED_MARKER,
)
from harness.errors import UsageError
from harness.history import schema
from harness.history.changes import Point, night_value
from harness.stats.welch import welch

R, W = schema.records, schema.rows
NOISE_FLOOR_PCT = 1.0  # compare: the smallest change called beyond noise, as ab's floor
ALPHA = 0.05
# What a series keeps apart and compare refuses to mix unless told: a row measured on another
# backend or device, or by another timer, is another quantity, whatever its name.
COMPARABLE = ("backend", "device", "timer")
# compare's flag of a row whose two records timed it by different kinds of timer (a graph against
# a direct timer where a capture fell back): its change is the timer's as much as the code's
TIMER_DIFFERS = "TIMER_DIFFERS"
# A round timed while the device throttled, or with a config its replay did not pin (a key the
# record lacked, tuned for itself), or rescued from a failed capture, says nothing of the code
# as the other nights timed it: a night's value leaves it out (`_point`), as an A/B never calls
# such a row. A fallback to another timer is not among these: it is another series.
UNSTEADY = (CLOCKS_THROTTLED_MARKER, REPLAY_FALLBACK_MARKER, RESCUED_MARKER)


@dataclass(frozen=True)
class Record:
    """One run, batch or campaign in the store: when, what, where, stacks, verdict counts."""

    id: int
    kind: str
    started_utc: str
    state: str
    path: str
    backend: str | None
    device: str | None
    host: str | None
    timer: str | None
    level: str | None
    axis: str | None
    axis_a: str | None
    axis_b: str | None
    stack_a: str | None
    stack_b: str | None
    flaggems_commit: str | None
    ops: int
    verdicts: str


@dataclass(frozen=True)
class Unit:
    unit: str
    op: str
    status: str
    wall_s: float | None
    reason: str | None


@dataclass(frozen=True)
class Detail:
    """One record with its units, its verdict rows' counts and its row count."""

    record: Record
    rows: int
    units: tuple[Unit, ...]


@dataclass(frozen=True)
class SeriesKey:
    """What makes two nights' values comparable: the row, its side and its caliber."""

    op: str
    dtype: str
    shape: str
    side: str
    backend: str
    device: str
    timer: str
    setting: str = ""  # a campaign side's switch (OMP_NUM_THREADS=1): side_setting


def side_setting(axis: str | None, a: str | None, b: str | None, side: str | None) -> str:
    """The setting a campaign's side ran under where its axis is a variable's switch
    (`OMP_NUM_THREADS=1`): a series and a comparison hold one, as side A of 1 -> 2 and side A
    of 2 -> 1 are not one quantity. "" for a run, an A/A, or an axis of two stacks, whose
    nights a series follows (each night's stack beside it, and its change points)."""
    if not axis or side not in ("A", "B"):
        return ""
    kind = axes.kind_of(axis)
    if kind.stacks or kind.aa:
        return ""
    return f"{axis}={b if side == 'B' else a}"


def series_labels(keys: Sequence[SeriesKey]) -> dict[SeriesKey, str]:
    """A distinct label for each series: its dtype, shape and side, then its backend, device
    and timer where the series given differ in them (a row's direct-timer fallback, another
    device), so that no two series share a line of a plot."""
    varying = [f for f in (*COMPARABLE, "setting") if len({getattr(k, f) for k in keys}) > 1]
    return {k: " ".join([k.dtype, k.shape, k.side or "-", *(getattr(k, f) or "-" for f in varying)])
            for k in keys}


@dataclass(frozen=True)
class Compared:
    """One row in both records: each side's median, the change and whether it is beyond noise.
    `flags` say why a change is never called beyond noise: a FLAG_MARKERS marker in either
    record's rounds (as `<record id>:<marker>`, as a campaign names a row's side), its two
    records timing it differently (TIMER_DIFFERS) or no device work in any of its calls."""

    op: str
    dtype: str
    shape: str
    first_ms: float
    second_ms: float
    change_pct: float
    p_value: float | None
    rounds: tuple[int, int]
    beyond_noise: bool
    flags: tuple[str, ...] = ()


@dataclass(frozen=True)
class Comparison:
    """compare's answer: the two records, their shared rows, and notes (mixed calibers)."""

    first: Record
    second: Record
    rows: list[Compared]
    notes: list[str]


@dataclass(frozen=True)
class Sample:
    """One round of a row in a record: its latency, the timer that took it and its markers."""

    latency_ms: float
    timer: str
    markers: tuple[str, ...]


def _record(row: object) -> Record:
    return Record(**{f: getattr(row, f) for f in Record.__dataclass_fields__})


def list_records(engine: Engine, kind: str | None = None, limit: int = 50) -> list[Record]:
    """The newest records first, at most `limit`."""
    query = select(R).order_by(R.c.started_utc.desc(), R.c.id.desc()).limit(limit)
    if kind:
        query = query.where(R.c.kind == kind)
    with engine.connect() as conn:
        return [_record(r) for r in conn.execute(query)]


def find_record(engine: Engine, ident: str) -> Record:
    """The record of an id of `history list`, or of a folder that was imported."""
    with engine.connect() as conn:
        if ident.isdigit():
            row = conn.execute(select(R).where(R.c.id == int(ident))).first()
        else:
            row = conn.execute(select(R).where(R.c.path == str(Path(ident).resolve()))
                               .order_by(R.c.id.desc())).first()
    if row is None:
        raise UsageError(f"history record {ident!r} is not in the store; expected an id of "
                         "`harness history list` or an imported folder")
    return _record(row)


def show(engine: Engine, ident: str) -> Detail:
    """One record, its units and how many rows it holds."""
    record = find_record(engine, ident)
    U = schema.units
    with engine.connect() as conn:
        count = conn.execute(select(func.count()).select_from(W)
                             .where(W.c.record_id == record.id)).scalar() or 0
        units = tuple(Unit(u.unit, u.op, u.status, u.wall_s, u.reason) for u in conn.execute(
            select(U).where(U.c.record_id == record.id).order_by(U.c.id)))
    return Detail(record, int(count), units)


def _point(when: str, record_id: int, rounds: list[Sample], stack: str | None,
           commit: str | None) -> Point:
    """A night of a row: the fastest of its rounds that the device ran at its clocks
    (UNSTEADY); where every round was marked, the fastest of them all, the point flagged with
    those markers so that no step is read from it."""
    steady = [r for r in rounds if not set(r.markers) & set(UNSTEADY)]
    flags = "" if steady else ",".join(sorted({m for r in rounds for m in r.markers
                                               if m in UNSTEADY}))
    used = steady or rounds
    counted = str(len(used)) if len(used) == len(rounds) else f"{len(used)} of {len(rounds)}"
    return Point(when, night_value([r.latency_ms for r in used]), record_id,
                 {"stack": stack or "", "flaggems_commit": commit or "", "rounds": counted,
                  "flags": flags})


def row_timer(record_timer: str | None, row_timer: str | None) -> str:
    """The timer that measured a row: its record's (which names the graph timer's algorithm)
    where the row was graph-timed or does not say, else the row's own, e.g. `direct` where its
    capture fell back. Rows of one record can thus belong to different series."""
    if row_timer and row_timer != "graph":
        return row_timer
    return record_timer or row_timer or ""


def _commit(r: Any) -> str | None:
    """The FlagGems commit a row ran: its side's, where the campaign's sides are commits."""
    if r.axis and axes.kind_of(r.axis).side_commits and r.side in ("A", "B"):
        return r.axis_b if r.side == "B" else r.axis_a
    return r.flaggems_commit


def series(engine: Engine, op: str | None = None, dtype: str | None = None,
           shape: str | None = None, since: str | None = None) -> dict[SeriesKey, list[Point]]:
    """Every row's series of nightly points (the fastest round, `_point`), oldest first; a
    series holds one backend, device and timer (`row_timer`)."""
    query = (select(W.c.record_id, W.c.op, W.c.dtype, W.c.shape, W.c.side, W.c.latency_ms,
                    W.c.timer.label("row_timer"), W.c.flags,
                    R.c.started_utc, R.c.backend, R.c.device, R.c.timer, R.c.stack_a,
                    R.c.stack_b, R.c.flaggems_commit, R.c.axis, R.c.axis_a, R.c.axis_b)
             .join(R, R.c.id == W.c.record_id).where(W.c.latency_ms.is_not(None))
             .order_by(R.c.started_utc, W.c.record_id))
    for column, value in ((W.c.op, op), (W.c.dtype, dtype), (W.c.shape, shape)):
        if value is not None:
            query = query.where(column == value)
    if since:
        query = query.where(R.c.started_utc >= since)
    nights: dict[SeriesKey, dict[int, list]] = defaultdict(dict)
    with engine.connect() as conn:
        for r in conn.execute(query):
            timer = row_timer(r.timer, r.row_timer)
            key = SeriesKey(r.op, r.dtype, r.shape, r.side, r.backend or "", r.device or "",
                            timer, side_setting(r.axis, r.axis_a, r.axis_b, r.side))
            night = nights[key].setdefault(r.record_id, [r.started_utc, [],
                                                         r.stack_b if r.side == "B"
                                                         else r.stack_a, _commit(r)])
            night[1].append(_sample(r, timer))
    return {key: [_point(n[0], rid, n[1], n[2], n[3]) for rid, n in by_record.items()]
            for key, by_record in nights.items()}


def _sample(row: Any, timer: str) -> Sample:
    """A stored round (its latency and comma-joined markers) timed by `timer` (`row_timer`)."""
    return Sample(row.latency_ms, timer, tuple(m for m in (row.flags or "").split(",") if m))


def _chosen(record: Record, side: str | None) -> str:
    """The side of `record` a comparison reads: `side`, else A of a campaign, else none."""
    return side if side is not None else ("A" if record.kind == "campaign" else "")


def _side_rows(engine: Engine, record: Record, side: str | None
               ) -> dict[tuple[str, str, str], list[Sample]]:
    chosen = _chosen(record, side)
    query = select(W.c.op, W.c.dtype, W.c.shape, W.c.latency_ms, W.c.timer, W.c.flags).where(
        (W.c.record_id == record.id) & (W.c.side == chosen) & W.c.latency_ms.is_not(None))
    found: dict[tuple[str, str, str], list[Sample]] = defaultdict(list)
    with engine.connect() as conn:
        for r in conn.execute(query):
            found[(r.op, r.dtype, r.shape)].append(_sample(r, row_timer(record.timer, r.timer)))
    return found


def caliber_differences(first: Record, second: Record) -> list[str]:
    """Each COMPARABLE field in which two records differ, as `field: 1='x' 2='y'`."""
    return [f"{f}: {first.id}={getattr(first, f)!r} {second.id}={getattr(second, f)!r}"
            for f in COMPARABLE if (getattr(first, f) or "") != (getattr(second, f) or "")]


def row_flags(first: Record, second: Record, xa: Sequence[Sample], xb: Sequence[Sample]
              ) -> tuple[str, ...]:
    """Why a shared row's change is not to be called (see `Compared.flags`)."""
    flags = [f"{rec.id}:{m}" for rec, rounds in ((first, xa), (second, xb))
             for m in FLAG_MARKERS if any(m in r.markers for r in rounds)]
    # the timer's kind (graph, direct): records timed by two graph algorithms differ in
    # caliber, which compare refuses or notes once, not row by row
    ta, tb = (sorted({r.timer.partition(":")[0] for r in rounds}) for rounds in (xa, xb))
    if ta != tb:
        flags.append(f"{TIMER_DIFFERS}:{'/'.join(ta)}->{'/'.join(tb)}")
    if all(r.latency_ms < DEVICE_WORK_MS for r in (*xa, *xb)):
        flags.append(NO_DEVICE_WORK)
    return tuple(flags)


def compare(engine: Engine, first: str, second: str, side: str | None = None,
            allow_mixed: bool = False) -> Comparison:
    """The rows two records share, on one side each (A of a campaign unless `side`): the
    change of the second against the first and Welch's test over their rounds. Records that
    differ in a COMPARABLE field are refused (UsageError naming each difference) unless
    `allow_mixed`, and then the difference is a note; a flagged row is never beyond noise."""
    a, b = find_record(engine, first), find_record(engine, second)
    sa, sb = (side_setting(r.axis, r.axis_a, r.axis_b, _chosen(r, side)) for r in (a, b))
    diffs = caliber_differences(a, b) + ([f"setting: {a.id}={sa!r} {b.id}={sb!r}"]
                                         if sa != sb else [])
    if diffs and not allow_mixed:
        raise UsageError(f"records {a.id} and {b.id} differ in caliber ({'; '.join(diffs)}); "
                         "pass --allow-mixed to compare them anyway")
    la, lb = _side_rows(engine, a, side), _side_rows(engine, b, side)
    out = []
    for key in sorted(set(la) & set(lb)):
        xa = [r.latency_ms for r in la[key]]
        xb = [r.latency_ms for r in lb[key]]
        ma, mb = statistics.median(xa), statistics.median(xb)
        change = (mb / ma - 1.0) * 100.0 if ma > 0 else math.nan
        test = welch([math.log(v) for v in xa if v > 0], [math.log(v) for v in xb if v > 0])
        p = test.p_value if test else None
        flags = row_flags(a, b, la[key], lb[key])
        beyond = not flags and p is not None and p < ALPHA and abs(change) >= NOISE_FLOOR_PCT
        out.append(Compared(*key, ma, mb, change, p, (len(xa), len(xb)), beyond, flags))
    notes = [f"mixed calibers (--allow-mixed): {'; '.join(diffs)}"] if diffs else []
    return Comparison(a, b, out, notes)


def verdict_counts(record: Record) -> str:
    """Its verdict (or status) counts, one short phrase."""
    counts = json.loads(record.verdicts or "{}")
    return ", ".join(f"{v} {k}" for k, v in sorted(counts.items())) or "-"


ORDERS = ("time", "commit")


def by_commit(points: Sequence[Point]) -> list[Point]:
    """The points with each FlagGems commit's nights together, commits in the order each was
    first measured (a commit measured again later, e.g. an older one re-run, joins its own);
    a point without a commit keeps its place in time."""
    commits = [p.attrs.get("flaggems_commit", "") for p in points]
    first: dict[str, int] = {}
    for i, commit in enumerate(commits):
        first.setdefault(commit, i)
    order = sorted(range(len(points)), key=lambda i: (first[commits[i]] if commits[i] else i, i))
    return [points[i] for i in order]


def ordered(found: dict[SeriesKey, list[Point]], by: str) -> dict[SeriesKey, list[Point]]:
    """Each series by time (as stored) or by commit (by_commit)."""
    if by == "time":
        return found
    if by != "commit":
        raise UsageError(f"--by {by!r} is not accepted; expected one of: {', '.join(ORDERS)}")
    return {key: by_commit(points) for key, points in found.items()}


def points_of(found: dict[SeriesKey, list[Point]]) -> Sequence[tuple[SeriesKey, Point]]:
    """Every (series, point), series by series: a trend's table."""
    return [(key, p) for key in sorted(found, key=lambda k: tuple(vars(k).values()))
            for p in found[key]]
