"""`harness summary`: tables of runs, batches or raw FlagGems logs, or an A/B of two of them."""

from __future__ import annotations

import dataclasses
import json
import math
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from harness import axes, stats
from harness.contract.results import RESULTS_JSONL
from harness.errors import UsageError, choice_error
from harness.fsutil import lock_held
from harness.report import render
from harness.report.abjson import as_report, read_ab
from harness.report.abresult import AbReport
from harness.report.comparison import compare
from harness.report.sources import (
    AB_JSON,
    CAMPAIGN_JSON,
    DRIVER_LOCK,
    OPS_STATUS_CSV,
    is_campaign,
    load_source,
    rounds_of,
)

FORMATS = ("md", "csv", "json")


def campaign_report(path: Path, *, noise_floor_pct: float) -> AbReport:
    """A campaign's A/B: its ab.json (`path` or inside it), else (a campaign cut short)
    compare() of its rounds."""
    if path.is_file() or (path / AB_JSON).is_file():
        doc = read_ab(path)
        axis = doc.caliber.axis
        live = render.liveness_note(doc.liveness, axis)
        found = as_report(doc)
        if axis and not axes.kind_of(axis).aa:
            found = dataclasses.replace(found, a_label=f"{axis}={found.a_label}",
                                        b_label=f"{axis}={found.b_label}")
        return dataclasses.replace(found, notes=tuple(filter(None, (live, *found.notes))))
    a, b = rounds_of(path / "A"), rounds_of(path / "B")
    both = sorted(a.keys() & b.keys())
    if not both:
        raise UsageError(f"campaign {str(path)!r} has no {AB_JSON} and no round finished on "
                         "both sides")
    report_ = compare([load_source(a[r]) for r in both], [load_source(b[r]) for r in both],
                      noise_floor_pct=noise_floor_pct, round_ids=both)
    dropped = sorted((a.keys() | b.keys()) - set(both))
    note = (f"no {AB_JSON}: compared from rounds {', '.join(map(str, both))}" +
            (f"; rounds {', '.join(map(str, dropped))} finished on one side only" if dropped
             else ""))
    return dataclasses.replace(report_, notes=(note, *report_.notes))


def unfinished(path: Path) -> UsageError | None:
    """Why a campaign directory cannot be summarized now: its driver runs (it holds the
    campaign's lock; an ab.json there is an earlier stop's, which it rewrites), or it stopped
    before its report. None for any other path."""
    if not (path / CAMPAIGN_JSON).is_file():
        return None
    # a running driver's campaign: an ab.json there is an earlier stop's, which it rewrites
    running = lock_held(path / DRIVER_LOCK)
    if not running and ((path / AB_JSON).exists() or is_campaign(path)):
        return None
    try:
        doc = json.loads((path / CAMPAIGN_JSON).read_text(encoding="utf-8"))
        states = Counter(str(u.get("status")) for u in doc.get("units") or ())
    except (OSError, UnicodeDecodeError, ValueError, AttributeError):
        return UsageError(f"campaign {str(path)!r} has no {AB_JSON} and its {CAMPAIGN_JSON} "
                          "cannot be read")
    units = ", ".join(f"{n} {state}" for state, n in sorted(states.items()) if state.isidentifier())
    if running:
        return UsageError(f"campaign {str(path)!r} is still running ({units or 'no units'}): "
                          f"its {AB_JSON} is written when it ends; summarize it then")
    return UsageError(f"campaign {str(path)!r} stopped before its report: no {AB_JSON} "
                      f"({units or 'no units'}); harness ab --resume {path} completes it")


def summarize(paths: Sequence[str], *, ab: Sequence[str] | None = None, fmt: str = "md",
              allow_mixed: bool = False, noise_floor_pct: float = stats.MIN_NOISE_FLOOR_PCT,
              write_line: render.WriteLine = print) -> None:
    """The `harness summary` command: tables of `paths`, or the A/B of `ab` = (A, B)."""
    if fmt not in FORMATS:
        raise choice_error("--format", fmt, FORMATS)
    if bool(paths) == bool(ab):
        raise UsageError("give RUN paths to summarize, or --ab A B, not both and not neither")
    if not (math.isfinite(noise_floor_pct) and 0 <= noise_floor_pct
            <= stats.MAX_NOISE_FLOOR_PCT):
        raise UsageError(f"--noise-floor={noise_floor_pct!r} is not accepted; expected a "
                         f"percentage from 0 to {stats.MAX_NOISE_FLOOR_PCT:g} (a larger floor "
                         "cannot mean \"the same\")")
    for path in paths:
        if (why := unfinished(Path(path))) is not None:
            raise why
    campaigns = [p for p in paths if is_campaign(Path(p)) and not (
        Path(p) / RESULTS_JSONL).is_file() and not (Path(p) / OPS_STATUS_CSV).is_file()]
    if campaigns and len(paths) > 1:
        raise UsageError(f"a campaign directory is summarized alone: {campaigns[0]!r} came with "
                         f"{len(paths) - 1} other path(s)")
    if campaigns:
        report = campaign_report(Path(campaigns[0]), noise_floor_pct=noise_floor_pct)
    elif ab:
        report = compare([load_source(ab[0])], [load_source(ab[1])], allow_mixed=allow_mixed,
                         noise_floor_pct=noise_floor_pct)
    else:
        render.RUN_RENDERERS[fmt]([load_source(p) for p in paths], write_line)
        return
    render.AB_RENDERERS[fmt](report, write_line)
