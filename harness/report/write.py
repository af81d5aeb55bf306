"""`harness report`: (re)write a campaign's ab.md and ab.png from its ab.json."""

from __future__ import annotations

from pathlib import Path

from harness.fsutil import atomic_write_text
from harness.report import render, suite_report
from harness.report.comparison import load_ab

AB_MD, AB_PNG = "ab.md", "ab.png"
NO_PLOT = ("matplotlib is not installed; pip install -r requirements/cpu.txt installs it "
           "(or pip install 'matplotlib>=3.5,<4')")


def write_report(path: str | Path) -> tuple[Path, Path | None]:
    """(Re)write ab.md and ab.png beside the ab.json at `path`; ab.png is None without
    matplotlib."""
    target = Path(path)
    directory = target if target.is_dir() else target.parent
    doc = load_ab(target)
    caliber = doc.get("caliber") or {}
    live = render.liveness_note(doc.get("liveness"), caliber.get("axis"))
    notes = [n for n in (render.status_note(doc), live, *(doc.get("notes") or ())) if n]
    text = (suite_report.render_markdown(doc, notes) if suite_report.is_suite(doc)
            else render.render_markdown(doc, caliber, notes=notes))
    md = atomic_write_text(directory / AB_MD, text)
    png = directory / AB_PNG
    return md, png if render.render_png(doc, png) else None
