"""The time breakdown of every run below a folder (a run, a batch, a campaign), summed.

Each run's time_breakdown.json (harness.contract.breakdown) gives its wall by phase; the sum
over runs says where a campaign's device time went, and the fraction of it spent in timed
replays, which is what a measurement budget buys.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.contract import breakdown
from harness.contract.identity import NOT_RUN, read_identity
from harness.contract.states import FINISHED
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
    # what was found and not summed, by why: an interrupted attempt a unit kept (ATTEMPT), a
    # file this harness cannot read as a breakdown
    left_out: dict[str, int] = field(default_factory=dict)

    @property
    def replay_fraction(self) -> float | None:
        return self.phases.get("replays", 0.0) / self.wall_s if self.wall_s > 0 else None


# A run directory a campaign's unit set aside when it ran again (campaign.unit._set_aside):
# an interrupted attempt, whose wall its unit's does not hold.
ATTEMPT = re.compile(r"\.attempt\d+$")
INTERRUPTED_ATTEMPTS, UNREADABLE = "interrupted attempts", "unreadable files"


def _documents(folder: Path, left_out: dict[Path, str]) -> dict[Path, dict[str, Any]]:
    """The readable breakdowns below `folder` by resolved path; what is left out goes to
    `left_out`, by resolved path, with why."""
    if not folder.is_dir():
        raise UsageError(f"{str(folder)!r} is not a directory; expected a run, batch or "
                         "campaign directory")
    docs, mine = {}, {}
    for path in sorted(folder.rglob(breakdown.BREAKDOWN_FILE)):
        if ATTEMPT.search(path.parent.name):
            mine[path.resolve()] = INTERRUPTED_ATTEMPTS
        elif (doc := breakdown.read(path)) is None:
            mine[path.resolve()] = UNREADABLE
        else:
            docs[path.resolve()] = doc
    left_out.update(mine)
    if not docs and not _not_run(folder):  # a round a campaign did not run has no wall
        raise UsageError(f"no {breakdown.BREAKDOWN_FILE} below {str(folder)!r} to sum"
                         + (f" ({_listed(_counted(mine))} left out)" if mine else "")
                         + "; expected a run, batch or campaign directory of runs made by "
                         "this harness")
    return docs


def _counted(left_out: dict[Path, str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for why in left_out.values():
        counts[why] = counts.get(why, 0) + 1
    return counts


def _listed(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} {why}" for why, n in counts.items())


def _not_run(folder: Path) -> bool:
    """Whether `folder` is the run directory of a campaign round recorded without a run (its
    operator's round 0 was skipped on every side)."""
    found = read_identity(folder)
    return found is not None and bool(found.doc.get(NOT_RUN))


def total(*folders: Path) -> Total:
    """The sum over every run below each of `folders` (each one included, a run counted once
    however many of them hold it); a folder with none is an error naming it."""
    seen: dict[Path, dict[str, Any]] = {}
    left_out: dict[Path, str] = {}  # by path: a folder given twice, or inside another, once
    for folder in folders:
        seen.update(_documents(folder, left_out))
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
    return Total(len(docs), wall, phases, host, sum(units.values()) if units else None,
                 _counted(left_out))


def _units_outside(folder: Path, runs: dict[Path, dict[str, Any]]) -> dict[str, float]:
    """Where `folder` is a campaign directory: for each finished unit whose runs (a side's
    folder below the operator's) are all among `runs` and carry their host seconds, the
    unit's wall less its runs' walls and host seconds, keyed by folder and unit (a round not
    run: its whole wall); else none."""
    try:
        campaign = json.loads((folder / CAMPAIGN_JSON).read_text(encoding="utf-8"))
        # a unit running again still carries its interrupted attempt's wall
        units = [u for u in campaign["units"] if isinstance(u, dict)
                 and u.get("status") in FINISHED and isinstance(u.get("op"), str)
                 and isinstance(u.get("round"), int) and breakdown.is_seconds(u.get("wall_s"))]
    except (OSError, ValueError, TypeError, KeyError, RecursionError):
        return {}
    found = {}
    for unit in units:
        key = f"{folder}::{unit['op']}/r{unit['round']}"
        sides = list((folder / str(unit["op"])).glob(f"*/r{unit['round']}"))
        if sides and all(_not_run(side) for side in sides):
            found[key] = float(unit["wall_s"])  # a round not run: its whole wall the host's
            continue
        # every side's run summed, each with its host seconds: a side without its breakdown
        # (a run that stopped before writing one) would leave its wall in unit_other
        paths = {side.resolve() / breakdown.BREAKDOWN_FILE for side in sides}
        if not paths or not paths <= set(runs) or any("host" not in runs[p] for p in paths):
            continue
        inside = sum(float(runs[p]["wall_s"]) + sum(float(runs[p]["host"][k])
                                                    for k in breakdown.HOST_PHASES)
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
    direct = result.phases.get("direct", 0.0)
    # a direct-timed row's timed calls are its whole `direct` phase, never replays
    shown += f" (and {100 * direct / result.wall_s:.1f}% timed directly)" \
        if direct and result.wall_s > 0 else ""
    write_line(f"runs: {result.runs}; fraction of wall in timed replays: {shown}")
    if result.left_out:
        write_line(f"left out: {_listed(result.left_out)}")
    outside = {**result.host, **({"unit_other": result.units} if result.units is not None
                                 else {})}
    if any(outside.values()):
        write_line("outside the runs' walls (the host's own work):")
        for phase, seconds in outside.items():
            write_line(f"{phase:<14} {seconds:>10.2f}")
