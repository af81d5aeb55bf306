"""A campaign's plan of units (operator, round), its campaign.json, and the order units run in."""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from harness.errors import UsageError
from harness.fsutil import atomic_write_json

SCHEMA = "harness-campaign/1"
CAMPAIGN_JSON = "campaign.json"
CACHE_DIR = "cache"  # cache/A and cache/B: each side's FlagGems and Triton caches
LOGS_DIR = "logs"
SIDES = ("A", "B")
# A unit in one of these states is never run again; any other state is run by --resume.
FINISHED = ("ok", "failed", "skipped")
PENDING = "not_run"


@dataclass(frozen=True, order=True)
class Unit:
    """One operator's round: side A and side B back to back on one device."""

    op: str
    round: int

    @property
    def id(self) -> str:
        return f"{self.op}/r{self.round}"

    @property
    def sides(self) -> tuple[str, str]:
        """A B in even rounds, B A in odd ones, so that drift between the two cancels."""
        return ("A", "B") if self.round % 2 == 0 else ("B", "A")

    def run_rel(self, side: str) -> str:
        return f"{self.op}/{side}/r{self.round}"


def parse_unit_id(text: str) -> Unit:
    """`<op>/r<round>` as a Unit; UsageError for anything else."""
    op, sep, tail = text.rpartition("/r")
    if not (sep and op and tail.isdigit()):
        raise UsageError(f"unit {text!r} is not accepted; expected <op>/r<round>, e.g. mm/r0")
    return Unit(op, int(tail))


def order_units(units: Iterable[Unit], walls: Mapping[str, float] | None = None) -> list[Unit]:
    """Round-major (round 0 of every operator before round 1 of any), longest first within a
    round by `walls` (seconds per operator); an operator with no wall goes first, in the given
    order, because it may be the longest."""
    walls = walls or {}
    listed = list(dict.fromkeys(units))
    position = {unit: i for i, unit in enumerate(listed)}

    def key(unit: Unit) -> tuple[int, float, int]:
        wall = walls.get(unit.op)
        return unit.round, -math.inf if wall is None else -wall, position[unit]

    return sorted(listed, key=key)


def plan_units(op_rounds: Mapping[str, int], walls: Mapping[str, float] | None = None
               ) -> list[Unit]:
    """Every unit of `op_rounds` ({operator: rounds}), in running order."""
    return order_units((Unit(op, r) for op, n in op_rounds.items() for r in range(n)), walls)


# --------------------------------------------------------------------------- campaign.json


def new_document(*, directory: Path, axis: Mapping[str, Any], caliber: Mapping[str, Any],
                 argv: Sequence[str], ops: Mapping[str, Mapping[str, Any]], rounds: int,
                 walls: Mapping[str, float], walls_from: Path | None) -> dict[str, Any]:
    """A new campaign's document: every operator with its node (or why it has none) and every
    unit not run yet, in running order; an operator without a node has its units skipped."""
    doc: dict[str, Any] = {
        "schema": SCHEMA, "dir": str(directory),
        "created_utc": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "axis": dict(axis), "caliber": dict(caliber), "argv": list(argv), "rounds": rounds,
        "walls": dict(walls), "walls_from": str(walls_from) if walls_from else None,
        "ops": {op: {"node": info.get("node"), "reason": info.get("reason"), "rounds": rounds}
                for op, info in ops.items()},
        "units": [], "state": "planned"}
    add_units(doc, {op: rounds for op in ops})
    return doc


def add_units(doc: dict[str, Any], op_rounds: Mapping[str, int]) -> list[Unit]:
    """Extend operators to `op_rounds` rounds: new units, not run yet (skipped where the
    operator has no node), placed by the running order of every unit still to run."""
    have = {u["id"] for u in doc["units"]}
    new = [u for u in plan_units(op_rounds, doc.get("walls")) if u.id not in have]
    for unit in new:
        reason = doc["ops"][unit.op].get("reason")
        doc["units"].append({"id": unit.id, "op": unit.op, "round": unit.round,
                             "status": "skipped" if reason else PENDING, "reason": reason,
                             "rc": None, "wall_s": None, "device": None, "attempts": 0})
    for op, n in op_rounds.items():
        doc["ops"][op]["rounds"] = max(n, doc["ops"][op].get("rounds") or 0)
    return new


def extend(doc: dict[str, Any], rounds: int | None, only: str | None,
           verdicts: Mapping[str, str]) -> list[Unit]:
    """Add rounds for --resume: up to `rounds` in all, for every operator or, with `only`,
    for those whose verdict (`verdicts`, from ab.json) is `only`; `only` without `rounds`
    adds as many rounds as the campaign first had."""
    targets = [op for op, info in doc["ops"].items() if not info.get("reason")]
    if only is not None:
        targets = [op for op in targets if verdicts.get(op) == only]
        if not targets:
            found = ", ".join(sorted(set(verdicts.values()))) or "none (no ab.json yet)"
            raise UsageError(f"ONLY={only!r}: no operator of this campaign has that verdict; "
                             f"its verdicts: {found}")
    if rounds is None and only is None:
        return []
    return add_units(doc, {op: rounds if rounds is not None
                           else doc["ops"][op]["rounds"] + doc["rounds"] for op in targets})


def units_to_run(doc: Mapping[str, Any]) -> list[Unit]:
    """Every unit not finished (never run, interrupted, crashed), in running order."""
    units = [Unit(u["op"], u["round"]) for u in doc["units"] if u["status"] not in FINISHED]
    return order_units(units, doc.get("walls"))


def status_map(doc: Mapping[str, Any]) -> dict[str, str]:
    return {u["id"]: u["status"] for u in doc["units"]}


def unit_entry(doc: Mapping[str, Any], unit_id: str) -> dict[str, Any]:
    for entry in doc["units"]:
        if entry["id"] == unit_id:
            return entry
    raise UsageError(f"unit {unit_id!r} is not in this campaign; it has: "
                     f"{', '.join(u['id'] for u in doc['units'])}")


def save(directory: Path, doc: Mapping[str, Any]) -> Path:
    return atomic_write_json(directory / CAMPAIGN_JSON, doc)


def load(directory: Path) -> dict[str, Any]:
    """The campaign.json of `directory`; UsageError when it holds none this harness reads."""
    path = Path(directory) / CAMPAIGN_JSON
    if not Path(directory).is_dir():
        raise UsageError(f"RESUME={str(directory)!r} is not a campaign directory")
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"RESUME={str(directory)!r} is not a campaign directory "
                         f"(no {CAMPAIGN_JSON})") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise UsageError(f"RESUME={str(directory)!r}: {CAMPAIGN_JSON} is not JSON ({exc})"
                         ) from None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise UsageError(f"RESUME={str(directory)!r}: {CAMPAIGN_JSON} has schema "
                         f"{doc.get('schema') if isinstance(doc, dict) else None!r}; "
                         f"expected {SCHEMA!r}")
    return doc


def check_caliber(doc: Mapping[str, Any], given: Mapping[str, Any], keys: Sequence[str]) -> None:
    """Refuse to resume with a setting of `keys` that differs from the campaign's."""
    stored = doc.get("caliber") or {}
    for key in keys:
        if key in given and given[key] != stored.get(key):
            raise UsageError(f"{key.upper()}={given[key]!r} differs from the campaign's "
                             f"{stored.get(key)!r}; resume with the campaign's settings")


# --------------------------------------------------------------------------- walls


def walls_from(path: Path) -> dict[str, float]:
    """Seconds per operator from an earlier campaign (its units' median wall) or batch
    (ops_status.csv's wall_s); UsageError when `path` is neither."""
    path = Path(path)
    if (path / CAMPAIGN_JSON).is_file():
        return own_walls(load(path))
    status = path / "ops_status.csv"
    if status.is_file():
        with open(status, newline="", encoding="utf-8") as fh:
            return {r["op"]: float(r["wall_s"]) for r in csv.DictReader(fh)
                    if r.get("op") and (r.get("wall_s") or "").strip()}
    raise UsageError(f"WALLS_FROM={str(path)!r} is not accepted; expected a campaign "
                     f"directory ({CAMPAIGN_JSON}) or a batch directory (ops_status.csv)")


def own_walls(doc: Mapping[str, Any]) -> dict[str, float]:
    """Seconds per operator from the campaign's own finished units (a resume's estimate)."""
    per_op: dict[str, list[float]] = {}
    for unit in doc["units"]:
        if unit.get("wall_s") is not None:
            per_op.setdefault(unit["op"], []).append(float(unit["wall_s"]))
    return {op: sorted(w)[len(w) // 2] for op, w in per_op.items()}


def round_walls(doc: Mapping[str, Any]) -> dict[str, float | int | None]:
    """Round 0's walls (it tunes) against the later rounds' (they replay): round 0's sum, and
    the mean wall of one unit in each, over the units that ran to the end.

    Per unit, not per round: an interrupted campaign's last round holds only some operators,
    and its sum would read as a faster round.
    """
    first: list[float] = []
    later: list[float] = []
    for unit in doc["units"]:
        if unit.get("wall_s") is not None and unit["status"] in ("ok", "failed"):
            (first if unit["round"] == 0 else later).append(float(unit["wall_s"]))

    def mean(walls: list[float]) -> float | None:
        return round(sum(walls) / len(walls), 2) if walls else None

    return {"round0_s": round(sum(first), 2) if first else None,
            "round0_unit_mean_s": mean(first), "later_unit_mean_s": mean(later),
            "later_units": len(later)}


def eta_from_rate(elapsed_s: float, done: int, remaining: int) -> float | None:
    """Seconds left when the rest finishes at the rate units finished in this session (a
    cluster's queue decides how many run at once, so only the rate is known)."""
    return None if done == 0 else elapsed_s / done * remaining


def eta_from_walls(walls_s: Sequence[float], running_s: Sequence[float], waiting: int,
                   workers: int) -> float | None:
    """Seconds left on `workers` devices: every unit takes the mean wall of those finished in
    this session, a running one less what it has run (`running_s`), and the `waiting` ones go
    `workers` at a time. None before a unit has finished."""
    if not walls_s:
        return None
    mean = sum(walls_s) / len(walls_s)
    left = sum(max(0.0, mean - ran) for ran in running_s) + waiting * mean
    return left / max(1, workers)
