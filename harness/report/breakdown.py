"""The time breakdown of every run below a folder (a run, a batch, a campaign), summed.

Each run's time_breakdown.json (harness.contract.breakdown) gives its wall by phase; the sum
over runs says where a campaign's device time went, and the fraction of it spent in timed
replays, which is what a measurement budget buys.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.contract import breakdown
from harness.contract.identity import NOT_RUN, read_identity
from harness.errors import UsageError
from harness.report.sources import CAMPAIGN_JSON


@dataclass(frozen=True)
class Total:
    """The phases of `runs` runs summed, and their walls; `host`: the seconds the host's runs
    spent outside those walls (breakdown.HOST_PHASES), `units`: the seconds the campaigns' units
    spent outside their runs (None below no campaign)."""

    runs: int
    wall_s: float
    phases: dict[str, float]
    host: dict[str, float] = field(default_factory=dict)
    units: float | None = None

    @property
    def replay_fraction(self) -> float | None:
        return self.phases.get("replays", 0.0) / self.wall_s if self.wall_s > 0 else None


def _documents(folder: Path) -> dict[Path, dict[str, Any]]:
    if not folder.is_dir():
        raise UsageError(f"{str(folder)!r} is not a directory; expected a run, batch or "
                         "campaign directory")
    docs = {p.resolve(): d for p in sorted(folder.rglob(breakdown.BREAKDOWN_FILE))
            if (d := breakdown.read(p)) is not None}
    if not docs and not _not_run(folder):  # a round a campaign did not run has no wall
        raise UsageError(f"no {breakdown.BREAKDOWN_FILE} below {str(folder)!r}; expected a "
                         "run, batch or campaign directory of runs made by this harness")
    return docs


def _not_run(folder: Path) -> bool:
    """Whether `folder` is the run directory of a campaign round recorded without a run (its
    operator's round 0 was skipped on every side)."""
    found = read_identity(folder)
    return found is not None and bool(found.doc.get(NOT_RUN))


def total(*folders: Path) -> Total:
    """The sum over every run below each of `folders` (each one included, a run counted once
    however many of them hold it); a folder with none is an error naming it."""
    seen: dict[Path, dict[str, Any]] = {}
    for folder in folders:
        seen.update(_documents(folder))
    if not seen:  # every folder a round not run
        raise UsageError(f"no {breakdown.BREAKDOWN_FILE} below "
                         f"{', '.join(repr(str(f)) for f in folders)}: no run there ran")
    docs = list(seen.values())
    phases = {p: 0.0 for p in breakdown.PHASES}
    host = {p: 0.0 for p in breakdown.HOST_PHASES}
    for doc in docs:
        for phase, seconds in doc["phases"].items():
            phases[phase] = phases.get(phase, 0.0) + float(seconds)
        for phase, seconds in (doc.get("host") or {}).items():
            if phase in host:
                host[phase] += float(seconds)
    wall = sum(float(d["wall_s"]) for d in docs)
    units = {key: seconds for folder in folders
             for key, seconds in _units_outside(folder.resolve(), seen).items()}
    return Total(len(docs), wall, phases, host, sum(units.values()) if units else None)


def _units_outside(folder: Path, runs: dict[Path, dict[str, Any]]) -> dict[str, float]:
    """Where `folder` is a campaign directory: for each finished unit whose runs (a side's
    folder below the operator's) are all among `runs` and carry their host seconds, the
    unit's wall less its runs' walls and host seconds, keyed by folder and unit (a round not
    run: its whole wall); else none."""
    try:
        campaign = json.loads((folder / CAMPAIGN_JSON).read_text(encoding="utf-8"))
        units = [u for u in campaign["units"] if isinstance(u.get("wall_s"), int | float)]
    except (OSError, ValueError, TypeError, KeyError):
        return {}
    found = {}
    for unit in units:
        key = f"{folder}::{unit['op']}/r{unit['round']}"
        sides = list((folder / str(unit["op"])).glob(f"*/r{unit['round']}"))
        if sides and all(_not_run(side) for side in sides):
            found[key] = float(unit["wall_s"])  # a round not run: its whole wall the host's
            continue
        paths = {p.resolve() for p in (folder / str(unit["op"])).glob(
            f"*/r{unit['round']}/{breakdown.BREAKDOWN_FILE}")}
        if not paths or not paths <= set(runs) or any("host" not in runs[p] for p in paths):
            continue
        inside = sum(float(runs[p]["wall_s"]) + sum(float(v) for v in runs[p]["host"].values())
                     for p in paths)
        found[key] = float(unit["wall_s"]) - inside
    return found


def render(result: Total, write_line: Callable[[str], None]) -> None:
    """The table: phase, seconds, % of wall; then the wall and the replays' fraction."""
    write_line(f"{'phase':<14} {'seconds':>10} {'% of wall':>9}")
    for phase, seconds in result.phases.items():
        share = 100 * seconds / result.wall_s if result.wall_s > 0 else 0.0
        write_line(f"{phase:<14} {seconds:>10.2f} {share:>9.1f}")
    write_line(f"{'wall':<14} {result.wall_s:>10.2f} {100.0:>9.1f}")
    fraction = result.replay_fraction
    shown = "-" if fraction is None else f"{100 * fraction:.1f}%"
    write_line(f"runs: {result.runs}; fraction of wall in timed replays: {shown}")
    outside = {**result.host, **({"unit_other": result.units} if result.units is not None
                                 else {})}
    if any(outside.values()):
        write_line("outside the runs' walls (the host's own work):")
        for phase, seconds in outside.items():
            write_line(f"{phase:<14} {seconds:>10.2f}")
