"""A campaign's result from its finished units: ab.json, liveness, ab.md, the receipt, the exit."""

from __future__ import annotations

import dataclasses
import signal
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from harness import stats
from harness.campaign import ab, plan
from harness.campaign.document import Campaign
from harness.campaign.plan import SIDES, round_walls
from harness.contract import identity, states
from harness.contract.boundary import DIRECT_MARKER
from harness.contract.results import RESULTS_JSONL
from harness.contract.states import CRASHED, ERROR, FAILED, OK, SKIPPED, TIMEOUT
from harness.errors import (
    EXIT_AXIS_NOT_LIVE,
    EXIT_BENCHMARK_FAILED,
    EXIT_OK,
    Interrupted,
    UsageError,
)
from harness.report import abjson, comparison, receipt, suite_report
from harness.report import write as report
from harness.report.sources import load_source
from harness.settings.spec import REPO_ROOT, Settings
from harness.stats import looks, noisefloor

Identities = dict[str, list[Mapping[str, Any]]]
# A unit in one of these has not ended: a resume runs it.
# A unit in one of these ended and did not measure: an operator's "units failed".
ENDED_BADLY = (FAILED, ERROR, CRASHED, TIMEOUT)


def done_rounds(directory: Path, campaign: Campaign, op: str) -> list[int]:
    """Rounds of `op` whose unit finished and left results on both sides, neither of them the
    partial rows of a session cut short (the runner's `partial`)."""
    return sorted(u.round for u in campaign.units if u.op == op
                  and u.status in states.RAN_TO_END
                  and all(_complete(directory / op / s / f"r{u.round}") for s in SIDES))


def _complete(run_dir: Path) -> bool:
    return (run_dir / RESULTS_JSONL).is_file() \
        and not getattr(identity.read_identity(run_dir), "partial", False)


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
                                        floor_at=model.at if model else None)
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
    gm = stats.rows_geomean([r.stats for r in rows], method.confidence)
    return comparison.AbReport(
        a_label="A", b_label="B", rows=tuple(rows), unpaired=tuple(unpaired),
        geomean_speedup_pct=None if gm is None else gm.speedup_pct,
        noise_floor_pct=max(stats.MIN_NOISE_FLOOR_PCT, floor),
        direct_rows=sum(1 for r in rows if any(DIRECT_MARKER in f for f in r.flags)),
        notes=tuple(dict.fromkeys(notes)), method=method,
        geomean_ci_low_pct=None if gm is None else gm.ci_low_pct,
        geomean_ci_high_pct=None if gm is None else gm.ci_high_pct, op_geomeans=tuple(op_geomeans))


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


def _last_reason(campaign: Campaign, op: str) -> str:
    reasons = [u.reason or u.status for u in campaign.units if u.op == op]
    return f"no round finished on both sides ({reasons[-1] if reasons else 'no unit'})"


def _no_row_reason(campaign: Campaign, op: str) -> str:
    """Why an operator whose rounds finished has no paired row: its last unit that did not
    end ok, e.g. "0 rows: pytest exited 0 without finishing its session"."""
    reasons = [u.reason for u in campaign.units
               if u.op == op and u.reason and u.status not in (OK, SKIPPED)]
    return f"no paired row ({reasons[-1]})" if reasons else "no paired row"


def _differs(ids: Identities) -> bool:
    a, b = ab.compiled_sets(ids)
    return not b <= a


def aa_note(result: comparison.AbReport, floor: float) -> str:
    """What an A/A measured, overall and by A latency, and whether NOISE_FROM takes it."""
    model = noisefloor.fit((r.stats.a_ms, r.stats.round_speedups_pct) for r in result.rows)
    use = ("pass this campaign as NOISE_FROM to later campaigns: each of their rows gets the "
           "floor of its A latency")
    if model.bands and model.bands[0].floor_pct > stats.MAX_NOISE_FLOOR_PCT:
        use = (f"NOISE_FROM refuses it: a floor above {stats.MAX_NOISE_FLOOR_PCT:g}% cannot mean "
               "the same; run it with more rounds or on a quieter device")
    return (f"A/A campaign: measured noise floor {floor:.2f}% over every row; by A latency "
            f"{model.text or '-'} ({use})")


def decide_liveness(result: comparison.AbReport, identities: Mapping[str, Identities],
                    campaign: Campaign) -> tuple[dict[str, str] | None, list[str], dict]:
    """(liveness, notes, caliber additions): rows that differ, an operator whose side B
    compiled what its side A never did, or else the sides' whole caches and the compiler."""
    axis = campaign.axis
    every: Identities = {side: [d for ids in identities.values() for d in ids[side]]
                         + [{"compiled_artifacts": campaign.side_artifacts.get(side)}]
                         for side in SIDES}
    if axis.name == ab.AXIS_NONE:
        floor = stats.noise_floor_from_aa(r.stats.round_speedups_pct for r in result.rows)
        notes = [aa_note(result, floor), ab.aa_artifact_note(every)]
        return None, [n for n in notes if n], {"measured_noise_floor_pct": floor}
    if any(r.stats.verdict in (stats.Verdict.FASTER, stats.Verdict.SLOWER) for r in result.rows):
        return {"status": "live", "detail": "rows differ beyond the noise floor"}, [], {}
    differ = sorted(op for op, ids in identities.items() if _differs(ids))
    if differ:
        return {"status": "live", "detail": "axis live: side B compiled artifacts side A never "
                f"produced (operators: {', '.join(differ)})"}, [], {}
    if axis.stacks:  # no switch to look up in a compiler: what the code shows is all
        return {"status": "unknown", "detail": "liveness unknown: the two stacks compiled the "
                "same kernels for every operator and no row differs"}, [], {}
    status, detail = ab.liveness(every, axis, campaign.python)
    if status == "unchecked":
        return None, [detail], {}
    return {"status": status, "detail": detail}, [], {}


def finished_units(campaign: Campaign) -> list[str]:
    """The units that ran to their end (a failing benchmark included): a partial campaign
    compares these."""
    return [u.id for u in campaign.units if u.status in states.RAN_TO_END]


def campaign_status(campaign: Campaign, stopped: Mapping[str, str] | None
                    ) -> abjson.CampaignStatus:
    """ab.json's status: complete or interrupted ({signal, step}), and what finished."""
    return abjson.CampaignStatus(
        states.RunStatus.COMPLETE if stopped is None else states.RunStatus.INTERRUPTED,
        None if stopped is None else abjson.Interruption(stopped.get("signal"),
                                                         stopped.get("step")),
        tuple(finished_units(campaign)))


def launch_note(identities: Mapping[str, Identities]) -> str:
    """How each side's pytest ran (run_identity.json's launch): in fresh processes, workers."""
    said = []
    for side in SIDES:
        kinds = [str((d.get("launch") or [{}])[-1].get("kind", "unknown"))
                 for ids in identities.values() for d in ids[side]]
        said.append(f"side {side}: " + (", ".join(
            f"{kinds.count(k)} in {'a worker' if k == 'worker' else 'a fresh process'}"
            for k in sorted(set(kinds))) or "no run"))
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
    # Two FlagGems commits: an operator whose side B compiled nothing side A did not runs the
    # same kernels (B replays A's winners): "unchanged", and its rows are expected to be same.
    equal, differ = (("unchanged", "changed") if campaign.axis.name == ab.AXIS_FLAGGEMS
                     else ("equal", "differ"))
    for op, ids in identities.items():
        a, b = ab.compiled_sets(ids)
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
    doc = abjson.document_of(result, caliber, notes=[*notes, *auto,
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
        units=tuple(abjson.UnitRecord(u.id, u.status, u.rc, u.wall_s, u.device, u.attempts,
                                      u.reason) for u in campaign.units),
        status=campaign_status(campaign, stopped))


def write_campaign(directory: Path, campaign: Campaign, settings: Settings,
                   stopped: Mapping[str, str] | None = None
                   ) -> tuple[abjson.AbDocument, Path, Path | None]:
    """ab.json, ab.md, ab.png and receipt.json of the campaign, finished or not:
    (ab.json's document, ab.md, ab.png or None)."""
    doc = build_document(directory, campaign, settings, stopped)
    abjson.write_ab(directory, doc)
    md, png = report.write_report(directory)
    status = doc.status or campaign_status(campaign, stopped)
    receipt.write_receipt(directory, receipt.build_receipt(
        campaign={"dir": str(directory), "axis": campaign.axis.name,
                  "variable": campaign.axis.variable, "ops": list(campaign.ops),
                  "units": [u.id for u in campaign.units], "status": status.state,
                  "finished_units": list(status.finished_units),
                  # the batch scripts the cluster ran, by sha256 (EXECUTOR=slurm)
                  "slurm": campaign.slurm.submissions if campaign.slurm else None},
        sides={side: {"runs": list((doc.sides or {}).get(side, ()))} for side in SIDES},
        rows=[abjson.row_json(r) for r in doc.rows],
        commands=[list(c) for c in doc.commands or ()], caliber=dict(doc.caliber.values),
        results_dir=directory))
    return doc, md, png


def finish(directory: Path, campaign: Campaign, settings: Settings,
           out: Callable[[str], None] = print) -> int:
    """Write the campaign's files; exit 0 (every unit ok or skipped), 1 (a unit failed,
    crashed, timed out or is still pending; an operator without a node) or 6 (the axis showed
    no sign of reaching the compiler)."""
    for op, seen in op_looks(directory, campaign).items():
        campaign.ops[op].looks = seen  # this finish is a look; the caller saves campaign.json
    doc, md, png = write_campaign(directory, campaign, settings)
    out(suite_report.suite_line(doc.operators or {}))
    for line in ab.done_lines(doc, md, png):
        out(line)
    if doc.liveness is not None and doc.liveness.status == "not_live":
        out(f"{ab.NOT_LIVE_MARKER} axis={campaign.axis.name}")
        return EXIT_AXIS_NOT_LIVE
    kept = [u for u in campaign.units if not campaign.ops[u.op].excluded]
    ok = (all(u.status in (OK, SKIPPED) for u in kept)
          and not any(i.reason for i in campaign.ops.values() if not i.excluded))
    return EXIT_OK if ok else EXIT_BENCHMARK_FAILED


def interrupted(directory: Path, campaign: Campaign, settings: Settings, signum: int,
                stopped: list[str], out: Callable[[str], None]) -> Interrupted:
    """Mark the campaign interrupted in campaign.json, write ab.json, ab.md and the receipt
    from the units that finished, print AB_INTERRUPTED; the exception to raise."""
    name, step = signal.Signals(signum).name, ",".join(stopped) or "-"
    finished = finished_units(campaign)
    campaign.state = states.CampaignState.INTERRUPTED
    campaign.interrupted = {"signal": name, "step": step, "finished_units": finished}
    campaign.save(directory)
    _, md, _ = write_campaign(directory, campaign, settings, {"signal": name, "step": step})
    out(f"{ab.INTERRUPTED_MARKER} signal={name} step={step} "
        f"finished_units={','.join(finished) or '-'} "
        f"units_left={len(plan.units_to_run(campaign))} dir={directory} report={md} "
        f"resume: harness ab --resume {directory}")
    return Interrupted(signum, step, directory)
