"""A campaign's end: its files written, its last words and its exit code, or its interruption."""

from __future__ import annotations

import signal
from collections.abc import Callable
from pathlib import Path

from harness.axes.liveness import NOT_LIVE_MARKER
from harness.campaign import ab, plan
from harness.campaign.compare import finished_units, op_looks
from harness.campaign.document import Campaign
from harness.campaign.files import write_campaign
from harness.contract import states
from harness.contract.states import OK, SKIPPED
from harness.errors import EXIT_AXIS_NOT_LIVE, EXIT_BENCHMARK_FAILED, EXIT_OK, Interrupted
from harness.report import gate, suite_report
from harness.settings.spec import Settings


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
    if gate.not_live(doc):
        out(f"{NOT_LIVE_MARKER} axis={campaign.axis.name}")
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
