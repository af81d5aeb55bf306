"""Folders as the harness writes them (run, batch, campaign), for the history store's tests."""

from __future__ import annotations

import csv
import json
from collections.abc import Mapping, Sequence
from pathlib import Path

SHAPES = ("[[64, 64]]", "[[1024, 1024]]")
VERSIONS = {"torch": "2.13.0+cpu", "python": "3.11.7", "flaggems_commit": "abc123",
            "flaggems_dirty": False}


def identity(op: str, **extra: object) -> dict[str, object]:
    """A run_identity.json of the fields the store reads (the rest as a real one has them)."""
    return {"schema": 1, "backend": "cpu", "op": op, "node": f"benchmark/test_{op}.py::test_{op}",
            "timer": "direct", "level": "core", "shape_mode": "upstream", "mode": "auto",
            "devices": [], "versions": dict(VERSIONS), "image_digest": None,
            "harness": {"commit": "f00d", "dirty": False, "files": {}},
            "state": "ok", "status": "complete", **extra}


def make_run(directory: Path, op: str, latencies: Sequence[float], record_op: str | None = None,
             *, timer: str = "direct", markers: Sequence[str] = (), **extra: object) -> Path:
    """A run folder: identity (timed by `timer`, `extra` over its fields) and one results.jsonl
    row per shape (latency i for shape i), each timed by `timer` with `markers`, named `record_op`
    where FlagGems' record names them otherwise than the operator."""
    directory.mkdir(parents=True)
    (directory / "run_identity.json").write_text(json.dumps(identity(op, **{"timer": timer,
                                                                            **extra})))
    rows = [{"op": record_op or op, "dtype": "torch.float32", "shape": shape, "status": "SUCCESS",
             "latency_base_ms": ms * 2, "latency_ms": ms, "speedup": 2.0, "tflops": 0.5,
             "gbps": 100.0, "timer": timer, "markers": list(markers), "samples": [ms]}
            for shape, ms in zip(SHAPES, latencies, strict=False)]
    (directory / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return directory


def make_batch(root: Path, stamp: str, ops: dict[str, Sequence[float]]) -> Path:
    """A batch folder and its operators' run folders under `root`."""
    batch = root / "batch" / stamp
    batch.mkdir(parents=True)
    with open(batch / "ops_status.csv", "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["op", "node", "status", "rc", "rows", "backend", "device", "timer",
                         "wall_s", "run", "slurm_task", "slurm_state", "reason"])
        for op, lat in ops.items():
            run = make_run(root / op / stamp, op, lat)
            writer.writerow([op, f"benchmark/test_{op}.py::test_{op}", "ok", 0, len(lat),
                             "cpu", "", "direct", 1.5, str(run), "", "", ""])
    return batch


def make_campaign(root: Path, stamp: str, ops: dict[str, Sequence[float]], rounds: int = 3,
                  state: str = "done", done_rounds: int | None = None,
                  step_b: float = 1.0, markers: Mapping[int, Sequence[str]] | None = None,
                  timer: str = "direct") -> Path:
    """An A/B campaign: campaign.json, ab.json (once done) and OP/A/rN, OP/B/rN side runs;
    B's latencies are A's times `step_b`, each round a little apart; round r's rows carry
    `markers[r]` on both sides. `timer` "graph" makes its caliber the adaptive graph timer's."""
    directory = root / "ab" / f"none-suite/{stamp}"
    directory.mkdir(parents=True)
    done_rounds = rounds if done_rounds is None else done_rounds
    units = []
    for op, lat in ops.items():
        for r in range(rounds):
            finished = r < done_rounds
            units.append({"id": f"{op}/r{r}", "op": op, "round": r, "attempts": 1,
                          "status": "ok" if finished else "running" if r == done_rounds
                          else "not_run", "rc": 0 if finished
                          else None, "wall_s": 2.0 if finished else None, "reason": None,
                          "device": "-"})
            if finished:
                wiggle = 1.0 + 0.001 * r
                marked = (markers or {}).get(r, ())
                make_run(directory / op / "A" / f"r{r}", op, [v * wiggle for v in lat],
                         timer=timer, markers=marked)
                make_run(directory / op / "B" / f"r{r}", op, [v * wiggle * step_b for v in lat],
                         timer=timer, markers=marked)
    plan = {"schema": "harness-campaign/1", "dir": str(directory),
            "created_utc": f"{stamp[:4]}-{stamp[4:6]}-{stamp[6:8]}T{stamp[9:11]}:"
                           f"{stamp[11:13]}:{stamp[13:15]}Z",
            "axis": {"name": "none", "variable": None, "a": "0", "b": "1"},
            "caliber": {"backend": "cpu", "timer": timer, "level": "core",
                        "shape_mode": "upstream",
                        **({"graph_timer": "adaptive"} if timer == "graph" else {})},
            "ops": {op: {"node": f"benchmark/test_{op}.py::test_{op}", "rounds": rounds}
                    for op in ops}, "rounds": rounds, "state": state, "units": units}
    (directory / "campaign.json").write_text(json.dumps(plan))
    if state == "done":
        rows = [{"op": op, "dtype": "torch.float32", "shape": shape, "verdict": "same",
                 "speedup_pct": 0.1, "ci_low_pct": -0.5, "ci_high_pct": 0.7, "rounds": rounds,
                 "flags": []} for op in ops for shape in SHAPES]
        (directory / "ab.json").write_text(json.dumps({
            "schema": "harness-ab/1", "rows": rows,
            "caliber": {"stacks": {"A": "torch=2.13.0+cpu", "B": "torch=2.13.0+cpu"},
                        "harness_commit": "f00d"}}))
    return directory
