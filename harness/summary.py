"""`harness summary`: tables of runs, batches or raw FlagGems logs, or an A/B of two of them."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from enum import Enum
from pathlib import Path
from typing import Any, cast

from harness import stats
from harness.boundary import DIRECT_MARKER, FLAG_MARKERS
from harness.errors import UsageError, choice_error
from harness.results import RESULTS_JSONL, SUCCESS, Row
from harness.sources import (
    AB_JSON,
    CALIBER_FIELDS,
    OPS_STATUS_CSV,
    Source,
    is_campaign,
    load_source,
    rounds_of,
)

FORMATS = ("md", "csv", "json")
SELF_TUNED = "not a same-config comparison: both sides tuned for themselves"
REGIME = "timed under a different regime"

WriteLine = Callable[[str], None]
Key = tuple[str, str, str, int]  # (op, dtype, shape, occurrence): mm measures a key twice


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
        groups.append(Group(
            op=op, dtype=dtype, rows=len(members),
            failed=sum(1 for r in members if r.status != SUCCESS),
            fallback=sum(1 for r in members if DIRECT_MARKER in r.markers),
            geomean_speedup=stats.geometric_mean(speedups) if speedups else None))
    return groups


# ---------------------------------------------------------------- A/B


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
        out[(*row.key(), seen[row.key()])] = row
    return out


def _measured(row: Row) -> bool:
    latency = row.latency_ms
    return row.status == SUCCESS and latency is not None and math.isfinite(latency) and latency > 0


def _why_unpaired(key: Key, a: Sequence[dict[Key, Row]], b: Sequence[dict[Key, Row]]) -> str:
    for name, side in (("A", a), ("B", b)):
        present = [r[key] for r in side if key in r]
        if not present:
            return f"only in {'B' if name == 'A' else 'A'}"
        if not any(_measured(row) for row in present):
            row = present[0]
            return f"{row.status} in {name}" if row.status != SUCCESS else f"no latency in {name}"
    return "never measured on both sides in the same round"


def _sides_caliber(sources: Sequence[Source]) -> dict[str, tuple[str, ...]]:
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
        ca, cb = _sides_caliber(a), _sides_caliber(b)
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
        [{k: r.latency_ms for k, r in rows.items() if _measured(r)} for rows in ka],
        [{k: r.latency_ms for k, r in rows.items() if _measured(r)} for rows in kb],
        noise_floor_pct=noise_floor_pct, flagged={k for k, f in flags.items() if f},
        group=lambda key: cast(Key, key)[0])
    paired = [AbRow(*cast(Key, k), stats=s, flags=flags[cast(Key, k)]) for k, s in result.rows]
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


# ---------------------------------------------------------------- campaigns


def campaign_report(path: Path, *, noise_floor_pct: float) -> AbReport:
    """A campaign's A/B: its ab.json (`path` or inside it), else (a campaign cut short)
    compare() of its rounds."""
    if path.is_file() or (path / AB_JSON).is_file():
        from harness import report  # it renders AbReports, so it imports this module

        doc = report.load_ab(path)
        caliber = doc.get("caliber") or {}
        axis = caliber.get("axis")
        live = report.liveness_note(doc.get("liveness"), axis)
        found = report.as_report(doc)
        if axis and axis != "none":
            found = dataclasses.replace(found, a_label=f"{axis}={found.a_label}",
                                        b_label=f"{axis}={found.b_label}")
        return dataclasses.replace(found, notes=tuple(filter(None, (live, *found.notes))))
    a, b = rounds_of(path / "A"), rounds_of(path / "B")
    both = sorted(a.keys() & b.keys())
    if not both:
        raise UsageError(f"campaign {str(path)!r} has no {AB_JSON} and no round finished on "
                         "both sides")
    report_ = compare([load_source(a[r]) for r in both], [load_source(b[r]) for r in both],
                      noise_floor_pct=noise_floor_pct)
    dropped = sorted((a.keys() | b.keys()) - set(both))
    note = (f"no {AB_JSON}: compared from rounds {', '.join(map(str, both))}" +
            (f"; rounds {', '.join(map(str, dropped))} finished on one side only" if dropped
             else ""))
    return dataclasses.replace(report_, notes=(note, *report_.notes))


# ---------------------------------------------------------------- rendering


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:+.1f}"


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _interval(low: float | None, high: float | None) -> str:
    return "-" if low is None else f"[{_pct(low)}, {_pct(high)}]"


def _ci(s: stats.RowStats) -> str:
    return _interval(s.ci_low_pct, s.ci_high_pct)


def _md_table(write_line: WriteLine, header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    write_line("| " + " | ".join(header) + " |")
    write_line("|" + "|".join(" --- " for _ in header) + "|")
    for row in rows:
        write_line("| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |")


def _caliber_line(source: Source) -> str:
    if not source.identities:
        told = " ".join(f"{k}={v}" for k, v in source.log_caliber)
        return f"{source.kind.replace('_', ' ')}: no run identity" + (
            f"; the log says {told}" if told else "")
    return " ".join(f"{f}={'/'.join(v)}" for f, v in _sides_caliber([source]).items())


def render_runs_md(sources: Sequence[Source], write_line: WriteLine) -> None:
    for source in sources:
        write_line(f"## {source.label}")
        write_line("")
        write_line(f"{_caliber_line(source)}; speedup = FlagGems over torch "
                   "(latency_base / latency), geometric mean of the successful rows")
        for note in source.notes:
            write_line(f"- note: {note}")
        write_line("")
        _md_table(write_line, ("op", "dtype", "rows", "failed", "fallback", "geomean speedup"),
                  [(g.op, g.dtype, str(g.rows), str(g.failed), str(g.fallback),
                    _ratio(g.geomean_speedup)) for g in run_groups(source.rows)])
        write_line("")


def _geomean_line(report: AbReport) -> str:
    line = (f"geomean speedup: {_pct(report.geomean_speedup_pct)}% over {len(report.rows)} "
            "paired rows, interval over rows "
            f"{_interval(report.geomean_ci_low_pct, report.geomean_ci_high_pct)}")
    if report.direct_rows:
        line += (f" ({report.direct_rows} of them {REGIME}: {DIRECT_MARKER} on a side; "
                 "rows marked *)")
    return line


def _ab_cells(row: AbRow) -> list[str]:
    s = row.stats
    mark = " *" if any(DIRECT_MARKER in f for f in row.flags) else ""
    return [row.op, row.dtype, row.shape, str(row.occurrence), f"{s.a_ms:.6f}", f"{s.b_ms:.6f}",
            _pct(s.speedup_pct), f"{_pct(s.min_pct)}..{_pct(s.max_pct)}{mark}", _ci(s),
            str(s.rounds), s.verdict.value, " ".join(row.flags) or "-"]


def render_ab_md(report: AbReport, write_line: WriteLine) -> None:
    write_line(f"## A/B: A={report.a_label} B={report.b_label}")
    write_line("")
    write_line("speedup % = (A_ms / B_ms - 1) * 100 of FlagGems latencies: positive when B is "
               f"faster; noise floor {report.noise_floor_pct:.1f}%; {report.method.text}")
    for note in report.notes:
        write_line(f"- {'FLAG' if note == SELF_TUNED else 'note'}: {note}")
    write_line("")
    _md_table(write_line, ("op", "dtype", "shape", "#", "A ms", "B ms", "speedup %",
                           "min..max %", f"{report.method.confidence * 100:g}% CI %", "rounds",
                           "verdict", "flags"),
              [_ab_cells(row) for row in report.rows])
    write_line("")
    write_line(_geomean_line(report))
    if len(report.op_geomeans) > 1:
        write_line("")
        _md_table(write_line, ("op", "rows", "geomean speedup %", "interval %"),
                  [(op, str(g.rows), _pct(g.speedup_pct), _interval(g.ci_low_pct, g.ci_high_pct))
                   for op, g in report.op_geomeans])
    if report.rows and max(r.stats.rounds for r in report.rows) < 2:
        write_line("one round per side: no interval, so no row is called faster or slower")
    if report.unpaired:
        write_line("")
        write_line(f"### unpaired rows ({len(report.unpaired)})")
        write_line("")
        _md_table(write_line, ("op", "dtype", "shape", "#", "reason"),
                  [(u.op, u.dtype, u.shape, str(u.occurrence), u.reason)
                   for u in report.unpaired])


def _csv(write_line: WriteLine, header: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    writer.writerows([["" if c is None else c for c in row] for row in rows])
    for line in buffer.getvalue().splitlines():
        write_line(line)


def render_runs_csv(sources: Sequence[Source], write_line: WriteLine) -> None:
    _csv(write_line, ("source", "op", "dtype", "rows", "failed", "fallback", "geomean_speedup"),
         [(s.label, g.op, g.dtype, g.rows, g.failed, g.fallback, g.geomean_speedup)
          for s in sources for g in run_groups(s.rows)])


AB_CSV_FIELDS = ("op", "dtype", "shape", "occurrence", "a_ms", "b_ms", "speedup_pct", "min_pct",
                 "max_pct", "ci_low_pct", "ci_high_pct", "rounds", "verdict", "flags", "unpaired")


def render_ab_csv(report: AbReport, write_line: WriteLine) -> None:
    """One line per paired row, then one per unpaired row (verdict "unpaired", its reason)."""
    paired = [(r.op, r.dtype, r.shape, r.occurrence, r.stats.a_ms, r.stats.b_ms,
               r.stats.speedup_pct, r.stats.min_pct, r.stats.max_pct, r.stats.ci_low_pct,
               r.stats.ci_high_pct, r.stats.rounds, r.stats.verdict.value, ";".join(r.flags), "")
              for r in report.rows]
    unpaired = [(u.op, u.dtype, u.shape, u.occurrence, *[None] * 8, "unpaired", "", u.reason)
                for u in report.unpaired]
    _csv(write_line, AB_CSV_FIELDS, paired + unpaired)


def _json(document: Any, write_line: WriteLine) -> None:
    write_line(json.dumps(document, indent=2,
                          default=lambda o: o.value if isinstance(o, Enum) else str(o)))


def render_ab_json(report: AbReport, write_line: WriteLine) -> None:
    _json({"speedup": "(A_ms / B_ms - 1) * 100", "self_tuned": SELF_TUNED in report.notes,
           **asdict(report)}, write_line)


def render_runs_json(sources: Sequence[Source], write_line: WriteLine) -> None:
    _json([{"source": s.label, "kind": s.kind, "notes": s.notes,
            "caliber": _sides_caliber([s]) if s.identities else None,
            "groups": [asdict(g) for g in run_groups(s.rows)]} for s in sources], write_line)


_RUN_RENDERERS = {"md": render_runs_md, "csv": render_runs_csv, "json": render_runs_json}
_AB_RENDERERS = {"md": render_ab_md, "csv": render_ab_csv, "json": render_ab_json}


def summarize(paths: Sequence[str], *, ab: Sequence[str] | None = None, fmt: str = "md",
              allow_mixed: bool = False, noise_floor_pct: float = stats.MIN_NOISE_FLOOR_PCT,
              write_line: WriteLine = print) -> None:
    """The `harness summary` command: tables of `paths`, or the A/B of `ab` = (A, B)."""
    if fmt not in FORMATS:
        raise choice_error("--format", fmt, FORMATS)
    if bool(paths) == bool(ab):
        raise UsageError("give RUN paths to summarize, or --ab A B, not both and not neither")
    if not math.isfinite(noise_floor_pct) or noise_floor_pct < 0:
        raise UsageError(f"--noise-floor={noise_floor_pct!r}; expected a percentage >= 0")
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
        _RUN_RENDERERS[fmt]([load_source(p) for p in paths], write_line)
        return
    _AB_RENDERERS[fmt](report, write_line)
