"""The store's tables (SQLAlchemy Core), one schema for SQLite and PostgreSQL, and its version."""

from __future__ import annotations

from sqlalchemy import (
    Column,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)

# Raised by one whenever a table or column changes; a store of a newer version is refused, an
# older one upgraded by `harness history upgrade` (none exists yet: version 1 is the first).
SCHEMA_VERSION = 1

metadata = MetaData()

meta = Table(
    "history_meta", metadata,
    Column("key", String(64), primary_key=True),
    Column("value", Text, nullable=False),
)

# One run, batch or campaign: the folder it was read from and the identity stamp that tells a
# reused path from the same folder imported again.
records = Table(
    "records", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("kind", String(16), nullable=False),  # run, batch, campaign
    Column("path", Text, nullable=False),
    Column("stamp", String(128), nullable=False),
    Column("digest", String(64), nullable=False),  # of the files read: a changed one re-imports
    Column("state", String(32), nullable=False),  # complete, running, interrupted, ...
    Column("started_utc", String(32), nullable=False),
    Column("imported_utc", String(32), nullable=False),
    Column("backend", String(32)),
    Column("device", Text),
    Column("host", Text),
    Column("timer", String(16)),
    Column("level", String(32)),
    Column("shape_mode", String(32)),
    Column("axis", Text),
    Column("axis_a", Text),
    Column("axis_b", Text),
    Column("stack_a", Text),  # each side's stack, one line (torch, Triton or FlagTree, ...)
    Column("stack_b", Text),
    Column("flaggems_commit", String(64)),
    Column("harness_commit", String(64)),
    Column("image_digest", Text),
    Column("ops", Integer, nullable=False),
    Column("verdicts", Text, nullable=False),  # JSON {verdict: count}
    UniqueConstraint("path", "stamp", name="uq_records_path_stamp"),
)

# One measured row of one side and round: a run's and a batch's rows have side "" and round 0.
rows = Table(
    "rows", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("record_id", Integer, ForeignKey("records.id", ondelete="CASCADE"), nullable=False),
    Column("op", String(128), nullable=False),
    Column("dtype", String(64), nullable=False),
    Column("shape", Text, nullable=False),
    Column("side", String(1), nullable=False),
    Column("round", Integer, nullable=False),
    Column("status", String(32), nullable=False),
    Column("latency_ms", Float),
    Column("latency_base_ms", Float),
    Column("gbps", Float),
    Column("tflops", Float),
    Column("timer", String(16)),
    Column("flags", Text, nullable=False),  # markers, comma-separated: a timer fallback, ...
    Column("run_path", Text, nullable=False),
)
Index("ix_rows_series", rows.c.op, rows.c.dtype, rows.c.shape, rows.c.side)
Index("ix_rows_record", rows.c.record_id)

# A campaign's verdict and interval per row (ab.json).
verdicts = Table(
    "verdicts", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("record_id", Integer, ForeignKey("records.id", ondelete="CASCADE"), nullable=False),
    Column("op", String(128), nullable=False),
    Column("dtype", String(64), nullable=False),
    Column("shape", Text, nullable=False),
    Column("verdict", String(32), nullable=False),
    Column("speedup_pct", Float),
    Column("ci_low_pct", Float),
    Column("ci_high_pct", Float),
    Column("rounds", Integer),
    Column("flags", Text, nullable=False),
)
Index("ix_verdicts_record", verdicts.c.record_id)

# Each unit's state and wall: a batch's operators, a campaign's (operator, round) units.
units = Table(
    "units", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("record_id", Integer, ForeignKey("records.id", ondelete="CASCADE"), nullable=False),
    Column("unit", String(160), nullable=False),
    Column("op", String(128), nullable=False),
    Column("status", String(32), nullable=False),
    Column("wall_s", Float),
    Column("reason", Text),
)
Index("ix_units_record", units.c.record_id)

CHILDREN = (rows, verdicts, units)
