"""ab.png of a suite: one screen whatever the suite's size, verdict counts in its title, an axis
in % that is symmetric in log ratio."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from harness.report import plot, plot_suite, synth, write
from harness.report.plot import OperatorLine

pytest.importorskip("matplotlib")


def _suite(n: int) -> synth.Plan:
    return synth.Plan(tuple(f"op{i:04d}" for i in range(n)), rows_per_op=8)


@pytest.fixture(scope="module")
def doc():
    return synth.suite_document(_suite(1112))


@pytest.mark.slow  # a suite-scale figure drawn whole: 7-10 s, the edit loop's largest
def test_a_suite_of_1112_operators_fits_a_screen_with_its_counts_in_the_title(doc, tmp_path):
    (tmp_path / "ab.json").write_text("{}")
    assert plot_suite.render_png(doc, tmp_path / "ab.png")
    head = (tmp_path / "ab.png").read_bytes()[16:24]
    width, height = int.from_bytes(head[:4], "big"), int.from_bytes(head[4:], "big")
    assert height <= 2000 and width <= 2000
    fig = plot_suite.build_figure(doc)
    title = fig.get_suptitle()
    counts = plot_suite.verdict_counts(doc.operators)
    assert counts in title and counts.endswith("of 1112 operators")
    slower = sum(1 for o in doc.operators.values() if o.verdict == "slower")
    assert f"{slower} slower" in counts


def test_the_axis_ticks_are_factors_either_way_written_in_percent():
    positions = plot_suite.ticks(math.log(3.0))
    labels = [plot_suite.tick_label(p) for p in positions]
    assert "0%" in labels and "+100%" in labels and "-50%" in labels  # one factor 2 each way
    assert positions == sorted(positions)
    assert [round(p, 9) for p in positions] == [round(-p, 9) for p in reversed(positions)]
    gaps = [b - a for a, b in zip(positions, positions[1:], strict=False)]
    assert min(gaps) >= 0.1 * math.log(3.0) - 1e-12  # no two labels crowd each other


def test_the_lower_panel_shows_a_bounded_number_of_each_called_way():
    lines = [OperatorLine(f"s{i}", "slower", 8, -i - 1.0) for i in range(30)]
    lines += [OperatorLine(f"f{i}", "faster", 8, i + 1.0) for i in range(30)]
    lines += [OperatorLine("x", "same", 8, 0.1)]
    shown = plot_suite.top_lines(lines, most=5)
    assert [x.op for x in shown] == ["s29", "s28", "s27", "s26", "s25",
                                     "f25", "f26", "f27", "f28", "f29"]


def test_the_report_draws_the_summary_for_a_suite_and_the_per_row_chart_for_one_operator(
        tmp_path: Path):
    from harness.report import abjson

    big, one = tmp_path / "big", tmp_path / "one"
    big.mkdir(), one.mkdir()
    abjson.write_ab(big, synth.suite_document(_suite(plot_suite.MAX_LINES + 1)))
    single = synth.suite_document(synth.Plan(("mm",), rows_per_op=8, seed=3))
    abjson.write_ab(one, abjson.AbDocument(single.caliber, single.rows, single.method))
    for folder in (big, one):
        _, png = write.write_report(folder)
        assert png is not None
    tall = int.from_bytes((one / "ab.png").read_bytes()[20:24], "big")
    summary = int.from_bytes((big / "ab.png").read_bytes()[20:24], "big")
    assert summary == round(plot_suite.HEIGHT_IN * plot_suite.DPI)
    assert tall == pytest.approx((2.6 + plot.ROW_IN * 8) * plot.DPI, abs=2)  # a line per row
