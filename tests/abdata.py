"""ab.json's data built from an A/B result, as the campaign writes it: for tests that need the
file, or its dict, without a campaign."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.report import abjson
from harness.report.abresult import AbReport


def ab_data(report: AbReport, caliber: Mapping[str, Any], *,
            liveness: Mapping[str, str] | None = None,
            notes: Sequence[str] = ()) -> dict[str, Any]:
    """ab.json's data of `report` (`liveness` as {status, detail})."""
    return abjson.document_of(report, caliber, liveness=abjson.liveness_of(liveness),
                              notes=notes).to_json()


def write_data(directory: Path, data: Mapping[str, Any]) -> Path:
    """Write ab.json's data through the typed loader and writer (a bad dict is refused)."""
    return abjson.write_ab(directory, abjson.parse(data, str(directory / abjson.AB_JSON)))
