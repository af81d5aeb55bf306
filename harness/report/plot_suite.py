"""ab.png of a suite: a summary that fits a screen (the distribution of the operators' geometric
means, the called ones marked, and the largest regressions and improvements)."""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.fsutil import atomic_write_bytes
from harness.report import plot
from harness.report.abjson import AbDocument, as_report
from harness.report.plot import COLORS, OTHER_COLOR, OperatorLine

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

# A suite with more operators than this gets the summary; fewer keep a line per operator.
MAX_LINES = 40
TOP = 15  # operators shown each way in the lower panel
WIDTH_IN, HEIGHT_IN, DPI = 12.0, 13.0, 120  # 1440 x 1560 px
# The x axis is ln(A_ms / B_ms), so that 2x faster and 2x slower lie equally far from 0; its
# ticks are factors either way, written in % (+100% and -50% are one factor 2).
FACTORS = (1.01, 1.02, 1.05, 1.1, 1.25, 1.5, 2.0, 3.0, 5.0, 10.0, 100.0)
MIN_REACH = math.log(1.1)
MAX_REACH = math.log(100.0)
SHOWN = ("slower", "inconclusive", "flagged", "same", "faster")


def to_x(pct: float) -> float:
    """The axis position of a speedup in %: ln(1 + pct / 100)."""
    return math.log(max(1.0 + pct / 100.0, 1e-9))


def tick_label(position: float) -> str:
    """The % a position reads as: "+25%", "-20%", "-4.8%", "0%"."""
    value = math.expm1(position) * 100.0
    if abs(value) < 0.05:
        return "0%"
    return f"{value:+.0f}%" if abs(value) >= 9.5 else f"{value:+.1f}%"


def ticks(reach: float, gap: float = 0.1) -> list[float]:
    """Positions of symmetric factor ticks within +-reach, the widest first, none nearer
    another (or 0) than `gap` of the reach: labels that never overlap."""
    kept: list[float] = []
    for position in sorted((math.log(f) for f in FACTORS), reverse=True):
        if position <= reach * 1.001 and all(abs(position - k) >= gap * reach
                                              for k in (*kept, 0.0)):
            kept.append(position)
    kept.sort()
    return [*(-p for p in reversed(kept)), 0.0, *kept]


def verdict_counts(operators: Mapping[str, Any]) -> str:
    """The verdict counts of the title: "75 slower, 73 faster, 775 same, ... of 1112"."""
    counts: dict[str, int] = {}
    for o in operators.values():
        counts[str(o.verdict)] = counts.get(str(o.verdict), 0) + 1
    order = ("slower", "faster", "same", "inconclusive", "flagged", "failed", "pending",
             "skipped", "excluded")
    shown = [f"{counts[v]} {v}" for v in order if counts.get(v)]
    shown += [f"{n} {v}" for v, n in counts.items() if v not in order]
    return f"{', '.join(shown)} of {len(operators)} operators"


def _reach(lines: Sequence[OperatorLine]) -> float:
    ends = [abs(to_x(v)) for x in lines for v in (x.geomean, x.ci_low, x.ci_high)
            if v is not None and v > -100 and math.isfinite(v)]
    return min(max([MIN_REACH, *ends]) * 1.08, MAX_REACH)


def _histogram(ax: Axes, lines: Sequence[OperatorLine], reach: float) -> None:
    import numpy as np

    bins = list(np.linspace(-reach, reach, 81))
    groups = [v for v in SHOWN if any(x.verdict == v for x in lines)]
    values = [[min(max(to_x(x.geomean or 0.0), -reach), reach) for x in lines
               if x.verdict == v and x.geomean is not None] for v in groups]
    ax.hist(values, bins=bins, stacked=True, log=True, label=groups,
            color=[COLORS.get(v, OTHER_COLOR) for v in groups], edgecolor="white",
            linewidth=0.3)
    for verdict, row in (("slower", 0.6), ("faster", 0.6)):  # the called ones, one tick each
        called = [to_x(x.geomean) for x in lines if x.verdict == verdict and x.geomean is not None]
        ax.plot(called, [row] * len(called), "|", color=COLORS[verdict], markersize=14,
                markeredgewidth=1.2)
    ax.set_ylim(0.4, None)
    ax.set_ylabel("operators (log scale)", fontsize=9)
    ax.set_title("each operator's geometric mean speedup; a tick below each operator called "
                 "slower or faster", fontsize=9, loc="left")
    ax.legend(fontsize=8, frameon=False, loc="upper right")


def top_lines(lines: Sequence[OperatorLine], most: int = TOP) -> list[OperatorLine]:
    """The `most` lowest geometric means of slower operators, then the `most` highest of
    faster ones, the lowest at the top."""
    slower = sorted((x for x in lines if x.verdict == "slower" and x.geomean is not None),
                    key=lambda x: x.geomean or 0.0)[:most]
    faster = sorted((x for x in lines if x.verdict == "faster" and x.geomean is not None),
                    key=lambda x: -(x.geomean or 0.0))[:most]
    return [*slower, *reversed(faster)]


def _clip(text: str, chars: int = plot.LABEL_CHARS) -> str:
    return text if len(text) <= chars else text[:chars - 1] + "…"


def _top(ax: Axes, shown: Sequence[OperatorLine], reach: float) -> None:
    count = len(shown)
    for y, x in zip(range(count - 1, -1, -1), shown, strict=True):
        color = COLORS.get(x.verdict, OTHER_COLOR)
        span = [min(max(to_x(v), -reach), reach) for v in (x.worst, x.best) if v is not None]
        if span:
            ax.hlines(y, min(span), max(span), color=color, linewidth=1, alpha=0.6)
        if x.ci_low is not None and x.ci_high is not None:
            ax.hlines(y, max(to_x(x.ci_low), -reach), min(to_x(x.ci_high), reach), color=color,
                      linewidth=4, alpha=0.8)
        ax.plot([to_x(x.geomean or 0.0)], [y], "o", color=color, markersize=6,
                markeredgecolor="black", markeredgewidth=0.5, zorder=3)
    labels = [_clip(f"{x.op} ({x.geomean or 0.0:+.1f}%, {x.rows} rows)") for x in shown]
    ax.set_yticks(list(range(count - 1, -1, -1)), labels, fontsize=8, family="monospace")
    ax.set_ylim(-0.7, max(count, 1) - 0.3)
    ax.set_title(f"the {TOP} largest regressions and improvements: geometric mean (dot), its 95% "
                 "interval (thick), the range of the operator's rows (thin)", fontsize=9,
                 loc="left")
    if not count:
        ax.text(0.5, 0.5, "no operator called slower or faster", transform=ax.transAxes,
                ha="center")


def build_figure(doc: AbDocument) -> Figure:
    """The summary figure of a suite campaign's document."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import FixedLocator, FuncFormatter

    report = as_report(doc)
    operators = doc.operators or {}
    lines = plot.operator_lines(report, {op: o.verdict for op, o in operators.items()})
    shown = top_lines(lines)
    reach = _reach([x for x in lines if x.geomean is not None and x.verdict != "inconclusive"]
                   + shown)
    fig = Figure(figsize=(WIDTH_IN, HEIGHT_IN), layout="constrained")
    FigureCanvasAgg(fig)
    upper, lower = fig.subplots(2, 1, sharex=True, height_ratios=(1, 2.2))
    _histogram(upper, lines, reach)
    _top(lower, shown, reach)
    for ax in (upper, lower):
        ax.axvline(0.0, color="black", linewidth=0.8)
        if report.geomean_speedup_pct is not None:
            ax.axvline(to_x(report.geomean_speedup_pct), color="black", linestyle="--",
                       linewidth=1)
        ax.xaxis.set_major_locator(FixedLocator(ticks(reach)))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: tick_label(v)))
        ax.tick_params(axis="x", labelsize=9, labelbottom=True)
        ax.grid(axis="x", color="0.85", linewidth=0.6)
    lower.set_xlim(-reach, reach)
    lower.set_xlabel("geometric mean speedup of B over A, % = (A_ms / B_ms - 1) * 100: right of "
                     "0, B is faster\nthe axis is ln(A_ms / B_ms): +100% and -50% (2x either "
                     "way) lie equally far from 0; dashed: the suite's geometric mean",
                     fontsize=9)
    fig.suptitle(f"{plot.title_text(report, doc.caliber)}\n{verdict_counts(operators)}",
                 fontsize=10, x=0.01, ha="left")
    return fig


def render_png(doc: AbDocument, path: str | Path) -> bool:
    """Write the suite's ab.png atomically; False (nothing written) without matplotlib."""
    if not plot.available():
        return False
    buffer = io.BytesIO()
    build_figure(doc).savefig(buffer, format="png", dpi=DPI)
    atomic_write_bytes(Path(path), buffer.getvalue())
    return True
