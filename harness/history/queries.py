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
from harness.errors import UsageError
from harness.history import schema
from harness.history.changes import Point, night_value
from harness.stats.welch import welch

R, W = schema.records, schema.rows
NOISE_FLOOR_PCT = 1.0  # compare: the smallest change called beyond noise, as ab's floor
ALPHA = 0.05


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


@dataclass(frozen=True)
class Compared:
    """One row in both records: each side's median, the change and whether it is beyond noise."""

    op: str
    dtype: str
    shape: str
    first_ms: float
    second_ms: float
    change_pct: float
    p_value: float | None
    rounds: tuple[int, int]
    beyond_noise: bool


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


def _point(when: str, record_id: int, latencies: list[float], stack: str | None,
           commit: str | None) -> Point:
    return Point(when, night_value(latencies), record_id,
                 {"stack": stack or "", "flaggems_commit": commit or "",
                  "rounds": str(len(latencies))})


def _commit(r: Any) -> str | None:
    """The FlagGems commit a row ran: its side's, where the campaign's sides are commits."""
    if r.axis and axes.kind_of(r.axis).side_commits and r.side in ("A", "B"):
        return r.axis_b if r.side == "B" else r.axis_a
    return r.flaggems_commit


def series(engine: Engine, op: str | None = None, dtype: str | None = None,
           shape: str | None = None, since: str | None = None) -> dict[SeriesKey, list[Point]]:
    """Every row's series of nightly points (median over rounds), oldest first."""
    query = (select(W.c.record_id, W.c.op, W.c.dtype, W.c.shape, W.c.side, W.c.latency_ms,
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
            key = SeriesKey(r.op, r.dtype, r.shape, r.side, r.backend or "", r.device or "",
                            r.timer or "")
            night = nights[key].setdefault(r.record_id, [r.started_utc, [],
                                                         r.stack_b if r.side == "B"
                                                         else r.stack_a, _commit(r)])
            night[1].append(r.latency_ms)
    return {key: [_point(n[0], rid, n[1], n[2], n[3]) for rid, n in by_record.items()]
            for key, by_record in nights.items()}


def _side_latencies(engine: Engine, record: Record, side: str | None
                    ) -> dict[tuple[str, str, str], list[float]]:
    chosen = side if side is not None else ("A" if record.kind == "campaign" else "")
    query = select(W.c.op, W.c.dtype, W.c.shape, W.c.latency_ms).where(
        (W.c.record_id == record.id) & (W.c.side == chosen) & W.c.latency_ms.is_not(None))
    found: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    with engine.connect() as conn:
        for r in conn.execute(query):
            found[(r.op, r.dtype, r.shape)].append(r.latency_ms)
    return found


def compare(engine: Engine, first: str, second: str, side: str | None = None
            ) -> tuple[Record, Record, list[Compared]]:
    """The rows two records share, on one side each (A of a campaign unless `side`): the
    change of the second against the first and Welch's test over their rounds."""
    a, b = find_record(engine, first), find_record(engine, second)
    la, lb = _side_latencies(engine, a, side), _side_latencies(engine, b, side)
    out = []
    for key in sorted(set(la) & set(lb)):
        xa, xb = la[key], lb[key]
        ma, mb = statistics.median(xa), statistics.median(xb)
        change = (mb / ma - 1.0) * 100.0 if ma > 0 else math.nan
        test = welch([math.log(v) for v in xa if v > 0], [math.log(v) for v in xb if v > 0])
        p = test.p_value if test else None
        beyond = p is not None and p < ALPHA and abs(change) >= NOISE_FLOOR_PCT
        out.append(Compared(*key, ma, mb, change, p, (len(xa), len(xb)), beyond))
    return a, b, out


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
