"""Inputs of `harness summary`: run, batch and campaign directories, results.csv, FlagGems logs."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.contract.boundary import RUN_HEADER
from harness.contract.identity import FORMER_GRAPH_TIMER, IDENTITY_FILE, read_identity
from harness.contract.ops_status import OPS_STATUS_CSV, read_ops_status
from harness.contract.results import (
    RESULTS_CSV,
    RESULTS_JSONL,
    Row,
    is_results_csv,
    parse_results_csv,
    parse_run_output,
    read_results,
)
from harness.contract.states import RunStatus
from harness.errors import UsageError

AB_JSON = "ab.json"
CAMPAIGN_JSON = "campaign.json"  # a campaign's plan and states, written by its driver
DRIVER_LOCK = ".driver.lock"  # held by the one driver of a campaign while it runs
ACCEPTED = ("expected a run directory (results.jsonl), a batch directory (ops_status.csv), a "
            "campaign directory (ab.json, A/rN, B/rN) or its ab.json, a results.csv, or a "
            "FlagGems console log or record log")
# FlagGems names its record log after its argv ("--mode kernel" -> "--mode_kernel"; one vendor
# spells the option --fg_mode); its tables carry the same facts as "mode=" and "level=".
_LOG_NAME_FACT = re.compile(r"--(?:fg_)?(mode|level)_([A-Za-z]+)")
LOG_FIELDS = {"mode": "timer", "level": "level"}  # Row attribute -> caliber field
# what makes two runs comparable; graph_timer only where the timer is graph
CALIBER_FIELDS = ("backend", "level", "timer", "shape_mode", "graph_timer")
BUDGET_FIELDS = ("warmup_ms", "iter_ms")  # FlagGems' budget: None where a run predates them
_HEADER_LINE = re.compile(r"^# (\w+): (.*)$", re.MULTILINE)


@dataclass(frozen=True)
class Source:
    """The rows of one input and the identities of the runs behind them (none for a raw log)."""

    label: str
    kind: str  # "run", "batch", "results_csv", "record_log" or "console"
    rows: tuple[Row, ...]
    identities: tuple[tuple[Path, Mapping[str, Any]], ...] = ()  # (run dir, run_identity.json)
    notes: tuple[str, ...] = ()
    # What a raw log tells of its caliber: (("level", "core"), ("timer", "kernel")); a FlagGems
    # log's timer is its --mode, a harness run.log's the header's timer.
    log_caliber: tuple[tuple[str, str], ...] = ()


# ---------------------------------------------------------------- inputs


def _load_run(run_dir: Path) -> Source:
    identity = read_identity(run_dir)
    if identity is None:
        return Source(str(run_dir), "run", tuple(read_results(run_dir)),
                      notes=(f"{run_dir}: no {IDENTITY_FILE}; caliber not known",))
    status = identity.doc.get("status")
    ended = () if status in (None, RunStatus.COMPLETE) else (
        f"{run_dir}: the run is {status} ({identity.doc.get('reason') or 'no reason given'}): "
        "its rows are those measured before it stopped",)
    return Source(str(run_dir), "run", tuple(read_results(run_dir)), ((run_dir, identity.doc),),
                  notes=ended)


def _batch_run_dir(batch_dir: Path, cell: str) -> Path:
    path = Path(cell)
    if path.is_absolute() or not (batch_dir / path).is_dir():
        return path  # the batch wrote it relative to where it ran: usually here
    return batch_dir / path


def _load_batch(batch_dir: Path) -> Source:
    entries = read_ops_status(batch_dir / OPS_STATUS_CSV, required=("op", "run"))
    rows: list[Row] = []
    identities: list[tuple[Path, Mapping[str, Any]]] = []
    notes: list[str] = []
    for entry in entries:
        cell = entry.run
        if not cell:
            notes.append(f"op {entry.op!r}: no run directory (status {entry.status})")
            continue
        try:
            run = _load_run(_batch_run_dir(batch_dir, cell))
        except UsageError as exc:
            notes.append(f"op {entry.op!r}: {exc}")
            continue
        rows.extend(run.rows)
        identities.extend(run.identities)
        notes.extend(run.notes)
    return Source(str(batch_dir), "batch", tuple(rows), tuple(identities), tuple(notes))


def log_caliber(name: str, rows: Sequence[Row]) -> tuple[tuple[str, str], ...]:
    """The timer (FlagGems' --mode) and level of a raw log, from its tables or else its name."""
    facts = {LOG_FIELDS[key]: value for key, value in _LOG_NAME_FACT.findall(name)}
    for attr, field in LOG_FIELDS.items():
        seen = sorted({str(getattr(r, attr)) for r in rows if getattr(r, attr)})
        if seen:
            facts[field] = "/".join(seen)
    return tuple(sorted(facts.items()))


def caliber_of(facts: Mapping[str, Any]) -> dict[str, str]:
    """The CALIBER_FIELDS and BUDGET_FIELDS of a run's identity, campaign caliber or run.log
    header, as text. graph_timer is the graph timer's algorithm where the timer is graph
    (FORMER_GRAPH_TIMER where the run predates the setting) and "-" where it is not: a direct
    run's is moot, and runs timed by two algorithms must not read as alike."""
    found = {f: str(facts.get(f)) for f in (*CALIBER_FIELDS, *BUDGET_FIELDS)}
    found["graph_timer"] = (str(facts.get("graph_timer") or FORMER_GRAPH_TIMER)
                            if facts.get("timer") == "graph" else "-")
    return found


def header_caliber(text: str) -> tuple[tuple[str, str], ...] | None:
    """The caliber a harness run.log states in its header; None for a log without one.

    Such a log's tables always say mode=kernel (the harness runs FlagGems so and times with its
    own plugin): only the header tells its timer.
    """
    if not text.startswith(RUN_HEADER):
        return None
    fields = {k: v.strip() for k, v in
              _HEADER_LINE.findall(text.split("\n# started_utc:", 1)[0])}
    stated = {k: v for k, v in caliber_of(fields).items() if k in fields or k == "graph_timer"}
    return tuple(sorted((k, v) for k, v in stated.items() if v not in ("", "None")))


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise UsageError(f"cannot read {str(path)!r}: {exc.strerror}") from None


def _load_file(path: Path) -> Source:
    if path.name in (RESULTS_CSV, RESULTS_JSONL) and (path.parent / RESULTS_JSONL).is_file():
        return _load_run(path.parent)  # its run, with the run's identity
    text = _read_text(path)
    if is_results_csv(text):
        return Source(str(path), "results_csv", tuple(parse_results_csv(text, str(path))),
                      notes=(f"{path}: a results.csv without its run; caliber not known",))
    header = header_caliber(text)
    if header is not None and (path.parent / RESULTS_JSONL).is_file():
        return _load_run(path.parent)  # a run's own run.log: the run, with its identity
    rows, kind = parse_run_output(text, text)
    if not rows:
        raise UsageError(f"no FlagGems results (console table or record-log line) in "
                         f"{str(path)!r}; {ACCEPTED}")
    told = header if header is not None else log_caliber(path.name, rows)
    return Source(str(path), kind, tuple(rows), log_caliber=told)


def is_campaign(path: Path) -> bool:
    """An A/B campaign: its directory (holding ab.json, or A and B sides of rounds), or its
    ab.json."""
    if path.is_file():
        return path.name == AB_JSON
    return path.is_dir() and ((path / AB_JSON).is_file() or all(
        (path / side / "r0").is_dir() for side in ("A", "B")))


def load_source(path: str | Path) -> Source:
    """Read a run or batch directory, a results.csv, or a raw FlagGems log."""
    p = Path(path)
    if p.is_dir():
        if (p / OPS_STATUS_CSV).is_file():
            return _load_batch(p)
        if (p / RESULTS_JSONL).is_file():
            return _load_run(p)
        if not is_campaign(p):
            raise UsageError(f"{str(p)!r} is none of the inputs of harness summary: {ACCEPTED}")
    if is_campaign(p):
        raise UsageError(f"{str(p)!r} is an A/B campaign: summarize it alone "
                         "(harness summary DIR), not as one side of --ab")
    if p.is_file():
        return _load_file(p)
    if p.exists():  # a FIFO, a socket, a device: reading one could block or never end
        raise UsageError(f"{str(p)!r} is not a file or a directory; {ACCEPTED}")
    raise UsageError(f"no such run, batch, campaign or log: {str(p)!r}; {ACCEPTED}")


def rounds_of(side: Path) -> dict[int, Path]:
    found = (re.fullmatch(r"r(\d+)", p.name) for p in side.iterdir() if p.is_dir())
    return {int(m[1]): side / m[0] for m in found if m and (side / m[0] / RESULTS_JSONL).is_file()}
