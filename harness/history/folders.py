"""Read a run, batch or campaign folder into what the store holds (the files stay the record)."""

from __future__ import annotations

import csv
import hashlib
import json
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from harness.contract.identity import FORMER_GRAPH_TIMER, IDENTITY_FILE, read_identity
from harness.contract.ops_status import OPS_STATUS_CSV, read_ops_status
from harness.contract.results import csv_list
from harness.contract.states import NOT_ENDED, NOT_RUN, RUNNING, SUBMITTED, CampaignState, RunStatus
from harness.errors import UsageError
from harness.fsutil import read_jsonl

RUN_IDENTITY, OPS_STATUS, CAMPAIGN_JSON, AB_JSON = (
    IDENTITY_FILE, OPS_STATUS_CSV, "campaign.json", "ab.json")
RESULTS_JSONL, RESULTS_CSV = "results.jsonl", "results.csv"
SIDES = ("A", "B")


@dataclass(frozen=True)
class Row:
    """One measured row of one side and round."""

    op: str
    dtype: str
    shape: str
    side: str
    round: int
    status: str
    latency_ms: float | None
    latency_base_ms: float | None
    gbps: float | None
    tflops: float | None
    timer: str | None
    flags: str
    run_path: str


@dataclass(frozen=True)
class Folder:
    """What one folder says: the record's fields, its rows, verdicts and units."""

    record: Mapping[str, Any]
    rows: tuple[Row, ...]
    verdicts: tuple[Mapping[str, Any], ...] = ()
    units: tuple[Mapping[str, Any], ...] = ()
    running: bool = False
    progress: str = field(default="")


def _json(path: Path) -> dict[str, Any]:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UsageError(f"{str(path)!r} cannot be read as JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise UsageError(f"{str(path)!r} is not a JSON object")
    return doc


def _identity(run: Path) -> Mapping[str, Any]:
    """A run's run_identity.json, checked as its one reader checks it."""
    found = read_identity(run)
    if found is None:
        raise UsageError(f"{str(run / RUN_IDENTITY)!r} is missing")
    return found.doc


READER_VERSION = 3  # of how a folder's files become its record, rows and verdicts


def _digest(*paths: Path, rows: Sequence[Row] = ()) -> str:
    """The files' bytes and the rows read: a folder whose rows grew while its campaign.json or
    ops_status.csv stood still (a side run written mid-unit) reads as changed."""
    h = hashlib.sha256()
    for path in paths:
        if path.is_file():
            h.update(path.read_bytes())
    h.update(repr(tuple(rows)).encode())
    return h.hexdigest()


def _stamp_time(name: str) -> str:
    """The UTC time of a folder named yyyymmdd-HHMMSS[-N]; empty where it is named otherwise."""
    try:
        when = datetime.strptime(name[:15], "%Y%m%d-%H%M%S").replace(tzinfo=timezone.utc)
    except ValueError:
        return ""
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def _float(value: object) -> float | None:
    if value in (None, ""):
        return None
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


def run_operator(ident: Mapping[str, Any]) -> str | None:
    """The operator a run of one test function measured, from its run_identity.json (OP, or
    the node's first mark where only TEST_NODE was given); None for a run of a whole file or
    folder, whose rows keep their record's names."""
    node, op = ident.get("node"), ident.get("op")
    return op if isinstance(op, str) and op and isinstance(node, str) and "::" in node else None


def result_rows(run: Path, side: str = "", round_: int = 0, op: str | None = None
                ) -> Iterator[Row]:
    """The rows of one run directory: results.jsonl where written, else results.csv; each
    named `op` where given (the operator the run measured), else as FlagGems' record names it.
    A record's name is not an operator's: FlagGems names the rows of four scatter_reduce_two
    benchmarks scatter_reduce_ and of ten einsum ones einsum, so one series would hold several
    operators' nights."""
    if (run / RESULTS_JSONL).is_file():
        found: list[dict[str, Any]] = []
        for number, value in read_jsonl(run / RESULTS_JSONL, UsageError, "a result row"):
            if not isinstance(value, dict):
                raise UsageError(f"{str(run / RESULTS_JSONL)!r} line {number} is not a result "
                                 f"row: {value!r} is not an object")
            found.append(value)
    elif (run / RESULTS_CSV).is_file():
        with open(run / RESULTS_CSV, newline="", encoding="utf-8") as fh:
            found = list(csv.DictReader(fh))
    else:
        return
    for r in found:
        markers = r.get("markers") or []
        # results.jsonl holds a list; results.csv one cell of `;`-separated markers
        flags = ",".join(markers if isinstance(markers, list) else csv_list(str(markers)))
        yield Row(op or str(r.get("op") or ""), str(r.get("dtype") or ""),
                  str(r.get("shape") or ""), side, round_, str(r.get("status") or ""),
                  _float(r.get("latency_ms")),
                  _float(r.get("latency_base_ms")), _float(r.get("gbps")),
                  _float(r.get("tflops")), r.get("timer") or None, flags, str(run))


def timer_text(facts: Mapping[str, Any]) -> str | None:
    """A record's timer, from a run's identity or a campaign's caliber: the graph timer with
    its algorithm ("graph:adaptive"; a run made before GRAPH_TIMER existed was timed by
    upstream's), since two algorithms' nights are two series."""
    timer = facts.get("timer")
    if timer != "graph":
        return timer
    return f"graph:{facts.get('graph_timer') or FORMER_GRAPH_TIMER}"


def _identity_fields(ident: Mapping[str, Any]) -> dict[str, Any]:
    """The record's fields a run_identity.json gives: caliber, device, host and stack."""
    versions = ident.get("versions") or {}
    devices = ident.get("devices") or []
    stack = " ".join(f"{k}={v}" for k, v in sorted(versions.items())
                     if v is not None and k not in ("flaggems_dirty",))
    runtime = ident.get("runtime") or {}
    return {
        "backend": ident.get("backend"), "timer": timer_text(ident),
        "level": ident.get("level"), "shape_mode": ident.get("shape_mode"),
        # each model once: a run that saw eight H100s and a unit pinned to one ran on one kind
        "device": ",".join(dict.fromkeys(str(d.get("name")) for d in devices
                                         if isinstance(d, dict))) or None,
        "host": ident.get("host") or runtime.get("host"),
        "stack_a": stack or None, "flaggems_commit": versions.get("flaggems_commit"),
        "harness_commit": (ident.get("harness") or {}).get("commit"),
        "image_digest": ident.get("image_digest"),
    }


def kind_of(directory: Path) -> str:
    """run, batch or campaign: what `directory` holds; UsageError where it is none of them."""
    for name, kind in ((CAMPAIGN_JSON, "campaign"), (OPS_STATUS, "batch"), (RUN_IDENTITY, "run")):
        if (directory / name).is_file():
            return kind
    what = "does not exist" if not directory.exists() else "is no run, batch or campaign"
    raise UsageError(f"{str(directory)!r} {what}: expected a folder holding {RUN_IDENTITY}, "
                     f"{OPS_STATUS} or {CAMPAIGN_JSON}")


def read_folder(directory: Path) -> Folder:
    """The record of one run, batch or campaign folder."""
    directory = Path(directory).resolve()
    kind = kind_of(directory)
    return {"run": read_run, "batch": read_batch, "campaign": read_campaign}[kind](directory)


def _base(kind: str, directory: Path, stamp: str, digest: str, state: str, started: str
          ) -> dict[str, Any]:
    # the reader's version in the digest: a folder imported before its rows were read as they
    # are now (2: named by their operator; 3: a device model named once, results.csv's
    # markers split) differs on the next import and is written again
    digest = hashlib.sha256(f"{READER_VERSION}:{digest}".encode()).hexdigest()
    return {"kind": kind, "path": str(directory), "stamp": stamp, "digest": digest,
            "state": state, "started_utc": started or "-", "axis": None, "axis_a": None,
            "axis_b": None, "stack_b": None, "ops": 0, "verdicts": "{}"}


def read_run(directory: Path) -> Folder:
    """One run: its identity and its rows."""
    ident = _identity(directory)
    digest = _digest(directory / RUN_IDENTITY, directory / RESULTS_JSONL, directory / RESULTS_CSV)
    state = str(ident.get("state") or ident.get("status") or RunStatus.COMPLETE)
    record = {**_base("run", directory, _digest(directory / RUN_IDENTITY)[:32], digest, state,
                      _stamp_time(directory.name)), **_identity_fields(ident)}
    rows = tuple(result_rows(directory, op=run_operator(ident)))
    record["ops"] = len({r.op for r in rows}) or 1
    record["verdicts"] = json.dumps(dict(Counter(r.status for r in rows)), sort_keys=True)
    return Folder(record, rows)


def batch_run(directory: Path, cell: str) -> Path:
    """The run folder a batch's ops_status.csv names, resolved as a run's own record is (so
    that the batch takes that record's rows over and a row counts once). An older batch wrote
    it relative to where it ran (OUT=runs: runs/add/<stamp>); such a one is looked for where
    runs go, beside the batch's folder (<OUT>/batch/<stamp>: <OUT>/add/<stamp>), before where
    this reader runs."""
    run = Path(cell)
    if not run.is_absolute():
        beside = directory.parents[1] / run.parent.name / run.name
        run = beside if (beside / RUN_IDENTITY).is_file() else run
    return run.resolve()


def read_batch(directory: Path) -> Folder:
    """One batch: ops_status.csv's units and each operator's run rows."""
    statuses = read_ops_status(directory / OPS_STATUS)
    running = any(s.status in ("pending", "running") for s in statuses)
    rows: list[Row] = []
    first = None
    for s in statuses:
        run = batch_run(directory, s.run) if s.run else Path()
        if s.run and (run / RUN_IDENTITY).is_file():
            first = first or run
            rows += result_rows(run, op=s.op)
    record = _base("batch", directory, "batch-" + directory.name,
                   _digest(directory / OPS_STATUS, rows=rows),
                   "running" if running else RunStatus.COMPLETE, _stamp_time(directory.name))
    if first is not None:
        record.update(_identity_fields(_identity(first)))
    record["ops"] = len(statuses)
    record["verdicts"] = json.dumps(dict(Counter(s.status for s in statuses)),
                                    sort_keys=True)
    units = tuple({"unit": s.op, "op": s.op, "status": s.status, "wall_s": s.wall_s,
                   "reason": s.reason or None} for s in statuses)
    ended = sum(s.status not in ("pending", "running", "not_run") for s in statuses)
    return Folder(record, tuple(rows), units=units, running=running,
                  progress=f"{ended} of {len(statuses)} operators ended")


def _side_runs(directory: Path) -> Iterator[tuple[str, int, Path]]:
    """(side, round, run folder) of every side run a campaign holds: OP/A/rN, OP/B/rN."""
    for run in sorted(directory.glob("*/[AB]/r[0-9]*")):
        if run.is_dir() and run.name[1:].isdigit():
            yield run.parent.name, int(run.name[1:]), run


def read_campaign(directory: Path) -> Folder:
    """One A/B campaign: its plan and units (campaign.json), verdicts (ab.json), side rows."""
    plan = _json(directory / CAMPAIGN_JSON)
    ab = _json(directory / AB_JSON) if (directory / AB_JSON).is_file() else {}
    state = str(plan.get("state") or CampaignState.PLANNED)
    rows, first = _campaign_rows(directory)
    record = _base("campaign", directory, str(plan.get("created_utc") or directory.name),
                   _digest(directory / CAMPAIGN_JSON, directory / AB_JSON, rows=rows), state,
                   str(plan.get("created_utc") or _stamp_time(directory.name)))
    caliber = {**(plan.get("caliber") or {}), **(ab.get("caliber") or {})}
    axis = plan.get("axis") or {}
    if first is not None:
        record.update(_identity_fields(_identity(first)))
    stacks = caliber.get("stacks") or {}
    digests = caliber.get("image_digests") or {}
    record.update({
        "backend": caliber.get("backend") or record.get("backend"),
        "timer": timer_text(caliber) or record.get("timer"),
        "level": caliber.get("level"), "shape_mode": caliber.get("shape_mode"),
        "axis": axis.get("name"), "axis_a": axis.get("a"), "axis_b": axis.get("b"),
        "stack_a": stacks.get("A") or record.get("stack_a"), "stack_b": stacks.get("B"),
        "harness_commit": caliber.get("harness_commit") or record.get("harness_commit"),
        "image_digest": json.dumps(digests, sort_keys=True) if digests else
        record.get("image_digest"),
        "ops": len(plan.get("ops") or {})})
    verdicts = tuple(_verdict(r) for r in ab.get("rows") or [])
    record["verdicts"] = json.dumps(dict(Counter(v["verdict"] for v in verdicts)),
                                    sort_keys=True)
    units = tuple({"unit": str(u.get("id")), "op": str(u.get("op")),
                   "status": str(u.get("status")), "wall_s": _float(u.get("wall_s")),
                   "reason": u.get("reason")} for u in plan.get("units") or [])
    ended = sum(1 for u in units if u["status"] not in (NOT_RUN, SUBMITTED, RUNNING))
    return Folder(record, rows, verdicts, units, running=state in NOT_ENDED,
                  progress=f"{ended} of {len(units)} units ended")


def _campaign_rows(directory: Path) -> tuple[tuple[Row, ...], Path | None]:
    rows: list[Row] = []
    first = None
    for side, round_, run in _side_runs(directory):
        if first is None and (run / RUN_IDENTITY).is_file():
            first = run
        rows += result_rows(run, side, round_, op=run.parent.parent.name)
    return tuple(rows), first


def _verdict(row: Mapping[str, Any]) -> dict[str, Any]:
    return {"op": str(row.get("op")), "dtype": str(row.get("dtype")),
            "shape": str(row.get("shape")), "verdict": str(row.get("verdict")),
            "speedup_pct": _float(row.get("speedup_pct")),
            "ci_low_pct": _float(row.get("ci_low_pct")),
            "ci_high_pct": _float(row.get("ci_high_pct")),
            "rounds": row.get("rounds"), "flags": ",".join(row.get("flags") or [])}
