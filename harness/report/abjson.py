"""The ab.json document: its types, the one loader that checks a file and the one writer."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from harness import stats
from harness.contract.boundary import DIRECT_MARKER
from harness.contract.jsonfields import Fields, check_bands
from harness.contract.states import RUN_STATUSES
from harness.errors import UsageError
from harness.fsutil import atomic_write_json, read_json
from harness.report.abresult import AbReport, AbRow, Unpaired, in_geomean
from harness.report.sources import AB_JSON

SCHEMA = "harness-ab/1"
SPEEDUP = "(A_ms / B_ms - 1) * 100"
LIVENESS = ("live", "unknown", "not_live", "unchecked")
# Caliber fields the harness reads, checked on load; the rest (settings.caliber()'s) are shown.
_CALIBER_NUMBERS = ("noise_floor_pct", "measured_noise_floor_pct")
_ROW_NUMBERS = ("a_ms", "b_ms", "speedup_pct", "ci_low_pct", "ci_high_pct", "min_pct", "max_pct",
                "rounds", "p_value", "p_adjusted", "noise_floor_pct")  # a row's, in file order


@dataclass(frozen=True)
class Caliber:
    """What makes the sides comparable, as written: settings.caliber()'s keys and the
    campaign's (op, axis, axis_var, a, b, rounds, noise floor, image digests, harness commit).

    The object is kept whole and in its order, so that a new setting reaches ab.json and ab.md
    without a change here; the fields the harness reads are checked on load and typed below.
    """

    values: Mapping[str, Any] = field(default_factory=dict)

    def text(self, key: str) -> str | None:
        """A field as shown: None when missing, null or empty."""
        value = self.values.get(key)
        return None if value is None or value == "" else str(value)

    @property
    def axis(self) -> str | None:
        return self.text("axis")

    @property
    def variable(self) -> str | None:
        """The environment variable the axis sets (None: an A/A campaign, or not recorded)."""
        return self.text("axis_var")

    @property
    def rounds(self) -> int | None:
        value = self.values.get("rounds")
        return value if isinstance(value, int) else None

    @property
    def noise_floor_pct(self) -> float | None:
        return self.values.get("noise_floor_pct")

    @property
    def measured_noise_floor_pct(self) -> float | None:
        """The noise floor an A/A campaign measured (None: not an A/A campaign)."""
        return self.values.get("measured_noise_floor_pct")

    @property
    def harness_dirty(self) -> bool:
        return bool(self.values.get("harness_dirty"))

    @property
    def image_digests(self) -> dict[str, tuple[str, ...]]:
        """Each side's image digests ({} when not recorded)."""
        return {side: tuple(d) for side, d in (self.values.get("image_digests") or {}).items()}


@dataclass(frozen=True)
class Liveness:
    """Whether the axis reached the compiler: a LIVENESS status and the note it reads as."""

    status: str
    detail: str | None = None


@dataclass(frozen=True)
class Worst:
    """An operator's row with the lowest speedup."""

    dtype: str
    shape: str
    speedup_pct: float
    verdict: str


@dataclass(frozen=True)
class OperatorSummary:
    """One operator of a suite campaign: its verdict (stats.OP_VERDICTS) and what made it."""

    verdict: str
    rows: int = 0
    rounds: int | None = None
    geomean_speedup_pct: float | None = None
    worst: Worst | None = None
    units_failed: int = 0
    reason: str | None = None  # why the operator has no rows
    artifacts: str | None = None  # none, equal, differ (unchanged, changed: two commits)


@dataclass(frozen=True)
class AbUnit:
    """One unit (an operator's round, both sides) as the campaign left it."""

    id: str
    status: str
    rc: int | None = None
    wall_s: float | None = None
    device: str | None = None
    attempts: int = 0
    reason: str | None = None


@dataclass(frozen=True)
class Interruption:
    signal: str | None
    step: str | None


@dataclass(frozen=True)
class CampaignStatus:
    """Complete or interrupted (by what, where), and the units that ran to their end."""

    state: str
    interrupted: Interruption | None = None
    finished_units: tuple[str, ...] = ()


@dataclass(frozen=True)
class AbDocument:
    """ab.json: a campaign's A/B. The last five parts are a campaign's (None: not written)."""

    caliber: Caliber
    rows: tuple[AbRow, ...]
    method: stats.Method = stats.Method()
    unpaired: tuple[Unpaired, ...] = ()
    geomean_speedup_pct: float | None = None
    geomean_ci_low_pct: float | None = None
    geomean_ci_high_pct: float | None = None
    geomean_by_op: tuple[tuple[str, stats.GeomeanStats], ...] = ()
    liveness: Liveness | None = None
    notes: tuple[str, ...] = ()
    operators: Mapping[str, OperatorSummary] | None = None
    commands: tuple[tuple[str, ...], ...] | None = None
    sides: Mapping[str, tuple[str, ...]] | None = None
    units: tuple[AbUnit, ...] | None = None
    status: CampaignStatus | None = None

    def to_json(self) -> dict[str, Any]:
        """The document as written, keys in their order."""
        out: dict[str, Any] = {
            "schema": SCHEMA, "speedup": SPEEDUP, "caliber": dict(self.caliber.values),
            "method": {**asdict(self.method), "text": self.method.text},
            "rows": [row_json(r) for r in self.rows],
            "unpaired": [asdict(u) for u in self.unpaired],
            "geomean_speedup_pct": self.geomean_speedup_pct,
            "geomean_ci_low_pct": self.geomean_ci_low_pct,
            "geomean_ci_high_pct": self.geomean_ci_high_pct,
            "geomean_by_op": [{"op": op, **asdict(g)} for op, g in self.geomean_by_op],
            "liveness": None if self.liveness is None else asdict(self.liveness),
            "notes": list(self.notes)}
        if self.operators is not None:
            out["operators"] = {op: _operator_json(o) for op, o in self.operators.items()}
        if self.commands is not None:
            out["commands"] = [list(c) for c in self.commands]
        if self.sides is not None:
            out["sides"] = {side: list(runs) for side, runs in self.sides.items()}
        if self.units is not None:
            out["units"] = [asdict(u) for u in self.units]
        if self.status is not None:
            stop = self.status.interrupted
            out["status"] = self.status.state
            out["interrupted"] = None if stop is None else asdict(stop)
            out["finished_units"] = list(self.status.finished_units)
        return out


def row_json(row: AbRow) -> dict[str, Any]:
    """The ab.json row of one AbRow; same_bound_pct only where it decided `same`."""
    s = row.stats
    return {"op": row.op, "dtype": row.dtype, "shape": row.shape, "occurrence": row.occurrence,
            **{key: getattr(s, key) for key in _ROW_NUMBERS}, "verdict": s.verdict.value,
            "flags": list(row.flags), "round_speedups_pct": list(s.round_speedups_pct),
            "round_ids": list(s.round_ids),
            **({"same_bound_pct": s.same_bound_pct} if s.verdict is stats.Verdict.SAME
               and s.same_bound_pct is not None else {})}


def _operator_json(o: OperatorSummary) -> dict[str, Any]:
    # an operator with no rows compiled nothing to compare: no artifacts
    return {k: v for k, v in asdict(o).items() if k != "artifacts" or v is not None}


# ---------------------------------------------------------------- the loader


def _row(f: Fields) -> AbRow:
    verdict_text = f.text("verdict")
    try:
        verdict = stats.Verdict(verdict_text)
    except ValueError:
        raise f.fail("verdict", f"is {verdict_text!r}; expected one of: "
                     f"{', '.join(v.value for v in stats.Verdict)}") from None
    speedup = f.number("speedup_pct")
    if not speedup > -100.0:  # also nan: B took no time or less than none
        raise f.fail("speedup_pct", f"is {speedup!r}; expected a number above -100")
    flags = f.texts("flags")
    per_round, ids = f.numbers("round_speedups_pct"), f.integers("round_ids")  # older: none
    if ids and not len(set(ids)) == len(ids) == len(per_round):
        raise f.fail("round_ids", f"is {list(ids)!r:.60}; expected {len(per_round)} distinct ids")
    return AbRow(op=f.text("op"), dtype=f.text("dtype"), shape=f.text("shape"),
                 occurrence=f.opt_integer("occurrence") or 1, flags=flags, stats=stats.RowStats(
                     a_ms=f.number("a_ms"), b_ms=f.number("b_ms"), speedup_pct=speedup,
                     min_pct=f.number("min_pct"), max_pct=f.number("max_pct"),
                     ci_low_pct=f.opt_number("ci_low_pct"), ci_high_pct=f.opt_number("ci_high_pct"),
                     flagged=bool(flags) or verdict is stats.Verdict.FLAGGED, verdict=verdict,
                     round_speedups_pct=per_round, round_ids=ids, rounds=f.integer("rounds"),
                     p_value=f.opt_number("p_value"), p_adjusted=f.opt_number("p_adjusted"),
                     noise_floor_pct=f.opt_number("noise_floor_pct"),  # older: not recorded
                     same_bound_pct=f.opt_number("same_bound_pct")))


def _method(f: Fields | None) -> stats.Method:
    if f is None:
        return stats.Method()
    try:
        confidence = f.opt_number("confidence")
        return stats.Method(name=f.opt_text("name") or stats.T_METHOD,
                            confidence=stats.CONFIDENCE if confidence is None else confidence,
                            fdr_q=f.opt_number("fdr_q"))
    except ValueError as exc:
        raise UsageError(f"{f.file}: method is not a method of judging rows ({exc})") from None


def _caliber(f: Fields | None) -> Caliber:
    if f is None:
        return Caliber()
    for key in _CALIBER_NUMBERS:
        f.opt_number(key)
    f.opt_integer("rounds")
    f.opt_flag("harness_dirty")
    check_bands(f)
    digests = f.opt_object("image_digests")
    if digests is not None:
        for side in digests.value:
            digests.texts(side)
    return Caliber(dict(f.value))


def caliber_of(values: Mapping[str, Any]) -> Caliber:
    """A caliber from its JSON object, checked as the loader checks ab.json's."""
    return _caliber(Fields(AB_JSON, "caliber", values))


def liveness_of(values: Mapping[str, Any] | None) -> Liveness | None:
    """A liveness verdict from its JSON object ({status, detail}), checked as the loader does."""
    return _liveness(None if values is None else Fields(AB_JSON, "liveness", values))


def _liveness(f: Fields | None) -> Liveness | None:
    if f is None:
        return None
    status = f.text("status")
    if status not in LIVENESS:
        raise f.fail("status", f"is {status!r}; expected one of: {', '.join(LIVENESS)}")
    return Liveness(status, f.opt_text("detail"))


def _operator(f: Fields) -> OperatorSummary:
    w = f.opt_object("worst")
    worst = None if w is None else Worst(w.text("dtype"), w.text("shape"),
                                         w.number("speedup_pct"), w.text("verdict"))
    return OperatorSummary(
        verdict=f.text("verdict"), rows=f.opt_integer("rows") or 0, rounds=f.opt_integer("rounds"),
        geomean_speedup_pct=f.opt_number("geomean_speedup_pct"), worst=worst,
        units_failed=f.opt_integer("units_failed") or 0, reason=f.opt_text("reason"),
        artifacts=f.opt_text("artifacts"))


def _unit(f: Fields) -> AbUnit:
    device = f.value.get("device")
    return AbUnit(id=f.text("id"), status=f.text("status"), rc=f.opt_integer("rc"),
                      wall_s=f.opt_number("wall_s"), device=None if device is None else str(device),
                      attempts=f.opt_integer("attempts") or 0, reason=f.opt_text("reason"))


def _status(f: Fields) -> CampaignStatus | None:
    state = f.opt_text("status")
    if state is None:
        return None
    if state not in RUN_STATUSES:
        raise f.fail("status", f"is {state!r}; expected one of: {', '.join(RUN_STATUSES)}")
    stop = f.opt_object("interrupted")
    cut = None if stop is None else Interruption(stop.opt_text("signal"), stop.opt_text("step"))
    return CampaignStatus(state, cut, f.texts("finished_units"))


def _geomean(f: Fields) -> tuple[str, stats.GeomeanStats]:
    return f.text("op"), stats.GeomeanStats(
        speedup_pct=f.number("speedup_pct"), ci_low_pct=f.opt_number("ci_low_pct"),
        ci_high_pct=f.opt_number("ci_high_pct"), rows=f.integer("rows"))


def parse(data: object, file: str = AB_JSON) -> AbDocument:
    """The document of ab.json's data; UsageError naming `file` and the first bad field."""
    f = Fields(file, "", data)
    schema = f.value.get("schema")
    if schema != SCHEMA or not isinstance(f.value.get("rows"), list):
        raise UsageError(f"{file!r} is not an A/B result: schema={schema!r}, expected "
                         f"{SCHEMA!r} with a list of rows")
    operators = f.entries("operators")
    commands = f.opt_list("commands")  # checked by text_lists below
    sides = f.opt_object("sides")
    units = f.opt_list("units")
    return AbDocument(
        caliber=_caliber(f.opt_object("caliber")), method=_method(f.opt_object("method")),
        rows=tuple(map(_row, f.objects("rows"))),
        unpaired=tuple(Unpaired(u.text("op"), u.text("dtype"), u.text("shape"),
                                u.opt_integer("occurrence") or 1, u.opt_text("reason") or "-")
                       for u in f.objects("unpaired")),
        geomean_speedup_pct=f.opt_number("geomean_speedup_pct"),
        geomean_ci_low_pct=f.opt_number("geomean_ci_low_pct"),
        geomean_ci_high_pct=f.opt_number("geomean_ci_high_pct"),
        geomean_by_op=tuple(map(_geomean, f.objects("geomean_by_op"))),
        liveness=_liveness(f.opt_object("liveness")), notes=f.texts("notes"),
        operators=None if operators is None else {op: _operator(o) for op, o in operators.items()},
        commands=None if commands is None else f.text_lists("commands"),
        sides=None if sides is None else {s: sides.texts(s) for s in sides.value},
        units=None if units is None else tuple(map(_unit, f.objects("units"))),
        status=_status(f))


# ---------------------------------------------------------------- files and reports


def read_ab(path: str | Path) -> AbDocument:
    """The ab.json at `path` (or inside the directory `path`); UsageError if it is not one."""
    target, data = read_json(path, AB_JSON, UsageError,
                             missing=f"no {AB_JSON} at {{path!r}}: give a campaign directory",
                             not_json="{path!r} is not JSON: {exc}")
    return parse(data, str(target))


def write_ab(directory: Path, document: AbDocument) -> Path:
    """Write `document` as the directory's ab.json, atomically."""
    return atomic_write_json(directory / AB_JSON, document.to_json())


def document_of(report: AbReport, caliber: Mapping[str, Any], *,
                liveness: Liveness | None = None, notes: Sequence[str] = ()) -> AbDocument:
    """The ab.json document of an A/B; the report's own notes come before `notes`."""
    return AbDocument(
        caliber=caliber_of({"noise_floor_pct": report.noise_floor_pct, **caliber}),
        method=report.method, rows=report.rows, unpaired=report.unpaired,
        geomean_speedup_pct=report.geomean_speedup_pct,
        geomean_ci_low_pct=report.geomean_ci_low_pct,
        geomean_ci_high_pct=report.geomean_ci_high_pct, geomean_by_op=report.op_geomeans,
        liveness=liveness, notes=(*report.notes, *notes))


def as_document(source: AbDocument | Mapping[str, Any] | Sequence[Any]) -> AbDocument:
    """A document from itself, ab.json's data, or a list of ab.json rows."""
    if isinstance(source, AbDocument):
        return source
    if isinstance(source, Mapping):
        return parse(source)
    return parse({"schema": SCHEMA, "rows": list(source)})


def as_report(source: AbReport | AbDocument | Mapping[str, Any] | Sequence[Any]) -> AbReport:
    """An AbReport from itself, a document, ab.json's data or a list of ab.json rows."""
    if isinstance(source, AbReport):
        return source
    doc = as_document(source)
    rows, method = doc.rows, doc.method
    geomean = (doc.geomean_speedup_pct, doc.geomean_ci_low_pct, doc.geomean_ci_high_pct)
    timed = [r for r in rows if in_geomean(r.flags)]
    computed = stats.rows_geomean([r.stats for r in timed], method.confidence)
    if geomean[0] is None and computed is not None:
        geomean = (computed.speedup_pct, computed.ci_low_pct, computed.ci_high_pct)
    elif computed is not None and computed.ci_low_pct is None:
        geomean = (geomean[0], None, None)  # an interval its rows cannot give (one round)
    labels = doc.caliber.values
    return AbReport(
        a_label=str(labels.get("a", "A")), b_label=str(labels.get("b", "B")), rows=rows,
        unpaired=doc.unpaired, geomean_speedup_pct=geomean[0],
        noise_floor_pct=float(doc.caliber.noise_floor_pct or math.nan),
        direct_rows=sum(1 for r in rows if any(DIRECT_MARKER in f for f in r.flags)),
        notes=doc.notes, method=method, geomean_ci_low_pct=geomean[1],
        geomean_ci_high_pct=geomean[2],
        op_geomeans=stats.group_geomeans([(r.op, r.stats) for r in timed], str, method.confidence))
