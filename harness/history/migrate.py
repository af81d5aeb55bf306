"""The store's schema upgrades, one step per version, run in place in one transaction."""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import update
from sqlalchemy.engine import Connection

from harness.history import schema


def _from_0(conn: Connection) -> None:
    """Version 0 (a store written before the version was counted from 1) holds the tables of
    version 1 already: nothing to change but the number."""


# STEPS[v] turns a store of version v into one of version v + 1. A change to the tables adds
# the step from the version before it here and raises schema.SCHEMA_VERSION.
STEPS: dict[int, Callable[[Connection], None]] = {0: _from_0}


def upgrade(conn: Connection, found: int) -> int:
    """Run every step from version `found` to schema.SCHEMA_VERSION in the caller's transaction
    and record the new version; the version it started from."""
    for version in range(found, schema.SCHEMA_VERSION):
        STEPS[version](conn)
    conn.execute(update(schema.meta).where(schema.meta.c.key == "schema_version")
                 .values(value=str(schema.SCHEMA_VERSION)))
    return found
