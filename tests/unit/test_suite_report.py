"""A suite campaign's operator verdicts and its ab.md section."""

from __future__ import annotations

from dataclasses import asdict

import pytest

from harness import stats
from harness.report import suite_report
from harness.report.abjson import OperatorSummary, parse


@pytest.mark.parametrize(("verdicts", "failed", "expected"), [
    (["same", "slower", "faster"], False, "slower"),  # a regression is never hidden by a win
    (["same", "faster"], False, "faster"),
    (["same", "inconclusive"], False, "inconclusive"),
    (["same", "flagged"], False, "same"),
    (["flagged", "flagged"], False, "flagged"),  # no row that says anything about B
    ([], False, "failed"),
    (["faster"], True, "failed"),
])
def test_an_operators_verdict_puts_regressions_first(verdicts, failed, expected):
    assert stats.operator_verdict(verdicts, failed) == expected


def row(op, speedup, verdict, shape="[8]"):
    return {"op": op, "dtype": "torch.float32", "shape": shape, "occurrence": 1, "a_ms": 1.0,
            "b_ms": 1.0 / (1 + speedup / 100), "speedup_pct": speedup, "min_pct": speedup,
            "max_pct": speedup, "ci_low_pct": None, "ci_high_pct": None, "rounds": 3,
            "verdict": verdict, "flags": []}


def test_suite_markdown_lists_regressions_first_with_each_operators_rows_folded():
    rows = [row("mm", 10.0, "faster"), row("mm", 12.0, "faster", "[16]"),
            row("add", -20.0, "slower"), row("add", 1.0, "same", "[16]")]
    ops = {"mm": {"rounds": 3}, "add": {"rounds": 3}, "bad": {"rounds": 3, "reason": "boom"}}
    operators = suite_report.operator_summaries(rows, ops)
    assert operators["add"].worst.speedup_pct == -20.0
    assert operators["mm"].geomean_speedup_pct == pytest.approx(
        ((1.10 * 1.12) ** 0.5 - 1) * 100)
    assert suite_report.suite_line(operators) == (
        "suite: 1 faster, 1 slower, 0 same, 1 failed of 3 operators")
    doc = parse({"schema": "harness-ab/1", "caliber": {"axis": "X"}, "rows": rows,
                 "unpaired": [], "operators": {op: asdict(o) for op, o in operators.items()}})
    assert suite_report.is_suite(doc)
    md = suite_report.render_markdown(doc, notes=[])
    full = md.split("## Every operator and row")[1]  # a small campaign keeps its tables inline
    table = [line.split(" | ")[0] for line in full.splitlines() if line.startswith("| ")
             and " | " in line and line.split(" | ")[1] in ("slower", "failed", "faster")]
    assert table == ["| add", "| bad", "| mm"]
    assert md.count("<details>") == 3 and "<summary>add: slower, 2 rows</summary>" in md
    assert "| bad | failed | - | - | 0 | 3 | 0 | boom |" in md
    assert "A ms and B ms are medians over rounds; speedup % is the mean of the per-round " in md


def test_a_one_operator_campaign_is_not_a_suite():
    one = {"schema": "harness-ab/1", "rows": [], "operators": {"mm": {"verdict": "failed"}}}
    assert not suite_report.is_suite(parse(one))
    assert not suite_report.is_suite(parse({"schema": "harness-ab/1", "rows": []}))


def test_the_suite_line_counts_inconclusive_operators_before_the_total():
    # Pinned: "... 2 failed, 1 inconclusive of 3 operators" read as "2 failed of 3".
    ops = {"a": OperatorSummary("failed"), "b": OperatorSummary("failed"),
           "c": OperatorSummary("inconclusive")}
    assert suite_report.suite_line(ops) == (
        "suite: 0 faster, 0 slower, 0 same, 2 failed, 1 inconclusive of 3 operators")


def test_a_one_round_suite_prints_no_geometric_mean_interval():
    # Pinned: a one-round suite of a switch that does nothing printed an interval over rows
    # that excluded zero.
    rows = [{**row(op, pct, "inconclusive", shape), "rounds": 1}
            for op, pct, shape in [("mm", 2.5, "[8]"), ("mm", 3.0, "[16]"),
                                   ("add", 3.5, "[8]"), ("add", 2.8, "[16]")]]
    ops = {"mm": {"rounds": 1}, "add": {"rounds": 1}}
    operators = suite_report.operator_summaries(rows, ops)
    doc = parse({"schema": "harness-ab/1", "caliber": {"axis": "X"}, "rows": rows,
                 "unpaired": [], "operators": {op: asdict(o) for op, o in operators.items()}})
    md = suite_report.render_markdown(doc, notes=[])
    assert "over 4 paired rows (0 flagged), interval over rows and rounds -\n" in md


def test_a_suite_without_a_paired_row_says_so_instead_of_an_empty_mean():
    doc = parse({"schema": "harness-ab/1", "caliber": {"axis": "X"}, "rows": [],
                 "unpaired": [], "operators": {"mm": asdict(OperatorSummary("failed"))}})
    md = suite_report.render_markdown(doc, notes=[])
    assert "**suite: 0 faster, 0 slower, 0 same, 1 failed of 1 operator**; no paired rows\n" in md
    assert "-% over" not in md


def test_an_operator_still_to_run_is_pending_not_failed():
    # Regression: an interrupted campaign's operators that had not run read "failed".
    assert stats.operator_verdict([], False, pending=True) == "pending"
    assert stats.operator_verdict([], True, pending=True) == "failed"  # its own reason wins
    ops = {"a": OperatorSummary("failed"), "b": OperatorSummary("pending"),
           "c": OperatorSummary("pending"), "d": OperatorSummary("faster")}
    assert suite_report.suite_line(ops) == (
        "suite: 1 faster, 0 slower, 0 same, 1 failed, 2 pending of 4 operators")


def test_an_operator_whose_code_two_commits_left_unchanged_says_so_beside_its_verdict():
    table = "\n".join(suite_report.operators_table({
        "mm": OperatorSummary("same", artifacts="unchanged"),
        "add": OperatorSummary("slower", artifacts="changed")}))
    assert "| mm | same (code unchanged) |" in table and "| add | slower |" in table


@pytest.mark.parametrize(("axis", "tune", "said"), [
    ("python", "replay", "B replays A's winners, a key it lacks counted (TUNE replay)"),
    ("flaggems", "each", "each side tunes in round 0 and replays its own winners after "
                         "(TUNE each)"),
])
def test_the_caliber_states_the_tuning_the_campaign_used_whatever_its_axis(axis, tune, said):
    # Regression: the axis line hard-coded TUNE each for two interpreters, replay for commits
    from harness.report import render
    from harness.report.abjson import caliber_of

    lines = render.caliber_lines(caliber_of({"axis": axis, "a": "x", "b": "y", "tune": tune}),
                                 None)
    assert lines[1].endswith(f"A=x, B=y; {said}")


def test_a_flagged_worst_row_and_the_flagged_rows_of_the_mean_are_said():
    # A row 40% slower on B, throttled in a round, was an operator's worst row with no mark,
    # and the suite's mean said "over 16 paired rows" with nothing of the flag.
    rows = [{**row("mm", -28.5, "flagged", "[8]"), "flags": ["B:GPU_CLOCKS_THROTTLED"]},
            row("mm", 0.1, "same", "[16]"), row("add", 0.2, "same", "[8]")]
    ops = {"mm": {"rounds": 3}, "add": {"rounds": 3}}
    operators = suite_report.operator_summaries(rows, ops)
    doc = parse({"schema": "harness-ab/1", "caliber": {"axis": "X"}, "rows": rows,
                 "unpaired": [], "operators": {op: asdict(o) for op, o in operators.items()}})
    md = suite_report.render_markdown(doc, notes=[])
    assert "over 3 paired rows (1 flagged)" in md
    assert "| -28.5% torch.float32 [8] (flagged) |" in md  # mm's worst row
    assert "| +0.2% torch.float32 [8] |" in md  # add's, not flagged
