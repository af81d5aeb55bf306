"""A run's tuning, before and after: rebuild a replay's database, collect what the run tuned."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.contract.boundary import REPLAYED_FILE, USED_FILE
from harness.contract.records import Records, Winner, read_records, to_text, write_records
from harness.contract.tuner_db import build_flaggems_db, config_cache_table, export_flaggems_db
from harness.fsutil import atomic_write_text


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
