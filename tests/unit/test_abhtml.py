"""ab.html's data: the rerun command, each side's GB/s from the run folders, a page that no
value can break out of."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

from harness.contract.results import Row, write_results
from harness.report import abhtml, abjson, rerun, synth, write
from harness.report.abjson import caliber_of


def test_the_page_reruns_an_operator_with_the_one_command_of_the_campaign():
    # it once spelt its own `make ab AXIS=...`, which named a raw variable's axis in a form
    # AXIS refuses (env:NAME) and the timer as MODE
    caliber = caliber_of({"axis": "MY_SWITCH", "axis_var": "MY_SWITCH", "a": "0", "b": "1",
                          "rounds": 5, "backend": "cpu"})
    assert rerun.prefix(caliber) == (
        "harness ab --backend cpu --axis env:MY_SWITCH --a 0 --b 1 --rounds 5")
    assert rerun.command(caliber, "mm") == rerun.prefix(caliber) + " --op mm"


def _doc(tmp_path: Path, ops: tuple[str, ...]) -> abjson.AbDocument:
    return synth.suite_document(synth.Plan(ops, rows_per_op=3, rounds=3, seed=1,
                                           directory=str(tmp_path)))


def test_gbps_is_each_sides_median_over_its_rounds_where_flaggems_printed_it(tmp_path):
    doc = _doc(tmp_path, ("mm",))
    row = doc.rows[0]
    for side, values in (("A", (10.0, 30.0, 20.0)), ("B", (40.0, None, 44.0))):
        for r, gbps in enumerate(values):
            (tmp_path / "mm" / side / f"r{r}").mkdir(parents=True)
            write_results(tmp_path / "mm" / side / f"r{r}", [Row(
                row.op, row.dtype, row.shape, "SUCCESS", 1.0, 1.0, 1.0, gbps=gbps)])
    found = abhtml.side_gbps(doc)
    assert found == {(row.op, row.dtype, row.shape, 1): {"A": 20.0, "B": 42.0}}
    data = abhtml.page_data(doc)
    assert data["rows"][0][-2:] == [20.0, 42.0] and data["rows"][1][-2:] == [None, None]


def test_run_folders_are_written_once_under_their_common_folder(tmp_path):
    data = abhtml.page_data(_doc(tmp_path, ("mm", "add")))
    assert data["base"] == str(tmp_path)
    assert data["ops"][0][5] == ["mm/A/r0", "mm/A/r1", "mm/A/r2"]


def test_no_value_closes_the_pages_script_early(tmp_path):
    doc = _doc(tmp_path, ("mm",))
    bad = replace(doc.rows[0], shape="</script><script>alert(1)</script>")
    page = abhtml.render_html(replace(doc, rows=(bad, *doc.rows[1:])))
    assert page.count("</script>") == 2  # the data's and the code's own
    data = re.search(r'<script type="application/json" id="data">(.*?)</script>', page, re.S)
    assert data and json.loads(data.group(1))["rows"][0][2] == bad.shape


def test_the_report_writes_ab_html_with_its_picture_inline(tmp_path):
    doc = _doc(tmp_path, ("mm",))
    abjson.write_ab(tmp_path, abjson.AbDocument(doc.caliber, doc.rows, doc.method))
    md, png = write.write_report(tmp_path)
    page = (tmp_path / "ab.html").read_text(encoding="utf-8")
    assert ('src="data:image/png;base64,' in page) == (png is not None)
    assert "http://" not in page and "https://" not in page
    counts = abhtml.page_data(abjson.read_ab(tmp_path))["counts"]
    verdicts = [r.stats.verdict.value for r in doc.rows]
    assert counts.startswith("rows: ") and counts.endswith(f" of {len(doc.rows)}")
    assert f"{verdicts.count('same')} same" in counts


def test_gbps_of_operators_whose_records_share_a_name_stay_each_operators(tmp_path):
    # Regression: ab.json names a campaign's rows by its operators, but the page looked their
    # GB/s up by FlagGems' record name (scatter_reduce_ for four operators): every such row
    # showed none, and the median mixed the operators.
    import sys

    from harness.axes import Axis
    from harness.campaign import plan, result
    from harness.settings import spec

    ops = {"scatter_reduce_two_inplace_sum": 100.0, "scatter_reduce_two_inplace_mean": 200.0}
    campaign = plan.new_campaign(directory=tmp_path, axis=Axis("none", None), caliber={},
                                 argv=[], ops={op: {"node": "n"} for op in ops}, rounds=2,
                                 walls={}, walls_from=None)
    campaign.python = sys.executable
    for op, gbps in ops.items():
        for r in range(2):
            campaign.unit(f"{op}/r{r}").status = "ok"
            for side in plan.SIDES:
                run = tmp_path / op / side / f"r{r}"
                run.mkdir(parents=True)
                rows = [{"op": "scatter_reduce_", "dtype": "torch.float16", "shape": "[[64]]",
                         "status": "SUCCESS", "latency_ms": 0.01, "latency_base_ms": None,
                         "speedup": None, "gbps": gbps, "mode": "kernel", "level": "core"}]
                (run / "results.jsonl").write_text(json.dumps(rows[0]) + "\n")
    doc = result.build_document(tmp_path, campaign, spec.resolve({"backend": "cpu"}, {},
                                                                 which=lambda _: None))
    found = abhtml.side_gbps(doc)
    assert {op: found[(op, "torch.float16", "[[64]]", 1)] for op in ops} == {
        op: {"A": gbps, "B": gbps} for op, gbps in ops.items()}
