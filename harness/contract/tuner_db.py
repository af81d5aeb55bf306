"""FlagGems' libtuner database (sqlite; docs/formats.md): export its winners, rebuild it."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from harness.contract.records import Records, Table, Winner

BENCHMARK_TABLE_MARK = "_benchmark_v"  # libtuner's per-config timing tables: not winners


def default_flaggems_cache(environ: dict[str, str]) -> Path:
    """FlagGems' cache root as it resolves it: FLAGGEMS_CACHE_DIR, else ~/.flaggems."""
    value = environ.get("FLAGGEMS_CACHE_DIR")
    return Path(value) if value else Path.home() / ".flaggems"


def config_cache_table(db_table: str) -> str:
    """The name libtuner's ConfigCache gives a database table: without the column-hash
    suffix the database adds (`t-<md5>` is `t`)."""
    return db_table.rsplit("-", 1)[0]


def export_flaggems_db(db_path: Path, used: Iterable[tuple[str, Sequence[Any]]] | None = None
                       ) -> Records:
    """Read libtuner's winners from `db_path`; with `used`, only those (table prefix, key).

    `used` names tables as libtuner's ConfigCache does (without the column-hash suffix the
    database adds), so a table `t-<md5>` matches the name `t`.
    """
    wanted: dict[str, set[str]] | None = None
    if used is not None:
        wanted = {}
        for name, key in used:
            wanted.setdefault(name, set()).add(json.dumps(list(key)))
    records = Records()
    with sqlite3.connect(f"file:{db_path}?mode=ro", uri=True) as conn:
        names = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type='table' ORDER BY name")]
        for name in names:
            if BENCHMARK_TABLE_MARK in name:
                continue
            base = config_cache_table(name)
            if wanted is not None and base not in wanted:
                continue
            info = conn.execute(f'PRAGMA table_info("{name}")').fetchall()
            table = Table("flaggems", db_path.name, name,
                          tuple((c[1], c[2], 1 if c[5] else 0) for c in info))
            keys, cols = table.key_columns, [c[0] for c in table.columns]
            rows = []
            for values in conn.execute(f'SELECT * FROM "{name}"'):
                row = dict(zip(cols, values, strict=True))
                key = tuple(row[k] for k in keys)
                if wanted is not None and json.dumps(list(key)) not in wanted[base]:
                    continue
                config = {k: v for k, v in row.items() if k not in keys}
                rows.append(Winner("flaggems", name, key, config))
            if rows:
                records.tables.append(table)
                records.winners.extend(rows)
    return records


def build_flaggems_db(config_cache_dir: Path, records: Records) -> list[Path]:
    """Write the libtuner database(s) the records describe into `config_cache_dir`."""
    config_cache_dir.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    by_table: dict[str, list[Winner]] = {}
    run_off = records.candidates_of()
    for winner in records.winners:  # a key with candidates must miss, so that they are timed
        if winner.source == "flaggems" and winner.ident() not in run_off:
            by_table.setdefault(winner.kernel, []).append(winner)
    for table in records.tables:
        path = written.setdefault(table.db, config_cache_dir / table.db)
        cols = ", ".join(f'"{n}" {t}' for n, t, _ in table.columns)
        keys = ", ".join(f'"{k}"' for k in table.key_columns)
        with sqlite3.connect(path) as conn:
            conn.execute(f'CREATE TABLE IF NOT EXISTS "{table.table}" ({cols}, '
                         f'PRIMARY KEY ({keys}))')
            names = [n for n, _, _ in table.columns]
            for winner in by_table.get(table.table, []):
                row = {**dict(zip(table.key_columns, winner.key, strict=True)), **winner.config}
                conn.execute(f'INSERT OR REPLACE INTO "{table.table}" '
                             f'({", ".join(chr(34) + n + chr(34) for n in names)}) '
                             f'VALUES ({", ".join("?" for _ in names)})',
                             [row.get(n) for n in names])
    return sorted(written.values())
