"""The A/B report: ab.md for a pull request and ab.png, rendered from a campaign's ab.json.

ab.json is the campaign's machine result; `ab_document` builds it from summary.AbReport, and
`harness report DIR` (re)writes ab.md and ab.png beside it. Its schema, "harness-ab/1":

    schema               "harness-ab/1" (required)
    caliber              {backend, op, axis, variable, a, b, level, timer, shape_mode, rounds,
                          noise_floor_pct, noise_floor_source,
                          image_digests: {"A": [...], "B": [...]}, harness_commit, harness_dirty}
                         every key optional: a missing one reads "not recorded"
    rows                 one per paired (op, dtype, shape, occurrence), required:
                         {op, dtype, shape, occurrence (1: the first measurement of the key),
                          a_ms, b_ms (medians over rounds), speedup_pct (geometric mean over
                          rounds of A_r / B_r, as (ratio - 1) * 100), ci_low_pct, ci_high_pct
                          (the method's interval; null with one round), min_pct, max_pct,
                          rounds, p_value, p_adjusted (t test of mean log ratio = 0, and its
                          Benjamini-Hochberg adjustment; null with one round),
                          verdict (a stats.Verdict value: "faster", "slower", "same",
                          "inconclusive", "flagged"), flags (["A:<marker>", ...]),
                          round_speedups_pct (optional: each round's speedup, in order; an
                          A/A campaign's give stats.noise_floor_from_aa its input)}
                         A row without a p_value key comes from an older harness: its
                         "same (flagged)" reads "flagged", its "same" (which meant "might or
                         might not differ") reads "inconclusive".
    method               {name, confidence, fdr_q, text} (optional: absent, an older harness's
                         bootstrap of the median when its rows lack p_value)
    unpaired             [{op, dtype, shape, occurrence, reason}]: rows not measured on both sides
    geomean_speedup_pct  over the paired rows; null when none paired (computed when absent)
    geomean_ci_low_pct, geomean_ci_high_pct
                         t interval on the mean of the rows' log ratios (optional; null below
                         two rows)
    geomean_by_op        [{op, speedup_pct, ci_low_pct, ci_high_pct, rows}] (optional: renderers
                         recompute it from the rows)
    liveness             {status, detail} or [status, detail] (optional): status "live",
                         "unknown", "not_live" or "unchecked"; detail is the note printed, e.g.
                         "axis live: compiled artifacts differ" (not_live: begins AXIS_NOT_LIVE)
    notes                ["..."]: anything else the reader must know before the table
    status               "complete" or "interrupted" (optional: absent reads complete)
    interrupted          {signal, step}: what stopped an interrupted campaign, and where
    finished_rounds      [0, 1, ...]: rounds both sides finished; the rows compare these only
    finished_steps       ["A/r0", "B/r0", ...]: every step that ran to its end
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from harness import plot, stats
from harness.boundary import DIRECT_MARKER
from harness.errors import UsageError
from harness.fsutil import atomic_write_text
from harness.sources import AB_JSON
from harness.summary import AbReport, AbRow, Unpaired

SCHEMA = "harness-ab/1"
AB_MD, AB_PNG = "ab.md", "ab.png"
NOT_RECORDED = "not recorded"
LIVENESS = ("live", "unknown", "not_live", "unchecked")
NOT_LIVE = "AXIS_NOT_LIVE"
INCOMPLETE = "INCOMPLETE"
ROW_KEYS = ("op", "dtype", "shape", "a_ms", "b_ms", "speedup_pct", "min_pct", "max_pct",
            "rounds", "verdict")
NUMERIC_KEYS = ("a_ms", "b_ms", "speedup_pct", "median_speedup_pct", "min_pct", "max_pct",
                "ci_low_pct", "ci_high_pct", "rounds", "occurrence", "p_value", "p_adjusted")
# An older harness's verdicts: its "same" meant "might or might not differ".
LEGACY_VERDICTS = {"same (flagged)": stats.Verdict.FLAGGED, "same": stats.Verdict.INCONCLUSIVE}
LEGACY_METHOD = stats.Method(name="bootstrap of the median (an older harness)", fdr_q=None)
NO_PLOT = ("matplotlib is not installed; pip install -r requirements/cpu.txt installs it "
           "(or pip install 'matplotlib>=3.5,<4')")


# ---------------------------------------------------------------- ab.json <-> summary.AbReport


def row_dict(row: AbRow) -> dict[str, Any]:
    """The ab.json row of one summary.AbRow."""
    s = row.stats
    return {"op": row.op, "dtype": row.dtype, "shape": row.shape, "occurrence": row.occurrence,
            "a_ms": s.a_ms, "b_ms": s.b_ms, "speedup_pct": s.speedup_pct,
            "ci_low_pct": s.ci_low_pct, "ci_high_pct": s.ci_high_pct, "min_pct": s.min_pct,
            "max_pct": s.max_pct, "rounds": s.rounds, "p_value": s.p_value,
            "p_adjusted": s.p_adjusted, "verdict": s.verdict.value,
            "flags": list(row.flags), "round_speedups_pct": list(s.round_speedups_pct)}


def ab_document(report: AbReport, caliber: Mapping[str, Any], *,
                liveness: Mapping[str, str] | Sequence[str] | None = None,
                notes: Sequence[str] = ()) -> dict[str, Any]:
    """The ab.json document of an A/B; the report's own notes come before `notes`."""
    return {"schema": SCHEMA, "speedup": "(A_ms / B_ms - 1) * 100",
            "caliber": {"noise_floor_pct": report.noise_floor_pct, **caliber},
            "method": {**asdict(report.method), "text": report.method.text},
            "rows": [row_dict(r) for r in report.rows],
            "unpaired": [asdict(u) for u in report.unpaired],
            "geomean_speedup_pct": report.geomean_speedup_pct,
            "geomean_ci_low_pct": report.geomean_ci_low_pct,
            "geomean_ci_high_pct": report.geomean_ci_high_pct,
            "geomean_by_op": [{"op": op, **asdict(g)} for op, g in report.op_geomeans],
            "liveness": liveness,
            "notes": [*report.notes, *notes]}


def _opt(value: Any) -> float | None:
    return None if value is None else float(value)


def _verdict(index: int, value: Any, legacy: bool) -> stats.Verdict:
    if legacy and value in LEGACY_VERDICTS:
        return LEGACY_VERDICTS[value]
    try:
        return stats.Verdict(value)
    except ValueError:
        raise UsageError(f"row {index}: verdict={value!r}; expected one of: "
                         f"{', '.join(v.value for v in stats.Verdict)}") from None


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check_row(index: int, d: Any) -> None:
    """A row must be an object whose numeric fields hold JSON numbers (null where optional)."""
    if not isinstance(d, Mapping) or not isinstance(d.get("stats", {}), Mapping):
        raise UsageError(f"row {index} of the A/B is {d!r:.80}; expected an object with "
                         f"{', '.join(ROW_KEYS)}")
    d = {**d, **d.get("stats", {})}
    for key in NUMERIC_KEYS:
        if not (d.get(key) is None or _is_number(d[key])):
            raise UsageError(f"row {index} of the A/B: {key}={d[key]!r}; expected a number")
    flags = d.get("flags")
    if not (flags is None or isinstance(flags, list) and all(isinstance(f, str) for f in flags)):
        raise UsageError(f"row {index} of the A/B: flags={flags!r}; expected a list of strings")
    series = d.get("round_speedups_pct")
    if not (series is None or isinstance(series, list) and all(map(_is_number, series))):
        raise UsageError(f"row {index} of the A/B: round_speedups_pct={series!r}; expected a "
                         "list of numbers")


def _flat(d: Mapping[str, Any]) -> dict[str, Any]:
    """An ab.json row, or summary's JSON row with RowStats nested under "stats", flattened."""
    d = {**d, **d.get("stats", {})}
    d.setdefault("speedup_pct", d.get("median_speedup_pct"))  # summary's JSON before the t test
    return d


def _row(index: int, d: Mapping[str, Any]) -> AbRow:
    """An ab.json row (or summary's JSON row) as an AbRow."""
    _check_row(index, d)
    d = _flat(d)
    lacking = [k for k in ROW_KEYS if d.get(k) is None]
    if lacking:
        raise UsageError(f"row {index} of the A/B lacks {', '.join(lacking)}: {dict(d)!r}")
    if not float(d["speedup_pct"]) > -100.0:  # also nan: B took no time or less than none
        raise UsageError(f"row {index}: speedup_pct={d['speedup_pct']!r}; expected a number "
                         "above -100")
    verdict = _verdict(index, d["verdict"], "p_value" not in d)
    flags = tuple(d.get("flags") or ())
    return AbRow(op=str(d["op"]), dtype=str(d["dtype"]), shape=str(d["shape"]),
                 occurrence=int(d.get("occurrence") or 1), flags=flags, stats=stats.RowStats(
                     a_ms=float(d["a_ms"]), b_ms=float(d["b_ms"]),
                     speedup_pct=float(d["speedup_pct"]), min_pct=float(d["min_pct"]),
                     max_pct=float(d["max_pct"]), ci_low_pct=_opt(d.get("ci_low_pct")),
                     ci_high_pct=_opt(d.get("ci_high_pct")), rounds=int(d["rounds"]),
                     flagged=bool(flags) or verdict is stats.Verdict.FLAGGED,
                     verdict=verdict,
                     round_speedups_pct=tuple(map(float, d.get("round_speedups_pct") or ())),
                     p_value=_opt(d.get("p_value")), p_adjusted=_opt(d.get("p_adjusted"))))


def _method(doc: Mapping[str, Any], rows: Sequence[Any]) -> stats.Method:
    """The document's method; an older harness's when it names none and its rows lack p_value."""
    given = doc.get("method")
    if given is None:
        legacy = bool(rows) and all("p_value" not in _flat(r) for r in rows)
        return LEGACY_METHOD if legacy else stats.Method()
    expected = "expected {name, confidence (0 to 1), fdr_q (0 to 1, or null)}"
    if not isinstance(given, Mapping):
        raise UsageError(f"method={given!r} is not a method of judging rows; {expected}")
    try:
        q = given.get("fdr_q")
        return stats.Method(name=str(given.get("name") or stats.T_METHOD),
                            confidence=float(given.get("confidence", stats.CONFIDENCE)),
                            fdr_q=None if q is None else float(q))
    except (TypeError, ValueError) as exc:
        raise UsageError(f"method={given!r} is not a method of judging rows ({exc}); "
                         f"{expected}") from None


def as_report(source: Any) -> AbReport:
    """A summary.AbReport from itself, an ab.json document, or a list of ab.json rows."""
    if isinstance(source, AbReport):
        return source
    doc = source if isinstance(source, Mapping) else {"rows": list(source)}
    rows = tuple(_row(i, r) for i, r in enumerate(doc.get("rows") or ()))
    method = _method(doc, doc.get("rows") or ())
    caliber = doc.get("caliber") or {}
    speedups = [r.stats.speedup_pct for r in rows]
    geomean, low, high = (doc.get(f"geomean_{k}_pct") for k in ("speedup", "ci_low", "ci_high"))
    computed = stats.geomean_stats(speedups, method.confidence)  # as stats.summarize_ab does
    if geomean is None and computed is not None:
        geomean, low, high = computed.speedup_pct, computed.ci_low_pct, computed.ci_high_pct
    by_op = stats.group_geomeans([(r.op, r.stats) for r in rows], str, method.confidence)
    return AbReport(
        a_label=str(caliber.get("a", "A")), b_label=str(caliber.get("b", "B")), rows=rows,
        unpaired=tuple(Unpaired(op=str(u.get("op")), dtype=str(u.get("dtype")),
                                shape=str(u.get("shape")), occurrence=int(u.get("occurrence") or 1),
                                reason=str(u.get("reason") or "-"))
                       for u in doc.get("unpaired") or ()),
        geomean_speedup_pct=_opt(geomean),
        noise_floor_pct=float(caliber.get("noise_floor_pct") or math.nan),
        direct_rows=sum(1 for r in rows if any(DIRECT_MARKER in f for f in r.flags)),
        notes=tuple(doc.get("notes") or ()), method=method, geomean_ci_low_pct=_opt(low),
        geomean_ci_high_pct=_opt(high), op_geomeans=by_op)


def _noise_floor(report: AbReport, caliber: Mapping[str, Any], given: float | None) -> float | None:
    """The floor to state: the one given, else the caliber's, else the report's (nan: none)."""
    for value in (given, caliber.get("noise_floor_pct"), report.noise_floor_pct):
        if value is not None and math.isfinite(float(value)):
            return float(value)
    return None


def status_note(doc: Mapping[str, Any]) -> str | None:
    """The note of an interrupted campaign: that it is incomplete, what stopped it, and which
    units (an operator's round, both sides) finished; None for a complete one."""
    if doc.get("status") != "interrupted":
        return None
    stop = doc.get("interrupted") or {}
    if "finished_units" in doc:
        units = doc.get("finished_units") or []
        planned = len(doc.get("units") or ()) or NOT_RECORDED
        finished = ", ".join(map(str, units)) or "none"
        return (f"{INCOMPLETE}: interrupted by {stop.get('signal') or NOT_RECORDED} during "
                f"{stop.get('step') or NOT_RECORDED}; finished units: {finished} ({len(units)} "
                f"of {planned}); the table compares the finished rounds only")
    rounds = doc.get("finished_rounds") or []
    planned = (doc.get("caliber") or {}).get("rounds") or NOT_RECORDED
    finished = ", ".join(f"r{r}" for r in rounds) or "none"
    return (f"{INCOMPLETE}: interrupted by {stop.get('signal') or NOT_RECORDED} during "
            f"{stop.get('step') or NOT_RECORDED}; finished rounds: {finished} ({len(rounds)} of "
            f"{planned}); the table compares the finished rounds only")


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


def _interval(low: float | None, high: float | None) -> str:
    return "-" if low is None or high is None else f"[{_pct(low)}, {_pct(high)}]"


def _ms(value: float) -> str:
    """Four significant digits, never an exponent: 0.001400, 0.06400, 237.5, 12346."""
    places = 3 - math.floor(math.log10(value)) if value > 0 else 3
    return f"{value:.{max(0, places)}f}"


def _cells(row: AbRow) -> list[str]:
    s = row.stats
    shape = row.shape if row.occurrence == 1 else f"{row.shape} (#{row.occurrence})"
    interval = _interval(s.ci_low_pct, s.ci_high_pct)
    verdict = s.verdict.value
    if s.verdict in (stats.Verdict.FASTER, stats.Verdict.SLOWER):
        verdict = f"**{verdict}**"
    return [row.op, row.dtype, shape, _ms(s.a_ms), _ms(s.b_ms), _pct(s.speedup_pct),
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
    if any(n.startswith(INCOMPLETE) for n in notes):
        out += ["**This campaign is incomplete: it was interrupted before every round ran.**",
                ""]
    if any(n.startswith(NOT_LIVE) for n in notes):
        out += ["**The axis showed no sign of reaching the compiler: no row below says "
                "anything about the switch.**", ""]
    bh = "" if report.method.fdr_q is None else " and survives false-discovery control"
    rule = (f"A row is faster or slower only where its interval excludes zero, its effect exceeds "
            f"the noise floor{bh}; same where the whole interval lies inside +-noise floor; "
            "inconclusive otherwise (more rounds would decide).")
    if report.method == LEGACY_METHOD:
        rule = ("Verdicts are the older harness's, its \"same\" (might or might not differ) read "
                "as inconclusive.")
    out += ["speedup % = (A_ms / B_ms - 1) * 100: positive when B is faster. Method: "
            f"{report.method.text}. {rule} A flagged row (a side timed directly, or self-tuned a "
            "missing replay key) reads \"flagged\" whatever its numbers.", ""]
    out += _table(("operator", "dtype", "shape", "A ms", "B ms", "speedup %", "min..max %",
                   "interval %", "verdict", "flags"), [_cells(r) for r in report.rows])
    flagged = sum(1 for r in report.rows if r.stats.flagged)
    interval = _interval(report.geomean_ci_low_pct, report.geomean_ci_high_pct)
    out += ["", f"geometric mean speedup: {_pct(report.geomean_speedup_pct)}% over "
                f"{len(report.rows)} paired rows ({flagged} flagged), interval over rows "
                f"{interval}"]
    if len(report.op_geomeans) > 1:
        out += ["", *_table(("operator", "rows", "geometric mean speedup %", "interval %"),
                            [(op, str(g.rows), _pct(g.speedup_pct),
                              _interval(g.ci_low_pct, g.ci_high_pct))
                             for op, g in report.op_geomeans])]
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


def render_png(rows: Any, path: str | Path, *, noise_floor: float | None = None) -> bool:
    """ab.png of an ab.json document (its caliber titles the chart), an AbReport or a list of
    rows; False (nothing written) without matplotlib."""
    caliber = (rows.get("caliber") or {}) if isinstance(rows, Mapping) else {}
    report = as_report(rows)
    return plot.render_png(report, path, caliber=caliber,
                           noise_floor=_noise_floor(report, caliber, noise_floor))


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
    for key, kind, of in (("caliber", dict, None), ("unpaired", list, dict), ("notes", list, str)):
        value = doc.get(key)
        if value is not None and not (isinstance(value, kind) and (
                of is None or all(isinstance(item, of) for item in value))):
            raise UsageError(f"{str(target)!r}: {key}={value!r:.80} is not accepted; expected "
                             + (f"a list of {'objects' if of is dict else 'strings'}"
                                if of else "an object"))
    try:
        for index, row in enumerate(doc["rows"]):
            _check_row(index, row)
    except UsageError as exc:
        raise UsageError(f"{str(target)!r}: {exc}") from None
    return doc


def write_report(path: str | Path) -> tuple[Path, Path | None]:
    """(Re)write ab.md and ab.png beside the ab.json at `path`; ab.png is None without
    matplotlib."""
    target = Path(path)
    directory = target if target.is_dir() else target.parent
    doc = load_ab(target)
    caliber = doc.get("caliber") or {}
    live = liveness_note(doc.get("liveness"), caliber.get("axis"))
    notes = [n for n in (status_note(doc), live, *(doc.get("notes") or ())) if n]
    from harness import suite_report  # it renders with this module's table helpers

    text = (suite_report.render_markdown(doc, notes) if suite_report.is_suite(doc)
            else render_markdown(doc, caliber, notes=notes))
    md = atomic_write_text(directory / AB_MD, text)
    png = directory / AB_PNG
    return md, png if render_png(doc, png) else None
