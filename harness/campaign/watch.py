"""`harness status`: where a campaign or a batch stands, read from its files, never writing."""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from harness import stats
from harness.campaign import compare, plan
from harness.campaign.document import Campaign, load
from harness.contract.ops_status import OPS_STATUS_CSV, read_ops_status
from harness.contract.states import (
    CRASHED,
    ERROR,
    EXCLUDED,
    FAILED,
    NOT_ENDED,
    OK,
    RUNNING,
    SKIPPED,
    SUBMITTED,
    TIMEOUT,
    CampaignState,
)
from harness.errors import UsageError
from harness.fsutil import lock_held
from harness.report import abjson, suite_report
from harness.report.abjson import OperatorSummary
from harness.report.sources import AB_JSON, CAMPAIGN_JSON, DRIVER_LOCK

DONE = (OK, SKIPPED)
BAD = (FAILED, ERROR, CRASHED, TIMEOUT)  # ended without measuring
ON_THE_WAY = (RUNNING, SUBMITTED)
ENDED = (*DONE, *BAD)  # an operator whose units are all in one of these has all its rounds
LISTED = 10  # running, failed and verdict lines shown; the rest counted


@dataclass(frozen=True)
class UnitLine:
    """A unit worth a line: its id, state, device, seconds since it started, why it ended."""

    id: str
    status: str
    device: str | None = None
    for_s: float | None = None
    reason: str | None = None


@dataclass(frozen=True)
class Driver:
    """Whether the campaign's driver runs now, and the line that says so."""

    alive: bool
    text: str


@dataclass(frozen=True)
class CampaignView:
    """A campaign as its files show it at one moment."""

    directory: Path
    state: str
    title: str
    total: int
    done: int
    running: tuple[UnitLine, ...]
    pending: int
    failed: tuple[UnitLine, ...]
    excluded: int
    driver: Driver
    eta_s: float | None
    eta_basis: str
    verdicts: Mapping[str, OperatorSummary]
    final: bool  # the verdicts are ab.json's of a finished campaign, not interim ones
    geomean: str


def _seconds_since(stamp: str | None, now: dt.datetime) -> float | None:
    if not stamp:
        return None
    try:
        then = dt.datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None
    return max(0.0, (now - then).total_seconds())


def _pid_runs(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process of that number
        return True
    return True


def driver_of(directory: Path, campaign: Campaign) -> Driver:
    """The driver as the campaign's lock and its recorded pid show it: the lock is held by
    the one driver while it runs (a process killed outright releases it)."""
    rec = campaign.driver
    who = f"pid {rec.pid} on {rec.host}" if rec else "pid not recorded"
    if lock_held(directory / DRIVER_LOCK):
        return Driver(True, f"driver: {who}, running" + (f" since {rec.since}" if rec else ""))
    if campaign.state == CampaignState.SUBMITTED:
        return Driver(False, "driver: none; the units were left to the cluster's queue "
                      f"(detached): harness ab --resume {directory} re-attaches")
    if campaign.state not in NOT_ENDED:
        return Driver(False, f"driver: none, the campaign is {campaign.state}")
    here = rec is not None and rec.host == socket.gethostname()
    still = " (that pid exists but does not hold the campaign's lock: not its driver)" \
        if here and rec is not None and _pid_runs(rec.pid) else ""
    return Driver(False, f"driver: {who} is gone{still}; the campaign is {campaign.state} and "
                  f"nothing runs it: harness ab --resume {directory} completes it")


def _eta(campaign: Campaign, running: list[UnitLine], pending: int, alive: bool
         ) -> tuple[float | None, str]:
    if not alive:
        return None, "no driver runs the campaign" if campaign.state in NOT_ENDED else "ended"
    walls = [u.wall_s for u in campaign.units if u.wall_s is not None and u.status in ENDED]
    devices = len({u.device for u in campaign.units if u.device}) or 1
    eta = plan.eta_from_walls(walls, [u.for_s or 0.0 for u in running], pending, devices)
    if eta is None:
        return None, "no unit has ended yet"
    return eta, (f"mean unit wall {sum(walls) / len(walls):.1f} s over {len(walls)} units, "
                 f"{devices} device(s)")


def _complete_ops(campaign: Campaign) -> list[str]:
    return [op for op, info in campaign.ops.items() if not info.excluded and not info.reason
            and all(u.status in ENDED for u in campaign.units if u.op == op)]


def interim_verdicts(directory: Path, campaign: Campaign
                     ) -> tuple[dict[str, OperatorSummary], str]:
    """The verdicts of the operators whose units have all ended, judged among themselves
    (false-discovery control over their rows only), and their geometric mean's line."""
    ops = _complete_ops(campaign)
    if not ops:
        return {}, "-"
    part = dataclasses.replace(campaign, ops={op: campaign.ops[op] for op in ops},
                               units=[u for u in campaign.units if u.op in ops])
    result, _, failures = compare.compare_ops(directory, part, campaign.noise_floor_pct)
    info = {op: {"rounds": len(compare.done_rounds(directory, part, op)),
                 "reason": failures.get(op),
                 "skipped": all(u.status == SKIPPED for u in part.units if u.op == op),
                 "units_failed": sum(u.status in BAD for u in part.units if u.op == op)}
            for op in ops}
    return (suite_report.operator_summaries([abjson.row_json(r) for r in result.rows], info),
            _geomean(result.geomean_speedup_pct, result.geomean_ci_low_pct,
                     result.geomean_ci_high_pct, len(result.rows)))


def _geomean(mean: float | None, low: float | None, high: float | None, rows: int) -> str:
    if mean is None:
        return "no paired rows"
    interval = "-" if low is None or high is None else f"[{low:+.1f}, {high:+.1f}]"
    return f"geometric mean speedup {mean:+.1f}% {interval} over {rows} rows"


def _verdicts(directory: Path, campaign: Campaign
              ) -> tuple[Mapping[str, OperatorSummary], bool, str]:
    if campaign.state == CampaignState.DONE and (directory / AB_JSON).is_file():
        doc = abjson.read_ab(directory)
        return (doc.operators or {}, True, _geomean(doc.geomean_speedup_pct,
                                                    doc.geomean_ci_low_pct,
                                                    doc.geomean_ci_high_pct, len(doc.rows)))
    found, line = interim_verdicts(directory, campaign)
    return found, False, line


def campaign_view(directory: Path, campaign: Campaign, now: dt.datetime | None = None
                  ) -> CampaignView:
    """What `campaign` (read from `directory`) shows now: its units by state, its driver,
    the time left, and the verdicts of operators whose rounds are all in."""
    now = now or dt.datetime.now(dt.timezone.utc)
    units = campaign.units
    running = [UnitLine(u.id, u.status, u.device, _seconds_since(u.started_utc, now))
               for u in units if u.status in ON_THE_WAY]
    failed = [UnitLine(u.id, u.status, u.device, reason=u.reason) for u in units
              if u.status in BAD]
    pending = sum(1 for u in units if u.status not in (*ENDED, *ON_THE_WAY, EXCLUDED))
    driver = driver_of(directory, campaign)
    eta, basis = _eta(campaign, running, pending, driver.alive)
    verdicts, final, geomean = _verdicts(directory, campaign)
    axis = campaign.axis
    return CampaignView(
        directory, campaign.state,
        f"{axis.name} (A={axis.a}, B={axis.b}), {len(campaign.ops)} operator(s)",
        len(units), sum(1 for u in units if u.status in DONE), tuple(running), pending,
        tuple(failed), sum(1 for u in units if u.status == EXCLUDED), driver, eta, basis,
        verdicts, final, geomean)


def duration(seconds: float | None) -> str:
    """12 s, 3 min 04 s, 2 h 05 min; ? where not known."""
    if seconds is None:
        return "?"
    s = int(round(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


def _unit_lines(title: str, found: tuple[UnitLine, ...], gone: bool) -> list[str]:
    if not found:
        return []
    lines = [f"{title}:"]
    for u in found[:LISTED]:
        if u.reason is not None or u.status in BAD:
            lines.append(f"  {u.id} {u.status} on {u.device or '-'}: {u.reason or '-'}")
        else:
            when = f"for {duration(u.for_s)}" + (" when its driver went: stopped" if gone else "")
            lines.append(f"  {u.id} {u.status} on {u.device or '-'} {when}")
    if len(found) > LISTED:
        lines.append(f"  and {len(found) - LISTED} more")
    return lines


def _verdict_lines(view: CampaignView) -> list[str]:
    kind = "final (ab.json)" if view.final else "interim, operators whose rounds are all in"
    if not view.verdicts:
        return [f"verdicts ({kind}): none yet"]
    counts = [o.verdict for o in view.verdicts.values()]
    said = ", ".join(f"{counts.count(v.value)} {v.value}" for v in stats.OpVerdict
                     if v.value in counts)
    lines = [f"verdicts ({kind}): {said}; {view.geomean}"]
    ranked = sorted(view.verdicts.items(), key=lambda item: (
        stats.OP_VERDICTS.index(stats.OpVerdict(item[1].verdict)),
        item[1].geomean_speedup_pct or 0.0))
    for op, o in ranked[:LISTED]:
        mean = "-" if o.geomean_speedup_pct is None else f"{o.geomean_speedup_pct:+.1f}%"
        lines.append(f"  {op}: {o.verdict}, geomean {mean}, {o.rows} rows, "
                     f"{o.rounds or 0} rounds" + (f" ({o.reason})" if o.reason else ""))
    if len(ranked) > LISTED:
        lines.append(f"  and {len(ranked) - LISTED} more")
    return lines


def view_lines(view: CampaignView) -> list[str]:
    """The view as `harness status` prints it."""
    gone = not view.driver.alive and view.state in NOT_ENDED
    left = f"{duration(view.eta_s)} ({view.eta_basis})" if view.eta_s is not None \
        else f"- ({view.eta_basis})"
    excluded = f", {view.excluded} excluded" if view.excluded else ""
    return [f"campaign {view.directory}: {view.state}; {view.title}", view.driver.text,
            f"units: {view.done} done, {len(view.running)} running, {view.pending} pending, "
            f"{len(view.failed)} failed{excluded} (of {view.total})",
            *_unit_lines("running" if not gone else "were running", view.running, gone),
            *_unit_lines("failed", view.failed, False),
            f"eta: {left}", *_verdict_lines(view)]


def batch_lines(directory: Path) -> list[str]:
    """A batch folder's ops_status.csv: operators by state and the time left. A batch
    records an operator when it ends, so which one runs now is not in its files."""
    found = read_ops_status(directory / OPS_STATUS_CSV)
    states = [s.status for s in found]
    walls = [s.wall_s for s in found if s.wall_s is not None]
    pending = sum(1 for s in found if s.status not in (*ENDED, "interrupted"))
    devices = {s.device for s in found if s.device} or {""}
    eta = plan.eta_from_walls(walls, [], pending, len(devices))
    return [f"batch {directory}: {len(found)} operators",
            f"operators: {sum(s in DONE for s in states)} done, {pending} pending or running, "
            f"{sum(s in BAD for s in states)} failed, {states.count('interrupted')} interrupted",
            *[f"  {s.op} {s.status}: {s.reason or '-'}" for s in found if s.status in BAD][
                :LISTED],
            f"eta: {duration(eta) if eta is not None and pending else '-'}"]


def status_lines(directory: Path) -> list[str]:
    """`harness status DIR`: a campaign's view, or a batch's; UsageError (one line) for a
    folder that is neither."""
    directory = Path(directory)
    if (directory / OPS_STATUS_CSV).is_file() and not (directory / CAMPAIGN_JSON).exists():
        return batch_lines(directory)
    campaign = load(directory, "RUN")
    try:
        return view_lines(campaign_view(directory, campaign))
    except UsageError as exc:  # a run of it being written: said, not guessed
        raise UsageError(f"RUN={str(directory)!r}: its runs cannot be read now ({exc})") from None
