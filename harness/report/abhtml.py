"""ab.html: a campaign's every operator and row in one self-contained page, sortable, filterable.

No chart library: the picture is ab.png, inlined, and the table's sort and filter are a small
script of the package's (static/ab.js). Bokeh 3's inline resources are about 2 MB and
plotly's 4.8 MB; a table of 9,000 rows needs neither, and the page opens offline.
"""

from __future__ import annotations

import base64
import json
import os
import statistics
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.contract.results import RESULTS_JSONL, read_results
from harness.errors import UsageError
from harness.fsutil import atomic_write_text
from harness.report import render, rerun, suite_report
from harness.report.abjson import AbDocument, as_report
from harness.report.abresult import SPEEDUP_SAID, AbReport, AbRow

STATIC = Path(__file__).resolve().parent / "static"
def _num(value: float | None) -> float | None:
    """Four significant digits: the page shows no more, and 9,000 rows stay small."""
    return None if value is None else float(f"{value:.4g}")


def side_gbps(doc: AbDocument) -> dict[tuple[str, str, str, int], dict[str, float]]:
    """Per row, each side's GB/s (median over its rounds) where FlagGems printed it; run
    folders that are gone are passed over."""
    found: dict[tuple[str, str, str, int], dict[str, list[float]]] = {}
    for side, runs in (doc.sides or {}).items():
        for run in runs:
            if not os.path.isfile(os.path.join(run, RESULTS_JSONL)):  # pathlib: 10x slower
                continue
            try:
                rows = read_results(Path(run))
            except UsageError:
                continue
            # its rows are its operator's, as ab.json names them, whatever FlagGems' record
            # calls them (comparison.compare's op)
            op = run_operator(run)
            seen: dict[tuple[str, str, str], int] = {}
            for row in rows:
                key3 = (op or row.op, row.dtype, row.shape)
                seen[key3] = seen.get(key3, 0) + 1
                if row.gbps is not None:
                    found.setdefault((*key3, seen[key3]), {}).setdefault(side, []).append(row.gbps)
    return {key: {side: statistics.median(v) for side, v in sides.items()}
            for key, sides in found.items()}


def run_operator(run: str) -> str | None:
    """The operator of a campaign's side run, DIR/OP/SIDE/rN; None for a shorter path."""
    return run.rsplit("/", 3)[-3] if run.count("/") >= 2 else None


def _runs_by_op(doc: AbDocument) -> tuple[str, dict[str, dict[str, list[str]]]]:
    """(the folder every run lies under, each operator's run folders per side below it)."""
    every = [run for runs in (doc.sides or {}).values() for run in runs]
    base = every[0].rsplit("/", 3)[0] if every and every[0].count("/") >= 3 else ""
    out: dict[str, dict[str, list[str]]] = {}
    for side, runs in (doc.sides or {}).items():
        for run in runs:  # DIR/OP/SIDE/rN
            op = run_operator(run) or run
            inside = base and run.startswith(base + "/")
            out.setdefault(op, {}).setdefault(side, []).append(
                run[len(base) + 1:] if inside else run)
    return base, out


def _row(row: AbRow, index: Mapping[str, int], gbps: Mapping[str, float] | None) -> list[Any]:
    s = row.stats
    return [index[row.op], row.dtype.removeprefix("torch."),
            row.shape if row.occurrence == 1 else f"{row.shape} (#{row.occurrence})",
            _num(s.a_ms), _num(s.b_ms), _num(s.speedup_pct), _num(s.ci_low_pct),
            _num(s.ci_high_pct), _num(s.noise_floor_pct), s.verdict.value, " ".join(row.flags),
            [_num(v) for v in s.round_speedups_pct], _num(s.p_adjusted),
            _num((gbps or {}).get("A")), _num((gbps or {}).get("B"))]


def page_data(doc: AbDocument) -> dict[str, Any]:
    """What the page's script reads: the answer's lines, the operators and the rows."""
    report = as_report(doc)
    operators = doc.operators or {}
    names = list(dict.fromkeys([*operators, *(r.op for r in report.rows)]))
    index = {op: i for i, op in enumerate(names)}
    broken = suite_report.badly_ended(doc)
    base, runs = _runs_by_op(doc)
    gbps = side_gbps(doc)
    ops = []
    for op in names:
        info = operators.get(op)
        ops.append([op, info.verdict if info else "-", info.rounds if info else None,
                    (info.reason if info else None) or "", ", ".join(broken.get(op, ())),
                    runs.get(op, {}).get("A", []), runs.get(op, {}).get("B", [])])
    interval = render.interval(report.geomean_ci_low_pct, report.geomean_ci_high_pct)
    title = doc.caliber.text("op") or ", ".join(names[:3]) or "-"
    return {
        "title": f"A/B: {doc.caliber.axis or '-'} on {title}",
        "counts": suite_report.suite_line(operators) if operators else _row_counts(report),
        "geomean": f"geometric mean speedup {render.pct(report.geomean_speedup_pct)}% over "
                   f"{len(report.rows)} paired rows, interval over rows and rounds {interval}",
        "said": SPEEDUP_SAID, "rerun": rerun.prefix(doc.caliber), "base": base,
        "ops": ops, "rows": [_row(r, index, gbps.get((r.op, r.dtype, r.shape, r.occurrence)))
                             for r in report.rows]}


def _row_counts(report: AbReport) -> str:
    """A one-operator campaign's line: how many rows got each verdict."""
    verdicts = [r.stats.verdict.value for r in report.rows]
    shown = [f"{verdicts.count(v)} {v}" for v in dict.fromkeys(
        ("faster", "slower", "same", "inconclusive", "flagged", *verdicts)) if v in verdicts]
    return f"rows: {', '.join(shown) or 'none'} of {len(verdicts)}"


def _json_for_script(data: Any) -> str:
    """JSON safe inside <script>: no "</" closes the element early."""
    return json.dumps(data, separators=(",", ":")).replace("</", "<\\/")


def render_html(doc: AbDocument, png: Path | None = None) -> str:
    """The page: its style, its data and its script inline; ab.png inlined where given."""
    picture = ""
    if png is not None and png.is_file():
        encoded = base64.b64encode(png.read_bytes()).decode("ascii")
        picture = f'<img id="chart" alt="ab.png" src="data:image/png;base64,{encoded}">'
    return (PAGE.replace("@STYLE@", (STATIC / "ab.css").read_text(encoding="utf-8"))
            .replace("@PICTURE@", picture)
            .replace("@DATA@", _json_for_script(page_data(doc)))
            .replace("@SCRIPT@", (STATIC / "ab.js").read_text(encoding="utf-8")))


def write_html(doc: AbDocument, directory: Path, png: Path | None = None) -> Path:
    """Write ab.html into `directory`, atomically."""
    return atomic_write_text(directory / suite_report.AB_HTML, render_html(doc, png))


PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,"><title>ab.html</title><style>@STYLE@</style></head>
<body>
<header><h1 id="title"></h1><p id="counts"></p><p id="geomean"></p><p id="said"></p></header>
<details id="picture"><summary>ab.png</summary>@PICTURE@</details>
<form id="filters" onsubmit="return false">
<label>verdict <select id="verdict"><option value="">any</option></select></label>
<label>operator <input id="op" list="op-names" size="24" placeholder="name"></label>
<datalist id="op-names"></datalist>
<label>dtype <select id="dtype"><option value="">any</option></select></label>
<label>text <input id="q" size="24" placeholder="any cell"></label>
<span id="count"></span></form>
<table id="rows"><thead><tr></tr></thead><tbody></tbody></table>
<p id="more"></p>
<script type="application/json" id="data">@DATA@</script>
<script>@SCRIPT@</script>
</body></html>
"""
