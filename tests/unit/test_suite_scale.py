"""A suite campaign's report at the suite's scale (1,112 operators of the real tree): ab.md
leads with the answer and stays small, the full tables go to CSV beside it."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from harness.providers import resolve
from harness.report import abjson, suite_report, synth, write
from harness.report.abresult import SPEEDUP_SAID
from tests.fixture_nodes import load_nodes_tsv

NODES_TSV = Path(__file__).resolve().parents[1] / "data" / "provider" / "benchmark_nodes.tsv"


@pytest.fixture(scope="module")
def suite() -> abjson.AbDocument:
    ops = tuple(resolve.op_names(load_nodes_tsv(NODES_TSV)))
    return synth.suite_document(synth.Plan(ops, directory="/campaign"))


def test_the_synthetic_suite_has_every_ending_a_real_one_has(suite):
    verdicts = {o.verdict for o in (suite.operators or {}).values()}
    assert {"same", "faster", "slower", "inconclusive", "flagged", "failed", "skipped"} <= verdicts
    assert {u.status for u in suite.units or ()} == {"ok", "failed", "crashed", "timeout",
                                                     "skipped"}
    assert len(suite.operators or {}) == 1112 and len(suite.rows) > 7000
    again = abjson.parse(suite.to_json())  # what the script writes, the loader reads
    assert again.rows == suite.rows and again.operators == suite.operators


def test_ab_md_of_the_suite_leads_with_the_answer_under_100_kb(suite):
    md = suite_report.render_markdown(suite, notes=[])
    assert len(md.encode()) < 100_000
    heads = ["## Suite", "## What needs a person", "### Failed, crashed or timed out",
             "### Largest regressions", "### Largest improvements", "## Every operator and row"]
    assert [md.index(h) for h in heads] == sorted(md.index(h) for h in heads)
    assert SPEEDUP_SAID in md
    assert f"**{suite_report.suite_line(suite.operators or {})}**; geometric mean" in md
    assert "[ab_rows.csv](ab_rows.csv)" in md and "[ab.html](ab.html)" in md
    assert "<details>" not in md  # no operator's rows inline at this scale


def _table_after(md: str, head: str) -> list[list[str]]:
    lines = md.split(head, 1)[1].split("\n\n")[1].splitlines()
    return [line.strip("| ").split(" | ") for line in lines[2:]]


def test_what_needs_a_person_lists_every_broken_operator_and_the_top_each_way(suite):
    md = suite_report.render_markdown(suite, notes=[])
    broken = _table_after(md, "### Failed, crashed or timed out")
    failed = sorted(op for op, o in (suite.operators or {}).items() if o.verdict == "failed")
    assert [row[0] for row in broken] == failed
    assert {row[2].split()[-1] for row in broken} == {"failed", "crashed", "timeout"}
    slower = _table_after(md, "### Largest regressions")
    assert len(slower) == suite_report.TOP
    means = [float(row[1]) for row in slower]
    assert means == sorted(means)  # the largest regression first
    lowest = min(o.geomean_speedup_pct or 0 for o in (suite.operators or {}).values()
                 if o.verdict == "slower")
    assert means[0] == pytest.approx(lowest, abs=0.05)
    faster = [float(row[1]) for row in _table_after(md, "### Largest improvements")]
    assert len(faster) == suite_report.TOP and faster == sorted(faster, reverse=True)


def test_the_full_tables_are_csv_beside_ab_json(suite, tmp_path):
    write.write_tables(suite, tmp_path)
    with open(tmp_path / suite_report.ROWS_CSV, newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(suite.rows) and rows[0]["op"] == suite.rows[0].op
    with open(tmp_path / suite_report.OPERATORS_CSV, newline="") as f:
        ops = list(csv.DictReader(f))
    assert len(ops) == 1112 and ops[0]["verdict"] == "slower"  # regressions first
    crashed = [o for o in ops if "crashed" in o["units_ended_badly"]]
    assert crashed and all(o["verdict"] == "failed" for o in crashed)
