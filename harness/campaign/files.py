"""A campaign's files from its document: ab.json, ab.md, ab.png and receipt.json."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from harness import executors
from harness.campaign.document import Campaign
from harness.campaign.plan import SIDES
from harness.campaign.result import build_document, campaign_status
from harness.report import abjson, receipt
from harness.report import write as report
from harness.settings.spec import Settings


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
                  **executors.receipt_fields(campaign.executor)},
        sides={side: {"runs": list((doc.sides or {}).get(side, ()))} for side in SIDES},
        rows=[abjson.row_json(r) for r in doc.rows],
        commands=[list(c) for c in doc.commands or ()], caliber=dict(doc.caliber.values),
        results_dir=directory))
    return doc, md, png
