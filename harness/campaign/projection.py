"""What a plan would cost: its units' wall projected from an earlier campaign's (WALLS_FROM)."""

from __future__ import annotations

import dataclasses
import math
import random
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from harness.campaign import plan
from harness.campaign.document import CAMPAIGN_JSON, Campaign, UnitRecord
from harness.campaign.plan import SIDES, Unit
from harness.contract import breakdown
from harness.contract.identity import read_identity
from harness.contract.states import FAILED, OK, SKIPPED, TIMEOUT
from harness.errors import UsageError

PROJECTED_DEVICES = (1, 8, 64)
# The units whose wall a plan would pay again: those that ran to their end, were skipped by
# the benchmark, or ran to their limit. An interrupted or crashed one's is a part of one.
COUNTED = (OK, FAILED, SKIPPED, TIMEOUT)
RESAMPLES = 2000  # draws of the known operators again, for the projection's spread
DRAW_SHARE = 0.9  # of those draws' walls, the middle share a projection states


@dataclass(frozen=True)
class RoundWalls:
    """What a campaign's units took, by round, its rounds' worker starts set apart.

    `first` and `later`: seconds per operator of its round-0 unit and of its later ones (their
    mean), each less the worker starts it paid for its round (worker_starts). `starts`: what
    one worker start took, by (round 0 or not, side), the mean over the (round, device) pairs
    where that side started one; a suite pays it once a round, device and side whatever its
    operators, and a run in a fresh process pays it every time. `notes`: how the walls were
    read, where the projection's line must say so."""

    first: dict[str, float] = field(default_factory=dict)
    later: dict[str, float] = field(default_factory=dict)
    starts: dict[tuple[bool, str], float] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    resident: tuple[str, ...] | None = None  # the sides it ran in workers; None: not known

    def start(self, round_: int, sides: Iterable[str]) -> float:
        """One worker start of each of `sides` in `round_`."""
        return math.fsum(self.starts.get((round_ == 0, side), 0.0) for side in sides)

    def filled(self) -> RoundWalls:
        """These walls for a plan with later rounds: where none ran, later rounds take round
        0's walls and starts, an overstatement the notes name."""
        if self.later or not self.first:
            return self
        starts = {**{(False, side): seconds for (zero, side), seconds in self.starts.items()
                     if zero}, **self.starts}  # a later start measured (its unit cut) stays
        return dataclasses.replace(self, later=dict(self.first), starts=starts, notes=(
            *self.notes, "later rounds as round 0 (no later round ran): an overstatement"))


def counted(unit: UnitRecord) -> bool:
    """Whether a plan would pay `unit`'s wall again (COUNTED, a finite wall not below 0)."""
    wall = unit.wall_s
    return unit.status in COUNTED and wall is not None and math.isfinite(wall) and wall >= 0


def worker_starts(path: Path, campaign: Campaign) -> dict[tuple[int, str, str], tuple[str, float]]:
    """The worker starts a campaign paid for its rounds rather than for its operators, by
    (round, device, side): the unit that paid each and its seconds. Each side's worker of a
    round and device is started by the first of that round's units on that device (by
    started_utc, ties in the plan's order; one interrupted later still started it) whose run
    on that side started a worker
    (`new_because` in run_identity.json's `launch`): that run's `startup`
    (time_breakdown.json) is the start. A later start in the round (a worker retired by the
    operator before, a resume's new driver) stays in its unit's wall, where the projection
    overstates rather than understates. A run of more than one pytest session (a capture
    rescued, or two launches where the first wrote no session), in a fresh process, or with
    files missing or unreadable counts nothing."""
    found: dict[tuple[int, str, str], tuple[str, int, UnitRecord, float]] = {}
    for order, unit in enumerate(campaign.units):
        if unit.started_utc is None:
            continue
        for side in SIDES:
            key = (unit.round, unit.device or "", side)
            if key in found and found[key][:2] <= (unit.started_utc, order):
                continue
            seconds = _start_s(path / Unit(unit.op, unit.round).run_rel(side))
            if seconds > 0:
                found[key] = (unit.started_utc, order, unit, seconds)
    return {key: (unit.id, seconds) for key, (_, _, unit, seconds) in found.items()}


def unit_starts(starts: Mapping[tuple[int, str, str], tuple[str, float]],
                campaign: Campaign) -> dict[str, float]:
    """The seconds of `starts` each unit paid, never more than its wall."""
    walls = {unit.id: unit.wall_s or 0.0 for unit in campaign.units}
    out: dict[str, float] = {}
    for unit_id, seconds in starts.values():
        out[unit_id] = min(out.get(unit_id, 0.0) + seconds, walls.get(unit_id, 0.0))
    return out


def _start_s(run_dir: Path) -> float:
    try:
        ident = read_identity(run_dir)
        doc = breakdown.read(run_dir / breakdown.BREAKDOWN_FILE)
    except (UsageError, OSError, RecursionError):
        return 0.0
    launches = ident.doc.get("launch") if ident is not None else None
    if not isinstance(launches, list) or len(launches) != 1 or doc is None or not any(
            isinstance(launch, dict) and launch.get("new_because") for launch in launches):
        return 0.0  # two launches' startup holds the first one's session too, not a start
    seconds = doc["phases"].get("startup")
    if doc.get("sessions", 1) != 1 or not breakdown.is_seconds(seconds):
        return 0.0  # two sessions' startup holds the gap between them too, not a start alone
    return max(0.0, float(seconds))


def walls_by_round(path: Path, campaign: Campaign | None = None) -> RoundWalls:
    """The walls of the campaign at `path` (read there unless given) by round, from its
    counted units (RoundWalls)."""
    campaign = campaign if campaign is not None else plan.checked_walls(Path(path))
    found = worker_starts(Path(path), campaign)
    paid = unit_starts(found, campaign)
    first: dict[str, float] = {}
    later: dict[str, list[float]] = {}
    for unit in campaign.units:
        if counted(unit):
            wall = (unit.wall_s or 0.0) - paid.get(unit.id, 0.0)
            if unit.round == 0:
                first[unit.op] = wall
            else:
                later.setdefault(unit.op, []).append(wall)
    by_kind: dict[tuple[bool, str], list[float]] = {}
    for (round_, _, side), (_, seconds) in found.items():
        by_kind.setdefault((round_ == 0, side), []).append(seconds)
    resident = _resident(Path(path), campaign)
    unread = [f"side {side} in {'round 0' if zero else 'later rounds'}"
              for zero, ran in ((True, first), (False, later)) if ran
              for side in resident or () if (zero, side) not in by_kind]
    return RoundWalls(first, {op: _mean(w) for op, w in later.items()},
                      {kind: _mean(seconds) for kind, seconds in by_kind.items()},
                      (f"no worker start read of {', '.join(unread)}: 0 s taken",)
                      if unread else (), resident)


def _resident(path: Path, campaign: Campaign) -> tuple[str, ...] | None:
    """The sides whose runs the campaign at `path` got from workers, read from the first run
    of each side that says how it ran (`launch`); None where no run of a side says."""
    kinds: dict[str, str] = {}
    for unit in campaign.units:
        for side in (s for s in SIDES if s not in kinds and counted(unit)):
            try:
                ident = read_identity(path / Unit(unit.op, unit.round).run_rel(side))
            except (UsageError, OSError, RecursionError):
                continue
            launches = ident.doc.get("launch") if ident is not None else None
            if isinstance(launches, list) and launches and isinstance(launches[0], dict):
                kinds[side] = str(launches[0].get("kind"))
        if len(kinds) == len(SIDES):
            return tuple(side for side in SIDES if kinds[side] == "worker")
    return None


def batch_walls(walls: Mapping[str, float]) -> RoundWalls:
    """A batch's walls (one run of an operator each) as a campaign's: a unit runs two sides,
    each about one such run."""
    return RoundWalls(later={op: 2 * wall for op, wall in walls.items()}, notes=(
        "a batch's walls, one run each: a unit takes two",))


def for_plan(campaign: Campaign, directory: Path) -> RoundWalls:
    """What the units still to run of `campaign` (at `directory`) are projected from: its
    own counted units (a resumed campaign, on its own host), then WALLS_FROM's for the
    operators those lack. A WALLS_FROM that cannot be read now is named in the notes."""
    own = walls_by_round(directory, campaign) if any(map(counted, campaign.units)) \
        else RoundWalls()
    if not campaign.walls_from:
        return own
    source = Path(campaign.walls_from)
    try:
        if (source / CAMPAIGN_JSON).is_file():
            found = plan.checked_walls(source)
            earlier = walls_by_round(source, found)
            theirs, ours = found.caliber.get("backend"), campaign.caliber.get("backend")
            if theirs != ours:
                earlier = dataclasses.replace(earlier, notes=(
                    *earlier.notes, f"WALLS_FROM ran on backend {theirs}, this plan on {ours}"))
        else:
            earlier = batch_walls(plan.walls_from(source))
    except (UsageError, OSError) as exc:
        earlier = RoundWalls(notes=(f"WALLS_FROM unreadable now ({exc}): its walls are not "
                                    "used",))
    if not (own.first or own.later):
        return earlier
    apart = () if None in (own.resident, earlier.resident) \
        or set(own.resident or ()) == set(earlier.resident or ()) else (
        f"WALLS_FROM ran {_sides_text(earlier.resident or ())} in workers, the campaign's own "
        f"units {_sides_text(own.resident or ())}",)
    return RoundWalls({**earlier.first, **own.first}, {**earlier.later, **own.later},
                      {**earlier.starts, **own.starts},
                      (*own.notes, *earlier.notes, *apart, "the campaign's own units first"),
                      own.resident if own.resident is not None else earlier.resident)


def _mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values) if values else 0.0


def worker_sides(workers: str) -> tuple[str, ...]:
    """The sides whose runs get their pytest from workers under WORKERS=`workers`."""
    return SIDES if workers == "1" else (workers,) if workers in SIDES else ()


@dataclass(frozen=True)
class _Taken:
    """The walls a plan's units take: round 0's and later rounds' by operator (round 0 takes
    later rounds' where no round-0 wall is known: a batch), and the means unknown operators
    take: the plan's known ones', else every known one's."""

    zero: dict[str, float]
    later: dict[str, float]
    zero_mean: float
    later_mean: float
    # the operators each mean is taken over, which a draw again draws from
    zero_pool: tuple[str, ...] = ()
    later_pool: tuple[str, ...] = ()
    # each kind of wall as the line names it: its words, the plan's operators that take it,
    # its walls and its mean
    kinds: tuple[tuple[str, frozenset[str], dict[str, float], float], ...] = ()

    @staticmethod
    def of(units: Sequence[Unit], walls: RoundWalls) -> _Taken | None:
        if not (walls.first and walls.later):  # one kind of wall for every round
            kinds = [("walls of", walls.first or walls.later, {u.op for u in units})]
        else:
            kinds = [("round 0 from the walls of", walls.first,
                      {u.op for u in units if u.round == 0}),
                     ("later rounds from the walls of", walls.later,
                      {u.op for u in units if u.round})]
        means, pools = [], []
        for _, source, ops in kinds:
            pool = tuple(sorted(op for op in ops if op in source)) or tuple(sorted(source))
            if ops and not pool:
                return None
            means.append(_mean([source[op] for op in pool]))
            pools.append(pool)
        return _Taken(kinds[0][1], kinds[-1][1], means[0], means[-1], pools[0], pools[-1],
                      tuple((label, frozenset(ops), source, mean)
                            for (label, source, ops), mean in zip(kinds, means, strict=True)))

    def wall(self, unit: Unit) -> float:
        return self.zero.get(unit.op, self.zero_mean) if unit.round == 0 \
            else self.later.get(unit.op, self.later_mean)


def projection(units: Sequence[Unit], walls: RoundWalls,
               devices: Sequence[int] = PROJECTED_DEVICES, workers: str = "1") -> str | None:
    """One line: the wall of `units` (in their running order) on each count of `devices`.
    A unit takes its operator's wall of its round in `walls` or, unknown, the mean of the
    plan's known ones of that round (of every known one, where the plan knows none: _Taken).
    On each device the first unit free to start (a later round waits for its operator's round
    0, as the executor's scheduler does) goes to the device that frees first; a device pays
    one worker start of each side in workers (`workers`: WORKERS) before its first unit of
    each round, and each run of a side in fresh processes pays one itself. None with no wall
    known.

    The mean, not the median: where the known operators are a random draw from the suite, the
    draw's mean times the suite's size estimates the suite's sum without bias, and walls are
    skewed (a draw of twelve on an H100 had round-0 walls of 2-70 s, median 7 s, mean 13 s),
    so the median understates it.
    """
    if any(u.round for u in units):
        walls = walls.filled()
    taken = _Taken.of(units, walls)
    if taken is None or not units:
        return None
    resident = worker_sides(workers)
    fresh = [s for s in SIDES if s not in resident]
    each = [taken.wall(u) + walls.start(u.round, fresh) for u in units]
    spread = _draw_spread(units, taken, walls.start, resident, fresh)
    spans = []
    for count in devices:
        ends = _schedule(units, each, count, lambda round_: walls.start(round_, resident))
        spans.append(f"{count} device{'' if count == 1 else 's'} {_duration(max(ends))}"
                     + (f" ({spread})" if count == 1 and spread else ""))
    return f"projected wall of {len(units)} units ({_basis(walls, taken, workers)}): " \
           + ", ".join(spans)


def _schedule(units: Sequence[Unit], walls: Sequence[float], count: int,
              start: Callable[[int], float]) -> list[float]:
    """Each of `count` devices' end: the units taken in their order by the device that frees
    first, a later round once its operator's round 0 has ended (procs.Scheduler's order: a
    free slot takes the first queued unit that is ready), a device paying `start(round)` (its
    workers' starts) before its first unit of each round. Devices that got none are left out."""
    zero = {u.op: i for i, u in enumerate(units) if u.round == 0}
    free = [0.0] * count
    rounds: list[set[int]] = [set() for _ in range(count)]
    ended: dict[int, float] = {}
    queue = list(range(len(units)))

    def ready(i: int, at: float) -> bool:
        first = zero.get(units[i].op) if units[i].round else None
        return first is None or ended.get(first, math.inf) <= at

    while queue:
        at = min(free)
        device = free.index(at)
        pick = next((n for n, i in enumerate(queue) if ready(i, at)), None)
        if pick is None:  # every queued unit waits for a round 0 still running
            upcoming = [end for end in ended.values() if end > at]
            if not upcoming:
                break
            free[device] = min(upcoming)
            continue
        i = queue.pop(pick)
        if units[i].round not in rounds[device]:
            rounds[device].add(units[i].round)
            at += start(units[i].round)
        ended[i] = free[device] = at + walls[i]
    return [end for end, ran in zip(free, rounds, strict=True) if ran]


def _basis(walls: RoundWalls, taken: _Taken, workers: str) -> str:
    """What the projection's walls are: by round, the operators whose walls are known and the
    mean the others take; the worker starts; anything `walls.notes` says."""
    parts = []
    for label, ops, known, mean in taken.kinds:
        if ops:
            unknown = len(ops - known.keys())
            parts.append(f"{label} {_count(len(ops) - unknown, 'operator')}" + (
                f", the mean {mean:.0f} s for the {_count(unknown, 'other')}" if unknown
                else ""))
    resident = worker_sides(workers)
    fresh = [s for s in SIDES if s not in resident]
    whose = "every run" if len(fresh) == len(SIDES) else f"side {''.join(fresh)}'s runs"
    for label, sides in (("worker starts once a round and device", resident),
                         (f"{whose} in fresh processes (WORKERS={workers}), their starts in "
                          "every unit", fresh)):
        zero, after = walls.start(0, sides), walls.start(1, sides)
        if sides and (zero or after):
            parts.append(f"{label}, {zero:.0f} s in round 0 and {after:.0f} s later")
    if walls.resident is not None and set(walls.resident) != set(resident):
        parts.append(f"its walls ran {_sides_text(walls.resident)} in workers, this plan "
                     f"{_sides_text(resident)}: a run moved to a fresh process costs more than "
                     "the start counted here, one moved to a worker less")
    return "; ".join([*parts, *walls.notes])


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _sides_text(sides: Sequence[str]) -> str:
    return {0: "neither side", len(SIDES): "both sides"}.get(len(sides), f"side {''.join(sides)}")


def _draw_spread(units: Sequence[Unit], taken: _Taken, start: Callable[[int, list[str]], float],
                 resident: Sequence[str], fresh: list[str]) -> str | None:
    """How far the one-device wall may lie from the projection where unknown operators take
    the known ones' means: DRAW_SHARE of the walls that the operators each mean is taken over
    give when drawn again with replacement (RESAMPLES times, seeded: the same line each time),
    as "90%: 3.1 h to 7.4 h, drawing the 12 operators again"; one draw for both rounds where
    their means are taken over the same operators, each bringing its round-0 and later wall.
    A draw of a dozen skewed walls moves its means a lot, and a projection from it says so.
    None where no wall is unknown, or where a mean that unknown walls take rests on fewer
    than two operators."""
    unknown_first = sum(1 for u in units if u.round == 0 and u.op not in taken.zero)
    unknown = sum(1 for u in units if u.round and u.op not in taken.later)
    if not (unknown_first or unknown) or unknown_first and len(taken.zero_pool) < 2 \
            or unknown and len(taken.later_pool) < 2:
        return None
    paid = math.fsum([*(start(r, list(resident)) for r in {u.round for u in units}),
                      *(start(u.round, fresh) for u in units)])
    known = math.fsum(taken.wall(u) for u in units if u.op in (
        taken.zero if u.round == 0 else taken.later)) + paid
    joint = taken.zero_pool == taken.later_pool
    rng = random.Random(0)
    totals: list[float] = []
    for _ in range(RESAMPLES):
        zeros = rng.choices(taken.zero_pool, k=len(taken.zero_pool))
        laters = zeros if joint else rng.choices(taken.later_pool, k=len(taken.later_pool))
        totals.append(known + unknown_first * _mean([taken.zero[op] for op in zeros])
                      + unknown * _mean([taken.later[op] for op in laters]))
    cuts = statistics.quantiles(totals, n=round(2 / (1 - DRAW_SHARE)), method="inclusive")
    drawn = len({*(taken.zero_pool if unknown_first else ()),
                 *(taken.later_pool if unknown else ())})
    return (f"{DRAW_SHARE:.0%}: {_duration(cuts[0])} to {_duration(cuts[-1])}, drawing the "
            f"{_count(drawn, 'operator')} again")


def _duration(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 60:.1f} min" if seconds >= 60 else f"{seconds:.0f} s"
