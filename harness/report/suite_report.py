"""A suite campaign's report: each operator's verdict, the suite's line, ab.md's suite section."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from harness import stats
from harness.report import render
from harness.report.abjson import AbDocument, OperatorSummary, Worst, as_report
from harness.report.abresult import SPEEDUP_SAID
from harness.report.render import pct


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
        worst = min(mine, key=lambda r: r["speedup_pct"], default=None)
        skipped = bool(info.get("skipped"))
        out[op] = OperatorSummary(
            verdict=stats.operator_verdict([r["verdict"] for r in mine],
                                           bool(info.get("reason")) and not skipped,
                                           bool(info.get("pending")), skipped,
                                           bool(info.get("excluded"))),
            rows=len(mine), rounds=info.get("rounds"),
            geomean_speedup_pct=geomean_pct([r["speedup_pct"] for r in mine]),
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
        worst = info.worst
        worst_text = "-" if not worst else f"{pct(worst.speedup_pct)}% {worst.dtype} {worst.shape}"
        verdict = f"{info.verdict} (code unchanged)" if info.artifacts == "unchanged" \
            else info.verdict
        cells.append([op, verdict, pct(info.geomean_speedup_pct), worst_text,
                      str(info.rows), str(info.rounds or "-"), str(info.units_failed),
                      info.reason or "-"])
    return render.table(("operator", "verdict", "geomean %", "worst row", "rows", "rounds",
                         "units failed", "reason"), cells)


def is_suite(doc: AbDocument) -> bool:
    return len(doc.operators or {}) > 1


def render_markdown(doc: AbDocument, notes: Sequence[str]) -> str:
    """ab.md of a suite campaign: caliber, notes, the suite line, operators (regressions first),
    then each operator's rows folded under <details>."""
    ab = as_report(doc)
    caliber = doc.caliber
    operators = doc.operators or {}
    floor = render.stated_floor(ab, caliber, None)
    out = render.campaign_head(f"{len(operators)} operators", caliber, floor, notes, unit="unit")
    interval = render.interval(ab.geomean_ci_low_pct, ab.geomean_ci_high_pct)
    mean = (f"geometric mean speedup {pct(ab.geomean_speedup_pct)}% over {len(ab.rows)} "
            f"paired rows, interval over rows {interval}" if ab.rows else "no paired rows")
    out += ["## Suite", "", f"**{suite_line(operators)}**; {mean}", "",
            f"{SPEEDUP_SAID} Method: "
            f"{ab.method.text}, false-discovery control over every row of the campaign. An "
            "operator is slower if any row is, faster if any row is and none slower.", "",
            *operators_table(operators), ""]
    for op, info in sorted(operators.items(), key=_regressions_first):
        rows = [render.row_cells(r, ab.noise_floor_pct) for r in ab.rows if r.op == op]
        out += ["<details>", f"<summary>{op}: {info.verdict}, {len(rows)} rows</summary>",
                "", *(render.table(render.ROW_HEADER, rows) if rows else ["no paired rows"]), "",
                "</details>", ""]
    out += render.unpaired_lines(ab)
    return "\n".join(out) + "\n"
