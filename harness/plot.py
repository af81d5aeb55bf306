"""ab.png: an A/B campaign's per-row speedups, intervals and verdicts as one chart."""

from __future__ import annotations

import io
import math
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.comparison import AbReport, AbRow
from harness.fsutil import atomic_write_bytes

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

# Verdict value -> colour; a verdict missing here (a newer one) draws in OTHER_COLOR.
COLORS = {"faster": "tab:green", "slower": "tab:red", "same": "tab:blue",
          "inconclusive": "tab:orange", "flagged": "tab:gray"}
OTHER_COLOR = "tab:purple"
# The x axis is logarithmic in A_ms / B_ms, so a 2x change reads as far from 0 either way
# (+100% and -50%, +900% and -90%): on a percent axis a 100x slowdown (-99%) would sit beside
# -70%. Within +-10%, where real effects sit, it is stretched at least MIN_STRETCH times, and
# more where outliers would leave that band under LINEAR_SHARE of the width.
LINEAR_PCT = 10.0
MIN_STRETCH = 3.0
LINEAR_SHARE = 0.35
_T = math.log(1 + LINEAR_PCT / 100)
# Tick candidates in %, the most useful first: one is kept unless it crowds a tick kept before.
TICK_CANDIDATES = (0, 10, -10, 5, -5, 100, -50, 2, -2, 900, -90, 25, -20, 1, -1, 300, -75,
                   9900, -99, 50, -25, 3, -3, 20, 200, 500, 1000)
TICK_MARGIN_IN = 0.08  # between two tick labels
TICK_FONT = 9
LABEL_CHARS = 46
TITLE_OPS_CHARS = 60
TITLE_VALUE_CHARS = 40
WIDTH_IN, ROW_IN, DPI = 12.0, 0.28, 120


def available() -> bool:
    """Whether matplotlib can be imported (its Agg canvas needs no display)."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: F401
        from matplotlib.figure import Figure  # noqa: F401
    except ImportError:
        return False
    return True


def pct_label(value: float) -> str:
    """A tick's text: "0%", "+5%", "-50%", "+1000%"."""
    return "0%" if value == 0 else f"{value:+g}%"


def scale_forward(pct: Any, stretch: float = MIN_STRETCH) -> Any:
    """Axis position of a speedup in %: ln(A_ms / B_ms) in units of ln(1.1), divided by
    `stretch` beyond one unit."""
    import numpy as np

    log_ratio = np.log(np.maximum(1.0 + np.asarray(pct, dtype=float) / 100.0, 1e-9))
    size = np.abs(log_ratio) / _T
    return np.sign(log_ratio) * np.where(size <= 1.0, size, 1.0 + (size - 1.0) / stretch)


def scale_inverse(position: Any, stretch: float = MIN_STRETCH) -> Any:
    """The speedup in % at an axis position: the inverse of scale_forward."""
    import numpy as np

    position = np.asarray(position, dtype=float)
    size = np.abs(position)
    log_ratio = np.sign(position) * _T * np.where(size <= 1.0, size, 1.0 + (size - 1.0) * stretch)
    return (np.exp(log_ratio) - 1.0) * 100.0


def stretch_for(low: float, high: float) -> float:
    """The stretch that keeps the +-10% band at LINEAR_SHARE of low..high's width or more."""
    outside = sum(max(float(abs(scale_forward(v, 1.0))) - 1.0, 0.0) for v in (low, high))
    return max(MIN_STRETCH, outside * LINEAR_SHARE / (2.0 * (1.0 - LINEAR_SHARE)))


def _row_label(row: AbRow, with_op: bool) -> str:
    dtype = row.dtype.removeprefix("torch.")
    shape = row.shape
    if len(shape) > LABEL_CHARS:  # both ends: shapes often differ only in their last tensor
        head = LABEL_CHARS * 3 // 5
        shape = f"{shape[:head]}…{shape[-(LABEL_CHARS - head - 1):]}"
    occurrence = f" #{row.occurrence}" if row.occurrence > 1 else ""
    return f"{row.op + ' ' if with_op else ''}{dtype} {shape}{occurrence}"


def _limits(report: AbReport, floor: float | None) -> tuple[float, float]:
    """The x range: every median, interval and min..max, the noise band, and zero."""
    values = [0.0, *([-floor, floor] if floor else [-1.0, 1.0])]
    for row in report.rows:
        s = row.stats
        values += [v for v in (s.speedup_pct, s.min_pct, s.max_pct, s.ci_low_pct,
                               s.ci_high_pct) if v is not None and math.isfinite(v)]
    return min(values), max(values)


def _padded(ax: Axes, low: float, high: float) -> tuple[float, float]:
    """`low..high` widened by 6% a side in the axis's own coordinates."""
    forward = ax.xaxis.get_transform()
    t_low, t_high = forward.transform([low, high])
    pad = max(t_high - t_low, 1e-9) * 0.06
    back = forward.inverted()
    return float(back.transform([t_low - pad])[0]), float(back.transform([t_high + pad])[0])


def percent_ticks(ax: Axes, low: float, high: float) -> list[float]:
    """Ticks in % within low..high, the most useful first, none crowding another (the axes'
    width as laid out at the last draw decides how close is crowded)."""
    forward = ax.xaxis.get_transform()
    t_low, t_high = forward.transform([low, high])
    fig = ax.figure
    inches = ax.get_position().width * fig.get_figwidth() / max(t_high - t_low, 1e-12)
    from matplotlib.font_manager import FontProperties

    renderer, font = fig.canvas.get_renderer(), FontProperties(size=TICK_FONT)

    def width_in(value: float) -> float:
        width = renderer.get_text_width_height_descent(pct_label(value), font, ismath=False)[0]
        return width / fig.dpi

    def apart(a: float, b: float) -> bool:
        room = (width_in(a) + width_in(b)) / 2 + TICK_MARGIN_IN
        return abs(forward.transform([a])[0] - forward.transform([b])[0]) * inches >= room

    kept: list[float] = []
    for value in map(float, TICK_CANDIDATES):
        if low <= value <= high and all(apart(value, k) for k in kept):
            kept.append(value)
    return sorted(kept)


def _clip(value: Any, chars: int) -> str:
    text = " ".join(str(value).split())  # a newline in a value would break the title's lines
    return text if len(text) <= chars else text[:chars - 1] + "…"


def title_text(report: AbReport, caliber: Mapping[str, Any]) -> str:
    """Two lines: what was switched on which operator, then the caliber and the geometric mean."""
    ops = str(caliber.get("op") or ", ".join(dict.fromkeys(r.op for r in report.rows)) or "-")
    if len(ops) > TITLE_OPS_CHARS:
        ops = f"{len(ops.split(','))} operators"
    axis = _clip(caliber.get("axis") or "", TITLE_VALUE_CHARS)
    a = _clip(caliber.get("a", report.a_label), TITLE_VALUE_CHARS)
    b = _clip(caliber.get("b", report.b_label), TITLE_VALUE_CHARS)
    if axis == "none":
        first = f"A/A campaign on {ops} (AXIS=none): the noise floor"
    else:
        first = f"{axis or 'A/B'} on {ops}: A={a} against B={b}"
    facts = [f"{k} {caliber[k]}" for k in ("backend", "timer", "level") if caliber.get(k)]
    if caliber.get("rounds"):
        facts.append(f"{caliber['rounds']} rounds")
    geomean = report.geomean_speedup_pct
    facts.append(f"geometric mean {'-' if geomean is None else f'{geomean:+.1f}%'} over "
                 f"{len(report.rows)} rows")
    return f"{first}\n{', '.join(facts)}"


def _draw_rows(ax: Axes, rows: Sequence[AbRow]) -> None:
    for y, row in zip(range(len(rows) - 1, -1, -1), rows, strict=True):
        s = row.stats
        color = COLORS.get(s.verdict.value, OTHER_COLOR)
        ax.hlines(y, s.min_pct, s.max_pct, color=color, linewidth=1, alpha=0.6)
        if s.ci_low_pct is not None and s.ci_high_pct is not None:
            ax.hlines(y, s.ci_low_pct, s.ci_high_pct, color=color, linewidth=4, alpha=0.8)
        ax.plot([s.speedup_pct], [y], "o", color=color, markersize=6,
                markeredgecolor="black", markeredgewidth=0.5, zorder=3)


def _legend_handles(report: AbReport, floor: float | None) -> list[Any]:
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles: list[Any] = []
    if floor:
        handles.append(Patch(color="0.88", label=f"noise floor ±{floor:.1f}%"))
    handles += [Line2D([], [], color="0.3", linewidth=4, label="95% interval"),
                Line2D([], [], color="0.3", linewidth=1, label="min..max of rounds")]
    if report.geomean_speedup_pct is not None:
        handles.append(Line2D([], [], color="black", linestyle="--", linewidth=1,
                              label=f"geometric mean {report.geomean_speedup_pct:+.1f}%"))
    seen = dict.fromkeys(r.stats.verdict.value for r in report.rows)
    handles += [Line2D([], [], marker="o", linestyle="", color=COLORS.get(v, OTHER_COLOR),
                       markeredgecolor="black", markeredgewidth=0.5, label=v) for v in seen]
    return handles


def build_figure(report: AbReport, caliber: Mapping[str, Any] | None = None,
                 noise_floor: float | None = None) -> Figure:
    """The ab.png figure of `report`, laid out and drawn, for saving or inspecting."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    caliber = caliber or {}
    rows = report.rows
    fig = Figure(figsize=(WIDTH_IN, 2.6 + ROW_IN * max(len(rows), 2)), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    stretch = stretch_for(*_limits(report, noise_floor))
    ax.set_xscale("function", functions=(partial(scale_forward, stretch=stretch),
                                         partial(scale_inverse, stretch=stretch)))
    if noise_floor:
        ax.axvspan(-noise_floor, noise_floor, color="0.88", zorder=0)
    ax.axvline(0.0, color="black", linewidth=0.8)
    if report.geomean_speedup_pct is not None:
        ax.axvline(report.geomean_speedup_pct, color="black", linestyle="--", linewidth=1)
    _draw_rows(ax, rows)
    low, high = _padded(ax, *_limits(report, noise_floor))
    ax.set_xlim(low, high)
    ax.xaxis.set_major_formatter(_formatter(pct_label))
    ax.xaxis.set_minor_locator(_no_ticks())
    ax.tick_params(axis="x", labelsize=TICK_FONT)
    ax.grid(axis="x", color="0.85", linewidth=0.6)
    ax.set_ylim(-0.7, max(len(rows), 1) - 0.3)
    with_op = len({r.op for r in rows}) > 1
    ax.set_yticks(list(range(len(rows) - 1, -1, -1)),
                  [_row_label(r, with_op) for r in rows], fontsize=8, family="monospace",
                  parse_math=False)
    ax.set_xlabel("speedup of B over A, % = (A_ms / B_ms - 1) * 100: right of 0, B is faster\n"
                  "scale: logarithmic in A_ms / B_ms (+100% and -50%, 2x either way, lie equally "
                  f"far from 0), stretched {stretch:.1f}x within ±{LINEAR_PCT:g}%", fontsize=9)
    # parse_math off: a value such as A=$HOME would otherwise be typeset, or fail, as TeX.
    ax.set_title(title_text(report, caliber), fontsize=10, loc="left", parse_math=False)
    if not rows:
        ax.text(0.5, 0.5, "no paired rows", transform=ax.transAxes, ha="center")
    ax.legend(handles=_legend_handles(report, noise_floor), loc="upper left",
              bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    fig.canvas.draw()  # lays the axes out: the ticks need its width
    ax.set_xticks(percent_ticks(ax, low, high))
    fig.canvas.draw()
    return fig


def _formatter(text: Callable[[float], str]) -> Any:
    from matplotlib.ticker import FuncFormatter

    return FuncFormatter(lambda value, _pos: text(value))


def _no_ticks() -> Any:
    from matplotlib.ticker import NullLocator

    return NullLocator()


def render_png(report: AbReport, path: str | Path, *, caliber: Mapping[str, Any] | None = None,
               noise_floor: float | None = None) -> bool:
    """Write ab.png atomically; False (nothing written) without matplotlib."""
    if not available():
        return False
    fig = build_figure(report, caliber, noise_floor)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI)
    atomic_write_bytes(Path(path), buffer.getvalue())
    return True
