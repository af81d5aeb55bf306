"""What a plan would cost: its units' wall projected from an earlier campaign's (WALLS_FROM)."""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from harness.campaign.document import CAMPAIGN_JSON, Campaign, UnitRecord, load
from harness.campaign.plan import SIDES, Unit
from harness.contract import breakdown
from harness.contract.identity import read_identity
from harness.errors import UsageError

PROJECTED_DEVICES = (1, 8, 64)
RESAMPLES = 2000  # draws of the known operators again, for the projection's spread
DRAW_SHARE = 0.9  # of those draws' walls, the middle share a projection states


@dataclass(frozen=True)
class RoundWalls:
    """An earlier campaign's walls by round, its rounds' worker starts set apart.

    `first` and `later`: seconds per operator of its round-0 unit and of its later ones (their
    median), each less the worker starts it paid for its round (round_starts). `start_first`
    and `start_later`: what those starts took on one device in round 0 and in a later round,
    the mean over the (round, device) pairs where any was found; a suite pays them once a
    round and device whatever its operators."""

    first: dict[str, float] = field(default_factory=dict)
    later: dict[str, float] = field(default_factory=dict)
    start_first: float = 0.0
    start_later: float = 0.0


def round_starts(path: Path, campaign: Campaign) -> dict[str, float]:
    """Seconds of worker starts that a unit of the campaign at `path` paid for its round rather
    than for its operator, by unit id. Each side's worker of a round and device is started by
    the first of that round's units on that device (by started_utc, ties in the plan's order)
    whose run on that side started a worker (`new_because` in run_identity.json's `launch`):
    that run's `startup` (time_breakdown.json) is the start. A later start in the round (a
    worker retired by the operator before, a resume's new driver) stays in its unit's wall,
    where the projection overstates rather than understates. A run of more than one pytest
    session (a capture rescued), in a fresh process, or with files missing or unreadable
    counts nothing. Never more than the unit's wall."""
    found: dict[tuple[int, str, str], tuple[str, int, UnitRecord, float]] = {}
    for order, unit in enumerate(campaign.units):
        wall = unit.wall_s
        if unit.started_utc is None or wall is None or not math.isfinite(wall) or wall <= 0:
            continue
        for side in SIDES:
            key = (unit.round, unit.device or "", side)
            if key in found and found[key][:2] <= (unit.started_utc, order):
                continue
            seconds = _start_s(path / Unit(unit.op, unit.round).run_rel(side))
            if seconds > 0:
                found[key] = (unit.started_utc, order, unit, seconds)
    out: dict[str, float] = {}
    for _, _, unit, seconds in found.values():
        out[unit.id] = min(out.get(unit.id, 0.0) + seconds, unit.wall_s or 0.0)
    return out


def _start_s(run_dir: Path) -> float:
    try:
        ident = read_identity(run_dir)
        doc = breakdown.read(run_dir / breakdown.BREAKDOWN_FILE)
    except (UsageError, OSError, RecursionError):
        return 0.0
    launches = ident.doc.get("launch") if ident is not None else None
    if not isinstance(launches, list) or doc is None or not any(
            isinstance(launch, dict) and launch.get("new_because") for launch in launches):
        return 0.0
    seconds = doc["phases"].get("startup")
    if doc.get("sessions", 1) != 1 or isinstance(seconds, bool) \
            or not isinstance(seconds, (int, float)):
        return 0.0  # two sessions' startup holds the gap between them too, not a start alone
    return float(seconds) if math.isfinite(seconds) and seconds > 0 else 0.0


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
    paid: dict[bool, list[float]] = {True: [], False: []}  # by round 0 or not
    for unit in campaign.units:
        if unit.wall_s is None:
            continue
        start = starts.get(unit.id, 0.0)
        if start:
            paid[unit.round == 0].append(start)
        if unit.round == 0:
            first[unit.op] = unit.wall_s - start
        else:
            later.setdefault(unit.op, []).append(unit.wall_s - start)
    return RoundWalls(first, {op: sorted(w)[len(w) // 2] for op, w in later.items()},
                      _mean(paid[True]), _mean(paid[False]))


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
    and start_later) once for each round it got a unit of: round 0's and each later one's.
    None with no wall known.

    The mean, not the median: where the known operators are a random draw from the suite, the
    draw's mean times the suite's size estimates the suite's sum without bias, and walls are
    skewed (a draw of twelve on an H100 had round-0 walls of 2-70 s, median 7 s, mean 13 s),
    so the median understates it.
    """
    ops = {u.op for u in units}
    known = [walls[op] for op in ops if op in walls]
    if not known:
        return None
    mean = _mean(known)
    first = first or {}
    first_known = [first[op] for op in ops if op in first] or list(first.values())
    first_mean = _mean(first_known) if first_known else mean
    each = sorted(((first.get(u.op, first_mean) if first and u.round == 0
                    else walls.get(u.op, mean), u.round) for u in units), reverse=True)
    spread = _draw_spread(units, walls, first, starts)
    spans = []
    for count in devices:
        free = [0.0] * count
        rounds: list[set[int]] = [set() for _ in range(count)]
        for wall, round_ in each:
            device = free.index(min(free))
            free[device] += wall
            rounds[device].add(round_)
        ends = [f + _starts_for(r, starts) for f, r in zip(free, rounds, strict=True)]
        spans.append(f"{count} device{'' if count == 1 else 's'} {_duration(max(ends))}"
                     + (f" ({spread})" if count == 1 and spread else ""))
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


def _draw_spread(units: Sequence[Unit], walls: Mapping[str, float],
                 first: Mapping[str, float], starts: tuple[float, float]) -> str | None:
    """How far the one-device wall may lie from the projection where unknown operators take
    the known ones' means: DRAW_SHARE of the walls that the plan's known operators give when
    drawn again with replacement (RESAMPLES times, seeded: the same line each time), each
    drawn operator bringing its round-0 wall and its later wall where it has them, as "90%:
    3.1 h to 7.4 h, drawing the 12 operators again". A draw of a dozen skewed walls moves
    its means a lot, and a projection from it says so. None where no wall is unknown, or
    where a mean that unknown walls take rests on fewer than two operators of the plan."""
    zeros = [u.op for u in units if first and u.round == 0]  # round 0 from round 0's walls
    rest = [u.op for u in units if not (first and u.round == 0)]
    unknown_first = sum(1 for op in zeros if op not in first)
    unknown = sum(1 for op in rest if op not in walls)
    pool = sorted({op for op in (*zeros, *rest) if op in walls or op in first})
    if not (unknown_first or unknown) \
            or unknown_first and sum(1 for op in pool if op in first) < 2 \
            or unknown and sum(1 for op in pool if op in walls) < 2:
        return None
    own = math.fsum([*(first[op] for op in zeros if op in first),
                     *(walls[op] for op in rest if op in walls)])
    paid = _starts_for({u.round for u in units}, starts)
    rng = random.Random(0)
    totals: list[float] = []
    while len(totals) < RESAMPLES:
        drawn = rng.choices(pool, k=len(pool))
        later = [walls[op] for op in drawn if op in walls]
        firsts = [first[op] for op in drawn if op in first]
        if (unknown and not later) or (unknown_first and not firsts):
            continue  # a draw with no wall of a kind it needs: drawn again
        totals.append(own + unknown_first * _mean(firsts) + unknown * _mean(later) + paid)
    cuts = statistics.quantiles(totals, n=round(2 / (1 - DRAW_SHARE)), method="inclusive")
    return (f"{DRAW_SHARE:.0%}: {_duration(cuts[0])} to {_duration(cuts[-1])}, drawing the "
            f"{len(pool)} operators again")


def _starts_for(rounds: set[int], starts: tuple[float, float]) -> float:
    """What a device that runs units of `rounds` pays for worker starts: round 0's once, a
    later round's once each (RoundWalls' start_first and start_later)."""
    return (starts[0] if 0 in rounds else 0.0) + starts[1] * len(rounds - {0})


def _duration(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 60:.1f} min" if seconds >= 60 else f"{seconds:.0f} s"
