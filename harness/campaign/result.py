"""ab.json's document of a campaign: rows, operators, liveness, caliber, units and status."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.axes.liveness import compiled_sets
from harness.campaign import ab
from harness.campaign.compare import (
    Identities,
    compare_ops,
    done_rounds,
    finished_units,
    op_looks,
)
from harness.campaign.document import Campaign
from harness.campaign.evidence import decide_liveness
from harness.campaign.plan import SIDES, UNMATCHED_DIR, round_walls
from harness.contract import identity, states
from harness.contract.states import CRASHED, ERROR, FAILED, SKIPPED, TIMEOUT
from harness.report import abjson, suite_report
from harness.settings.spec import REPO_ROOT, Settings

# A unit in one of these ended and did not measure: an operator's "units failed".
ENDED_BADLY = (FAILED, ERROR, CRASHED, TIMEOUT)


def _pending(campaign: Campaign, op: str) -> bool:
    """No unit of `op` has ended, well or badly: each is still to run (a resume runs it)."""
    return not campaign.ops[op].reason and all(
        u.status in states.UNFINISHED for u in campaign.units if u.op == op)

def _skipped(campaign: Campaign, op: str) -> str | None:
    """pytest's reason where every unit of `op` was skipped; None otherwise."""
    units = [u for u in campaign.units if u.op == op]
    if campaign.ops[op].reason or not units or any(u.status != SKIPPED for u in units):
        return None
    return "; ".join(dict.fromkeys(u.reason or "skipped" for u in units))

def campaign_status(campaign: Campaign, stopped: Mapping[str, str] | None
                    ) -> abjson.CampaignStatus:
    """ab.json's status: complete or interrupted ({signal, step}), and what finished."""
    return abjson.CampaignStatus(
        states.RunStatus.COMPLETE if stopped is None else states.RunStatus.INTERRUPTED,
        None if stopped is None else abjson.Interruption(stopped.get("signal"),
                                                         stopped.get("step")),
        tuple(finished_units(campaign)))

def launch_note(identities: Mapping[str, Identities]) -> str:
    """How each side's pytest ran (run_identity.json's launch): in fresh processes, or in
    workers, with how many workers started and how many retired (each run's launch says
    why)."""
    said = []
    for side in SIDES:
        last = [(d.get("launch") or [{}])[-1] for ids in identities.values() for d in ids[side]]
        kinds = [str(launch.get("kind", "unknown")) for launch in last]
        parts = []
        for kind in sorted(set(kinds)):
            if kind != "worker":
                parts.append(f"{kinds.count(kind)} in a fresh process")
                continue
            mine = [launch for launch in last if launch.get("kind") == "worker"]
            started = sum(launch.get("session") == 1 for launch in mine)
            retired = sum(bool(launch.get("retired")) for launch in mine)
            parts.append(f"{len(mine)} in a worker ({started} started"
                         + (f", {retired} retired" if retired else "") + ")")
        said.append(f"side {side}: " + (", ".join(parts) or "no run"))
    return "how pytest ran: " + "; ".join(said)

def _stack_text(identities: Mapping[str, Identities], side: str) -> str:
    """The versions `side`'s runs recorded, one text for each distinct set."""
    found = {" ".join(f"{k}={v}" for k, v in sorted((d.get("versions") or {}).items())
                      if v is not None)
             for ids in identities.values() for d in ids[side]}
    return "; ".join(sorted(found)) or "-"

def _caliber(campaign: Campaign, settings: Settings, identities: Mapping[str, Identities],
             extra: Mapping[str, Any]) -> dict[str, Any]:
    """ab.json's caliber: the settings, the operators, the axis and its sides, the images,
    the walls and the harness checkout."""
    axis, ops = campaign.axis, list(campaign.ops)
    return {**settings.caliber(), "baseline": ab.campaign_baseline(settings, axis),
            "op": ops[0] if len(ops) == 1 else None, "ops": ops,
            "node": campaign.ops[ops[0]].node if len(ops) == 1 else None,
            "axis": axis.name, "axis_var": axis.variable, "a": axis.a,
            "b": axis.b, "rounds": max(i.rounds for i in campaign.ops.values()),
            **({"auto": campaign.auto} if campaign.auto else {}),
            "noise_floor_source": campaign.noise_from,
            **({"noise_floor_bands": campaign.noise_floor_bands}
               if campaign.noise_floor_bands else {}),
            "image_digests": {side: sorted({d.get("image_digest") or "none"
                                            for ids in identities.values() for d in ids[side]})
                              for side in SIDES},
            "stacks": {side: _stack_text(identities, side) for side in SIDES},
            "tune": axis.tune, "walls": round_walls(campaign), **extra,
            **{f"harness_{k}": v for k, v in identity.git_state(REPO_ROOT).items()}}

def _walls_note(walls: Mapping[str, Any], tune: str = "replay") -> list[str]:
    if walls["round0_s"] is None:
        return []
    who = "side A tunes" if tune == "replay" else "each side tunes"
    return [f"walls: round 0 ({who}) {walls['round0_s']} s over all operators, "
            f"{walls['round0_unit_mean_s']} s a unit; later rounds (replay) "
            f"{walls['later_unit_mean_s'] or '-'} s a unit over {walls['later_units']} units"]

def _unmatched_note(directory: Path) -> list[str]:
    kept = [p for p in (directory / UNMATCHED_DIR / "B").glob("*/*") if p.is_file()]
    if not kept:
        return []
    return [f"side B compiled artifacts side A never did: {len(kept)} of them are kept in "
            f"{UNMATCHED_DIR}/B/, each beside side A's of the same name in {UNMATCHED_DIR}/A/ "
            "where it had one, to see what differs"]


def _operators(directory: Path, campaign: Campaign, doc: abjson.AbDocument,
               identities: Mapping[str, Identities], failures: Mapping[str, str]
               ) -> dict[str, abjson.OperatorSummary]:
    """Each operator's summary; a unit never run or interrupted is left for resume, not
    counted failed."""
    info: dict[str, dict[str, Any]] = {
        op: {"rounds": len(done_rounds(directory, campaign, op)),
             "reason": i.reason or _skipped(campaign, op)
             or (failures.get(op) if not _pending(campaign, op) else None),
             "stopped": i.stopped,
             "pending": _pending(campaign, op), "skipped": _skipped(campaign, op) is not None,
             "excluded": i.excluded,
             "units_failed": sum(1 for u in campaign.units if u.op == op
                                 and u.status in ENDED_BADLY)}
        for op, i in campaign.ops.items()}
    equal, differ = campaign.axis.kind.artifact_words
    for op, ids in identities.items():
        a, b = compiled_sets(ids)
        info[op]["artifacts"] = "none" if not (a or b) else differ if not b <= a else equal
    return suite_report.operator_summaries([abjson.row_json(r) for r in doc.rows], info)

def build_document(directory: Path, campaign: Campaign, settings: Settings,
                   stopped: Mapping[str, str] | None = None) -> abjson.AbDocument:
    """ab.json of the campaign: every operator's rows, the operators' verdicts, liveness
    (not checked when a signal stopped the campaign: `stopped`) and its status."""
    result, identities, failures = compare_ops(directory, campaign, campaign.noise_floor_pct)
    live, notes, extra = ((None, ["liveness not checked: the campaign was interrupted"], {})
                          if stopped else decide_liveness(result, identities, campaign))
    caliber = _caliber(campaign, settings, identities,
                       {**extra, "looks": op_looks(directory, campaign)})
    auto = [launch_note(identities)]
    if campaign.auto:
        auto.append(f"ROUNDS=auto (MIN_ROUNDS {campaign.auto['min']}, MAX_ROUNDS "
                    f"{campaign.auto['max']}): each operator ran rounds while a row of it was "
                    "undecided; its rounds and why it stopped are in the operators' table")
    doc = abjson.document_of(result, caliber, notes=[*notes, *_unmatched_note(directory), *auto,
                                    *_walls_note(caliber["walls"], campaign.axis.tune)],
                             liveness=None if live is None else abjson.Liveness(
                                 live["status"], live.get("detail")))
    every = [d for ids in identities.values() for side in SIDES for d in ids[side]]
    return dataclasses.replace(
        doc, operators=_operators(directory, campaign, doc, identities, failures),
        commands=tuple(tuple([f"{k}={v}" for k, v in (d.get("extra_env") or {}).items()]
                             + list(d.get("command") or [])) for d in every),
        sides={side: tuple(str(directory / op / side / f"r{r}") for op in identities
                           for r in done_rounds(directory, campaign, op)) for side in SIDES},
        units=tuple(abjson.AbUnit(u.id, u.status, u.rc, u.wall_s, u.device, u.attempts,
                                      u.reason) for u in campaign.units),
        status=campaign_status(campaign, stopped))
