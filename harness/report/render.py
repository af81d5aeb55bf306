"""Every renderer of runs and A/B results (md, csv, json, png), writing through `write_line`."""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from harness import axes, stats
from harness.contract.boundary import DIRECT_MARKER
from harness.contract.results import SUCCESS, Row
from harness.report import plot
from harness.report.abjson import AbDocument, Caliber, Liveness, as_document, as_report, caliber_of
from harness.report.abresult import SPEEDUP_SAID, AbReport, AbRow, in_geomean
from harness.report.comparison import SELF_TUNED, sides_caliber
from harness.report.sources import Source
from harness.stats import noisefloor

WriteLine = Callable[[str], None]
REGIME = "timed under a different regime"
NOT_RECORDED = "not recorded"
NOT_LIVE = "AXIS_NOT_LIVE"
INCOMPLETE = "INCOMPLETE"
TUNES = {"each": "each side tunes in round 0 and replays its own winners after (TUNE each)",
         "replay": "B replays A's winners, a key it lacks counted (TUNE replay)"}
BASELINES = {"once": "once: in round 0, both sides; FlagGems' speedup over torch comes from A/r0",
             "every": "every run", "off": "not timed"}
ROW_HEADER = ("operator", "dtype", "shape", "A ms", "B ms", "speedup %", "min..max %",
              "interval %", "floor %", "verdict", "flags")


# ---------------------------------------------------------------- cells and tables


def pct(value: float | None) -> str:
    return "-" if value is None else f"{value:+.1f}"


def ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def interval(low: float | None, high: float | None) -> str:
    return "-" if low is None or high is None else f"[{pct(low)}, {pct(high)}]"


def ms(value: float) -> str:
    """Four significant digits, never an exponent: 0.001400, 0.06400, 237.5, 12346."""
    if not math.isfinite(value):  # an ab.json may hold NaN: show it rather than crash on log10
        return str(value)
    places = 3 - math.floor(math.log10(value)) if value > 0 else 3
    return f"{value:.{max(0, places)}f}"


def _shape(shape: str, occurrence: int) -> str:
    """A shape, with which measurement of its key it is when measured more than once."""
    return shape if occurrence == 1 else f"{shape} (#{occurrence})"


def floor_cell(row_floor: float | None, floor: float | None = None) -> str:
    """The noise floor a row's verdict used; `floor` where the row does not record its own
    (an older ab.json: one floor for every row)."""
    value = floor if row_floor is None else row_floor
    return "-" if value is None or not math.isfinite(value) else f"{value:.1f}"


def row_cells(row: AbRow, floor: float | None = None) -> list[str]:
    """One A/B row's cells under ROW_HEADER; a row timed directly on a side is marked *.
    `floor`: the report's, for a row that does not record its own."""
    s = row.stats
    verdict = s.verdict.value
    if s.verdict in (stats.Verdict.FASTER, stats.Verdict.SLOWER):
        verdict = f"**{verdict}**"
    elif s.verdict is stats.Verdict.SAME and s.same_bound_pct is not None:
        low, high = stats.floor_band(s.same_bound_pct)  # the equivalence interval's reach
        verdict = f"same ({pct(low)}..{pct(high)})"
    mark = " *" if any(DIRECT_MARKER in f for f in row.flags) else ""
    return [row.op, row.dtype, _shape(row.shape, row.occurrence), ms(s.a_ms), ms(s.b_ms),
            pct(s.speedup_pct),
            f"{pct(s.min_pct)}..{pct(s.max_pct)}{mark}", interval(s.ci_low_pct, s.ci_high_pct),
            floor_cell(s.noise_floor_pct, floor), verdict, " ".join(row.flags) or "-"]


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """A markdown table; a | inside a cell is escaped."""
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    return lines + ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in rows]


# ---------------------------------------------------------------- notes and caliber


def stated_floor(report: AbReport, caliber: Caliber, given: float | None) -> float | None:
    """The floor to state: the one given, else the caliber's, else the report's (nan: none);
    None where each row has the floor of its latency (the caliber's noise_floor_bands)."""
    if given is None and noisefloor.model_of(caliber.values) is not None:
        return None
    for value in (given, caliber.noise_floor_pct, report.noise_floor_pct):
        if value is not None and math.isfinite(float(value)):
            return float(value)
    return None


def status_note(doc: AbDocument) -> str | None:
    """The note of an interrupted campaign: that it is incomplete, what stopped it, and which
    units (an operator's round, both sides) finished; None for a complete one."""
    if doc.status is None or doc.status.state != "interrupted":
        return None
    stop = doc.status.interrupted
    head = (f"{INCOMPLETE}: interrupted by {(stop and stop.signal) or NOT_RECORDED} during "
            f"{(stop and stop.step) or NOT_RECORDED}")
    units = doc.status.finished_units
    planned = len(doc.units or ()) or NOT_RECORDED
    return (f"{head}; finished units: {', '.join(units) or 'none'} ({len(units)} of {planned}); "
            "the table compares the finished rounds only")


def liveness_note(liveness: Liveness | None, axis: object = None) -> str | None:
    """The note a liveness verdict reads as: its detail; a dead axis's always begins with the
    AXIS_NOT_LIVE marker, so that the report warns and grep finds it."""
    if liveness is None:
        return None
    detail = liveness.detail or f"axis {liveness.status}"
    if liveness.status == "not_live" and not detail.startswith(NOT_LIVE):
        detail = f"{NOT_LIVE} axis={axis or '-'}: {detail}"
    return detail


def _digests(digests: Mapping[str, Sequence[str]]) -> str:
    """{"A": [...], "B": [...]} as "A d1; B d2"."""
    shown = [f"{side} {', '.join(d)}" for side, d in digests.items() if d]
    return "; ".join(shown) or "none recorded"


def caliber_lines(caliber: Caliber, floor: float | None) -> list[str]:
    """The caliber as bullet lines: what a reader needs before trusting any row."""
    def get(key: str) -> str:
        return caliber.text(key) or NOT_RECORDED

    axis = get("axis")
    kind = axes.kind_of(axis)
    if kind.aa:
        axis_line = "none (an A/A campaign: both sides identical; it measures the noise floor)"
    elif kind.report_text:
        axis_line = (f"{axis} ({kind.report_text}): A={get('a')}, B={get('b')}; "
                     f"{TUNES.get(get('tune'), get('tune'))}")
    else:
        var = caliber.variable
        axis_line = (f"{axis}{f' ({var})' if var and var != axis else ''}: "
                     f"A={get('a')} (off), B={get('b')} (on)")
    model = noisefloor.model_of(caliber.values)
    shown = NOT_RECORDED if floor is None else f"{floor:.1f}%"
    if model is not None and floor is None:
        shown = (f"per row, by A latency (column floor %): {model.text}, interpolated in log "
                 f"latency; at least {stats.MIN_NOISE_FLOOR_PCT:.1f}%")
    if caliber.text("noise_floor_source"):
        source = caliber.text("noise_floor_source")
        shown += f" (from the A/A campaign {source})" if model is not None else f" ({source})"
    dirty = " (dirty: uncommitted changes)" if caliber.harness_dirty else ""
    stacks = caliber.values.get("stacks")
    stack_lines = [f"- stack {side}: {stacks.get(side, NOT_RECORDED)}" for side in ("A", "B")
                   ] if isinstance(stacks, dict) and kind.shows_stacks else []
    return [f"- backend: {get('backend')}", f"- axis: {axis_line}", *stack_lines,
            f"- level: {get('level')}", f"- timer: {get('timer')}",
            f"- shape mode: {get('shape_mode')}", f"- torch reference (BASELINE): "
            f"{BASELINES.get(caliber.text('baseline') or '', NOT_RECORDED)}",
            f"- rounds: {get('rounds')} planned per side, interleaved A B B A ...",
            f"- noise floor: {shown}", f"- image digest: {_digests(caliber.image_digests)}",
            f"- harness commit: {get('harness_commit')}{dirty}"]


def campaign_head(title: str, caliber: Caliber, floor: float | None,
                  notes: Sequence[str], unit: str = "round") -> list[str]:
    """A campaign's ab.md down to its method: title, caliber, notes and their warnings."""
    out = [f"# A/B: {caliber.axis or 'axis ' + NOT_RECORDED} on {title}", "",
           "## Caliber", "", *caliber_lines(caliber, floor), ""]
    if notes:
        out += ["## Notes", "", *(f"- {n}" for n in notes), ""]
    if any(n.startswith(INCOMPLETE) for n in notes):
        out += [f"**This campaign is incomplete: it was interrupted before every {unit} ran.**", ""]
    if any(n.startswith(NOT_LIVE) for n in notes):
        out += ["**The axis showed no sign of reaching the compiler: no row below says "
                "anything about the switch.**", ""]
    return out


# ---------------------------------------------------------------- one run


@dataclass(frozen=True)
class Group:
    """One operator and dtype of a run: FlagGems' speedup over torch is latency_base / latency."""

    op: str
    dtype: str
    rows: int
    failed: int
    fallback: int  # rows carrying DIRECT_MARKER: timed directly where capture failed
    geomean_speedup: float | None  # over rows with a positive speedup; None if there are none


def _speedup(row: Row) -> float | None:
    value = row.speedup
    if value is None and row.latency_base_ms and row.latency_ms:
        value = row.latency_base_ms / row.latency_ms
    good = row.status == SUCCESS and value is not None and math.isfinite(value) and value > 0
    return value if good else None


def run_groups(rows: Sequence[Row]) -> list[Group]:
    """A Group per (op, dtype) in first-seen order."""
    by_group: dict[tuple[str, str], list[Row]] = {}
    for row in rows:
        by_group.setdefault((row.op, row.dtype), []).append(row)
    groups = []
    for (op, dtype), members in by_group.items():
        speedups = [s for s in map(_speedup, members) if s is not None]
        groups.append(Group(op=op, dtype=dtype, rows=len(members),
                            failed=sum(1 for r in members if r.status != SUCCESS),
                            fallback=sum(1 for r in members if DIRECT_MARKER in r.markers),
                            geomean_speedup=stats.geometric_mean(speedups) if speedups else None))
    return groups


def _caliber_line(source: Source) -> str:
    if not source.identities:
        told = " ".join(f"{k}={v}" for k, v in source.log_caliber)
        return f"{source.kind.replace('_', ' ')}: no run identity" + (
            f"; the log says {told}" if told else "")
    return " ".join(f"{f}={'/'.join(v)}" for f, v in sides_caliber([source]).items())


def render_runs_md(sources: Sequence[Source], write_line: WriteLine) -> None:
    for source in sources:
        for line in [f"## {source.label}", "",
                     f"{_caliber_line(source)}; speedup = FlagGems over torch "
                     "(latency_base / latency), geometric mean of the successful rows",
                     *(f"- note: {note}" for note in source.notes), "",
                     *table(("op", "dtype", "rows", "failed", "fallback", "geomean speedup"),
                            [(g.op, g.dtype, str(g.rows), str(g.failed), str(g.fallback),
                              ratio(g.geomean_speedup)) for g in run_groups(source.rows)]), ""]:
            write_line(line)


# ---------------------------------------------------------------- A/B markdown


def _pair_head(report: AbReport) -> list[str]:
    """`harness summary --ab`'s head: the two sides, the formula, the floor and the notes."""
    return [f"## A/B: A={report.a_label} B={report.b_label}", "",
            "speedup % = (A_ms / B_ms - 1) * 100 of FlagGems latencies: positive when B is "
            f"faster; noise floor {report.noise_floor_pct:.1f}%; {report.method.text}",
            *(f"- {'FLAG' if n == SELF_TUNED else 'note'}: {n}" for n in report.notes), ""]


def _method_lines(report: AbReport) -> list[str]:
    bh = "" if report.method.fdr_q is None else " and survives false-discovery control"
    rule = (f"A row is faster or slower only where its interval excludes zero, its effect lies "
            f"outside the noise band{bh}; same where the whole interval lies inside it, a factor "
            "1 + floor either way (5%: -4.8..+5.0; alpha spent over looks: the equivalence "
            "interval's reach beside same); inconclusive otherwise (more rounds would decide).")
    return [f"{SPEEDUP_SAID} Method: {report.method.text}. {rule} A flagged row (a side timed "
            "directly, self-tuned a missing replay key or throttled, or the sides' SM clocks 5% "
            "apart) reads \"flagged\" whatever its numbers.", ""]


def geomean_line(report: AbReport) -> str:
    timed = [r for r in report.rows if in_geomean(r.flags)]
    left = len(report.rows) - len(timed)
    return (f"geometric mean speedup: {pct(report.geomean_speedup_pct)}% over {len(timed)} "
            f"paired rows ({sum(1 for r in timed if r.stats.flagged)} flagged"
            + (f"; {left} without device work left out" if left else "") + "), interval over "
            f"rows and rounds {interval(report.geomean_ci_low_pct, report.geomean_ci_high_pct)}"
            + (f" ({report.direct_rows} of them {REGIME}: {DIRECT_MARKER} on a side; rows "
               "marked *)" if report.direct_rows else ""))


def ab_tables(report: AbReport) -> list[str]:
    """The rows table, the geometric means and the unpaired rows: the same wherever rendered."""
    out = [*table(ROW_HEADER, [row_cells(r, report.noise_floor_pct) for r in report.rows]), "",
           geomean_line(report)]
    if len(report.op_geomeans) > 1:
        out += ["", *table(("operator", "rows", "geometric mean speedup %", "interval %"),
                           [(op, str(g.rows), pct(g.speedup_pct),
                             interval(g.ci_low_pct, g.ci_high_pct))
                            for op, g in report.op_geomeans])]
    if report.rows and all(r.stats.rounds < 2 for r in report.rows):
        out.append("one round per side: no interval, so no row is called faster or slower")
    return [*out, "", *unpaired_lines(report)]


def unpaired_lines(report: AbReport) -> list[str]:
    if not report.unpaired:
        return ["unpaired rows: none"]
    return [f"## Unpaired rows ({len(report.unpaired)})", "",
            *table(("operator", "dtype", "shape", "reason"),
                   [(u.op, u.dtype, _shape(u.shape, u.occurrence), u.reason)
                    for u in report.unpaired])]


def render_ab_md(report: AbReport, write_line: WriteLine, *,
                 caliber: Caliber | None = None, notes: Sequence[str] = (),
                 noise_floor: float | None = None) -> None:
    """An A/B in markdown. With a caliber (a campaign's ab.md): its caliber, `notes` and the
    method; without (two runs compared): the sides and the report's own notes."""
    if caliber is None:
        head = _pair_head(report)
    else:
        title = caliber.text("op") or ", ".join(dict.fromkeys(r.op for r in report.rows)) or "-"
        floor = stated_floor(report, caliber, noise_floor)
        head = [*campaign_head(str(title), caliber, floor, notes), *_method_lines(report)]
    for line in [*head, *ab_tables(report)]:
        write_line(line)


def render_markdown(source: AbReport | AbDocument | Mapping[str, Any] | Sequence[Any],
                    caliber: Caliber | Mapping[str, Any], *, noise_floor: float | None = None,
                    notes: Sequence[str] = ()) -> str:
    """ab.md's text of an AbReport, a document (or ab.json's data) or a list of its rows."""
    out: list[str] = []
    render_ab_md(as_report(source), out.append, notes=notes, noise_floor=noise_floor,
                 caliber=caliber if isinstance(caliber, Caliber) else caliber_of(caliber))
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------- csv and json
RUN_CSV_FIELDS = ("source", "op", "dtype", "rows", "failed", "fallback", "geomean_speedup")

def write_csv(write_line: WriteLine, header: Sequence[str], rows: Sequence[Any]) -> None:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    writer.writerows([["" if c is None else c for c in row] for row in rows])
    for line in buffer.getvalue().splitlines():
        write_line(line)


def render_runs_csv(sources: Sequence[Source], write_line: WriteLine) -> None:
    write_csv(write_line, RUN_CSV_FIELDS, [(s.label, g.op, g.dtype, g.rows, g.failed, g.fallback,
                                            g.geomean_speedup) for s in sources
                                           for g in run_groups(s.rows)])


AB_CSV_FIELDS = ("op", "dtype", "shape", "occurrence", "a_ms", "b_ms", "speedup_pct", "min_pct",
                 "max_pct", "ci_low_pct", "ci_high_pct", "noise_floor_pct", "rounds", "verdict",
                 "flags", "unpaired")


def render_ab_csv(report: AbReport, write_line: WriteLine) -> None:
    """One line per paired row, then one per unpaired row (verdict "unpaired", its reason)."""
    paired = [(r.op, r.dtype, r.shape, r.occurrence, r.stats.a_ms, r.stats.b_ms,
               r.stats.speedup_pct, r.stats.min_pct, r.stats.max_pct, r.stats.ci_low_pct,
               r.stats.ci_high_pct, r.stats.noise_floor_pct, r.stats.rounds,
               r.stats.verdict.value, ";".join(r.flags), "") for r in report.rows]
    unpaired = [(u.op, u.dtype, u.shape, u.occurrence, *[None] * 9, "unpaired", "", u.reason)
                for u in report.unpaired]
    write_csv(write_line, AB_CSV_FIELDS, [*paired, *unpaired])


def _json(document: Any, write_line: WriteLine) -> None:
    write_line(json.dumps(document, indent=2,
                          default=lambda o: o.value if isinstance(o, Enum) else str(o)))


def render_ab_json(report: AbReport, write_line: WriteLine) -> None:
    _json({"speedup": "(A_ms / B_ms - 1) * 100", "self_tuned": SELF_TUNED in report.notes,
           **asdict(report)}, write_line)


def render_runs_json(sources: Sequence[Source], write_line: WriteLine) -> None:
    _json([{"source": s.label, "kind": s.kind, "notes": s.notes,
            "caliber": sides_caliber([s]) if s.identities else None,
            "groups": [asdict(g) for g in run_groups(s.rows)]} for s in sources], write_line)


RUN_RENDERERS = {"md": render_runs_md, "csv": render_runs_csv, "json": render_runs_json}
AB_RENDERERS = {"md": render_ab_md, "csv": render_ab_csv, "json": render_ab_json}


# ---------------------------------------------------------------- png


def render_png(source: AbReport | AbDocument | Mapping[str, Any] | Sequence[Any],
               path: str | Path, *, noise_floor: float | None = None) -> bool:
    """ab.png of a document (its caliber titles the chart, its operators' verdicts colour a
    suite's lines), an AbReport or a list of rows; False (nothing written) without matplotlib."""
    doc = None if isinstance(source, AbReport) else as_document(source)
    caliber = doc.caliber if doc else Caliber()
    ops = doc.operators if doc and doc.operators else {}
    report = as_report(doc or source)
    return plot.render_png(report, path, caliber=caliber,
                           noise_floor=stated_floor(report, caliber, noise_floor),
                           verdicts={op: o.verdict for op, o in ops.items()} or None,
                           capped=[op for op, o in ops.items() if stats.hit_max_rounds(o.reason)])
