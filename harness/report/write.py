"""`harness report`: (re)write a campaign's ab.md, its CSV tables, ab.html and ab.png from its
ab.json."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from harness.fsutil import atomic_write_text
from harness.report import abhtml, plot_suite, render, suite_report
from harness.report.abjson import AbDocument, as_report, read_ab
from harness.report.plot import AB_PNG
from harness.report.plot import NO_PLOT as NO_PLOT  # what the CLI says without matplotlib

AB_MD = "ab.md"


def _lines(render_to: Callable[[render.WriteLine], None]) -> str:
    out: list[str] = []
    render_to(out.append)
    return "\n".join(out) + "\n"


def write_tables(doc: AbDocument, directory: Path) -> list[Path]:
    """ab_rows.csv (every row) and, for a suite, ab_operators.csv (every operator)."""
    report = as_report(doc)
    written = [atomic_write_text(directory / suite_report.ROWS_CSV,
                                 _lines(lambda w: render.render_ab_csv(report, w)))]
    if suite_report.is_suite(doc):
        written.append(atomic_write_text(
            directory / suite_report.OPERATORS_CSV,
            _lines(lambda w: suite_report.render_operators_csv(doc, w))))
    return written


def write_report(path: str | Path) -> tuple[Path, Path | None]:
    """(Re)write ab.md, ab_rows.csv (ab_operators.csv for a suite), ab.png and ab.html beside
    the ab.json at `path`; ab.png is None without matplotlib."""
    target = Path(path)
    directory = target if target.is_dir() else target.parent
    doc = read_ab(target)
    live = render.liveness_note(doc.liveness, doc.caliber.axis)
    notes = [n for n in (render.status_note(doc), live, *doc.notes) if n]
    text = (suite_report.render_markdown(doc, notes) if suite_report.is_suite(doc)
            else render.render_markdown(doc, doc.caliber, notes=notes))
    md = atomic_write_text(directory / AB_MD, text)
    write_tables(doc, directory)
    png = directory / AB_PNG
    summary = len(doc.operators or {}) > plot_suite.MAX_LINES
    drawn = plot_suite.render_png(doc, png) if summary else render.render_png(doc, png)
    abhtml.write_html(doc, directory, png if drawn else None)
    return md, png if drawn else None
