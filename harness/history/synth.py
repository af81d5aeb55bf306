"""Synthetic history for the speed figures: a full-suite campaign's folder, a year of nights."""

from __future__ import annotations

import json
import math
import random
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

from sqlalchemy import Engine

from harness.history.folders import Folder, Row
from harness.history.importer import write_folder

DTYPES = ("torch.float16", "torch.bfloat16", "torch.float32")


@dataclass(frozen=True)
class Machine:
    """The backend and device a synthetic history claims; the caller names them."""

    backend: str
    device: str


def suite(n_ops: int = 1112, n_rows: int = 9000) -> list[tuple[str, str, str]]:
    """(op, dtype, shape) of a suite of `n_ops` operators and about `n_rows` rows."""
    per_op, extra = divmod(n_rows, n_ops)
    out = []
    for i in range(n_ops):
        for j in range(per_op + (1 if i < extra else 0)):
            out.append((f"op{i:04d}", DTYPES[j % 3], f"[[{2 ** (6 + j // 3)}, 1024]]"))
    return out


def _latency(op: str, shape: str) -> float:
    return 0.01 + (hash((op, shape)) % 1000) / 1000.0


def write_campaign(directory: Path, rows: list[tuple[str, str, str]], machine: Machine,
                   rounds: int = 3, seed: int = 0) -> Path:
    """A finished A/B campaign folder as the harness writes it: campaign.json, ab.json and
    OP/{A,B}/rN/ with run_identity.json and results.jsonl."""
    rng = random.Random(seed)
    by_op: dict[str, list[tuple[str, str]]] = {}
    for op, dtype, shape in rows:
        by_op.setdefault(op, []).append((dtype, shape))
    ident = {"schema": 1, "backend": machine.backend, "timer": "graph", "level": "core",
             "shape_mode": "upstream", "devices": [{"name": machine.device}],
             "versions": {"torch": "2.11.0", "triton": "3.6.0"}, "state": "ok",
             "status": "complete", "harness": {"commit": "0" * 40, "files": {}}}
    units = []
    for op, shapes in by_op.items():
        for r in range(rounds):
            units.append({"id": f"{op}/r{r}", "op": op, "round": r, "status": "ok",
                          "wall_s": 3.0, "reason": None})
            for side in ("A", "B"):
                run = directory / op / side / f"r{r}"
                run.mkdir(parents=True)
                (run / "run_identity.json").write_text(json.dumps({**ident, "op": op}))
                lines = [json.dumps({"op": op, "dtype": d, "shape": s, "status": "SUCCESS",
                                     "latency_ms": _latency(op, s) * math.exp(
                                         rng.gauss(0, 0.01)), "timer": "graph",
                                     "markers": []}) for d, s in shapes]
                (run / "results.jsonl").write_text("\n".join(lines) + "\n")
    (directory / "campaign.json").write_text(json.dumps({
        "schema": "harness-campaign/1", "dir": str(directory), "state": "done",
        "created_utc": "2026-11-01T01:00:00Z", "rounds": rounds,
        "axis": {"name": "none", "a": "0", "b": "1"}, "caliber": {"backend": machine.backend},
        "ops": {op: {"rounds": rounds} for op in by_op}, "units": units}))
    (directory / "ab.json").write_text(json.dumps({"rows": [
        {"op": op, "dtype": d, "shape": s, "verdict": "same", "speedup_pct": 0.0,
         "rounds": rounds, "flags": []} for op, d, s in rows]}))
    return directory


def nights(rows: list[tuple[str, str, str]], machine: Machine, count: int = 365, seed: int = 0,
           step: tuple[str, int, float] | None = None) -> Iterator[Folder]:
    """A nightly full-suite batch per night, oldest first; `step` (op, night, pct) moves one
    operator's rows from that night on."""
    rng = random.Random(seed)
    start = datetime(2025, 11, 1, 1, 0, tzinfo=timezone.utc)
    for n in range(count):
        when = (start + timedelta(days=n)).strftime("%Y-%m-%dT%H:%M:%SZ")
        path = f"/synthetic/runs/batch/night{n:03d}"
        out = []
        for op, dtype, shape in rows:
            moved = step is not None and op == step[0] and n >= step[1]
            ms = _latency(op, shape) * math.exp(rng.gauss(0, 0.01)) * (
                1 + step[2] / 100 if moved and step else 1.0)
            out.append(Row(op, dtype, shape, "", 0, "SUCCESS", ms, None, None, None, "graph",
                           "", f"{path}/{op}"))
        record = {"kind": "batch", "path": path, "stamp": f"night{n:03d}", "digest": str(n),
                  "state": "complete", "started_utc": when, "backend": machine.backend,
                  "device": machine.device, "timer": "graph", "level": "core",
                  "shape_mode": "upstream", "stack_a": f"flaggems={n // 30}", "ops": 1112,
                  "verdicts": "{}"}
        yield Folder(record, tuple(out))


def build_year(engine: Engine, rows: list[tuple[str, str, str]], machine: Machine,
               count: int = 365, step: tuple[str, int, float] | None = None) -> None:
    """Write `count` nights into the store, a transaction each."""
    for folder in nights(rows, machine, count, step=step):
        with engine.begin() as conn:
            write_folder(conn, folder)
