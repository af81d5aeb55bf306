"""Tests for harness.report.plot: ab.png is a PNG a reader can use, checked on the figure itself."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import pytest

from harness.report import plot
from harness.report.abjson import Caliber, as_report
from harness.report.render import render_png
from harness.report.write import AB_PNG
from tests.unit.test_report import (
    CALIBER,
    DIRECT_MARKER,
    PNG_MAGIC,
    ab_row,
    document,
    one_round_rows,
)

pytest.importorskip("matplotlib")

LONG_SHAPE = "[[16, 4096, 4096], [16, 4096, 128], [16, 128, 4096], [1, 1, 1], [2, 2]]"


def verdicts(doc: dict[str, Any]) -> dict[str, str] | None:
    """The verdicts of a document's operators, as the chart takes them."""
    operators = doc.get("operators")
    return None if operators is None else {op: o["verdict"] for op, o in operators.items()}


def figure(doc: dict[str, Any]) -> Any:
    return plot.build_figure(as_report(doc), Caliber(doc["caliber"]),
                             doc["caliber"]["noise_floor_pct"], verdicts(doc))


def thirty_rows() -> dict[str, Any]:
    rows = []
    for i in range(30):
        pct = (i - 15) * 0.7 if i % 3 else (i - 15) * 6.0
        verdict = "faster" if pct > 3 else "slower" if pct < -3 else "same"
        rows.append({**ab_row(LONG_SHAPE if i % 4 == 0 else f"[[{64 * (i + 1)}, 64]]", 1.0, 1.0,
                              pct, verdict, (pct - 1.0, pct + 1.0)), "op": "layer_norm"})
    return document(rows=rows, caliber={**CALIBER, "op": "layer_norm"})


def png_size(data: bytes) -> tuple[int, int]:
    assert data.startswith(PNG_MAGIC) and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def test_png_of_known_rows_is_a_png_of_a_readable_size(tmp_path: Path) -> None:
    assert render_png(document(), tmp_path / AB_PNG) is True
    data = (tmp_path / AB_PNG).read_bytes()
    width, height = png_size(data)
    assert (width, height >= 300) == (int(plot.WIDTH_IN * plot.DPI), True)
    assert 10_000 < len(data) < 1_000_000


def test_title_names_the_operator_the_axis_and_both_values() -> None:
    title = figure(document()).axes[0].get_title(loc="left")
    first, second, third = title.splitlines()
    assert first == "RLC_ENHANCE on tanh: A=0 against B=1"
    assert "backend cuda" in second and "3 rounds" in second
    assert "geometric mean +123.4% over 3 rows" in second
    assert third == "rows: 1 faster, 1 same, 1 flagged"


def test_ticks_are_percentages_on_both_sides_of_zero() -> None:
    # Pinned: four ticks in exponent notation (-10^2, -10^1, 0), no unit.
    for doc in (document(), thirty_rows()):
        ax = figure(doc).axes[0]
        labels = [t.get_text() for t in ax.get_xticklabels()]
        assert labels and all(text.endswith("%") and "^" not in text for text in labels)
        ticks = ax.get_xticks()
        assert len(labels) >= 5 and min(ticks) < 0 < max(ticks), labels


def test_the_noise_band_bars_and_verdicts_are_in_the_legend() -> None:
    ax = figure(document()).axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels[:3] == ["noise floor -1.5..+1.5%", "95% interval", "min..max of rounds"]
    assert {"faster", "same", "flagged", "geometric mean +123.4%"} <= set(labels)


def test_every_row_has_its_interval_bar_at_its_own_height() -> None:
    doc = document()
    ax = figure(doc).axes[0]
    segments = [tuple(map(tuple, seg)) for c in ax.collections if hasattr(c, "get_segments")
                for seg in c.get_segments()]
    for y, row in zip((2, 1, 0), doc["rows"], strict=True):
        assert ((row["ci_low_pct"], y), (row["ci_high_pct"], y)) in segments
        assert ((row["min_pct"], y), (row["max_pct"], y)) in segments


@pytest.mark.parametrize("make", ["demo", "thirty_long_rows", "no_rows"])
def test_nothing_is_drawn_outside_the_figure(make: str) -> None:
    # Pinned: the row labels were cut off at the left edge.
    doc = {"demo": document, "thirty_long_rows": thirty_rows,
           "no_rows": lambda: document(rows=[], geomean_speedup_pct=None)}[make]()
    fig = figure(doc)
    renderer = fig.canvas.get_renderer()
    box, page = fig.get_tightbbox(renderer), fig.bbox_inches
    assert (box.x0, box.y0) >= (page.x0 - 1e-6, page.y0 - 1e-6)
    assert box.x1 <= page.x1 + 1e-6 and box.y1 <= page.y1 + 1e-6
    for label in fig.axes[0].get_yticklabels():
        extent = label.get_window_extent(renderer)
        assert extent.x0 >= 0 and extent.x1 <= fig.bbox.x1


def test_thirty_rows_keep_each_label_apart() -> None:
    doc = thirty_rows()
    fig = figure(doc)
    renderer = fig.canvas.get_renderer()
    extents = sorted((t.get_window_extent(renderer) for t in fig.axes[0].get_yticklabels()),
                     key=lambda e: e.y0)
    assert len(extents) == 30
    assert all(low.y1 <= high.y0 + 0.5 for low, high in zip(extents, extents[1:], strict=False))
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert labels[0].startswith("float16 [[16, 4096, 4096]")
    assert "…" in labels[0] and labels[0].endswith("[1, 1, 1], [2, 2]]")
    assert len(labels[0]) == len("float16 ") + plot.LABEL_CHARS


def test_a_single_operator_is_named_once_in_the_title_not_on_every_row() -> None:
    labels = [t.get_text() for t in figure(document()).axes[0].get_yticklabels()]
    assert labels == ["float16 [[64, 64]]", "float16 [[4096, 4096]]", "float16 [[1, 1]]"]


def test_an_aa_campaign_is_titled_as_the_noise_floor() -> None:
    doc = document(caliber={**CALIBER, "axis": "none"})
    assert figure(doc).axes[0].get_title(loc="left").startswith(
        "A/A campaign on tanh (AXIS=none)")


def test_flagged_rows_draw_grey_whatever_their_number() -> None:
    doc = document(rows=[ab_row("[[1, 1]]", 0.064, 0.0014, 4471.4, "flagged",
                                flags=(f"A:{DIRECT_MARKER}",))])
    ax = figure(doc).axes[0]
    (point,) = [line for line in ax.get_lines() if line.get_marker() == "o"]
    assert point.get_color() == plot.COLORS["flagged"]
    assert ax.get_xlim()[1] > 4471.4


def demo_like() -> dict[str, Any]:
    # The demo's rows on a loaded two-core host: a 100x slowdown beside -70% and a wide interval.
    return document(rows=[ab_row("[[128, 128]]", 1, 1, -35.1, "same", (-99.88, 20.16)),
                          ab_row("[[256, 256]]", 1, 1, -99.1, "slower", (-99.19, -36.59)),
                          ab_row("[[512, 512]]", 1, 1, -69.2, "slower", (-69.74, -53.15))],
                    geomean_speedup_pct=-84.8)


def test_two_x_either_way_lies_equally_far_from_zero() -> None:
    # Pinned: on the old percent axis a 100x slowdown (-99%) sat beside -70%.
    forward = plot.scale_forward
    assert float(forward(100.0)) == pytest.approx(-float(forward(-50.0)))
    assert float(forward(9900.0)) == pytest.approx(-float(forward(-99.0)))
    assert float(forward(-70.0) - forward(-99.0)) > 2 * float(forward(-50.0) - forward(-70.0))
    for pct in (-99.5, -50.0, -3.0, 0.0, 7.0, 10.0, 250.0, 4471.4):
        assert float(plot.scale_inverse(plot.scale_forward(pct))) == pytest.approx(pct)


@pytest.mark.parametrize("make", [document, thirty_rows, demo_like])
def test_one_scale_reads_off_its_ticks_which_never_overlap(make: Any) -> None:
    # Pinned: a scale stretched within +-10% ticked -99, -90, -75, -10, -5, 0, +5, +10, +900
    # and needed a legend of its breakpoints to read.
    fig = figure(make())
    ax = fig.axes[0]
    renderer = fig.canvas.get_renderer()
    forward = ax.xaxis.get_transform().transform
    ticks = sorted(ax.get_xticks())
    assert 0 in ticks
    # one scale: a factor's distance from 0 is the same wherever it sits
    for pct in (10.0, 100.0):
        a, zero, b = forward([pct, 0.0, 100 / (1 + pct / 100) - 100])
        assert a - zero == pytest.approx(zero - b)
    assert "stretched" not in ax.get_xlabel()
    boxes = sorted((t.get_window_extent(renderer) for t in ax.get_xticklabels()),
                   key=lambda b: b.x0)
    assert all(left.x1 < right.x0 for left, right in zip(boxes, boxes[1:], strict=False))


def test_hostile_values_reach_the_title_as_plain_text_and_stay_inside() -> None:
    # A value holding "$...$" was parsed as TeX; a long or multi-line one ran off the figure.
    doc = document(caliber={**CALIBER, "a": "$HOME;rm -rf /", "b": "x" * 300 + "\n$PATH",
                            "op": "tanh"})
    doc["rows"][0] = {**doc["rows"][0], "op": "we$ird$ op", "shape": "[[$1$]]"}
    fig = figure(doc)
    ax = fig.axes[0]
    (title,) = [c for c in ax.get_children()
                if hasattr(c, "get_parse_math") and c.get_text() == ax.get_title(loc="left")]
    assert title.get_text().splitlines()[0].startswith("RLC_ENHANCE on tanh: A=$HOME;rm -rf / ")
    assert len(title.get_text().splitlines()) == 3  # what, the caliber, the rows' verdicts
    assert not title.get_parse_math()
    assert all(not t.get_parse_math() for t in fig.axes[0].get_yticklabels())
    box = fig.get_tightbbox(fig.canvas.get_renderer())
    assert box.x1 <= fig.bbox_inches.x1 + 1e-6 and box.x0 >= -1e-6


def suite_document(n_ops: int = 3) -> dict[str, Any]:
    """A suite campaign's ab.json: `n_ops` operators of two rows each, op k at about k-1 %,
    their verdicts in `operators`, and one operator that never paired a row."""
    rows, operators = [], {}
    for k in range(n_ops):
        op = f"op{k:03d}"
        for shape, offset in (("[[64, 64]]", -0.5), ("[[4096, 4096]]", 0.5)):
            rows.append({**ab_row(shape, 1.0, 1.0, k - 1 + offset, "same", (k - 2.0, k)),
                         "op": op})
        operators[op] = {"verdict": "slower" if k == 0 else "same", "rows": 2}
    operators["unique"] = {"verdict": "failed", "rows": 0, "reason": "no paired row"}
    return document(rows=rows, operators=operators,
                    caliber={**CALIBER, "op": ",".join(operators)})


def labels_top_down(fig: Any) -> list[str]:
    ticks = fig.axes[0].get_yticklabels()
    renderer = fig.canvas.get_renderer()
    return [t.get_text() for t in sorted(ticks, key=lambda t: -t.get_window_extent(renderer).y0)]


def test_a_suite_chart_has_a_line_per_operator_from_the_worst_up() -> None:
    doc = suite_document(3)
    doc["rows"][4:6] = [{**r, "speedup_pct": -30.0} for r in doc["rows"][4:6]]  # op002 worst
    fig = figure(doc)
    assert labels_top_down(fig) == ["unique (no paired row)", "op002 (2 rows)", "op000 (2 rows)",
                                    "op001 (2 rows)"]
    lines = plot.operator_lines(as_report(doc), verdicts(doc))
    assert [x.verdict for x in lines] == ["failed", "same", "slower", "same"]
    assert lines[1].geomean == pytest.approx(-30.0) and lines[1].worst == -30.0
    assert lines[2].ci_low is not None  # the interval of op000's geometric mean (two rows)


def test_a_suite_chart_colours_each_operator_by_its_verdict_in_ab_json() -> None:
    from matplotlib.colors import to_hex

    fig = figure(suite_document(2))
    markers = sorted((line for line in fig.axes[0].lines if line.get_marker() == "o"),
                     key=lambda line: -line.get_ydata()[0])
    assert [to_hex(m.get_color()) for m in markers] == [to_hex(plot.COLORS["slower"]),
                                                        to_hex(plot.COLORS["same"])]
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert "95% interval of the geometric mean" in legend
    assert "operator slower" in legend and "operator same" in legend


@pytest.mark.slow  # a suite-scale figure drawn whole: 7-10 s, the edit loop's largest
def test_two_hundred_operators_stay_readable() -> None:
    fig = figure(suite_document(200))
    renderer = fig.canvas.get_renderer()
    extents = sorted((t.get_window_extent(renderer) for t in fig.axes[0].get_yticklabels()),
                     key=lambda e: e.y0)
    assert len(extents) == 201
    assert all(low.y1 <= high.y0 + 0.5 for low, high in zip(extents, extents[1:], strict=False))
    box, page = fig.get_tightbbox(renderer), fig.bbox_inches
    assert box.x0 >= page.x0 - 1e-6 and box.x1 <= page.x1 + 1e-6
    assert box.y0 >= page.y0 - 1e-6 and box.y1 <= page.y1 + 1e-6
    assert fig.get_figheight() * plot.DPI < 8000  # a PNG a browser still shows whole


def test_an_operator_interval_wider_than_its_rows_stays_on_the_chart() -> None:
    # Pinned: the x range followed the rows only, and on an H200 suite chart mul's interval
    # (three rows, two degrees of freedom) ran off the right edge.
    doc = suite_document(2)
    low, high = figure(doc).axes[0].get_xlim()
    lines = [x for x in plot.operator_lines(as_report(doc), verdicts(doc)) if x.ci_low]
    assert lines and all(low < x.ci_low and x.ci_high < high for x in lines)
    assert max(x.ci_high for x in lines) > max(r["max_pct"] for r in doc["rows"])


def dot_x(ax: Any, y: float) -> float:
    """The display x of the dot on line `y`."""
    (dot,) = [line for line in ax.get_lines()
              if line.get_marker() == "o" and line.get_ydata()[0] == y]
    return float(ax.transData.transform((dot.get_xdata()[0], y))[0])


def past_the_edge(ax: Any) -> list[tuple[str, float, float]]:
    """(marker, x, y) of each arrow at an edge a line runs past."""
    return [(line.get_marker(), line.get_xdata()[0], line.get_ydata()[0])
            for line in ax.get_lines() if line.get_marker() in (">", "<")]


def assert_apart_and_inside(ax: Any, y_low: float, y_high: float) -> None:
    """The dots on lines y_low (+12%) and y_high (+59%) lie inside the axes, a tenth of its
    width apart or more."""
    left, right = ax.transData.transform([(x, 0) for x in ax.get_xlim()])[:, 0]
    low, high = dot_x(ax, y_low), dot_x(ax, y_high)
    assert left < low < high < right
    assert high - low > 0.1 * (right - left), (low, high, left, right)


def test_one_wild_row_interval_neither_squeezes_the_rows_nor_hides() -> None:
    # Pinned: limits came from every interval, one reached +2e16% (two rounds), and +12% and
    # +59% both sat on the +10% tick.
    doc = document(rows=[ab_row("[[1]]", 1, 1, 12.0, "faster", (10.0, 14.0)),
                         ab_row("[[2]]", 1, 1, 30.0, "inconclusive", (-20.0, 2e16)),
                         ab_row("[[3]]", 1, 1, 59.0, "faster", (55.0, 63.0))],
                   geomean_speedup_pct=None)
    ax = figure(doc).axes[0]
    assert_apart_and_inside(ax, 2, 0)
    low, high = ax.get_xlim()
    assert high < 200  # the cap: twice +59%'s distance from 0 on the log axis, +153%
    ((marker, x, y),) = past_the_edge(ax)
    assert (marker, y) == (">", 1) and x < high
    segments = [seg for c in ax.collections if hasattr(c, "get_segments")
                for seg in c.get_segments() if seg[0][1] == 1]
    assert max(seg[1][0] for seg in segments) == pytest.approx(x)  # clipped at the arrow
    assert "+2e+16%" in [t.get_text() for t in ax.texts]
    assert "runs past the axis: its end beside" in [
        t.get_text() for t in ax.get_legend().get_texts()]


def test_a_suite_chart_keeps_its_limits_to_what_it_draws() -> None:
    # Pinned: a suite chart took its limits from rows' intervals it does not draw: one at
    # +2e16% put operators at +12% and +59% on the same spot.
    rows = [{**ab_row("[[1]]", 1, 1, 12.0, "faster", (10.0, 2e16)), "op": "add"},
            {**ab_row("[[2]]", 1, 1, 12.0, "faster", (10.0, 14.0)), "op": "add"},
            {**ab_row("[[1]]", 1, 1, 59.0, "faster", (55.0, 63.0)), "op": "mul"},
            {**ab_row("[[1]]", 1, 1, 2.0, "same", (0.5, 3.0)), "op": "div"},
            {**ab_row("[[2]]", 1, 1, 60.0, "faster", (58.0, 62.0)), "op": "div"}]
    doc = document(rows=rows, geomean_speedup_pct=None, caliber={**CALIBER, "op": "add,mul,div"})
    lines = plot.operator_lines(as_report(doc), verdicts(doc))
    assert [x.op for x in lines] == ["add", "div", "mul"]  # on y 2, 1, 0
    ax = figure(doc).axes[0]
    assert_apart_and_inside(ax, 2, 0)
    assert ax.get_xlim()[1] < 200
    # div's two rows (+2%, +60%) give its geometric mean an interval of -92.6%..+2104%, past
    # the cap either way (-60%, +153%).
    div = lines[1]
    assert div.ci_low is not None and div.ci_high is not None and div.ci_high > 1000
    assert sorted((m, y) for m, _, y in past_the_edge(ax)) == [("<", 1), (">", 1)]
    shown = [float(t.get_text().rstrip("%")) for t in ax.texts if t.get_text().endswith("%")]
    assert shown == [pytest.approx(div.ci_low, rel=1e-3), pytest.approx(div.ci_high, rel=1e-3)]


@pytest.mark.parametrize("suite", [False, True])
def test_a_one_round_campaign_draws_no_interval(suite: bool) -> None:
    # Pinned: a one-round suite of a switch that does nothing drew each operator's interval
    # over its rows, and it excluded zero.
    rows = one_round_rows() if suite else [r for r in one_round_rows() if r["op"] == "tanh"]
    doc = document(rows=rows, geomean_speedup_pct=None,
                   caliber={**CALIBER, "rounds": 1, "op": "tanh,exp" if suite else "tanh"})
    ax = figure(doc).axes[0]
    widths = [w for c in ax.collections if hasattr(c, "get_segments")
              for w in c.get_linewidths()]
    assert widths and 4 not in widths
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert not any("interval" in text for text in legend)


def test_operators_that_ran_to_max_rounds_are_marked(monkeypatch, tmp_path: Path) -> None:
    from harness import stats

    doc = suite_document(2)
    doc["operators"]["op001"]["reason"] = stats.MAX_ROUNDS_STOP.format(most=6)
    doc["operators"]["op000"]["reason"] = "decided after 2 rounds"
    drawn = []
    real = plot.build_figure
    monkeypatch.setattr(plot, "build_figure", lambda *a, **k: drawn.append(real(*a, **k))
                        or drawn[-1])
    assert render_png(doc, tmp_path / AB_PNG) is True
    assert labels_top_down(drawn[0]) == ["unique (no paired row)", "op000 (2 rows)",
                                         "op001 (2 rows, MAX_ROUNDS)"]
