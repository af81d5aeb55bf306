"""A/B pairing and the ab.json document: compare two sides, save, load and check the result.

`compare` pairs two sides' rows into an AbReport; `ab_document` is its ab.json, `load_ab` reads
one back and `as_report` turns it into an AbReport again. The schema, "harness-ab/1":

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

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from harness.contract.boundary import DIRECT_MARKER, FLAG_MARKERS
from harness.contract.results import SUCCESS, Row
from harness.errors import UsageError
from harness.fsutil import atomic_write_json, read_json
from harness.report import stats
from harness.report.sources import AB_JSON, CALIBER_FIELDS, Source

SCHEMA = "harness-ab/1"
SELF_TUNED = "not a same-config comparison: both sides tuned for themselves"
ROW_KEYS = ("op", "dtype", "shape", "a_ms", "b_ms", "speedup_pct", "min_pct", "max_pct",
            "rounds", "verdict")
NUMERIC_KEYS = ("a_ms", "b_ms", "speedup_pct", "median_speedup_pct", "min_pct", "max_pct",
                "ci_low_pct", "ci_high_pct", "rounds", "occurrence", "p_value", "p_adjusted")
# An older harness's verdicts: its "same" meant "might or might not differ".
LEGACY_VERDICTS = {"same (flagged)": stats.Verdict.FLAGGED, "same": stats.Verdict.INCONCLUSIVE}
LEGACY_METHOD = stats.Method(name="bootstrap of the median (an older harness)", fdr_q=None)

Key = tuple[str, str, str, int]  # (op, dtype, shape, occurrence): mm measures a key twice


# ---------------------------------------------------------------- pairing


@dataclass(frozen=True)
class AbRow:
    op: str
    dtype: str
    shape: str
    occurrence: int
    stats: stats.RowStats
    flags: tuple[str, ...]  # "A:<marker>" / "B:<marker>" for every flag marker of either side


@dataclass(frozen=True)
class Unpaired:
    op: str
    dtype: str
    shape: str
    occurrence: int
    reason: str


@dataclass(frozen=True)
class AbReport:
    """An A/B of two sides (each a list of rounds); speedup_pct = (A_ms / B_ms - 1) * 100."""

    a_label: str
    b_label: str
    rows: tuple[AbRow, ...]
    unpaired: tuple[Unpaired, ...]
    geomean_speedup_pct: float | None
    noise_floor_pct: float
    direct_rows: int  # paired rows where either side carries DIRECT_MARKER
    notes: tuple[str, ...]
    method: stats.Method = stats.Method()
    geomean_ci_low_pct: float | None = None  # None: fewer than two paired rows
    geomean_ci_high_pct: float | None = None
    op_geomeans: tuple[tuple[str, stats.GeomeanStats], ...] = ()  # per operator, first seen


def keyed(rows: Sequence[Row]) -> dict[Key, Row]:
    """Rows by (op, dtype, shape, occurrence): the n-th measurement of a key is occurrence n."""
    seen: Counter[tuple[str, str, str]] = Counter()
    out: dict[Key, Row] = {}
    for row in rows:
        seen[row.key()] += 1
        key = (*row.key(), seen[row.key()])
        out[key] = row
    return out


def _measured(row: Row) -> bool:
    latency = row.latency_ms
    return row.status == SUCCESS and latency is not None and math.isfinite(latency) and latency > 0


def _latencies(rows: dict[Key, Row]) -> dict[Key, float]:
    """The latency of each measured row."""
    return {k: r.latency_ms for k, r in rows.items() if r.latency_ms is not None and _measured(r)}


def _why_unpaired(key: Key, a: Sequence[dict[Key, Row]], b: Sequence[dict[Key, Row]]) -> str:
    for name, side in (("A", a), ("B", b)):
        present = [r[key] for r in side if key in r]
        if not present:
            return f"only in {'B' if name == 'A' else 'A'}"
        if not any(_measured(row) for row in present):
            row = present[0]
            return f"{row.status} in {name}" if row.status != SUCCESS else f"no latency in {name}"
    return "never measured on both sides in the same round"


def sides_caliber(sources: Sequence[Source]) -> dict[str, tuple[str, ...]]:
    return {f: tuple(sorted({str(ident.get(f)) for s in sources for _, ident in s.identities}))
            for f in CALIBER_FIELDS}


def _logs_caliber(sources: Sequence[Source], field: str) -> tuple[str, ...]:
    return tuple(sorted({dict(s.log_caliber).get(field, "?") for s in sources}))


def _mixed(ca: Mapping[str, tuple[str, ...]], cb: Mapping[str, tuple[str, ...]],
           allow_mixed: bool) -> list[str]:
    diffs = [f"{f}: A={'/'.join(ca[f])!r} B={'/'.join(cb[f])!r}" for f in ca if ca[f] != cb[f]]
    if diffs and not allow_mixed:
        raise UsageError(f"the two sides differ in caliber ({'; '.join(diffs)}); "
                         "pass --allow-mixed to compare them anyway")
    return [f"mixed calibers (--allow-mixed): {'; '.join(diffs)}"] if diffs else []


def caliber_notes(a: Sequence[Source], b: Sequence[Source], *, allow_mixed: bool) -> list[str]:
    """Compare the calibers of two sides: UsageError naming each difference unless allowed.

    Runs compare by their identities; logs by what they say (a harness run.log its header, a
    FlagGems log its --mode as the timer, and its level); a run against a log is not checked.
    A FlagGems --mode and a harness timer are different settings: they read as different.
    """
    sources = (*a, *b)
    if all(s.identities for s in sources):
        ca, cb = sides_caliber(a), sides_caliber(b)
        return _mixed({f: ca[f] for f in CALIBER_FIELDS}, {f: cb[f] for f in CALIBER_FIELDS},
                      allow_mixed)
    raw = [s.label for s in sources if not s.identities]
    known = [f for f in CALIBER_FIELDS if all(dict(s.log_caliber).get(f) for s in sources)]
    if len(raw) < len(sources) or not known:
        return [f"caliber not checked: no run identity for {', '.join(map(repr, raw))}"]
    notes = _mixed({f: _logs_caliber(a, f) for f in known},
                   {f: _logs_caliber(b, f) for f in known}, allow_mixed)
    unknown = [f for f in CALIBER_FIELDS if f not in known]
    return notes + [f"caliber of the logs: {', '.join(known)} checked (a FlagGems log's timer is "
                    f"its --mode){'; not recorded: ' + ', '.join(unknown) if unknown else ''}"]


def _replays_from(side: Sequence[Source], targets: set[Path]) -> bool:
    """Every run of `side` pinned autotune winners recorded under one of `targets`."""
    froms = [ident.get("replay_from") for s in side for _, ident in s.identities]
    return bool(froms) and all(
        f and any(t == Path(f).resolve() or t in Path(f).resolve().parents for t in targets)
        for f in froms)


def tuning_notes(a: Sequence[Source], b: Sequence[Source]) -> list[str]:
    """The self-tuned flag: neither side replays the other's winners (nor both one source)."""
    ids = [ident for s in (*a, *b) for _, ident in s.identities]
    if not ids or any(not s.identities for s in (*a, *b)):
        return []
    if any(ident.get("autotune_mode", "default") != "default" for ident in ids):
        return []
    dirs_a = {d.resolve() for s in a for d, _ in s.identities}
    dirs_b = {d.resolve() for s in b for d, _ in s.identities}
    shared = {Path(i["replay_from"]).resolve() for i in ids if i.get("replay_from")}
    if _replays_from(b, dirs_a) or _replays_from(a, dirs_b) or (
            len(shared) == 1 and all(i.get("replay_from") for i in ids)):
        return []
    return [SELF_TUNED]


def _flags(key: Key, rounds: Sequence[dict[Key, Row]], side: str) -> list[str]:
    return [f"{side}:{m}" for m in FLAG_MARKERS if any(m in r[key].markers for r in rounds
                                                         if key in r)]


def compare(a: Sequence[Source], b: Sequence[Source], *, allow_mixed: bool = False,
            noise_floor_pct: float = stats.MIN_NOISE_FLOOR_PCT) -> AbReport:
    """An A/B of two sides, each a list of rounds (one Source per round; `--ab` gives one)."""
    notes = caliber_notes(a, b, allow_mixed=allow_mixed) + tuning_notes(a, b)
    notes += [n for s in (*a, *b) for n in s.notes]
    ka, kb = [keyed(s.rows) for s in a], [keyed(s.rows) for s in b]
    flags = {k: tuple(_flags(k, ka, "A") + _flags(k, kb, "B"))
             for side in (ka, kb) for r in side for k in r}
    result = stats.summarize_ab(
        [_latencies(rows) for rows in ka], [_latencies(rows) for rows in kb],
        noise_floor_pct=noise_floor_pct, flagged={k for k, f in flags.items() if f},
        group=lambda key: key[0])
    paired = [AbRow(*k, stats=s, flags=flags[k]) for k, s in result.rows]
    done = {key for key, _ in result.rows}
    unpaired = [Unpaired(*key, reason=_why_unpaired(key, ka, kb))
                for key in flags if key not in done]
    gm = result.geomean
    low, high = (None, None) if gm is None else (gm.ci_low_pct, gm.ci_high_pct)
    return AbReport(
        a_label=" + ".join(s.label for s in a), b_label=" + ".join(s.label for s in b),
        rows=tuple(paired), unpaired=tuple(unpaired),
        geomean_speedup_pct=None if gm is None else gm.speedup_pct,
        noise_floor_pct=result.noise_floor_pct,
        direct_rows=sum(1 for r in paired if any(DIRECT_MARKER in f for f in r.flags)),
        notes=tuple(notes), method=result.method, geomean_ci_low_pct=low,
        geomean_ci_high_pct=high, op_geomeans=tuple((str(op), g) for op, g in result.groups))



# ---------------------------------------------------------------- ab.json <-> AbReport


def row_dict(row: AbRow) -> dict[str, Any]:
    """The ab.json row of one AbRow."""
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
    """A AbReport from itself, an ab.json document, or a list of ab.json rows."""
    if isinstance(source, AbReport):
        return source
    doc: Mapping[str, Any] = source if isinstance(source, Mapping) else {"rows": list(source)}
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



# ---------------------------------------------------------------- files


def load_ab(path: str | Path) -> dict[str, Any]:
    """The ab.json at `path` (or inside the directory `path`); UsageError if it is not one."""
    target, doc = read_json(path, AB_JSON, UsageError,
                            missing=f"no {AB_JSON} at {{path!r}}: give a campaign directory",
                            not_json="{path!r} is not JSON: {exc}")
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




def save_ab(directory: Path, document: Mapping[str, Any]) -> Path:
    """Write `document` as the directory's ab.json, atomically."""
    return atomic_write_json(directory / AB_JSON, document)
