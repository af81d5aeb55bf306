"""ab.png: an A/B campaign as one chart: a line per row for one operator; for a suite, a line
per operator (its geometric mean with that mean's interval and its rows' range, sorted)."""

from __future__ import annotations

import io
import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness import axes, stats
from harness.fsutil import atomic_write_bytes
from harness.report.abjson import Caliber
from harness.report.abresult import AbReport, AbRow, in_geomean

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

# Verdict value -> colour; a verdict missing here (a newer one) draws in OTHER_COLOR.
COLORS = {"faster": "tab:green", "slower": "tab:red", "same": "tab:blue",
          "inconclusive": "tab:orange", "flagged": "tab:gray"}
OTHER_COLOR = "tab:purple"
AB_PNG = "ab.png"
NO_PLOT = ("matplotlib is not installed; pip install -r requirements/cpu.txt installs it "
           "(or pip install 'matplotlib>=3.5,<4')")
# The x axis is logarithmic in A_ms / B_ms, so a 2x change reads as far from 0 either way
# (+100% and -50%, +900% and -90%): on a percent axis a 100x slowdown (-99%) would sit beside
# -70%. It is one scale throughout, read off its ticks alone: a scale stretched within +-10% put
# ticks at -99, -90, -75, -10, -5, 0, +5, +10, +900 and needed a legend of its breakpoints.
LINEAR_PCT = 10.0
_T = math.log(1 + LINEAR_PCT / 100)  # the axis unit: ln(1.1)
# The x range follows what is drawn, within a cap: at two rounds a row's interval (t = 12.7) can
# reach +2e16%, and a range that wide squeezes every dot into the +-10% band. The cap is CAP_TIMES
# the farthest dot's distance from 0 on the log axis, never inside +-CAP_MIN_PCT or the noise
# band; a line reaching past it stops at the edge with an arrow, its true end written beside.
CAP_TIMES = 2.0
CAP_MIN_PCT = 10.0
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


def scale_forward(pct: Any) -> Any:
    """Axis position of a speedup in %: ln(A_ms / B_ms) in units of ln(1.1)."""
    import numpy as np

    return np.log(np.maximum(1.0 + np.asarray(pct, dtype=float) / 100.0, 1e-9)) / _T


def scale_inverse(position: Any) -> Any:
    """The speedup in % at an axis position: the inverse of scale_forward."""
    import numpy as np

    return (np.exp(np.asarray(position, dtype=float) * _T) - 1.0) * 100.0


def _row_label(row: AbRow) -> str:
    dtype = row.dtype.removeprefix("torch.")
    shape = row.shape
    if len(shape) > LABEL_CHARS:  # both ends: shapes often differ only in their last tensor
        head = LABEL_CHARS * 3 // 5
        shape = f"{shape[:head]}…{shape[-(LABEL_CHARS - head - 1):]}"
    occurrence = f" #{row.occurrence}" if row.occurrence > 1 else ""
    return f"{dtype} {shape}{occurrence}"


@dataclass(frozen=True)
class OperatorLine:
    """One operator of a suite chart; `geomean` None: no paired row."""

    op: str
    verdict: str
    rows: int
    geomean: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    worst: float | None = None  # the rows' lowest speedup
    best: float | None = None


def operator_lines(report: AbReport, verdicts: Mapping[str, str] | None = None
                   ) -> list[OperatorLine]:
    """A line per operator, sorted from the lowest geometric mean (the worst regression) up;
    operators without a paired row first. Verdicts come from `verdicts` (ab.json's operators')
    where given, else from the rows by `stats.operator_verdict`."""
    verdicts = verdicts or {}
    by_op: dict[str, list[AbRow]] = {}
    for row in report.rows:
        by_op.setdefault(row.op, []).append(row)
    means = dict(report.op_geomeans)
    lines = []
    for op in dict.fromkeys([*by_op, *verdicts]):
        rows = by_op.get(op, [])
        verdict = verdicts.get(op) or stats.operator_verdict(
            [r.stats.verdict.value for r in rows], False)
        mean = means.get(op)  # every operator with a timed row has one (in_geomean)
        speedups = [r.stats.speedup_pct for r in rows if in_geomean(r.flags)]
        lines.append(OperatorLine(op, str(verdict), len(rows)) if mean is None else
                     OperatorLine(op, str(verdict), len(rows), mean.speedup_pct, mean.ci_low_pct,
                                  mean.ci_high_pct, min(speedups), max(speedups)))
    return sorted(lines, key=lambda x: (x.geomean is not None, x.geomean or 0.0, x.op))


@dataclass(frozen=True)
class Mark:
    """One line as drawn: a thin span, a thick interval where there is one, a dot."""

    verdict: str
    span: tuple[float, float]
    interval: tuple[float, float] | None
    point: float

    def ends(self) -> tuple[float, ...]:
        return (*self.span, *(self.interval or ()), self.point)


def _pair(low: float | None, high: float | None) -> tuple[float, float] | None:
    return None if low is None or high is None else (low, high)


def marks(report: AbReport, lines: Sequence[OperatorLine] | None = None) -> list[Mark | None]:
    """The chart's lines from the top: rows, or a suite's operators (`lines`; None for one
    without a paired row: its line stays empty)."""
    if lines is None:
        return [Mark(s.verdict.value, (s.min_pct, s.max_pct), _pair(s.ci_low_pct, s.ci_high_pct),
                     s.speedup_pct) for s in (r.stats for r in report.rows)]
    return [None if x.geomean is None or x.worst is None or x.best is None else
            Mark(x.verdict, (x.worst, x.best), _pair(x.ci_low, x.ci_high), x.geomean)
            for x in lines]


def cap(points: Sequence[float], floor: float | None) -> tuple[float, float]:
    """The farthest the x axis reaches either way from the dots at `points`, in % (CAP_TIMES)."""
    reach = max([math.log1p(CAP_MIN_PCT / 100)] + [CAP_TIMES * abs(math.log1p(p / 100))
                                                   for p in points if -100 < p < math.inf])
    band = stats.floor_band(floor) if floor else (0.0, 0.0)
    return min(math.expm1(-reach) * 100, band[0]), max(math.expm1(reach) * 100, band[1])


def _limits(report: AbReport, floor: float | None, drawn: Sequence[Mark | None]
            ) -> tuple[tuple[float, float], tuple[float, float]]:
    """(the x range, the cap): every end drawn, clipped to the cap, the noise band and zero."""
    points = [m.point for m in drawn if m]
    if report.geomean_speedup_pct is not None:
        points.append(report.geomean_speedup_pct)
    low, high = cap(points, floor)
    values = [0.0, *(stats.floor_band(floor) if floor else (-1.0, 1.0)), *points]
    values += [min(max(v, low), high) for m in drawn if m for v in m.ends()]
    values = [v for v in values if math.isfinite(v)]
    return (min(values), max(values)), (low, high)


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
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.font_manager import FontProperties

    fig, canvas = ax.figure, ax.figure.canvas
    assert isinstance(fig, Figure) and isinstance(canvas, FigureCanvasAgg)  # build_figure's
    forward = ax.xaxis.get_transform()
    t_low, t_high = forward.transform([low, high])
    inches = ax.get_position().width * fig.get_figwidth() / max(t_high - t_low, 1e-12)
    renderer, font = canvas.get_renderer(), FontProperties(size=TICK_FONT)

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


def title_text(report: AbReport, caliber: Caliber) -> str:
    """What was switched on which operator; the caliber and the geometric mean; the rows'
    verdict counts."""
    ops = caliber.text("op") or ", ".join(dict.fromkeys(r.op for r in report.rows)) or "-"
    if len(ops) > TITLE_OPS_CHARS:
        ops = f"{len(ops.split(','))} operators"
    axis = _clip(caliber.axis or "", TITLE_VALUE_CHARS)
    a = _clip(caliber.values.get("a", report.a_label), TITLE_VALUE_CHARS)
    b = _clip(caliber.values.get("b", report.b_label), TITLE_VALUE_CHARS)
    if axes.kind_of(axis).aa:
        first = f"A/A campaign on {ops} (AXIS=none): the noise floor"
    else:
        first = f"{axis or 'A/B'} on {ops}: A={a} against B={b}"
    facts = [f"{k} {caliber.text(k)}" for k in ("backend", "timer", "level") if caliber.text(k)]
    if caliber.rounds:
        facts.append(f"{caliber.rounds} rounds")
    geomean = report.geomean_speedup_pct
    facts.append(f"geometric mean {'-' if geomean is None else f'{geomean:+.1f}%'} over "
                 f"{len(report.rows)} rows")
    counts: dict[str, int] = {}
    for row in report.rows:
        word = row.stats.verdict.value
        counts[word] = counts.get(word, 0) + 1
    said = ", ".join(f"{n} {v}" for v, n in sorted(counts.items(), key=lambda c: -c[1]))
    return f"{first}\n{', '.join(facts)}" + (f"\nrows: {said}" if said else "")


def _draw_line(ax: Axes, y: int, mark: Mark, window: tuple[float, float]) -> bool:
    """One line of the chart, clipped to `window`; True where it reaches past an edge."""
    color = COLORS.get(mark.verdict, OTHER_COLOR)
    low, high = window

    def clip(value: float) -> float:
        return min(max(value, low), high)

    ax.hlines(y, clip(mark.span[0]), clip(mark.span[1]), color=color, linewidth=1, alpha=0.6)
    if mark.interval is not None:
        ax.hlines(y, clip(mark.interval[0]), clip(mark.interval[1]), color=color, linewidth=4,
                  alpha=0.8)
    ax.plot([mark.point], [y], "o", color=color, markersize=6, markeredgecolor="black",
            markeredgewidth=0.5, zorder=3)
    ends = [v for v in mark.ends() if not math.isnan(v)]
    past = [(end, edge, right) for end, edge, right in ((min(ends, default=low), low, False),
                                                        (max(ends, default=high), high, True))
            if (end > edge if right else end < edge)]
    for end, edge, right in past:
        _arrow(ax, y, color, end, edge, right)
    return bool(past)


def end_text(end: float) -> str:
    """A clipped end: "+2e+16%", "+2130%", "-92.69%"; "-99.9994%", never a rounded "-100%"."""
    return f"{end:+.4g}%" if end > -99.5 else f"{end:+.6g}%"


def _arrow(ax: Axes, y: int, color: str, end: float, edge: float, right: bool) -> None:
    """A triangle at the `edge` a line runs past, pointing out, its true `end` written beside."""
    ax.plot([edge], [y], ">" if right else "<", color=color, markersize=7,
            markeredgecolor="black", markeredgewidth=0.5, zorder=4)
    ax.annotate(end_text(end), (edge, y), xytext=(-6 if right else 6, 3),
                textcoords="offset points", ha="right" if right else "left", va="bottom",
                fontsize=7, color="0.2", parse_math=False, zorder=4)


def _legend_handles(report: AbReport, floor: float | None,
                    lines: Sequence[OperatorLine] | None, drawn: Sequence[Mark | None],
                    clipped: bool) -> list[Any]:
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles: list[Any] = []
    if floor:
        low, high = stats.floor_band(floor)  # a factor 1 + floor either way
        handles.append(Patch(color="0.88", label=f"noise floor {low:+.1f}..{high:+.1f}%"))
    thick, thin = (("95% interval", "min..max of rounds") if lines is None else
                   ("95% interval of the geometric mean", "range of the operator's rows"))
    if any(m and m.interval for m in drawn):
        handles.append(Line2D([], [], color="0.3", linewidth=4, label=thick))
    handles.append(Line2D([], [], color="0.3", linewidth=1, label=thin))
    if clipped:
        handles.append(Line2D([], [], marker=">", linestyle="", color="0.3",
                              markeredgecolor="black", markeredgewidth=0.5,
                              label="runs past the axis: its end beside"))
    if report.geomean_speedup_pct is not None:
        handles.append(Line2D([], [], color="black", linestyle="--", linewidth=1,
                              label=f"geometric mean {report.geomean_speedup_pct:+.1f}%"))
    seen = (dict.fromkeys(r.stats.verdict.value for r in report.rows) if lines is None else
            dict.fromkeys(x.verdict for x in lines if x.geomean is not None))
    handles += [Line2D([], [], marker="o", linestyle="", color=COLORS.get(v, OTHER_COLOR),
                       markeredgecolor="black", markeredgewidth=0.5,
                       label=v if lines is None else f"operator {v}") for v in seen]
    return handles


def build_figure(report: AbReport, caliber: Caliber | None = None,
                 noise_floor: float | None = None, verdicts: Mapping[str, str] | None = None,
                 capped: Collection[str] = ()) -> Figure:
    """The ab.png figure of `report`, laid out and drawn, for saving or inspecting: a line
    per row for one operator, a line per operator for more (`verdicts`: ab.json's operators';
    `capped`: operators that ROUNDS=auto ran to MAX_ROUNDS undecided, so labelled)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import NullLocator

    caliber = caliber or Caliber()
    suite = len({r.op for r in report.rows} | set(verdicts or {})) > 1
    lines = operator_lines(report, verdicts) if suite else None
    drawn = marks(report, lines)
    count = len(drawn)
    fig = Figure(figsize=(WIDTH_IN, 2.6 + ROW_IN * max(count, 2)), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    limits, window = _limits(report, noise_floor, drawn)
    ax.set_xscale("function", functions=(scale_forward, scale_inverse))
    if noise_floor:
        ax.axvspan(*stats.floor_band(noise_floor), color="0.88", zorder=0)
    ax.axvline(0.0, color="black", linewidth=0.8)
    if report.geomean_speedup_pct is not None:
        ax.axvline(report.geomean_speedup_pct, color="black", linestyle="--", linewidth=1)
    clipped = any([_draw_line(ax, y, m, window)
                   for y, m in zip(range(count - 1, -1, -1), drawn, strict=True) if m])
    labels = ([_row_label(r) for r in report.rows] if lines is None else
              [_clip(f"{x.op} ({x.rows} rows{', MAX_ROUNDS' * (x.op in capped)})"
                     if x.geomean is not None else f"{x.op} (no paired row)", LABEL_CHARS)
               for x in lines])
    low, high = _padded(ax, *limits)
    ax.set_xlim(low, high)
    ax.xaxis.set_major_formatter(_formatter(pct_label))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.tick_params(axis="x", labelsize=TICK_FONT)
    ax.grid(axis="x", color="0.85", linewidth=0.6)
    ax.set_ylim(-0.7, max(count, 1) - 0.3)
    ax.set_yticks(list(range(count - 1, -1, -1)), labels, fontsize=8, family="monospace",
                  parse_math=False)
    what = ("speedup of B over A, % = (A_ms / B_ms - 1) * 100" if not suite else
            "each operator's geometric mean speedup of B over A, % = (A_ms / B_ms - 1) * 100")
    ax.set_xlabel(f"{what}: right of 0, B is faster\n"
                  "scale: logarithmic in A_ms / B_ms (+100% and -50%, 2x either way, lie equally "
                  "far from 0)", fontsize=9)
    # parse_math off: a value such as A=$HOME would otherwise be typeset, or fail, as TeX.
    ax.set_title(title_text(report, caliber), fontsize=10, loc="left", parse_math=False)
    if not count:
        ax.text(0.5, 0.5, "no paired rows", transform=ax.transAxes, ha="center")
    ax.legend(handles=_legend_handles(report, noise_floor, lines, drawn, clipped),
              loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    fig.canvas.draw()  # lays the axes out: the ticks need its width
    ax.set_xticks(percent_ticks(ax, low, high))
    fig.canvas.draw()
    return fig


def _formatter(text: Callable[[float], str]) -> Any:
    from matplotlib.ticker import FuncFormatter

    return FuncFormatter(lambda value, _pos: text(value))


def render_png(report: AbReport, path: str | Path, *, caliber: Caliber | None = None,
               noise_floor: float | None = None, verdicts: Mapping[str, str] | None = None,
               capped: Collection[str] = ()) -> bool:
    """Write ab.png atomically; False (nothing written) without matplotlib."""
    if not available():
        return False
    fig = build_figure(report, caliber, noise_floor, verdicts, capped)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI)
    atomic_write_bytes(Path(path), buffer.getvalue())
    return True
