"""Import folders into the store: a transaction per folder, idempotent beside other writers."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, delete, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection
from sqlalchemy.exc import OperationalError, SQLAlchemyError

from harness.errors import HarnessError
from harness.history import schema, store
from harness.history.folders import Folder, kind_of, read_folder

ADDED, UPDATED, UNCHANGED = "added", "updated", "unchanged"
COPY_OF = "unchanged (a copy of record {id}, at another path)"


@dataclass(frozen=True)
class Imported:
    """What importing one folder did."""

    path: str
    kind: str
    outcome: str  # added, updated, unchanged
    rows: int
    record_id: int
    running: bool
    progress: str

    def line(self) -> str:
        tail = (f"; it is still running ({self.progress}): recorded as far as it got, import "
                "it again when it ends") if self.running else ""
        return f"history: {self.kind} {self.path} {self.outcome} ({self.rows} rows){tail}"


def _insert(conn: Connection) -> Any:
    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    return dialect.insert(schema.records)


def write_folder(conn: Connection, folder: Folder) -> tuple[str, int]:
    """Write one folder's record in the caller's transaction: (outcome, record id).

    A record is keyed by (path, stamp): a second writer's insert of the same key does nothing
    (it waits for the first one's transaction on PostgreSQL, for the file lock on SQLite), so
    two writers never duplicate it; a record whose files changed has its children replaced.
    """
    if folder.record["kind"] == "run" and (owner := _batch_of(conn, folder.record["path"])):
        return UNCHANGED, owner  # its rows are in the batch that ran it
    if (twin := _copy_of(conn, folder)) is not None:
        return COPY_OF.format(id=twin), twin
    fields = {**folder.record, "imported_utc": datetime.now(timezone.utc).strftime(
        "%Y-%m-%dT%H:%M:%SZ")}
    key = (schema.records.c.path == fields["path"]) & (schema.records.c.stamp == fields["stamp"])
    new = conn.execute(_insert(conn).values(**fields).on_conflict_do_nothing(
        index_elements=["path", "stamp"]).returning(schema.records.c.id)).scalar()
    if new is not None:
        _children(conn, new, folder)
        return ADDED, new
    found = conn.execute(select(schema.records.c.id, schema.records.c.digest).where(key)).one()
    if found.digest == fields["digest"]:
        return UNCHANGED, found.id
    conn.execute(update(schema.records).where(schema.records.c.id == found.id).values(**fields))
    for table in schema.CHILDREN:
        conn.execute(delete(table).where(table.c.record_id == found.id))
    _children(conn, found.id, folder)
    return UPDATED, found.id


def _copy_of(conn: Connection, folder: Folder) -> int | None:
    """The record of this folder under another path (copied, moved, or one filesystem mounted
    at two paths): the same kind, stamp and digest of its rows. Recorded twice, its nights
    would count twice, and half the night-to-night differences, zero, would shrink the noise a
    step is judged against."""
    R, fields = schema.records, folder.record
    return conn.execute(select(R.c.id).where(
        (R.c.kind == fields["kind"]) & (R.c.stamp == fields["stamp"])
        & (R.c.digest == fields["digest"]) & (R.c.path != fields["path"])).limit(1)).scalar()


def _batch_of(conn: Connection, run_path: str) -> int | None:
    """The batch record whose rows came from this run folder, if one does."""
    W, R = schema.rows, schema.records
    return conn.execute(select(W.c.record_id).join(R, R.c.id == W.c.record_id).where(
        (W.c.run_path == run_path) & (R.c.kind == "batch")).limit(1)).scalar()


def _drop_runs(conn: Connection, run_paths: set[str]) -> None:
    """Drop the run records a batch now holds: each of its operators recorded itself as a run
    when it ended, and a row must count once in a series."""
    R = schema.records
    ids = [r.id for r in conn.execute(select(R.c.id).where(
        (R.c.kind == "run") & R.c.path.in_(sorted(run_paths))))]
    for table in (*schema.CHILDREN, R):
        column = table.c.id if table is R else table.c.record_id
        if ids:
            conn.execute(delete(table).where(column.in_(ids)))


def _children(conn: Connection, record_id: int, folder: Folder) -> None:
    if folder.rows:
        conn.execute(schema.rows.insert(),
                     [{**asdict(r), "record_id": record_id} for r in folder.rows])
    if folder.verdicts:
        conn.execute(schema.verdicts.insert(),
                     [{**v, "record_id": record_id} for v in folder.verdicts])
    if folder.units:
        conn.execute(schema.units.insert(), [{**u, "record_id": record_id} for u in folder.units])
    if folder.record["kind"] == "batch":
        _drop_runs(conn, {r.run_path for r in folder.rows})


def import_folder(engine: Engine, directory: Path) -> Imported:
    """Read `directory` and write it in one transaction: killed midway, the store is as before."""
    return write_read(engine, read_folder(directory))


def write_read(engine: Engine, folder: Folder) -> Imported:
    """Write a folder already read, in one transaction; store.Unreachable in one line where
    the store cannot be written (a read-only file, a full disk), nothing of it written."""
    try:
        with engine.begin() as conn:
            outcome, record_id = write_folder(conn, folder)
    except OperationalError as exc:  # opening it wrote nothing: its first write is here
        reason = str(exc.orig).strip().splitlines()[0] if exc.orig else str(exc)
        raise store.Unreachable(f"the history store {engine.url.render_as_string()!r} cannot "
                                f"be written: {reason}") from None
    return Imported(folder.record["path"], folder.record["kind"], outcome, len(folder.rows),
                    record_id, folder.running, folder.progress)


def read_paths(paths: Iterable[Path]) -> list[Folder]:
    """Every folder of `paths` read, before any store is opened: a corrupt one (a results.jsonl
    cut short) is a UsageError naming its file, and no store is created or written."""
    paths = [Path(p) for p in paths]
    for path in paths:
        kind_of(path)
    return [read_folder(p) for p in paths]


def import_paths(engine: Engine, paths: Iterable[Path]) -> list[Imported]:
    """Import each folder in turn, each its own transaction, once every one of them is known
    to be a run, batch or campaign and has been read (UsageError naming the first that is
    not: nothing written)."""
    return [write_read(engine, folder) for folder in read_paths(paths)]


def record(history: str | None, out: Path, directory: Path,
           write_line: Callable[[str], None]) -> Imported | None:
    """Record a run, batch or campaign that ended (or goes on) in the store HISTORY names.

    Never raises for the store's sake: the files are the record, so a store that cannot be
    written costs one line, and `harness history import DIR` catches up later.
    """
    try:
        where = store.resolve(history, out)
        if where is None:
            return None
        engine = store.open_store(where)
        try:
            return import_folder(engine, directory)
        finally:
            engine.dispose()
    except (HarnessError, SQLAlchemyError, OSError, ValueError) as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        write_line(f"history: {directory} not recorded ({reason}); the files keep it: "
                   f"harness history import {directory}")
        return None
