"""What TUNE_SCREEN saved and what it cost: two A/A campaigns' side A of round 0 compared.

One campaign ran with TUNE_SCREEN=1, the other with 0, both `--axis none` (one round is enough:
only round 0's side A tunes). For each operator both ran: side A's round-0 wall, warmup and
reference seconds in each (a tuner FlagGems calls from its reference, as linear_backward's,
tunes in `reference`) and the screen's counts from run_identity.json; then, row by row, the
latency of the screen's winners against the full sweep's (the full campaign's A against the
screened one's, as `harness summary --ab` reads it) beside what the same winners read in two
runs (the full campaign's A against its B). A screened row slower by more than SLOWER_PCT where
the same winners moved less is named, where the operator's screen kept fewer candidates than it
timed, or recorded no screen at all: there the screen most likely dropped the winner. Where it
dropped none, the row is marked but not named: the two processes differed, not the candidates.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from harness.contract.identity import read_identity
from harness.errors import UsageError
from harness.report import breakdown
from harness.report.comparison import compare
from harness.report.sources import CAMPAIGN_JSON, load_source

SLOWER_PCT = 1.5  # the bound an A/A holds each row of 2 us or more to


def campaign(path: Path) -> Path:
    """`path` itself where it holds a campaign.json; else a UsageError naming it."""
    if not (path / CAMPAIGN_JSON).is_file():
        raise UsageError(f"{str(path)!r} is not a campaign directory (no {CAMPAIGN_JSON}); give "
                         "the folder `harness ab` printed as its report's")
    return path


def round0(directory: Path, op: str, side: str = "A") -> Path:
    """The run folder of `op`'s round 0 on `side` of the campaign in `directory`."""
    return directory / op / side / "r0"


def operators(screened: Path, full: Path) -> list[str]:
    """The operators whose side A ran round 0 in both campaigns, by name."""
    ran = [{p.parent.parent.name for p in c.glob("*/A/r0") if p.is_dir()}
           for c in (screened, full)]
    return sorted(ran[0] & ran[1])


def phases(run: Path) -> tuple[float, float, float] | None:
    """(wall, warmup, reference) seconds of a run; None where it left no breakdown."""
    try:
        found = breakdown.total(run)
    except UsageError:
        return None
    return found.wall_s, found.phases["warmup"], found.phases["reference"]


def speedups(a: Path, b: Path) -> dict[tuple[str, str, int], tuple[float, float]]:
    """(speedup %, A's ms) of each row B and A both timed, by (dtype, shape, occurrence)."""
    report = compare([load_source(a)], [load_source(b)])
    return {(r.dtype, r.shape, r.occurrence): (r.stats.speedup_pct, r.stats.a_ms)
            for r in report.rows if r.stats.speedup_pct is not None}


@dataclass
class Tally:
    """What the operators compared so far add up to."""
    moved: list[float] = field(default_factory=list)  # screened winners against full, % a row
    drift: list[float] = field(default_factory=list)  # the same winners in two runs, % a row
    named: list[str] = field(default_factory=list)  # rows the screen most likely made slower
    saved: list[float] = field(default_factory=list)  # warmup + reference seconds, an operator


def operator_lines(screened: Path, full: Path, op: str, tally: Tally,
                   write: Callable[[str], None]) -> None:
    """Write one operator's lines and add what they found to `tally`."""
    times = {name: phases(round0(c, op)) for name, c in (("screened", screened), ("full", full))}
    ident = read_identity(round0(screened, op))
    screen = ident.doc.get("screen") if ident else None
    cells = [f"{name} " + ("-" if t is None else f"wall {t[0]:.1f} warmup {t[1]:.1f} reference "
                           f"{t[2]:.1f}") for name, t in times.items()]
    write(f"{op}: {'; '.join(cells)}; screen {screen if screen is not None else '-'}")
    mine, theirs = times["screened"], times["full"]
    if mine is not None and theirs is not None:
        tally.saved.append(sum(theirs[1:]) - sum(mine[1:]))
    try:
        winners = speedups(round0(full, op), round0(screened, op))
        same = speedups(round0(full, op), round0(full, op, "B"))
    except UsageError as exc:  # a side that timed no row (an operator FlagGems skipped)
        write(f"  no rows compared: {exc}")
        return
    # only a screen that kept fewer candidates than it timed can have dropped a winner; where
    # the run recorded no screen (a parallel warmup's shards tuned), which it did is unknown
    dropped = None if not isinstance(screen, dict) else \
        screen.get("kept", 0) < screen.get("candidates", 0)
    for key in sorted(set(winners) & set(same)):
        (pct, ms), (noise, _) = winners[key], same[key]
        tally.moved.append(pct)
        tally.drift.append(noise)
        worse = pct < -SLOWER_PCT and abs(noise) < -pct
        if worse and dropped is not False:
            tally.named.append(f"{op} {key[0]} {key[1]}")
        mark = ("" if not worse else "  << slower" if dropped else
                "  << slower, though the screen dropped no candidate of this operator"
                if dropped is False else "  << slower (the run recorded no screen)")
        write(f"  {key[0]} {key[1]} {ms * 1000:.2f} us: screened winners {pct:+.2f}%, same "
              f"winners {noise:+.2f}%{mark}")


def compare_campaigns(screened: Path, full: Path, write: Callable[[str], None]) -> None:
    """Write every operator's lines (operator_lines), then the totals: seconds saved, the
    rows' median moves, and the rows named slower. A folder that is no campaign, or two with
    no operator in common, is a UsageError."""
    screened, full = campaign(screened), campaign(full)
    ops = operators(screened, full)
    if not ops:
        raise UsageError(f"no operator ran side A of round 0 in both {str(screened)!r} and "
                         f"{str(full)!r}")
    tally = Tally()
    for op in ops:
        operator_lines(screened, full, op, tally, write)
    write(f"operators {len(ops)}; warmup + reference saved {sum(tally.saved):.1f} s")
    if tally.moved:
        write(f"rows {len(tally.moved)}: |screened winners| median "
              f"{statistics.median(map(abs, tally.moved)):.2f}%, |same winners| median "
              f"{statistics.median(map(abs, tally.drift)):.2f}%; slower beyond {SLOWER_PCT}% "
              f"where the same winners held: {len(tally.named)}"
              + (f" ({', '.join(tally.named)})" if tally.named else ""))
