"""Autotune records: the winners a run used, as diffable text (docs/formats.md), and their merge."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import UsageError
from harness.fsutil import atomic_write_text

RECORDS_DIR = "autotune_records"
RECORDS_FILE = "winners.jsonl"
TIMES_FILE = "winner_times.jsonl"


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
        except (ValueError, KeyError, TypeError, RecursionError) as exc:
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
            timed = [(c, t) for c, t in candidates if t is not None]
            if timed:
                winner, ms = min(timed, key=lambda c: c[1])
                others = {json.dumps(c.config, sort_keys=True): c for c, _ in timed
                          if c.config != winner.config}
                merged.candidates += list(others.values())
        merged.winners.append(winner)
        if ms is not None:
            merged.times[ident] = ms
    return merged, differ
