"""A campaign's operators compared: each one's sides over its finished rounds, then one A/B."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness import stats
from harness.campaign.document import Campaign
from harness.campaign.plan import SIDES
from harness.contract import identity, states
from harness.contract.boundary import DIRECT_MARKER
from harness.contract.results import RESULTS_JSONL
from harness.contract.states import OK, SKIPPED
from harness.errors import UsageError
from harness.report import comparison
from harness.report.abresult import in_geomean
from harness.report.sources import load_source
from harness.stats import looks, noisefloor

Identities = dict[str, list[Mapping[str, Any]]]  # each side's run identities


def done_rounds(directory: Path, campaign: Campaign, op: str) -> list[int]:
    """Rounds of `op` whose unit finished and left results on both sides, neither of them the
    partial rows of a session cut short (the runner's `partial`)."""
    return sorted(u.round for u in campaign.units if u.op == op
                  and u.status in states.RAN_TO_END
                  and all(_complete(directory / op / s / f"r{u.round}") for s in SIDES))

def _complete(run_dir: Path) -> bool:
    return (run_dir / RESULTS_JSONL).is_file() \
        and not getattr(identity.read_identity(run_dir), "partial", False)

def finished_units(campaign: Campaign) -> list[str]:
    """The units that ran to their end (a failing benchmark included): a partial campaign
    compares these."""
    return [u.id for u in campaign.units if u.status in states.RAN_TO_END]

def op_looks(directory: Path, campaign: Campaign) -> dict[str, list[int]]:
    """Each judged operator's looks: the round counts it was judged at, and its finished
    rounds now where they differ from its last look (a resume that added rounds)."""
    out = {}
    for op, info in campaign.ops.items():
        now = len(done_rounds(directory, campaign, op))
        out[op] = [*info.looks, now] if now and (not info.looks or info.looks[-1] != now) \
            else list(info.looks)
    return out

def noise_model(campaign: Campaign) -> noisefloor.NoiseModel | None:
    """The campaign's noise floor by A latency (from NOISE_FROM's A/A); None: one floor."""
    return (noisefloor.NoiseModel.from_json(campaign.noise_floor_bands)
            if campaign.noise_floor_bands else None)

def outside_note(rows: list[comparison.AbRow], model: noisefloor.NoiseModel | None) -> list[str]:
    """What a row whose A latency the A/A never measured gets: its nearest band's floor."""
    if model is None:
        return []
    outside = sum(1 for r in rows if model.outside(r.stats.a_ms))
    if not outside:
        return []
    lo, hi = model.bands[0].lo_ms, model.bands[-1].hi_ms
    return [f"noise floor: {outside} rows lie outside the A/A's A latencies ({lo:.3g}.."
            f"{hi:.3g} ms) and take its nearest band's floor"]

def compare_ops(directory: Path, campaign: Campaign, floor: float
                ) -> tuple[comparison.AbReport, dict[str, Identities], dict[str, str]]:
    """Each operator's sides compared over its finished rounds, merged into one report;
    with each operator's run identities per side, and why an operator has no rows. A row is
    judged against the campaign's noise floor at its A latency, or `floor` without one."""
    model = noise_model(campaign)
    rows: list[comparison.AbRow] = []
    unpaired: list[comparison.Unpaired] = []
    notes: list[str] = []
    op_geomeans: list[tuple[str, stats.GeomeanStats]] = []
    identities: dict[str, Identities] = {}
    failures: dict[str, str] = {}
    for op, info in campaign.ops.items():
        if info.excluded:  # listed apart, never compared
            continue
        rounds = done_rounds(directory, campaign, op)
        if info.reason or not rounds:
            failures[op] = info.reason or _last_reason(campaign, op)
            continue
        sources = {side: [load_source(directory / op / side / f"r{r}") for r in rounds]
                   for side in SIDES}
        try:
            result = comparison.compare(sources["A"], sources["B"], noise_floor_pct=floor,
                                        floor_at=model.at if model else None, round_ids=rounds,
                                        op=op)
        except UsageError as exc:
            failures[op] = str(exc)
            continue
        if not result.rows:  # its rounds ran to their end and paired nothing: say why
            failures[op] = _no_row_reason(campaign, op)
        rows += result.rows
        unpaired += result.unpaired
        notes += result.notes
        op_geomeans += result.op_geomeans
        identities[op] = {side: [d for s in srcs for _, d in s.identities]
                          for side, srcs in sources.items()}
    notes += outside_note(rows, model)
    seen = op_looks(directory, campaign)
    planned = campaign.auto["max"] - campaign.auto["min"] + 1 if campaign.auto else 1
    return (campaign_wide(rows, unpaired, notes, floor, op_geomeans, seen, planned),
            identities, failures)

def campaign_wide(rows: list[comparison.AbRow], unpaired: list[comparison.Unpaired],
                  notes: list[str], floor: float, op_geomeans: list[tuple[str, stats.GeomeanStats]],
                  seen: Mapping[str, list[int]] | None = None, planned: int = 1
                  ) -> comparison.AbReport:
    """The operators' rows as one A/B: the false-discovery control runs again over every row
    of the campaign (one family, not one per operator), and the geometric mean spans them all.
    Once an operator was judged at two round counts (`seen`), or the campaign planned several
    looks (`planned`, ROUNDS=auto), alpha is spent over looks."""
    method, adjusted = looks.judge([r.stats for r in rows],
                                   [(seen or {}).get(r.op) or [r.stats.rounds] for r in rows],
                                   noise_floor_pct=floor, planned=planned)
    if looks.extended(list((seen or {}).values())):
        notes = [*notes, "looks (round counts each operator was judged at; a verdict is its "
                 "last look's): " + "; ".join(f"{op} {', '.join(map(str, k))} (look {len(k)})"
                                             for op, k in (seen or {}).items() if k)]
    rows = [dataclasses.replace(r, stats=s) for r, s in zip(rows, adjusted, strict=True)]
    gm = stats.rows_geomean([r.stats for r in rows if in_geomean(r.flags)], method.confidence)
    return comparison.AbReport(
        a_label="A", b_label="B", rows=tuple(rows), unpaired=tuple(unpaired),
        geomean_speedup_pct=None if gm is None else gm.speedup_pct,
        noise_floor_pct=max(stats.MIN_NOISE_FLOOR_PCT, floor),
        direct_rows=sum(1 for r in rows if any(DIRECT_MARKER in f for f in r.flags)),
        notes=tuple(dict.fromkeys(notes)), method=method,
        geomean_ci_low_pct=None if gm is None else gm.ci_low_pct,
        geomean_ci_high_pct=None if gm is None else gm.ci_high_pct, op_geomeans=tuple(op_geomeans))

def _last_reason(campaign: Campaign, op: str) -> str:
    reasons = [u.reason or u.status for u in campaign.units if u.op == op]
    return f"no round finished on both sides ({reasons[-1] if reasons else 'no unit'})"

def _no_row_reason(campaign: Campaign, op: str) -> str:
    """Why an operator whose rounds finished has no paired row: its last unit that did not
    end ok, e.g. "0 rows: pytest exited 0 without finishing its session"."""
    reasons = [u.reason for u in campaign.units
               if u.op == op and u.reason and u.status not in (OK, SKIPPED)]
    return f"no paired row ({reasons[-1]})" if reasons else "no paired row"
