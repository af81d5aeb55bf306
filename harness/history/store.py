"""Open the store that HISTORY names: an SQLite file (the default, under OUT) or PostgreSQL."""

from __future__ import annotations

import shlex
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event, select, text
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DatabaseError, OperationalError

from harness.errors import EXIT_PREFLIGHT, HarnessError, UsageError
from harness.history import DEFAULT_NAME, migrate, schema

OFF = "off"
SQLITE_PREFIX = "sqlite:///"
POSTGRES_PREFIXES = ("postgresql://", "postgres://", "postgresql+psycopg://")
ACCEPTED = "off, an SQLite file path, sqlite:///PATH or postgresql://USER@HOST/DB"
SQLITE_WAIT_S = 60  # a second writer waits this long for the first one's transaction
_LOCK_KEY = 0x686973  # PostgreSQL advisory lock: one session creates the tables at a time


class StoreError(HarnessError):
    """A store that cannot be opened or is not one this harness can read."""


class Unreachable(StoreError):
    """The store's server or file cannot be reached: the environment, not the input."""

    exit_code = EXIT_PREFLIGHT


@dataclass(frozen=True)
class Where:
    """A store's address: the SQLAlchemy URL and how to name it to a user."""

    url: str
    label: str

    @property
    def sqlite(self) -> bool:
        return self.url.startswith("sqlite")


def resolve(value: str | None, out: Path) -> Where | None:
    """The store HISTORY names (None: off); empty means the default file under `out`."""
    if value is None or value == "":
        path = Path(out) / DEFAULT_NAME
        return Where(SQLITE_PREFIX + str(path.resolve()), str(path))
    if value == OFF:
        return None
    if value.startswith(POSTGRES_PREFIXES):
        rest = value.split("://", 1)[1]
        return Where("postgresql+psycopg://" + rest, _hide_password(value))
    if value.startswith(SQLITE_PREFIX):
        path = Path(value[len(SQLITE_PREFIX):])
    elif "://" in value:
        raise UsageError(f"HISTORY={value!r} is not accepted; expected one of: {ACCEPTED}")
    else:
        path = Path(value)
    if path.is_dir():
        raise UsageError(f"HISTORY={value!r} is a folder; expected {ACCEPTED} (e.g. "
                         f"{path / DEFAULT_NAME})")
    return Where(SQLITE_PREFIX + str(path.resolve()), str(path))


def _hide_password(url: str) -> str:
    scheme, rest = url.split("://", 1)
    if "@" in rest and ":" in rest.split("@", 1)[0]:
        user = rest.split("@", 1)[0].split(":", 1)[0]
        rest = f"{user}:***@{rest.split('@', 1)[1]}"
    return f"{scheme}://{rest}"


def _sqlite_engine(where: Where) -> Engine:
    path = Path(where.url[len(SQLITE_PREFIX):])
    if path.exists() and path.stat().st_size and not _is_sqlite(path):
        raise UsageError(f"HISTORY={where.label!r} is not an SQLite database (corrupt, or "
                         "another kind of file); move it aside and run `harness history import` "
                         "over the run folders to rebuild it")
    if not path.parent.is_dir():
        path.parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(where.url, connect_args={"timeout": SQLITE_WAIT_S})

    @event.listens_for(engine, "connect")
    def _connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # SQLAlchemy's BEGIN below, not the driver's
        dbapi_connection.execute("PRAGMA foreign_keys=ON")

    @event.listens_for(engine, "begin")
    def _begin(conn: Connection) -> None:
        # Take the write lock up front: two writers that both read first and then write would
        # otherwise deadlock on the upgrade, and one of them fail.
        conn.exec_driver_sql("BEGIN IMMEDIATE")

    return engine


def _is_sqlite(path: Path) -> bool:
    with open(path, "rb") as fh:
        return fh.read(16) == b"SQLite format 3\x00"


UPGRADE = "harness history upgrade"


def open_store(where: Where) -> Engine:
    """An engine on the store, its tables created where missing and its version checked: an
    older store is refused naming UPGRADE."""
    return _open(where, upgrade=False)[0]


def upgrade_store(where: Where) -> tuple[Engine, int | None]:
    """open_store, an older store upgraded in place first (one transaction); with the version
    it was found at (None: a new store)."""
    return _open(where, upgrade=True)


def _open(where: Where, upgrade: bool) -> tuple[Engine, int | None]:
    engine = _sqlite_engine(where) if where.sqlite else create_engine(
        where.url, pool_pre_ping=True, connect_args={"connect_timeout": 10})
    try:
        with engine.begin() as conn:
            found = _create(conn, where, upgrade)
    except OperationalError as exc:
        engine.dispose()
        reason = str(exc.orig).strip().splitlines()[0] if exc.orig else str(exc)
        raise Unreachable(f"HISTORY={where.label!r} cannot be reached: {reason}") from None
    except (DatabaseError, sqlite3.DatabaseError) as exc:
        engine.dispose()
        reason = str(getattr(exc, "orig", exc)).strip().splitlines()[0]
        raise UsageError(f"HISTORY={where.label!r} is not a history store this harness can "
                         f"read: {reason}") from None
    except StoreError:
        engine.dispose()
        raise
    return engine, found


def _create(conn: Connection, where: Where, upgrade: bool) -> int | None:
    """Create the tables in one transaction and check the version the store was written in
    (upgrading an older one there when `upgrade`): that version, None for a new store."""
    if conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _LOCK_KEY})
    schema.meta.create(conn, checkfirst=True)
    found = conn.execute(select(schema.meta.c.value).where(
        schema.meta.c.key == "schema_version")).scalar()
    version = schema.SCHEMA_VERSION if found is None else int(found)
    if version > schema.SCHEMA_VERSION:
        raise StoreError(f"the history store is of schema version {version}, newer than this "
                         f"harness reads ({schema.SCHEMA_VERSION}); use a newer harness, or "
                         "point HISTORY at another store")
    if version < schema.SCHEMA_VERSION and not upgrade:
        raise StoreError(f"HISTORY={where.label!r} is a history store of schema version "
                         f"{version}, older than this harness's ({schema.SCHEMA_VERSION}); "
                         f"upgrade it in place: {UPGRADE} --history {shlex.quote(where.label)}")
    if version < schema.SCHEMA_VERSION:
        migrate.upgrade(conn, version)
    schema.metadata.create_all(conn, checkfirst=True)
    if found is None:
        conn.execute(schema.meta.insert().values(key="schema_version",
                                                 value=str(schema.SCHEMA_VERSION)))
    return None if found is None else version
