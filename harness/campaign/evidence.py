"""What a finished campaign shows about its axis, judged by the axis kind's liveness rule."""

from __future__ import annotations

from collections.abc import Mapping

from harness import axes
from harness.axes.liveness import compiled_sets
from harness.campaign.compare import Identities
from harness.campaign.document import Campaign
from harness.campaign.plan import SIDES
from harness.report import comparison


def _differs(ids: Identities) -> bool:
    a, b = compiled_sets(ids)
    return not b <= a


def decide_liveness(result: comparison.AbReport, identities: Mapping[str, Identities],
                    campaign: Campaign) -> axes.Found:
    """(liveness, notes, caliber additions) by the axis kind's rule (AxisKind.liveness), from
    what the campaign shows: its rows, each operator whose side B compiled what its side A
    never did, and the sides' whole caches."""
    every: Identities = {side: [d for ids in identities.values() for d in ids[side]]
                         + [{"compiled_artifacts": campaign.side_artifacts.get(side)}]
                         for side in SIDES}
    differ = sorted(op for op, ids in identities.items() if _differs(ids))
    return campaign.axis.kind.liveness(axes.Evidence(
        campaign.axis, [r.stats for r in result.rows], every, differ, campaign.python))
