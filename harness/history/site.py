"""`harness publish`: a static site over the history store, its records, trends and changes."""

from __future__ import annotations

import html
import json
import math
import os
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import Engine

from harness.fsutil import atomic_write_text
from harness.history import changes, queries
from harness.report.suite_report import AB_HTML

INDEX = "index.html"
MAX_RECORDS = 2000  # the newest, on the index page
SVG_W, SVG_H, PAD = 640, 120, 6
STYLE = """body{font:14px/1.4 system-ui,sans-serif;margin:1em 2em;color:#222}
table{border-collapse:collapse}th,td{padding:2px 8px;border-bottom:1px solid #eee;
text-align:left;white-space:nowrap}th{background:#f4f4f4}svg{background:#fcfcfc;
border:1px solid #ddd}.step{stroke:#c00;stroke-width:1.5}.up{color:#c00}.down{color:#080}"""
FILTER = """const q=document.getElementById("q"),n=document.getElementById("shown");
function f(){const v=q.value.trim().toLowerCase();let k=0;
document.querySelectorAll("tr.f").forEach(t=>{const s=!v||t.textContent.toLowerCase()
.includes(v);t.style.display=s?"":"none";if(s)k++});n.textContent=k+" shown"}
q.addEventListener("input",f);f();"""


@dataclass(frozen=True)
class Found:
    """A change point of one row's series, with the record it was first seen in."""

    key: queries.SeriesKey
    change: changes.Change


def page_name(op: str) -> str:
    """An operator's page: ops/<name>.html, its name kept to characters safe in a path."""
    return "ops/" + re.sub(r"[^A-Za-z0-9_.-]", "_", op) + ".html"


def _e(value: object) -> str:
    return html.escape(str(value if value is not None else "-"))


def _page(title: str, body: str, script: str = "") -> str:
    inline = f"<script>{script}</script>" if script else ""
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
            f'<link rel="icon" href="data:,"><title>{_e(title)}</title><style>{STYLE}</style>'
            f"</head><body><h1>{_e(title)}</h1>{body}{inline}</body></html>\n")


def record_link(record: queries.Record | None, here: Path) -> str:
    """A link to the record's campaign page (its ab.html) or folder, relative to `here`."""
    if record is None:
        return "-"
    page = Path(record.path) / AB_HTML  # a campaign's; else its folder
    target = page if page.is_file() else Path(record.path)
    shown = f"{record.kind} {record.id}"
    return f'<a href="{_e(os.path.relpath(target, here))}">{_e(shown)}</a>'


def sparkline(points: Sequence[changes.Point], steps: Sequence[changes.Change]) -> str:
    """An inline SVG of a series' log latency, a red line before each change point."""
    drawn = [i for i, p in enumerate(points) if p.latency_ms > 0]  # a log scale: no zero
    at = {index: n for n, index in enumerate(drawn)}  # a step's index is the series'
    logs = [math.log(points[i].latency_ms) for i in drawn]
    if not logs:
        return ""
    low, high = min(logs), max(logs)
    span, count = (high - low) or 1.0, max(len(logs) - 1, 1)

    def x(i: int) -> float:
        return PAD + (SVG_W - 2 * PAD) * i / count

    coords = " ".join(f"{x(i):.1f},{PAD + (SVG_H - 2 * PAD) * (high - v) / span:.1f}"
                      for i, v in enumerate(logs))
    marks = "".join(f'<line class="step" x1="{x(at[c.index]) - 0.5:.1f}" '
                    f'x2="{x(at[c.index]) - 0.5:.1f}"'
                    f' y1="0" y2="{SVG_H}"><title>{c.step_pct:+.1f}% from {_e(c.first.when)}'
                    "</title></line>" for c in steps)
    dots = "" if len(logs) > 1 else f'<circle cx="{x(0):.1f}" cy="{SVG_H / 2}" r="3"/>'
    scale = (f'<text x="{SVG_W - PAD}" y="14" text-anchor="end" font-size="11">'
             f"{math.exp(high):.4g} ms</text><text x=\"{SVG_W - PAD}\" y=\"{SVG_H - PAD}\" "
             f'text-anchor="end" font-size="11">{math.exp(low):.4g} ms</text>')
    return (f'<svg width="{SVG_W}" height="{SVG_H}" role="img"><polyline fill="none" '
            f'stroke="#1f77b4" points="{coords}"/>{dots}{marks}{scale}</svg>')


def _changes_table(found: Sequence[Found], records: Mapping[int, queries.Record], here: Path,
                   with_op: bool) -> str:
    head = ("operator", "dtype", "shape", "side", "step %", "interval %", "p", "first after",
            "record")
    rows = []
    for f in found:
        c, k = f.change, f.key
        op = f'<a href="{_e(page_name(k.op))}">{_e(k.op)}</a>' if with_op else _e(k.op)
        cls = "up" if c.step_pct > 0 else "down"  # latency up: slower
        rows.append(f'<tr class="f"><td>{op}</td><td>{_e(k.dtype)}</td><td>{_e(k.shape)}</td>'
                    f"<td>{_e(k.side or '-')}</td><td class=\"{cls}\">{c.step_pct:+.1f}</td>"
                    f"<td>[{c.low_pct:+.1f}, {c.high_pct:+.1f}]</td><td>{c.p_value:.2g}</td>"
                    f"<td>{_e(c.first.when)}</td>"
                    f"<td>{record_link(records.get(c.first.record_id), here)}</td></tr>")
    header = "".join(f"<th>{h}</th>" for h in head)
    return f'<table id="changes"><tr>{header}</tr>{"".join(rows)}</table>' if rows else \
        "<p>no change point found</p>"


def _op_page(op: str, found: Mapping[queries.SeriesKey, list[changes.Point]],
             steps: Sequence[Found], records: Mapping[int, queries.Record], here: Path) -> str:
    parts = [f'<p><a href="../{INDEX}">all records and operators</a>; latency of each row, '
             "night by night, log scale; a red line: a change point (its step in its title)</p>",
             "<h2>Change points</h2>", _changes_table(steps, records, here, with_op=False),
             "<h2>Rows</h2>"]
    for key, points in sorted(found.items(), key=lambda kv: tuple(vars(kv[0]).values())):
        mine = [f.change for f in steps if f.key == key]
        last = points[-1]
        parts.append(f'<div class="series"><h3>{_e(key.dtype)} {_e(key.shape)} side '
                     f"{_e(key.side or '-')} ({_e(key.backend)} {_e(key.device)}, "
                     f"{_e(key.timer)}): {len(points)} nights, last {last.latency_ms:.4g} ms "
                     f"({record_link(records.get(last.record_id), here)})</h3>"
                     f"{sparkline(points, mine)}</div>")
    return _page(f"history of {op}", "".join(parts))


def _index(records: Sequence[queries.Record], by_op: Mapping[str, Mapping], steps: Sequence[Found],
           lookup: Mapping[int, queries.Record], here: Path) -> str:
    rows = "".join(
        f'<tr class="f"><td>{_e(r.started_utc)}</td><td>{_e(r.kind)}</td><td>{_e(r.state)}</td>'
        f"<td>{_e(r.backend)}</td><td>{_e(r.device)}</td>"
        f"<td>{_e(f'{r.axis} {r.axis_a}->{r.axis_b}' if r.axis else '-')}</td>"
        f"<td>{r.ops}</td><td>{_e(queries.verdict_counts(r))}</td>"
        f"<td>{record_link(r, here)}</td></tr>" for r in records)
    counts: dict[str, int] = defaultdict(int)
    for f in steps:
        counts[f.key.op] += 1
    ops = "".join(f'<tr class="f"><td><a href="{_e(page_name(op))}">{_e(op)}</a></td>'
                  f"<td>{len(series)}</td><td>{counts.get(op, 0)}</td></tr>"
                  for op, series in sorted(by_op.items()))
    body = (f'<p><label>filter <input id="q" size="30"></label> <span id="shown"></span></p>'
            f"<h2>Records over time ({len(records)}, newest first)</h2>"
            '<table id="records"><tr><th>when</th><th>kind</th><th>state</th><th>backend</th>'
            "<th>device</th><th>axis</th><th>ops</th><th>verdicts</th><th>page</th></tr>"
            f"{rows}</table><h2>Change points ({len(steps)})</h2>"
            f"{_changes_table(steps, lookup, here, with_op=True)}"
            f"<h2>Operators ({len(by_op)})</h2>"
            '<table id="ops"><tr><th>operator</th><th>rows</th><th>change points</th></tr>'
            f"{ops}</table>")
    return _page("history", body, FILTER)


def publish(engine: Engine, out: Path, since: str | None = None) -> Path:
    """Write the site into `out`: index.html (records, change points, operators) and one
    page per operator (each row's trend); returns index.html's path."""
    records = queries.list_records(engine, limit=MAX_RECORDS)
    lookup = {r.id: r for r in records}
    found = queries.series(engine, since=since)
    by_op: dict[str, dict[queries.SeriesKey, list[changes.Point]]] = defaultdict(dict)
    steps: list[Found] = []
    for key, points in found.items():
        by_op[key.op][key] = points
        steps += [Found(key, c) for c in changes.find_changes(points)]
    steps.sort(key=lambda f: (f.change.first.when, f.key.op), reverse=True)
    out = out.resolve()
    (out / "ops").mkdir(parents=True, exist_ok=True)
    for op, series in by_op.items():
        atomic_write_text(out / page_name(op), _op_page(
            op, series, [f for f in steps if f.key.op == op], lookup, (out / "ops")))
    atomic_write_text(out / "site.json", json.dumps(
        {"records": len(records), "operators": len(by_op), "changes": len(steps)}) + "\n")
    return atomic_write_text(out / INDEX, _index(records, by_op, steps, lookup, out))
