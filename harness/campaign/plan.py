"""A campaign's plan of units (operator, round): the order units run in, new and added units,
walls and estimates."""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from harness.axes import Axis
from harness.campaign.document import (
    CAMPAIGN_JSON,
    Campaign,
    OpRecord,
    UnitRecord,
    load,
    walls_by_op,
)
from harness.contract.ops_status import OPS_STATUS_CSV, read_ops_status
from harness.contract.states import (
    CRASHED,
    EXCLUDED,
    FAILED,
    FINISHED,
    INTERRUPTED,
    PENDING,
    RAN_TO_END,
    SKIPPED,
)
from harness.errors import UsageError
from harness.settings.kinds import comma_items
from harness.settings.variables import WALL_MULTIPLE

# The states of a batch's operator whose wall is a part of one (ops_status.csv): WALLS_FROM
# lends no such wall.
PARTIAL = (INTERRUPTED, CRASHED)
CACHE_DIR = "cache"  # cache/A and cache/B: each side's FlagGems and Triton caches
UNMATCHED_DIR = "unmatched"  # a few of side B's artifacts that side A never had
LOGS_DIR = "logs"
SIDES = ("A", "B")


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


# --------------------------------------------------------------------------- the campaign


def new_campaign(*, directory: Path, axis: Axis, caliber: Mapping[str, Any],
                 argv: Sequence[str], ops: Mapping[str, Mapping[str, Any]], rounds: int,
                 walls: Mapping[str, float], walls_from: Path | None) -> Campaign:
    """A new campaign: every operator with its node (or why it has none) and every unit not
    run yet, in running order; an operator without a node has its units failed (never run),
    one that exists on one side only (`skipped`) its units skipped (never run)."""
    campaign = Campaign(
        dir=str(directory),
        created_utc=datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        axis=axis, caliber=dict(caliber), argv=list(argv), rounds=rounds, walls=dict(walls),
        walls_from=str(walls_from.absolute()) if walls_from else None,  # read again on resume
        ops={op: OpRecord(info.get("node"), info.get("reason"), rounds,
                          skipped=info.get("skipped")) for op, info in ops.items()})
    add_units(campaign, {op: rounds for op in ops})
    return campaign


def add_units(campaign: Campaign, op_rounds: Mapping[str, int]) -> list[Unit]:
    """Extend operators to `op_rounds` rounds: new units, not run yet (failed, never run, where
    the operator has no node), placed by the running order of every unit still to run."""
    have = {u.id for u in campaign.units}
    new = [u for u in plan_units(op_rounds, campaign.walls) if u.id not in have]
    for unit in new:
        info = campaign.ops[unit.op]
        status = FAILED if info.reason else SKIPPED if info.skipped else PENDING
        campaign.units.append(UnitRecord(unit.id, unit.op, unit.round, status,
                                         info.reason or info.skipped))
    for op, n in op_rounds.items():
        campaign.ops[op].rounds = max(n, campaign.ops[op].rounds)
    for op in {u.op for u in new}:  # why it stopped no longer holds: its looks say anew
        campaign.ops[op].stopped = None
    return new


def extend(campaign: Campaign, rounds: int | None, only: str | None,
           verdicts: Mapping[str, str]) -> list[Unit]:
    """Add rounds for --resume: up to `rounds` in all, for every operator or, with `only`,
    for those whose verdict (`verdicts`, from ab.json) is `only`; `only` without `rounds`
    adds as many rounds as the campaign first had."""
    targets = [op for op, info in campaign.ops.items()
               if not (info.reason or info.excluded or info.skipped)]
    if only is not None:
        found = ", ".join(sorted({verdicts[op] for op in targets if op in verdicts})) \
            or "none (no ab.json yet)"
        targets = [op for op in targets if verdicts.get(op) == only]
        if not targets:
            raise UsageError(f"ONLY={only!r}: no operator of this campaign that can run again "
                             f"has that verdict; theirs: {found} (operators excluded, without "
                             "a node, or on one side only never run again)")
    if rounds is None and only is None:
        return []
    least = min((campaign.ops[op].rounds for op in targets), default=0)
    if rounds is not None and rounds < least:
        raise UsageError(f"ROUNDS={rounds} is not accepted on resume: every operator has "
                         f"{least} rounds or more already; a resume adds rounds, never removes "
                         f"them (give more than {least}, or leave ROUNDS out)")
    return add_units(campaign, {op: rounds if rounds is not None
                                else campaign.ops[op].rounds + campaign.rounds
                                for op in targets})


EXCLUDE_REASON = "excluded by EXCLUDE on resume"
INCLUDE_ALL = "none"  # EXCLUDE=none: every operator is taken back


def exclude(campaign: Campaign, text: str) -> list[str]:
    """Apply EXCLUDE (comma-separated operators, or `none`): the operators left out from now on,
    in place of those an earlier resume left out; their units not finished read excluded and
    are not run, and an operator taken back has them run again. The operators now excluded;
    UsageError, naming the closest known operators, for a name the campaign does not have."""
    names = [] if text.strip() == INCLUDE_ALL else comma_items("EXCLUDE", text)
    if not names and text.strip() != INCLUDE_ALL:
        raise UsageError(f"EXCLUDE={text!r} names no operator; EXCLUDE={INCLUDE_ALL} takes "
                         "every one back")
    if INCLUDE_ALL in names and INCLUDE_ALL not in campaign.ops:
        others = ", ".join(n for n in names if n != INCLUDE_ALL)
        raise UsageError(f"EXCLUDE={INCLUDE_ALL} takes every operator back and is given alone, "
                         f"not with {others}")
    for name in names:
        if name not in campaign.ops:
            raise UsageError(_unknown_op(campaign, name))
    for op, info in campaign.ops.items():
        info.excluded = EXCLUDE_REASON if op in names else None
    for unit in campaign.units:
        if unit.op in names and unit.status not in FINISHED:
            unit.status, unit.reason = EXCLUDED, EXCLUDE_REASON
        elif unit.op not in names and unit.status == EXCLUDED:
            unit.status, unit.reason = PENDING, None
    return names


def _unknown_op(campaign: Campaign, name: str) -> str:
    """EXCLUDE's refusal of a name the campaign does not have, with those close to it (case
    aside); "closest: none" would read as the operator, or the keyword, none."""
    by_lower = {op.lower(): op for op in campaign.ops}
    close = [by_lower[c] for c in difflib.get_close_matches(name.lower(), list(by_lower), n=3)]
    what = f"; closest: {', '.join(close)}" if close else ", nor close to one"
    return (f"EXCLUDE={name!r} is not an operator of this campaign{what} "
            f"({len(campaign.ops)} operators; EXCLUDE={INCLUDE_ALL} takes every one back)")


def units_to_run(campaign: Campaign) -> list[Unit]:
    """Every unit not finished (never run, interrupted, crashed), in running order."""
    units = [Unit(u.op, u.round) for u in campaign.units if u.status not in FINISHED]
    return order_units(units, campaign.walls)


def check_caliber(campaign: Campaign, given: Mapping[str, Any], keys: Sequence[str]) -> None:
    """Refuse to resume with a setting of `keys` that differs from the campaign's."""
    stored = campaign.caliber
    for key in keys:
        if key in given and given[key] != stored.get(key):
            raise UsageError(f"{key.upper()}={given[key]!r} differs from the campaign's "
                             f"{stored.get(key)!r}; resume with the campaign's settings")


# --------------------------------------------------------------------------- walls


def checked_walls(path: Path) -> Campaign:
    """The campaign at `path` read as WALLS_FROM; UsageError where a unit's wall is not
    seconds (a number, finite, not below 0)."""
    campaign = load(path, "WALLS_FROM")
    for unit in campaign.units:
        if unit.wall_s is not None and not (math.isfinite(unit.wall_s) and unit.wall_s >= 0):
            raise UsageError(f"WALLS_FROM={str(path)!r}: {CAMPAIGN_JSON} gives unit "
                             f"{unit.id!r} wall_s={unit.wall_s!r}; expected seconds, a "
                             "number not below 0")
    return campaign


def walls_from(path: Path) -> dict[str, float]:
    """Seconds per operator from an earlier campaign (its units' median wall) or batch
    (ops_status.csv's wall_s); UsageError when `path` is neither."""
    path = Path(path)
    if (path / CAMPAIGN_JSON).is_file():
        return walls_by_op(checked_walls(path))
    if (path / OPS_STATUS_CSV).is_file():
        try:
            statuses = read_ops_status(path / OPS_STATUS_CSV)
        except UsageError as exc:
            raise UsageError(f"WALLS_FROM={str(path)!r} is not accepted: {exc}") from None
        # an interrupted or crashed operator's wall is a part of one (a file of walls alone,
        # `op,wall_s`, has no status: each counts)
        return {s.op: s.wall_s for s in statuses
                if s.op and s.wall_s is not None and s.status not in PARTIAL}
    raise UsageError(f"WALLS_FROM={str(path)!r} is not accepted; expected a campaign "
                     f"directory ({CAMPAIGN_JSON}) or a batch directory ({OPS_STATUS_CSV})")


def round_walls(campaign: Campaign) -> dict[str, float | int | None]:
    """Round 0's walls (it tunes) against the later rounds' (they replay): round 0's sum, and
    the mean wall of one unit in each, over the units that ran to the end.

    Per unit, not per round: an interrupted campaign's last round holds only some operators,
    and its sum would read as a faster round.
    """
    first: list[float] = []
    later: list[float] = []
    for unit in campaign.units:
        if unit.wall_s is not None and unit.status in RAN_TO_END:
            (first if unit.round == 0 else later).append(unit.wall_s)

    def mean(walls: list[float]) -> float | None:
        return round(sum(walls) / len(walls), 2) if walls else None

    return {"round0_s": round(sum(first), 2) if first else None,
            "round0_unit_mean_s": mean(first), "later_unit_mean_s": mean(later),
            "later_units": len(later)}


def unit_limit(floor_s: float | None, wall_s: float | None) -> float | None:
    """A unit's time limit: UNIT_TIMEOUT (`floor_s`; None: no limit), raised to WALL_MULTIPLE
    times its operator's known wall, so that an operator known to be slow is not cut short."""
    if floor_s is None or wall_s is None:
        return floor_s
    return max(floor_s, round(WALL_MULTIPLE * wall_s))


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
