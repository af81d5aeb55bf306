"""Autotune records: the winners a run used, as diffable text, and their replay into a cache.

Format (`autotune_records/winners.jsonl`, one JSON object per line, sorted, UTF-8):

    {"kind": "table", "source": "flaggems", "db": "TunedConfig_<vendor>_triton_3_6.db",
     "table": "mm_kernel_<hash>-<md5>", "columns": [["key_0", "BIGINT", 1], ...,
     ["BLOCK_M", "BIGINT", 0], ...]}
    {"kind": "winner", "source": "flaggems", "kernel": "mm_kernel_<hash>-<md5>",
     "key": [4096, 4096, 4096, "torch.float16"], "config": {"BLOCK_M": 128, "num_warps": 8}}
    {"kind": "winner", "source": "triton", "kernel": "flag_gems.ops.x:kernel_fn",
     "key": [1024, "torch.float32"], "config": {"BLOCK": 256, "num_warps": 4}}

A "flaggems" winner is a row of FlagGems' libtuner database (sqlite under
FLAGGEMS_CACHE_DIR/config_cache): `kernel` is its table, `key` its key columns in order and
`config` the other columns; the table line keeps the column types so a replay can rebuild the
database exactly. A "triton" winner is an entry of a Triton autotuner's in-memory cache, keyed by
the kernel's module and qualified name. Keys are what the tuner looks up; one line per
(kernel, key), so `diff` between two runs shows exactly which winners differ.

A merge of shards that each swept part of a key's configs adds, after the winners, one
`{"kind": "candidate", ...}` line (same fields as a winner) for each other shard's winner of
that key: a replay pins the winner and its candidates together, so the replaying run times
those few configs on its own device and keeps the fastest, instead of trusting times taken
on different devices.

Beside it, `winner_times.jsonl` holds, for each winner the run swept itself, its median time
in that sweep: `{"source": ..., "kernel": ..., "key": [...], "ms": 0.0123}`. Timings differ
from run to run, so they stay out of winners.jsonl; a parallel warmup's merge reads them to
pick the fastest of its shards' winners for one key.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.boundary import REPLAYED_FILE, USED_FILE
from harness.errors import UsageError
from harness.fsutil import atomic_write_text

RECORDS_DIR = "autotune_records"
RECORDS_FILE = "winners.jsonl"
TIMES_FILE = "winner_times.jsonl"
BENCHMARK_TABLE_MARK = "_benchmark_v"  # libtuner's per-config timing tables: not winners


@dataclass(frozen=True)
class Table:
    """One libtuner config table: its database file name and (name, sql type, is-key) columns."""

    source: str
    db: str
    table: str
    columns: tuple[tuple[str, str, int], ...]

    @property
    def key_columns(self) -> list[str]:
        return [name for name, _, pk in self.columns if pk]


@dataclass(frozen=True)
class Winner:
    """The config a tuner settled on for one key of one kernel."""

    source: str  # "flaggems" (libtuner database) or "triton" (Triton autotuner cache)
    kernel: str
    key: tuple[Any, ...]
    config: dict[str, Any] = field(hash=False)

    def ident(self) -> tuple[str, str, str]:
        return (self.source, self.kernel, json.dumps(list(self.key)))


@dataclass
class Records:
    """Tables and winners, as read from or written to winners.jsonl."""

    tables: list[Table] = field(default_factory=list)
    winners: list[Winner] = field(default_factory=list)
    times: dict[tuple[str, str, str], float] = field(default_factory=dict)  # ident -> ms
    candidates: list[Winner] = field(default_factory=list)  # run-off configs of a winner's key

    def candidates_of(self) -> dict[tuple[str, str, str], list[dict[str, Any]]]:
        found: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
        for c in self.candidates:
            found.setdefault(c.ident(), []).append(c.config)
        return found

    def index(self) -> dict[tuple[str, str, str], Winner]:
        return {w.ident(): w for w in self.winners}


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


def to_text(records: Records) -> str:
    """winners.jsonl text: tables first, then winners, each sorted, one JSON object per line."""
    lines = [json.dumps({"kind": "table", "source": t.source, "db": t.db, "table": t.table,
                         "columns": [list(c) for c in t.columns]}, sort_keys=True)
             for t in sorted(records.tables, key=lambda t: (t.source, t.table))]
    for kind, winners in (("winner", records.winners), ("candidate", records.candidates)):
        lines += [json.dumps({"kind": kind, "source": w.source, "kernel": w.kernel,
                              "key": list(w.key), "config": w.config}, sort_keys=True)
                  for w in sorted(winners, key=lambda w: (w.ident(), json.dumps(
                      w.config, sort_keys=True)))]
    return "".join(line + "\n" for line in lines)


def from_text(text: str, origin: str = "records") -> Records:
    records = Records()
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
            if item["kind"] == "table":
                records.tables.append(Table(item["source"], item["db"], item["table"],
                                            tuple(tuple(c) for c in item["columns"])))
            else:
                found = Winner(item["source"], item["kernel"], tuple(item["key"]),
                               dict(item["config"]))
                (records.candidates if item["kind"] == "candidate" else records.winners
                 ).append(found)
        except (ValueError, KeyError, TypeError) as exc:
            raise UsageError(f"{origin}:{number}: not an autotune record ({exc})") from None
    return records


def records_path(run_or_records: Path) -> Path:
    """winners.jsonl of a run directory, a records directory, or the file itself."""
    for candidate in (run_or_records / RECORDS_DIR / RECORDS_FILE,
                      run_or_records / RECORDS_FILE, run_or_records):
        if candidate.is_file():
            return candidate
    raise UsageError(f"REPLAY_FROM={str(run_or_records)!r} holds no "
                     f"{RECORDS_DIR}/{RECORDS_FILE}: was it recorded (ISOLATE_TUNER_CACHE=1 "
                     "or RECORD=1)?")


def times_to_text(records: Records) -> str:
    return "".join(json.dumps({"source": s, "kernel": k, "key": json.loads(key), "ms": ms},
                              sort_keys=True) + "\n"
                   for (s, k, key), ms in sorted(records.times.items()))


def _text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: not autotune records: it cannot be read as UTF-8 text "
                         f"({exc.__class__.__name__})") from None


def read_records(run_or_records: Path) -> Records:
    """winners.jsonl, with the winner_times.jsonl beside it when there is one."""
    path = records_path(run_or_records)
    records = from_text(_text(path), str(path))
    times = path.parent / TIMES_FILE
    if times.is_file():
        for number, line in enumerate(_text(times).splitlines(), start=1):
            try:
                item = json.loads(line)
                records.times[(item["source"], item["kernel"],
                               json.dumps(item["key"]))] = float(item["ms"])
            except (ValueError, KeyError, TypeError) as exc:
                raise UsageError(f"{times}:{number}: not a winner time ({exc})") from None
    return records


def write_records(run_dir: Path, records: Records) -> Path:
    target = run_dir / RECORDS_DIR
    target.mkdir(exist_ok=True)
    if records.times:
        atomic_write_text(target / TIMES_FILE, times_to_text(records))
    return atomic_write_text(target / RECORDS_FILE, to_text(records))


def merge(parts: Sequence[Records]) -> tuple[Records, int]:
    """Union of several runs' records, and how many (kernel, key)s got differing winners.

    Where parts disagree on a key, the winner with the smallest recorded time is kept (the
    parts swept different configs of it: a parallel warmup's shares) and the other parts'
    timed winners become its candidates. A part without a time for the key (none of the
    configs it ran could run) is passed over; with no time at all, the first part's winner is
    kept, without candidates.
    """
    merged = Records()
    seen_tables: set[str] = set()
    found: dict[tuple[str, str, str], list[tuple[Winner, float | None]]] = {}
    for part in parts:
        for table in part.tables:
            if table.table not in seen_tables:
                seen_tables.add(table.table)
                merged.tables.append(table)
        for winner in part.winners:
            found.setdefault(winner.ident(), []).append((winner, part.times.get(winner.ident())))
    differ = 0
    for ident, candidates in found.items():
        winner, ms = candidates[0]
        if any(c.config != winner.config for c, _ in candidates):
            differ += 1
            timed = [c for c in candidates if c[1] is not None]
            if timed:
                winner, ms = min(timed, key=lambda c: c[1])
                others = {json.dumps(c.config, sort_keys=True): c for c, _ in timed
                          if c.config != winner.config}
                merged.candidates += list(others.values())
        merged.winners.append(winner)
        if ms is not None:
            merged.times[ident] = ms
    return merged, differ


def share_text(share: tuple[int, int]) -> str:
    """The "I/N" spelling of a warmup share, as parse_share reads it."""
    return f"{share[0]}/{share[1]}"


def parse_share(text: str) -> tuple[int, int] | None:
    """ZL_WARMUP_SHARE / --warmup-share: "I/N" with 0 <= I < N (0/1: every config); "" is
    None."""
    if not text:
        return None
    index, _, count = text.partition("/")
    if not (index.isdigit() and count.isdigit() and int(index) < int(count)):
        raise UsageError(f"WARMUP_SHARE={text!r} is not accepted; expected I/N with "
                         "0 <= I < N, e.g. 0/2 (0/1: every config)")
    return int(index), int(count)




def default_flaggems_cache(environ: dict[str, str]) -> Path:
    """FlagGems' cache root as it resolves it: FLAGGEMS_CACHE_DIR, else ~/.flaggems."""
    value = environ.get("FLAGGEMS_CACHE_DIR")
    return Path(value) if value else Path.home() / ".flaggems"


def prepare_replay(run_dir: Path, flaggems_cache: Path, replay_from: Path) -> Path:
    """Before a replaying run: keep the records it pins beside its results and rebuild
    FlagGems' libtuner database from them in the run's private cache. Returns the records
    file the autotune plugin reads."""
    records = read_records(replay_from)
    pinned = atomic_write_text(run_dir / REPLAYED_FILE, to_text(records))
    build_flaggems_db(flaggems_cache / "config_cache", records)
    return pinned


@dataclass(frozen=True)
class TuningOutcome:
    """What a run's tuners did: winners recorded, and replay keys that self-tuned."""

    recorded: int | None  # None: recording was off
    fallbacks: tuple[dict[str, Any], ...]
    compiled_kernels: int | None = None  # binaries in a private Triton cache; None: shared
    artifacts: tuple[str, ...] = ()  # sha256 of each compiled artifact, sorted


def winner_times(winners: Sequence[Winner], swept: Sequence[dict[str, Any]]
                 ) -> dict[tuple[str, str, str], float]:
    """Each recorded winner's time in the sweep that chose it, from the plugin's "time"
    items; libtuner's items name the table without the suffix its database adds."""
    by_key: dict[tuple[str, str, str], float] = {}
    for item in swept:  # a key swept twice (after an eviction): the last sweep chose it
        by_key[(item["source"], item["kernel"], json.dumps(item["key"]))] = float(item["ms"])
    times = {}
    for winner in winners:
        source, kernel, key = winner.ident()
        ms = by_key.get((source, kernel, key))
        if ms is None and source == "flaggems":
            ms = by_key.get((source, config_cache_table(kernel), key))
        if ms is not None:
            times[winner.ident()] = ms
    return times


def finish_run(run_dir: Path, flaggems_cache: Path, record: bool) -> TuningOutcome:
    """After a run: fold the plugin's report into autotune_records/winners.jsonl (when
    recording), count replay fallbacks. The plugin's file is removed either way."""
    used_path = run_dir / USED_FILE
    lines = used_path.read_text("utf-8").splitlines() if used_path.is_file() else []
    items = [json.loads(line) for line in lines if line.strip()]
    used_path.unlink(missing_ok=True)
    fallbacks = tuple(i for i in items if i["kind"] == "fallback")
    if not record:
        return TuningOutcome(None, fallbacks)
    used = [(i["table"], i["key"]) for i in items if i["kind"] == "used"]
    records = Records(winners=[Winner(i["source"], i["kernel"], tuple(i["key"]), i["config"])
                               for i in items if i["kind"] == "winner"])
    for db in sorted((flaggems_cache / "config_cache").glob("*.db")):
        part = export_flaggems_db(db, used)
        records.tables += part.tables
        records.winners += part.winners
    records.times = winner_times(records.winners, [i for i in items if i["kind"] == "time"])
    write_records(run_dir, records)
    return TuningOutcome(len(records.winners), fallbacks)
