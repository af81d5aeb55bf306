"""A device or quota that filled up mid-campaign: the campaign stopped as a signal would stop
it, recorded interrupted and resumable, naming the file that filled it."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from harness.campaign import ab, compare, plan
from harness.campaign.document import CAMPAIGN_JSON, Campaign
from harness.campaign.plan import CACHE_DIR
from harness.campaign.unit import resume_hint
from harness.contract.states import INTERRUPTED, CampaignState
from harness.errors import EXIT_PREFLIGHT, NO_SPACE_LIMIT, NO_SPACE_TEXT, NoSpace, no_space
from harness.executors.base import Ended


@contextmanager
def full_device_stops(directory: Path, campaign: Campaign, out: Callable[[str], None]
                      ) -> Iterator[None]:
    """A full device (or spent quota) met by any write of the block stops the campaign as a
    signal would: recorded interrupted, caches removed, NoSpace naming the file and the resume
    raised."""
    try:
        yield
    except (NoSpace, OSError) as exc:
        if (full := no_space(exc)) is None:
            raise
        raise out_of_space(directory, campaign, _first(exc, full), out) from exc


def _first(exc: BaseException, full: NoSpace) -> NoSpace:
    """The first NoSpace of the chain that ends in `exc`: the file that filled the device, not
    campaign.json that the cleanup then failed to write."""
    context = exc.__context__
    while context is not None:
        if isinstance(context, NoSpace):
            full = context
        context = context.__context__
    return full


def out_of_space(directory: Path, campaign: Campaign, full: NoSpace,
                 out: Callable[[str], None]) -> NoSpace:
    """Remove the side caches (room for what follows), mark the campaign interrupted in
    campaign.json where it can still be written, print AB_INTERRUPTED; the error to raise.
    ab.json and ab.md are left as they were: the resume that completes the campaign writes
    them."""
    shutil.rmtree(directory / CACHE_DIR, ignore_errors=True)
    finished = compare.finished_units(campaign)
    step = ",".join(u.id for u in campaign.units if u.status == INTERRUPTED) or "-"
    campaign.state = CampaignState.INTERRUPTED
    campaign.interrupted = {"signal": None, "reason": "no_space", "path": str(full.path),
                            "step": step, "finished_units": finished}
    try:
        campaign.save(directory)
        kept = ""
    except NoSpace:
        kept = f" ({CAMPAIGN_JSON} not updated: its units still running are rerun)"
    out(f"{ab.INTERRUPTED_MARKER} reason=no_space path={full.path} step={step} "
        f"finished_units={','.join(finished) or '-'} "
        f"units_left={len(plan.units_to_run(campaign))} dir={directory}{kept} "
        f"resume: {resume_hint(directory)}")
    return NoSpace(full.path, resume_hint(directory), full.limit)


def child_full(end: Ended) -> NoSpace | None:
    """The unit's child stopped on a full device (its exit code and its log's last line say
    so): the file it named."""
    reason = end.reason or ""
    if end.rc != EXIT_PREFLIGHT or NO_SPACE_TEXT not in reason:
        return None
    said = reason.split(NO_SPACE_TEXT, 1)[1]
    limit = NO_SPACE_LIMIT in said
    path = said.rsplit(NO_SPACE_LIMIT if limit else ": free space", 1)[0].strip().strip("'\"")
    return NoSpace(path or None, limit=limit)
