"""The A/B report: ab.md for a pull request and ab.png, rendered from a campaign's ab.json.

ab.json is the campaign's machine result; `ab_document` builds it from summary.AbReport, and
`harness report DIR` (re)writes ab.md and ab.png beside it. Its schema, "harness-ab/1":

    schema               "harness-ab/1" (required)
    caliber              {backend, op, axis, variable, a, b, level, timer, shape_mode, rounds,
                          noise_floor_pct, noise_floor_source, seed,
                          image_digests: {"A": [...], "B": [...]}, harness_commit, harness_dirty}
                         every key optional: a missing one reads "not recorded"
    rows                 one per paired (op, dtype, shape, occurrence), required:
                         {op, dtype, shape, occurrence (1: the first measurement of the key),
                          a_ms, b_ms (medians over rounds), speedup_pct (median over rounds of
                          (A_ms / B_ms - 1) * 100), ci_low_pct, ci_high_pct (95% bootstrap; null
                          with one round), min_pct, max_pct, rounds,
                          verdict (a stats.Verdict value: "faster", "slower", "same",
                          "same (flagged)"), flags (["A:<marker>", "B:<marker>", ...]),
                          round_speedups_pct (optional: each round's speedup, in order; an
                          A/A campaign's give stats.noise_floor_from_aa its input)}
    unpaired             [{op, dtype, shape, occurrence, reason}]: rows not measured on both sides
    geomean_speedup_pct  over the paired rows; null when none paired (computed when absent)
    liveness             {status, detail} or [status, detail] (optional): status "live",
                         "unknown", "not_live" or "unchecked"; detail is the note printed, e.g.
                         "axis live: compiled artifacts differ" (not_live: begins AXIS_NOT_LIVE)
    notes                ["..."]: anything else the reader must know before the table
"""

from __future__ import annotations

import io
import json
import math
import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from harness import stats
from harness.errors import UsageError
from harness.fsutil import atomic_write_text
from harness.summary import DIRECT_MARKER, AbReport, AbRow, Unpaired

SCHEMA = "harness-ab/1"
AB_JSON, AB_MD, AB_PNG = "ab.json", "ab.md", "ab.png"
NOT_RECORDED = "not recorded"
LIVENESS = ("live", "unknown", "not_live", "unchecked")
NOT_LIVE = "AXIS_NOT_LIVE"
ROW_KEYS = ("op", "dtype", "shape", "a_ms", "b_ms", "speedup_pct", "min_pct", "max_pct",
            "rounds", "verdict")
NO_PLOT = "matplotlib is not installed (pip install 'flaggems-bench-harness[plot]')"


# ---------------------------------------------------------------- ab.json <-> summary.AbReport


def row_dict(row: AbRow) -> dict[str, Any]:
    """The ab.json row of one summary.AbRow."""
    s = row.stats
    return {"op": row.op, "dtype": row.dtype, "shape": row.shape, "occurrence": row.occurrence,
            "a_ms": s.a_ms, "b_ms": s.b_ms, "speedup_pct": s.median_speedup_pct,
            "ci_low_pct": s.ci_low_pct, "ci_high_pct": s.ci_high_pct, "min_pct": s.min_pct,
            "max_pct": s.max_pct, "rounds": s.rounds, "verdict": s.verdict.value,
            "flags": list(row.flags), "round_speedups_pct": list(s.round_speedups_pct)}


def ab_document(report: AbReport, caliber: Mapping[str, Any], *,
                liveness: Mapping[str, str] | Sequence[str] | None = None,
                notes: Sequence[str] = ()) -> dict[str, Any]:
    """The ab.json document of an A/B; the report's own notes come before `notes`."""
    return {"schema": SCHEMA, "speedup": "(A_ms / B_ms - 1) * 100",
            "caliber": {"noise_floor_pct": report.noise_floor_pct, "seed": report.seed,
                        **caliber},
            "rows": [row_dict(r) for r in report.rows],
            "unpaired": [asdict(u) for u in report.unpaired],
            "geomean_speedup_pct": report.geomean_speedup_pct,
            "liveness": liveness,
            "notes": [*report.notes, *notes]}


def _opt(value: Any) -> float | None:
    return None if value is None else float(value)


def _verdict(index: int, value: Any) -> stats.Verdict:
    try:
        return stats.Verdict(value)
    except ValueError:
        raise UsageError(f"row {index}: verdict={value!r}; expected one of: "
                         f"{', '.join(v.value for v in stats.Verdict)}") from None


def _row(index: int, d: Mapping[str, Any]) -> AbRow:
    """An ab.json row (or summary's JSON row, RowStats nested under "stats") as an AbRow."""
    d = {**d, **d.get("stats", {})}
    d.setdefault("speedup_pct", d.get("median_speedup_pct"))
    lacking = [k for k in ROW_KEYS if d.get(k) is None]
    if lacking:
        raise UsageError(f"row {index} of the A/B lacks {', '.join(lacking)}: {dict(d)!r}")
    verdict, flags = _verdict(index, d["verdict"]), tuple(d.get("flags") or ())
    return AbRow(op=str(d["op"]), dtype=str(d["dtype"]), shape=str(d["shape"]),
                 occurrence=int(d.get("occurrence") or 1), flags=flags, stats=stats.RowStats(
                     a_ms=float(d["a_ms"]), b_ms=float(d["b_ms"]),
                     median_speedup_pct=float(d["speedup_pct"]), min_pct=float(d["min_pct"]),
                     max_pct=float(d["max_pct"]), ci_low_pct=_opt(d.get("ci_low_pct")),
                     ci_high_pct=_opt(d.get("ci_high_pct")), rounds=int(d["rounds"]),
                     flagged=bool(flags) or verdict is stats.Verdict.UNRELIABLE,
                     verdict=verdict,
                     round_speedups_pct=tuple(map(float, d.get("round_speedups_pct") or ()))))


def as_report(source: Any) -> AbReport:
    """A summary.AbReport from itself, an ab.json document, or a list of ab.json rows."""
    if isinstance(source, AbReport):
        return source
    doc = source if isinstance(source, Mapping) else {"rows": list(source)}
    rows = tuple(_row(i, r) for i, r in enumerate(doc.get("rows") or ()))
    caliber = doc.get("caliber") or {}
    geomean = doc.get("geomean_speedup_pct")
    if geomean is None and rows:  # the same geometric mean as stats.summarize_ab
        ratios = (1.0 + r.stats.median_speedup_pct / 100.0 for r in rows)
        geomean = (stats.geometric_mean(ratios) - 1.0) * 100.0
    return AbReport(
        a_label=str(caliber.get("a", "A")), b_label=str(caliber.get("b", "B")), rows=rows,
        unpaired=tuple(Unpaired(op=str(u.get("op")), dtype=str(u.get("dtype")),
                                shape=str(u.get("shape")), occurrence=int(u.get("occurrence") or 1),
                                reason=str(u.get("reason") or "-"))
                       for u in doc.get("unpaired") or ()),
        geomean_speedup_pct=_opt(geomean),
        noise_floor_pct=float(caliber.get("noise_floor_pct") or math.nan),
        seed=int(caliber.get("seed") or 0),
        direct_rows=sum(1 for r in rows if any(DIRECT_MARKER in f for f in r.flags)),
        notes=tuple(doc.get("notes") or ()))


def _noise_floor(report: AbReport, caliber: Mapping[str, Any], given: float | None) -> float | None:
    """The floor to state: the one given, else the caliber's, else the report's (nan: none)."""
    for value in (given, caliber.get("noise_floor_pct"), report.noise_floor_pct):
        if value is not None and math.isfinite(float(value)):
            return float(value)
    return None


def liveness_note(liveness: Any, axis: object = None) -> str | None:
    """The note a liveness verdict reads as: its detail; a dead axis's always begins with the
    AXIS_NOT_LIVE marker, so that the report warns and grep finds it."""
    if not liveness:
        return None
    if isinstance(liveness, Mapping):
        status, detail = liveness.get("status"), liveness.get("detail")
    else:
        status, detail = (*liveness, None, None)[:2]
    if status not in LIVENESS:
        raise UsageError(f"liveness status={status!r}; expected one of: {', '.join(LIVENESS)}")
    detail = str(detail or f"axis {status}")
    if status == "not_live" and not detail.startswith(NOT_LIVE):
        detail = f"{NOT_LIVE} axis={axis or '-'}: {detail}"
    return detail


# ---------------------------------------------------------------- markdown


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:+.1f}"


def _ms(value: float) -> str:
    """Four significant digits, never an exponent: 0.001400, 0.06400, 237.5, 12346."""
    places = 3 - math.floor(math.log10(value)) if value > 0 else 3
    return f"{value:.{max(0, places)}f}"


def _cells(row: AbRow) -> list[str]:
    s = row.stats
    shape = row.shape if row.occurrence == 1 else f"{row.shape} (#{row.occurrence})"
    interval = "-" if s.ci_low_pct is None else f"[{_pct(s.ci_low_pct)}, {_pct(s.ci_high_pct)}]"
    verdict = s.verdict.value
    if s.verdict in (stats.Verdict.FASTER, stats.Verdict.SLOWER):
        verdict = f"**{verdict}**"
    return [row.op, row.dtype, shape, _ms(s.a_ms), _ms(s.b_ms), _pct(s.median_speedup_pct),
            f"{_pct(s.min_pct)}..{_pct(s.max_pct)}", interval, verdict,
            " ".join(row.flags) or "-"]


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    return lines + ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in rows]


def _digests(value: Any) -> str:
    """{"A": [...], "B": [...]} as "A d1; B d2"; a list or a string as it is."""
    if isinstance(value, Mapping):
        value = [f"{side} {', '.join(d) if isinstance(d, (list, tuple)) else d}"
                 for side, d in value.items() if d]
        return "; ".join(value) or "none recorded"
    if isinstance(value, (list, tuple)):
        return ", ".join(map(str, value)) or "none recorded"
    return str(value) if value else "none recorded"


def caliber_lines(caliber: Mapping[str, Any], noise_floor: float | None) -> list[str]:
    """The caliber as bullet lines: what a reader needs before trusting any row."""
    def get(key: str) -> str:
        value = caliber.get(key)
        return NOT_RECORDED if value is None or value == "" else str(value)

    axis = get("axis")
    if axis == "none":
        axis_line = "none (an A/A campaign: both sides identical; it measures the noise floor)"
    else:
        var = caliber.get("variable")
        axis_line = (f"{axis}{f' ({var})' if var and var != axis else ''}: "
                     f"A={get('a')} (off), B={get('b')} (on)")
    floor = NOT_RECORDED if noise_floor is None else f"{noise_floor:.1f}%"
    if caliber.get("noise_floor_source"):
        floor += f" ({caliber['noise_floor_source']})"
    dirty = " (dirty: uncommitted changes)" if caliber.get("harness_dirty") else ""
    return [f"- backend: {get('backend')}", f"- axis: {axis_line}",
            f"- level: {get('level')}", f"- timer: {get('timer')}",
            f"- shape mode: {get('shape_mode')}",
            f"- rounds: {get('rounds')} per side, interleaved A B B A ...",
            f"- noise floor: {floor}", f"- image digest: {_digests(caliber.get('image_digests'))}",
            f"- harness commit: {get('harness_commit')}{dirty}"]


def render_markdown(ab_result_or_rows: Any, caliber: Mapping[str, Any], *,
                    noise_floor: float | None = None, notes: Sequence[str] = ()) -> str:
    """ab.md: caliber, notes, the table, the geometric mean and the unpaired rows."""
    report = as_report(ab_result_or_rows)
    floor = _noise_floor(report, caliber, noise_floor)
    title = caliber.get("op") or ", ".join(dict.fromkeys(r.op for r in report.rows)) or "-"
    out = [f"# A/B: {caliber.get('axis') or 'axis ' + NOT_RECORDED} on {title}", "",
           "## Caliber", "", *caliber_lines(caliber, floor), ""]
    if notes:
        out += ["## Notes", "", *(f"- {n}" for n in notes), ""]
    if any(n.startswith(NOT_LIVE) for n in notes):
        out += ["**The axis showed no sign of reaching the compiler: no row below says "
                "anything about the switch.**", ""]
    out += ["speedup % = (A_ms / B_ms - 1) * 100: positive when B is faster. A row is faster or "
            "slower only where its 95% bootstrap interval excludes zero and its median exceeds "
            "the noise floor; a flagged row (a side timed directly, or self-tuned a missing "
            "replay key) reads \"same (flagged)\" whatever its numbers.", ""]
    out += _table(("operator", "dtype", "shape", "A ms", "B ms", "speedup %", "min..max %",
                   "interval %", "verdict", "flags"), [_cells(r) for r in report.rows])
    flagged = sum(1 for r in report.rows if r.stats.flagged)
    out += ["", f"geometric mean speedup: {_pct(report.geomean_speedup_pct)}% over "
                f"{len(report.rows)} paired rows ({flagged} flagged)"]
    if report.rows and all(r.stats.rounds < 2 for r in report.rows):
        out.append("one round per side: no interval, so no row is called faster or slower")
    if report.unpaired:
        out += ["", f"## Unpaired rows ({len(report.unpaired)})", "",
                *_table(("operator", "dtype", "shape", "reason"),
                        [(u.op, u.dtype, u.shape, u.reason) for u in report.unpaired])]
    else:
        out += ["", "unpaired rows: none"]
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------- PNG


COLORS = {stats.Verdict.FASTER: "tab:green", stats.Verdict.SLOWER: "tab:red",
          stats.Verdict.SAME: "tab:blue", stats.Verdict.UNRELIABLE: "tab:gray"}


def render_png(rows: Any, path: str | Path, *, noise_floor: float | None = None) -> bool:
    """ab.png: per-shape speedup with its interval as a bar; False (nothing written) without
    matplotlib. Uses the Agg canvas directly: no pyplot, no global backend choice."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        return False
    report = as_report(rows)
    n = len(report.rows)
    fig = Figure(figsize=(9, 1.6 + 0.3 * max(n, 1)))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    floor = _noise_floor(report, {}, noise_floor)
    if floor:
        ax.axvspan(-floor, floor, color="0.92", zorder=0, label=f"noise floor ±{floor:.1f}%")
    ax.axvline(0.0, color="black", linewidth=0.8)
    # Linear within +-10%, logarithmic beyond: a few-percent effect stays readable beside a
    # flagged row that the direct timer put at +2500%.
    ax.set_xscale("symlog", linthresh=10.0)
    for y, row in zip(range(n - 1, -1, -1), report.rows, strict=True):
        s = row.stats
        color = COLORS[s.verdict]
        if s.ci_low_pct is not None and s.ci_high_pct is not None:
            ax.hlines(y, s.ci_low_pct, s.ci_high_pct, color=color, linewidth=2)
        ax.plot([s.median_speedup_pct], [y], "o", color=color)
    for verdict, color in COLORS.items():
        if any(r.stats.verdict is verdict for r in report.rows):
            ax.plot([], [], "o", color=color, label=verdict.value)
    ax.set_yticks(list(range(n - 1, -1, -1)))
    ax.set_yticklabels([f"{r.op} {r.dtype} {r.shape}"[:60] for r in report.rows], fontsize=7)
    ax.set_xlabel("speedup % = (A_ms / B_ms - 1) * 100 (right: B faster; log beyond ±10%); "
                  "bar: 95% interval")
    if not n:
        ax.text(0.5, 0.5, "no paired rows", transform=ax.transAxes, ha="center")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="best", fontsize=7)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=120)
    _atomic_write_bytes(Path(path), buffer.getvalue())
    return True


def _atomic_write_bytes(target: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


# ---------------------------------------------------------------- files


def load_ab(path: str | Path) -> dict[str, Any]:
    """The ab.json at `path` (or inside the directory `path`); UsageError if it is not one."""
    target = Path(path)
    target = target / AB_JSON if target.is_dir() else target
    try:
        doc = json.loads(target.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"no {AB_JSON} at {str(target)!r}: give a campaign directory") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise UsageError(f"{str(target)!r} is not JSON: {exc}") from None
    schema = doc.get("schema") if isinstance(doc, dict) else None
    if schema != SCHEMA or not isinstance(doc.get("rows"), list):
        raise UsageError(f"{str(target)!r} is not an A/B result: schema={schema!r}, "
                         f"expected {SCHEMA!r} with a list of rows")
    return doc


def write_report(path: str | Path) -> tuple[Path, Path | None]:
    """(Re)write ab.md and ab.png beside the ab.json at `path`; ab.png is None without
    matplotlib."""
    target = Path(path)
    directory = target if target.is_dir() else target.parent
    doc = load_ab(target)
    caliber = doc.get("caliber") or {}
    live = liveness_note(doc.get("liveness"), caliber.get("axis"))
    notes = [n for n in (live, *(doc.get("notes") or ())) if n]
    from harness import suite_report  # it renders with this module's table helpers

    text = (suite_report.render_markdown(doc, notes) if suite_report.is_suite(doc)
            else render_markdown(doc, caliber, notes=notes))
    md = atomic_write_text(directory / AB_MD, text)
    png = directory / AB_PNG
    return md, png if render_png(doc, png) else None
