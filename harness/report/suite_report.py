"""A suite campaign's report: each operator's verdict, the suite's line, ab.md's suite section."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from harness import stats
from harness.contract.states import CRASHED, ERROR, FAILED, TIMEOUT
from harness.report import render
from harness.report.abjson import AbDocument, OperatorSummary, Worst, as_report
from harness.report.abresult import SPEEDUP_SAID, AbReport, in_geomean
from harness.report.render import pct
from harness.stats import OpVerdict

AB_HTML, ROWS_CSV, OPERATORS_CSV = "ab.html", "ab_rows.csv", "ab_operators.csv"
ENDED_BADLY = (FAILED, ERROR, CRASHED, TIMEOUT)
# A campaign with no more rows and operators keeps every operator's rows in ab.md; a larger one
# links to the full tables (a suite's were 1.5 MB of markdown that no one scrolled).
INLINE_ROWS, INLINE_OPERATORS = 160, 20
TOP = 20  # regressions and improvements shown each
MAX_BROKEN = 100
MAX_NAMES = 60


def geomean_pct(speedups: Sequence[float]) -> float | None:
    """The geometric mean of speedups in % (None: none)."""
    found = stats.geomean_stats(speedups)
    return None if found is None else found.speedup_pct


def operator_summaries(rows: Sequence[Mapping[str, Any]], ops: Mapping[str, Mapping[str, Any]]
                       ) -> dict[str, OperatorSummary]:
    """Per operator of `ops` ({op: {rounds, reason, pending, skipped, units_failed,
    artifacts}}): its verdict, paired rows (ab.json's), geometric mean speedup and worst row
    (lowest speedup). A skipped operator's reason is pytest's, not a failure's."""
    out = {}
    for op, info in ops.items():
        mine = [r for r in rows if r["op"] == op]
        timed = [r for r in mine if in_geomean(r.get("flags") or ())]
        worst = min(timed, key=lambda r: r["speedup_pct"], default=None)
        skipped = bool(info.get("skipped"))
        out[op] = OperatorSummary(
            verdict=stats.operator_verdict([r["verdict"] for r in mine],
                                           bool(info.get("reason")) and not skipped,
                                           bool(info.get("pending")), skipped,
                                           bool(info.get("excluded"))),
            rows=len(mine), rounds=info.get("rounds"),
            geomean_speedup_pct=geomean_pct([r["speedup_pct"] for r in timed]),
            worst=None if worst is None else Worst(worst["dtype"], worst["shape"],
                                                   worst["speedup_pct"], worst["verdict"]),
            units_failed=info.get("units_failed") or 0,
            # ROUNDS=auto: why it ran no more rounds, where nothing failed
            reason=info.get("excluded") or info.get("reason") or info.get("stopped"),
            artifacts=info.get("artifacts"))
    return out


def suite_line(operators: Mapping[str, OperatorSummary]) -> str:
    """One line: how many operators got each verdict; pending and skipped apart from failed."""
    counts = [v.verdict for v in operators.values()]
    shown = [f"{counts.count(v)} {v}" for v in ("faster", "slower", "same", "failed")]
    shown += [f"{counts.count(v)} {v}" for v in ("pending", "skipped") if v in counts]
    shown += [f"{counts.count(v)} {v}" for v in ("inconclusive", "flagged") if v in counts]
    shown += [f"{counts.count('excluded')} excluded"] if "excluded" in counts else []
    return f"suite: {', '.join(shown)} of {len(counts)} operator{'' if len(counts) == 1 else 's'}"


def _regressions_first(item: tuple[str, OperatorSummary]) -> tuple[int, float, str]:
    op, info = item
    geomean = info.geomean_speedup_pct
    return stats.OP_VERDICTS.index(info.verdict), geomean if geomean is not None else 0.0, op


def operators_table(operators: Mapping[str, OperatorSummary]) -> list[str]:
    cells = []
    for op, info in sorted(operators.items(), key=_regressions_first):
        worst_text = _worst(info)
        verdict = f"{info.verdict} (code unchanged)" if info.artifacts == "unchanged" \
            else info.verdict
        cells.append([op, verdict, pct(info.geomean_speedup_pct), worst_text,
                      str(info.rows), str(info.rounds or "-"), str(info.units_failed),
                      info.reason or "-"])
    return render.table(("operator", "verdict", "geomean %", "worst row", "rows", "rounds",
                         "units failed", "reason"), cells)


def is_suite(doc: AbDocument) -> bool:
    return len(doc.operators or {}) > 1


def _interval_of(report: AbReport) -> dict[str, str]:
    return {op: render.interval(g.ci_low_pct, g.ci_high_pct) for op, g in report.op_geomeans}


def badly_ended(doc: AbDocument) -> dict[str, list[str]]:
    """Per operator, its units that failed, crashed or timed out, as "r4 crashed"."""
    out: dict[str, list[str]] = {}
    for unit in doc.units or ():
        if unit.status in ENDED_BADLY:
            op, _, round_id = unit.id.rpartition("/")
            out.setdefault(op, []).append(f"{round_id} {unit.status}")
    return out


def _bounded(lines: list[list[str]], most: int) -> tuple[list[list[str]], str | None]:
    """The first `most` lines, and what was left out (None: nothing)."""
    rest = len(lines) - most
    return lines[:most], (f"... and {rest} more: every operator is in {OPERATORS_CSV} and "
                          f"{AB_HTML}" if rest > 0 else None)


def attention_lines(doc: AbDocument, report: AbReport) -> list[str]:
    """What needs a person: operators that failed, crashed or timed out, then the largest
    regressions and improvements (TOP of each), then the undecided ones by name."""
    operators = doc.operators or {}
    broken = badly_ended(doc)
    failed = [[op, info.verdict, ", ".join(broken.get(op, ())) or "-", info.reason or "-"]
              for op, info in sorted(operators.items())
              if info.verdict == OpVerdict.FAILED or op in broken]
    out = ["## What needs a person", ""]
    shown, more = _bounded(failed, MAX_BROKEN)
    out += [f"### Failed, crashed or timed out: {len(failed)} operators", "",
            *(render.table(("operator", "verdict", "units ended badly", "reason"), shown)
              if shown else ["none"]), *([more] if more else []), ""]
    intervals = _interval_of(report)
    for verdict, title, sign in ((OpVerdict.SLOWER, "Largest regressions", 1),
                                 (OpVerdict.FASTER, "Largest improvements", -1)):
        mine = sorted(((op, o) for op, o in operators.items() if o.verdict == verdict),
                      key=lambda x: (sign * (x[1].geomean_speedup_pct or 0.0), x[0]))
        cells = [[op, pct(o.geomean_speedup_pct), intervals.get(op, "-"), _worst(o), str(o.rows)]
                 for op, o in mine[:TOP]]
        out += [f"### {title}: {len(cells)} of {len(mine)} {verdict} operators", "",
                *(render.table(("operator", "geomean %", "interval %", "worst row", "rows"),
                               cells) if cells else ["none"]), ""]
    undecided = sorted(op for op, o in operators.items() if o.verdict == OpVerdict.INCONCLUSIVE)
    if undecided:
        names = ", ".join(undecided[:MAX_NAMES]) + (", ..." if len(undecided) > MAX_NAMES else "")
        out += [f"### Inconclusive: {len(undecided)} operators (more rounds would decide)", "",
                names, ""]
    return out


def _worst(info: OperatorSummary) -> str:
    """The operator's worst row as a table shows it, "(flagged)" after a row timed under
    another regime on a side: its number is no measure of the operator."""
    worst = info.worst
    if not worst:
        return "-"
    flagged = " (flagged)" if worst.verdict == stats.Verdict.FLAGGED.value else ""
    return f"{pct(worst.speedup_pct)}% {worst.dtype} {worst.shape}{flagged}"


def render_markdown(doc: AbDocument, notes: Sequence[str]) -> str:
    """ab.md of a suite campaign: caliber and notes, the answer (verdict counts, geometric
    mean), what needs a person, the links to the full tables; a small campaign keeps its
    operators' table and each operator's rows, folded, inline."""
    ab = as_report(doc)
    caliber = doc.caliber
    operators = doc.operators or {}
    floor = render.stated_floor(ab, caliber, None)
    out = render.campaign_head(f"{len(operators)} operators", caliber, floor, notes, unit="unit")
    # one wording wherever a mean is rendered: its flagged rows counted, its rows without
    # device work said left out
    mean = render.geomean_line(ab) if ab.rows else "no paired rows"
    out += ["## Suite", "", f"**{suite_line(operators)}**; {mean}", "",
            f"{SPEEDUP_SAID} Method: "
            f"{ab.method.text}, false-discovery control over every row of the campaign. An "
            "operator is slower if any row is, faster if any row is and none slower.", "",
            *attention_lines(doc, ab),
            "## Every operator and row", "",
            f"- [{AB_HTML}]({AB_HTML}): every operator and row, sortable and filterable, each "
            "row with its rounds, run folders and the command that reruns it",
            f"- [{OPERATORS_CSV}]({OPERATORS_CSV}): one line per operator",
            f"- [{ROWS_CSV}]({ROWS_CSV}): one line per row", ""]
    if len(ab.rows) > INLINE_ROWS or len(operators) > INLINE_OPERATORS:
        unpaired = (render.unpaired_lines(ab) if len(ab.unpaired) <= MAX_NAMES else
                    [f"unpaired rows: {len(ab.unpaired)}, in {ROWS_CSV} (verdict unpaired)"])
        return "\n".join([*out, *unpaired]) + "\n"
    out += [*operators_table(operators), ""]
    for op, info in sorted(operators.items(), key=_regressions_first):
        rows = [render.row_cells(r, ab.noise_floor_pct) for r in ab.rows if r.op == op]
        out += ["<details>", f"<summary>{op}: {info.verdict}, {len(rows)} rows</summary>",
                "", *(render.table(render.ROW_HEADER, rows) if rows else ["no paired rows"]), "",
                "</details>", ""]
    out += render.unpaired_lines(ab)
    return "\n".join(out) + "\n"


OPERATOR_FIELDS = ("op", "verdict", "rows", "rounds", "geomean_speedup_pct", "ci_low_pct",
                   "ci_high_pct", "worst_speedup_pct", "worst_dtype", "worst_shape",
                   "units_failed", "units_ended_badly", "reason")


def render_operators_csv(doc: AbDocument, write_line: render.WriteLine) -> None:
    """One line per operator of a suite campaign, regressions first."""
    means = dict(as_report(doc).op_geomeans)
    broken = badly_ended(doc)
    lines = []
    for op, o in sorted((doc.operators or {}).items(), key=_regressions_first):
        mean, worst = means.get(op), o.worst
        lines.append((op, o.verdict, o.rows, o.rounds, o.geomean_speedup_pct,
                      mean and mean.ci_low_pct, mean and mean.ci_high_pct,
                      worst and worst.speedup_pct, worst and worst.dtype, worst and worst.shape,
                      o.units_failed, ";".join(broken.get(op, ())), o.reason))
    render.write_csv(write_line, OPERATOR_FIELDS, lines)
