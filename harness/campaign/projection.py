"""What a plan would cost: its units' wall projected from an earlier campaign's (WALLS_FROM)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from harness.campaign.document import CAMPAIGN_JSON, Campaign, UnitRecord, load
from harness.campaign.plan import SIDES, Unit
from harness.contract.breakdown import BREAKDOWN_FILE
from harness.contract.identity import IDENTITY_FILE

PROJECTED_DEVICES = (1, 8, 64)


@dataclass(frozen=True)
class RoundWalls:
    """An earlier campaign's walls by round, its rounds' worker starts set apart.

    `first` and `later`: seconds per operator of its round-0 unit and of its later ones (their
    median), each less the worker starts it paid for its round (round_starts). `start_first`
    and `start_later`: what those starts took on one device in round 0 and in a later round
    (means over the campaign's devices and rounds), which a suite pays once a round and
    device whatever its operators."""

    first: dict[str, float] = field(default_factory=dict)
    later: dict[str, float] = field(default_factory=dict)
    start_first: float = 0.0
    start_later: float = 0.0


def round_starts(path: Path, campaign: Campaign) -> dict[str, float]:
    """Seconds of worker starts that a unit of the campaign at `path` paid for its round rather
    than for its operator, by unit id. In each round, the first unit to start on a device
    (by started_utc, ties in the plan's order) finds no worker of that round and starts one a
    side: the `startup` (time_breakdown.json) of each of its runs whose launch started a worker
    (`new_because` in run_identity.json). A run in a fresh process, or one whose files are
    missing or unreadable, counts nothing. Never more than the unit's wall."""
    firsts: dict[tuple[int, str], UnitRecord] = {}
    for unit in campaign.units:
        if unit.started_utc is None or unit.wall_s is None:
            continue
        key = (unit.round, unit.device or "")
        if key not in firsts or unit.started_utc < (firsts[key].started_utc or ""):
            firsts[key] = unit
    out = {}
    for unit in firsts.values():
        seconds = sum(_start_s(path / Unit(unit.op, unit.round).run_rel(side)) for side in SIDES)
        if seconds > 0:
            out[unit.id] = min(seconds, unit.wall_s or 0.0)
    return out


def _start_s(run_dir: Path) -> float:
    try:
        identity = json.loads((run_dir / IDENTITY_FILE).read_text(encoding="utf-8"))
        if not any(isinstance(launch, dict) and launch.get("new_because")
                   for launch in identity.get("launch") or ()):
            return 0.0
        breakdown = json.loads((run_dir / BREAKDOWN_FILE).read_text(encoding="utf-8"))
        seconds = float(breakdown["phases"]["startup"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return 0.0
    return seconds if math.isfinite(seconds) and seconds > 0 else 0.0


def walls_by_round(path: Path) -> RoundWalls:
    """The walls of an earlier campaign by round (RoundWalls): round-0 units pay what later
    rounds do not (side A's tuning, torch's reference, the first worker starts). Empty for a
    batch, whose one wall an operator serves every round."""
    path = Path(path)
    if not (path / CAMPAIGN_JSON).is_file():
        return RoundWalls()
    campaign = load(path, "WALLS_FROM")
    starts = round_starts(path, campaign)
    first: dict[str, float] = {}
    later: dict[str, list[float]] = {}
    for unit in campaign.units:
        if unit.wall_s is None:
            continue
        wall = unit.wall_s - starts.get(unit.id, 0.0)
        if unit.round == 0:
            first[unit.op] = wall
        else:
            later.setdefault(unit.op, []).append(wall)
    by_round = [(int(uid.rpartition("/r")[2]) == 0, s) for uid, s in starts.items()]
    return RoundWalls(first, {op: sorted(w)[len(w) // 2] for op, w in later.items()},
                      _mean([s for zero, s in by_round if zero]),
                      _mean([s for zero, s in by_round if not zero]))


def _mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values) if values else 0.0


def projection(units: Sequence[Unit], walls: Mapping[str, float],
               first: Mapping[str, float] | None = None,
               devices: Sequence[int] = PROJECTED_DEVICES,
               starts: tuple[float, float] = (0.0, 0.0)) -> str | None:
    """One line: the wall of `units` on each count of `devices`. A unit takes its operator's
    wall in `walls` or, unknown, the mean of the known ones; a round-0 unit takes its
    operator's wall in `first` (or their mean) where `first` has any. Units go to the device
    that frees first, longest first; then each device pays `starts` (RoundWalls' start_first
    and start_later) once for round 0 and once for each later round. None with no wall known.

    The mean, not the median: where the known operators are a random draw from the suite, the
    draw's mean times the suite's size estimates the suite's sum without bias, and walls are
    skewed (a draw of twelve on an H100 had round-0 walls of 2-70 s, median 7 s, mean 13 s),
    so the median understates it.
    """
    ops = {u.op for u in units}
    known = [walls[op] for op in ops if op in walls]
    if not known:
        return None
    mean = math.fsum(known) / len(known)
    first = first or {}
    first_known = [first[op] for op in ops if op in first] or list(first.values())
    first_mean = math.fsum(first_known) / len(first_known) if first_known else mean
    each = sorted((first.get(u.op, first_mean) if first and u.round == 0
                   else walls.get(u.op, mean) for u in units), reverse=True)
    rounds = {u.round for u in units}
    paid = (starts[0] if 0 in rounds else 0.0) + starts[1] * len(rounds - {0})
    spans = []
    for count in devices:
        free = [0.0] * count
        for wall in each:
            free[free.index(min(free))] += wall
        spans.append(f"{count} device{'' if count == 1 else 's'} "
                     f"{_duration(max(free) + paid)}")
    guessed = sum(1 for op in ops if op not in walls)
    rest = f", the mean {mean:.0f} s for the {guessed} others" if guessed else ""
    unfirst = sum(1 for op in ops if op not in first)
    round0 = "; round 0 from its own units" + (
        f", the mean {first_mean:.0f} s for the {unfirst} others" if unfirst else "") \
        if first else ""
    started = (f"; worker starts once a round and device, {starts[0]:.0f} s in round 0 and "
               f"{starts[1]:.0f} s later") if any(starts) else ""
    return (f"projected wall of {len(units)} units (walls of {len(ops) - guessed} "
            f"operators{rest}{round0}{started}): {', '.join(spans)}")


def _duration(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 60:.1f} min" if seconds >= 60 else f"{seconds:.0f} s"
