"""ROUNDS=auto: after each round, another round only for the operators it can still decide.

Every operator runs MIN_ROUNDS first. Then, at each look, the campaign's rows are judged as its
report judges them (looks.judge: alpha spent over the looks an operator had, so that looking
after every round and stopping when a row is decided keeps each verdict's error rate), and an
operator gets one more round while a row of it is inconclusive that MAX_ROUNDS may still decide
(looks.futile_width). It stops, and says why, when every row is faster, slower or same; at
its first look when both sides ran the same code (unchanged_ops: an operator of two FlagGems
commits whose compiled code and Python source are the same on both sides; every operator of an
A/A, or of a switch of code generation that changed no kernel); at MAX_ROUNDS; when no
undecided row of it can be decided by MAX_ROUNDS (those rows stay inconclusive); or when it has
no paired row to judge. Stopping never changes a verdict's meaning: each is valid whatever rule
chose the rounds.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness import backends, stats
from harness.axes.liveness import compiled_sets
from harness.campaign import compare, plan, refs
from harness.campaign.document import Campaign, UnitRecord
from harness.campaign.unit import cache_kernels
from harness.contract.states import FINISHED, OK, SKIPPED
from harness.errors import UsageError
from harness.executors.base import Task
from harness.providers.opsource import PackageSource, op_source_hash
from harness.report.abresult import AbRow
from harness.stats import looks

# What it says is what is compared: kernels side B's units compiled, and the Python source its
# name's modules import (harness.providers.opsource); code reached otherwise is in neither.
UNCHANGED_STOP = ("code and source unchanged after {done} rounds: side B compiled no kernel "
                  "side A did not, and the Python source its modules import is the same")
DECIDED_STOP = "decided after {done} rounds"
BROKEN_STOP = "a unit did not end ok after {done} rounds"
FUTILE_STOP = "stopped after {done} rounds: MAX_ROUNDS ({most}) cannot decide {rows}"
FUTILE_NAMED = 3  # rows a futility stop names; the rest are counted


@dataclass(frozen=True)
class Look:
    """What one look at an operator found: its rows, the undecided ones, and those of them
    that MAX_ROUNDS cannot decide (each as its stop reason names it)."""

    rows: int
    undecided: int
    done: int  # its rounds that finished on both sides
    ended_well: bool  # every unit of it ended ok or skipped
    unchanged: bool = False  # its compiled code and Python source are equal on both sides
    futile: tuple[str, ...] = ()
    flagged: int = 0  # rows flagged (timed under another regime on a side): never judged
    badly: tuple[str, ...] = ()  # its units that did not end ok, as "tanh/r2 crashed"


def stop_reason(look: Look, most: int) -> str | None:
    """Why an operator runs no more rounds, or None while it goes on."""
    done = look.done
    if not look.ended_well:
        named = f" ({', '.join(look.badly)})" if look.badly else ""
        return BROKEN_STOP.format(done=done) + named
    if look.rows == 0:
        return f"no paired row after {done} rounds"
    if look.undecided == 0:
        flagged = look.flagged
        return DECIDED_STOP.format(done=done) + (
            f", {flagged} flagged row{'' if flagged == 1 else 's'} not judged" if flagged else "")
    if look.unchanged:
        return UNCHANGED_STOP.format(done=done)
    if done > most:  # a resume's ROUNDS took it past the bound
        return f"{done} rounds, past MAX_ROUNDS ({most}) by a resume, with rows undecided"
    if done == most:
        return stats.MAX_ROUNDS_STOP.format(most=most)
    if look.futile and len(look.futile) == look.undecided:
        named = "; ".join(look.futile[:FUTILE_NAMED])
        more = len(look.futile) - FUTILE_NAMED
        return FUTILE_STOP.format(done=done, most=most, rows=named + (
            f"; and {more} more rows" if more > 0 else ""))
    return None


def futile_rows(rows: Sequence[AbRow], seen: Sequence[int], most: int, planned: int,
                confidence: float, noise_known: bool) -> tuple[str, ...]:
    """The operator's undecided rows that MAX_ROUNDS cannot decide, each as "float16 [64, 64]
    (+-2.1% at best, against its 1% floor)": the half-width its interval would reach at
    MAX_ROUNDS at the least, against the floor it must lie inside. With `noise_known`
    (NOISE_FROM) a row's noise is at most its A/A's (looks.sd_of_floor of its floor)."""
    out = []
    for row in rows:
        s = row.stats
        if s.verdict is not stats.Verdict.INCONCLUSIVE:
            continue
        floor = max(stats.MIN_NOISE_FLOOR_PCT, s.noise_floor_pct or 0.0)
        width = looks.futile_width(s, seen, most, planned=planned, confidence=confidence,
                                   noise_sd=looks.sd_of_floor(floor) if noise_known else None)
        if width is not None:
            name = f"{row.dtype} {row.shape}" + (f" #{row.occurrence}" if row.occurrence > 1
                                                  else "")
            out.append(f"{name} (+-{width:.2g}% at best, against its {floor:.3g}% floor)")
    return tuple(out)


def unchanged_ops(directory: Path, campaign: Campaign,
                  identities: Mapping[str, compare.Identities], ops: Sequence[str]) -> set[str]:
    """Of `ops`, those whose two sides ran the same code, which by then is all they can show:
    none unless side B replays side A's winners (TUNE=replay), and then

    - two FlagGems commits: an operator whose side B compiled nothing its side A did not (as
      the report's `unchanged` reads), from the same Python source in each side's tree;
    - sides that differ in nothing but compiled code (AxisKind.code_only: an A/A, a switch of
      the compiler's code generation): every operator, where each kernel in side B's cache is
      one in side A's (its artifacts and launch settings: artifacts.kernel_fingerprints) and
      each side compiled something, over the whole campaign, its caches never dropped. The
      whole campaign's code and not an operator's own: a side's units share one Triton cache
      and a worker's kernels in memory, so a kernel that operators share is fingerprinted
      with the first one that compiled it, and an operator's own fingerprints need not show
      all it ran (a commit's source, which covers what an operator imports, does). By kernel
      and not by artifact: side A's cache also holds its tuning candidates, and a kernel of
      side B's whose code equals one candidate's is still another kernel where its launch
      settings are another's. A switch that changed any kernel stops none of them this way.
    """
    axis = campaign.axis
    if not ops or axis.tune != "replay":  # each side's own winners: the same code may run
        return set()  # other configs
    if axis.kind.side_commits:
        return _same_source(directory, [op for op in ops if op in identities
                                        and _same_code(identities[op])])
    backend = campaign.caliber.get("backend")
    try:
        code_only = isinstance(backend, str) and axis.kind.code_only(axis, backends.get(backend))
    except UsageError:  # a backend this harness does not know: what its switch reaches neither
        return set()
    if not code_only or any(campaign.side_artifacts.values()):  # caches dropped since (a
        return set()  # resume): what they held is known by artifact, not by kernel
    try:
        a, b = (cache_kernels(directory, side) for side in plan.SIDES)
    except OSError:  # a file of a cache that cannot be read shows nothing
        return set()
    return set(ops) if a and b and b <= a else set()


def _same_source(directory: Path, ops: Sequence[str]) -> set[str]:
    """Of `ops`, those whose Python source is the same in each side's FlagGems tree."""
    if not ops:
        return set()
    parsed: dict[bytes, ast.Module | None] = {}  # the sides share most modules' text
    sources = [PackageSource(refs.side_tree(directory, side) / refs.PACKAGE_DIR, parsed)
               for side in plan.SIDES]
    found = set()
    for op in ops:
        a, b = (op_source_hash(source, op) for source in sources)
        if a is not None and a == b:
            found.add(op)
    return found


def _same_code(ids: compare.Identities) -> bool:
    a, b = compiled_sets(ids)
    return bool(a or b) and b <= a


def add_round(directory: Path, campaign: Campaign, out: Callable[[str], None] = print) -> bool:
    """Look at the campaign (a look for each operator not waiting for a unit that runs again),
    record why the operators that stop do, and add one round for the others; whether any
    round was added or any operator waits (the driver then runs what is owed and looks again)."""
    assert campaign.auto is not None
    units_of = {op: [u for u in campaign.units if u.op == op] for op in campaign.ops}
    live = [op for op, i in campaign.ops.items() if not (i.reason or i.excluded or i.skipped)]
    waiting = [op for op in live if not campaign.ops[op].stopped and runs_again(units_of[op])]
    for op, seen in compare.op_looks(directory, campaign).items():
        if op not in waiting:  # a look is a judgement: one that waits had none
            campaign.ops[op].looks = seen
    result, identities, _ = compare.compare_ops(directory, campaign, campaign.noise_floor_pct)
    least, most = campaign.auto["min"], campaign.auto["max"]
    undecided = {r.op for r in result.rows if r.stats.verdict is stats.Verdict.INCONCLUSIVE}
    open_ops = [op for op in live if op not in waiting and (
        not campaign.ops[op].stopped
        or _reopened(campaign.ops[op].stopped or "", op in undecided, units_of[op]))]
    first_look = [op for op in open_ops if len(campaign.ops[op].looks) <= 1]
    unchanged = unchanged_ops(directory, campaign, identities, first_look)
    grow: dict[str, int] = {}
    for op in open_ops:
        info, units = campaign.ops[op], units_of[op]
        rows = [r for r in result.rows if r.op == op]
        look = Look(
            rows=len(rows), done=len(compare.done_rounds(directory, campaign, op)),
            undecided=sum(r.stats.verdict is stats.Verdict.INCONCLUSIVE for r in rows),
            ended_well=_ended_well(units),
            unchanged=op in unchanged,
            futile=futile_rows(rows, info.looks, most, most - least + 1,
                               result.method.confidence, bool(campaign.noise_floor_bands)),
            flagged=sum(r.stats.verdict is stats.Verdict.FLAGGED for r in rows),
            badly=tuple(f"{u.id} {u.status}" for u in units if u.status not in (OK, SKIPPED)))
        info.stopped = stop_reason(look, most)
        if info.stopped is None and info.rounds >= most:  # rounds that gave no row count too
            info.stopped = stats.MAX_ROUNDS_STOP.format(most=most)
        if info.stopped is None:
            grow[op] = info.rounds + 1  # a round of its own, past one that gave no row
    if grow:
        plan.add_units(campaign, grow)
        out(f"ROUNDS=auto: {len(grow)} operators with rows undecided get round "
            f"{max(grow.values())}: {', '.join(sorted(grow))}")
    if waiting:
        out(f"ROUNDS=auto: {len(waiting)} operators wait for units that run again before they "
            f"are looked at: {', '.join(sorted(waiting))}")
    return bool(grow or waiting)


def _reopened(stopped: str, undecided: bool, units: Sequence[UnitRecord]) -> bool:
    """Whether an operator that stopped is looked at again: it stopped as decided and a row of
    it reads inconclusive now (verdicts are judged over every row of the campaign, so rows of
    another operator, or fewer of them after EXCLUDE on resume, can undo a decision), or it
    stopped for a unit that did not end ok and every unit of it has since (a later batch ran
    the unit again), so that its reason no longer names a unit that ended ok."""
    if stopped.startswith(DECIDED_STOP.split("{")[0]):
        return undecided
    return stopped.startswith(BROKEN_STOP.split("{")[0]) and _ended_well(units)


def _ended_well(units: Sequence[UnitRecord]) -> bool:
    """Every unit of an operator ended ok or skipped."""
    return all(u.status in (OK, SKIPPED) for u in units)


def owed(campaign: Campaign, tasks: Sequence[Task]) -> list[Task]:
    """The tasks a look's next batch runs: none of an operator it stopped (a unit of it that
    did not end ok after its second run among them, which would otherwise run again in every
    batch while other operators grow); a resume runs what is left."""
    return [t for t in tasks if not campaign.ops[plan.parse_unit_id(t.id).op].stopped]


# A unit that crashed, timed out or was cut off runs again (it is not FINISHED); its operator
# is looked at once it has, or once it has run this many times without finishing.
RUNS_BEFORE_LOOKED_AT = 2


def runs_again(units: Sequence[UnitRecord]) -> bool:
    """Whether an operator's next look waits for units of it that run again: some unit is not
    finished, and none has run RUNS_BEFORE_LOOKED_AT times unfinished (its operator then stops,
    saying which did not end ok). A look would otherwise stop the operator as if the unit had
    ended badly for good, and judge it without the unit's rows."""
    again = [u for u in units if u.status not in FINISHED]
    return bool(again) and all(u.attempts < RUNS_BEFORE_LOOKED_AT for u in again)
