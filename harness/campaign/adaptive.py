"""ROUNDS=auto: after each round, another round only for the operators it can still decide.

Every operator runs MIN_ROUNDS first. Then, at each look, the campaign's rows are judged as its
report judges them (looks.judge: alpha spent over the looks an operator had, so that looking
after every round and stopping when a row is decided keeps each verdict's error rate), and an
operator gets one more round while a row of it is inconclusive and it has run fewer than
MAX_ROUNDS. It stops, and says why, when every row is faster, slower or same; at MAX_ROUNDS (its
undecided rows stay inconclusive); or when it has no paired row to judge.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from harness import stats
from harness.campaign import compare, plan
from harness.campaign.document import Campaign
from harness.contract.states import OK, SKIPPED


def stop_reason(decided: bool, rows: int, done: int, most: int, ended_well: bool) -> str | None:
    """Why an operator runs no more rounds, or None while it goes on."""
    if not ended_well:
        return f"a unit did not end ok after {done} rounds"
    if rows == 0:
        return f"no paired row after {done} rounds"
    if decided:
        return f"decided after {done} rounds"
    if done > most:  # a resume's ROUNDS took it past the bound
        return f"{done} rounds, past MAX_ROUNDS ({most}) by a resume, with rows undecided"
    if done == most:
        return stats.MAX_ROUNDS_STOP.format(most=most)
    return None


def add_round(directory: Path, campaign: Campaign, out: Callable[[str], None] = print) -> bool:
    """Look at the campaign (a look for each operator), record why the operators that stop do,
    and add one round for the others; whether any round was added."""
    assert campaign.auto is not None
    for op, seen in compare.op_looks(directory, campaign).items():
        campaign.ops[op].looks = seen
    result, _, _ = compare.compare_ops(directory, campaign, campaign.noise_floor_pct)
    grow: dict[str, int] = {}
    for op, info in campaign.ops.items():
        if info.reason or info.excluded or info.stopped or info.skipped:
            continue
        rows = [r for r in result.rows if r.op == op]
        done = len(compare.done_rounds(directory, campaign, op))
        ended_well = all(u.status in (OK, SKIPPED) for u in campaign.units if u.op == op)
        decided = all(r.stats.verdict is not stats.Verdict.INCONCLUSIVE for r in rows)
        info.stopped = stop_reason(decided, len(rows), done, campaign.auto["max"], ended_well)
        if info.stopped is None:
            grow[op] = done + 1
    if grow:
        plan.add_units(campaign, grow)
        out(f"ROUNDS=auto: {len(grow)} operators with rows undecided get round "
            f"{max(grow.values())}: {', '.join(sorted(grow))}")
    return bool(grow)
