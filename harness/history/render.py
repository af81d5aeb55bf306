"""Render the history's answers as markdown, CSV or JSON through a `write_line` callable."""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from harness.fsutil import atomic_write_bytes
from harness.report import plot

FORMATS = ("md", "csv", "json")


def _cell(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return "-" if math.isnan(value) else f"{value:.4g}"
    return str(value).replace("|", "\\|")


def table(rows: Sequence[Mapping[str, object]], fmt: str, write_line: Callable[[str], None],
          title: str = "") -> None:
    """One table of `rows` (dicts with the same keys) in `fmt`."""
    if fmt == "json":
        write_line(json.dumps(list(rows), indent=2, sort_keys=False, default=str))
        return
    if not rows:
        if fmt == "md":
            write_line(f"{title}: nothing in the store" if title else "nothing in the store")
        return
    headers = list(rows[0])
    if fmt == "csv":
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=headers, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
        for line in buf.getvalue().splitlines():
            write_line(line)
        return
    if title:
        write_line(title)
        write_line("")
    write_line("| " + " | ".join(headers) + " |")
    write_line("| " + " | ".join("---" for _ in headers) + " |")
    for row in rows:
        write_line("| " + " | ".join(_cell(row[h]) for h in headers) + " |")


def trend_png(series: Mapping[str, Sequence[tuple[str, float]]], path: Path, title: str,
              xlabel: str = "night, oldest first") -> Path | None:
    """A line per series of latency over time, written atomically; None without matplotlib."""
    if not plot.available():
        return None
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: PLC0415
    from matplotlib.figure import Figure  # noqa: PLC0415

    fig = Figure(figsize=(9, 4.5))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    for label, points in series.items():
        ax.plot(range(len(points)), [v for _, v in points], marker="o", label=label[:60])
    ax.set_xlabel(xlabel)
    ax.set_ylabel("latency, ms")
    ax.set_title(title)
    if len(series) <= 10:
        ax.legend(fontsize=7)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    atomic_write_bytes(path, buf.getvalue())
    return path
