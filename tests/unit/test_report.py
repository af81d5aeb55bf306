"""Tests for harness.report.write: ab.md from ab.json or an AbReport, ab.png, `harness report`."""

from __future__ import annotations

import json
import math
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from harness import cli
from harness.contract.boundary import DIRECT_MARKER
from harness.contract.results import Row
from harness.errors import UsageError
from harness.report.abjson import SCHEMA, as_report, document_of, parse, read_ab, write_ab
from harness.report.comparison import compare
from harness.report.render import render_markdown, render_png
from harness.report.sources import AB_JSON, Source
from harness.report.write import AB_MD, AB_PNG, write_report
from harness.stats import Verdict, looks
from tests.abdata import ab_data

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
CALIBER = {"backend": "cuda", "op": "tanh", "axis": "RLC_ENHANCE",
           "axis_var": "FLAGTREE_CUDA_RLC_ENHANCE", "a": "0", "b": "1", "level": "core",
           "timer": "graph", "shape_mode": "upstream", "rounds": 3, "noise_floor_pct": 1.5,
           "noise_floor_source": "A/A campaign runs/ab/none-tanh/20250101-000000",
           "image_digests": {"A": ["sha256:aaa"], "B": ["sha256:bbb"]},
           "harness_commit": "c0ffee" * 6 + "ab", "harness_dirty": True}


def ab_row(shape: str, a_ms: float, b_ms: float, pct: float, verdict: str,
           ci: tuple[float, float] | None = (1.0, 2.0), flags: tuple[str, ...] = (),
           **extra: Any) -> dict[str, Any]:
    return {"op": "tanh", "dtype": "torch.float16", "shape": shape, "occurrence": 1,
            "a_ms": a_ms, "b_ms": b_ms, "speedup_pct": pct,
            "ci_low_pct": ci[0] if ci else None, "ci_high_pct": ci[1] if ci else None,
            "min_pct": pct - 1, "max_pct": pct + 1, "rounds": 3, "p_value": 0.001,
            "p_adjusted": 0.003, "verdict": verdict, "flags": list(flags), **extra}


def document(**overrides: Any) -> dict[str, Any]:
    doc = {"schema": SCHEMA, "caliber": CALIBER,
           "rows": [ab_row("[[64, 64]]", 0.0014, 0.0010, 40.0, "faster", (30.0, 50.0)),
                    ab_row("[[4096, 4096]]", 237.5, 237.0, 0.2, "same", (-0.5, 0.9)),
                    ab_row("[[1, 1]]", 0.064, 0.0014, 4471.4, "flagged",
                           flags=(f"A:{DIRECT_MARKER}",))],
           "method": {"name": "t interval on per-round log ratios", "confidence": 0.95,
                      "fdr_q": 0.05},
           "unpaired": [{"op": "tanh", "dtype": "torch.bfloat16", "shape": "[[8, 8]]",
                         "occurrence": 1, "reason": "FAILED in B"}],
           "geomean_speedup_pct": 123.4,
           "liveness": {"status": "live", "detail": "axis live: compiled artifacts differ"},
           "notes": ["something the reader must know"]}
    return {**doc, **overrides}


def table_rows(markdown: str) -> list[list[str]]:
    """The cells of the main table's body rows (skipping header and rule)."""
    lines = [ln for ln in markdown.splitlines() if ln.startswith("| ")]
    header = lines.index(next(ln for ln in lines if ln.startswith("| operator | dtype | shape |")))
    body = []
    for line in lines[header + 2:]:
        cells = [c.strip() for c in line.strip("|").split(" | ")]
        if cells[0] == "operator":
            break  # the unpaired table's header
        body.append(cells)
    return body


# ---------------------------------------------------------------- markdown


def test_markdown_states_the_caliber_above_the_table() -> None:
    md = render_markdown(document(), CALIBER)
    for line in ("- backend: cuda",
                 "- axis: RLC_ENHANCE (FLAGTREE_CUDA_RLC_ENHANCE): A=0 (off), B=1 (on)",
                 "- level: core", "- timer: graph", "- shape mode: upstream",
                 "- rounds: 3 planned per side, interleaved A B B A ...",
                 "- noise floor: 1.5% (A/A campaign runs/ab/none-tanh/20250101-000000)",
                 "- image digest: A sha256:aaa; B sha256:bbb",
                 f"- harness commit: {CALIBER['harness_commit']} (dirty: uncommitted changes)"):
        assert line in md.splitlines(), line
    assert md.index("- backend: cuda") < md.index("| operator |")
    assert md.startswith("# A/B: RLC_ENHANCE on tanh\n")


def test_one_table_row_per_input_row_with_verdict_and_flags() -> None:
    rows = table_rows(render_markdown(document(), CALIBER))
    assert [r[2] for r in rows] == ["[[64, 64]]", "[[4096, 4096]]", "[[1, 1]]"]
    # rows of an older ab.json record no floor: the floor column shows the report's
    faster, same, flagged = rows
    assert faster == ["tanh", "torch.float16", "[[64, 64]]", "0.001400", "0.001000", "+40.0",
                      "+39.0..+41.0", "[+30.0, +50.0]", "1.5", "**faster**", "-"]
    assert same[3:5] == ["237.5", "237.0"] and same[9] == "same"
    assert flagged[9] == "flagged" and flagged[10] == f"A:{DIRECT_MARKER}"


def test_the_method_is_named_above_the_table() -> None:
    md = render_markdown(document(), CALIBER)
    assert "Method: t interval on per-round log ratios, 95%, BH q=0.05." in md
    assert md.index("Method: t interval") < md.index("| operator |")
    md = render_markdown(document(method={"confidence": 0.9, "fdr_q": 0.1}), CALIBER)
    assert "Method: t interval on per-round log ratios, 90%, BH q=0.1." in md
    for bad, message in (({"confidence": 1.5}, "method is not a method of judging rows"),
                         ({"fdr_q": "x"}, "method.fdr_q is 'x', not a number"),
                         ("t test", "method is 't test', not an object")):
        with pytest.raises(UsageError, match=message):
            render_markdown(document(method=bad), CALIBER)


def test_the_report_says_what_a_ms_b_ms_and_speedup_are() -> None:
    # a reader saw the medians' ratio and the speedup disagree in sign on a noisy row: the
    # report says the sides are medians over rounds and speedup is the mean of log ratios
    md = render_markdown(document(), CALIBER)
    said = md.index("A ms and B ms are medians over rounds; speedup % is the mean of the "
                    "per-round log ratios")
    assert said < md.index("| operator |")
    assert "(A_ms / B_ms - 1) * 100" not in md


def test_an_older_verdict_spelling_is_refused() -> None:
    # "same (flagged)" was an older harness's verdict: this one never wrote it.
    with pytest.raises(UsageError, match="rows\\[0\\].verdict is 'same \\(flagged\\)'"):
        render_markdown([ab_row("[[1]]", 1.0, 1.0, 0.0, "same (flagged)")], {})


def test_geomean_unpaired_rows_and_notes() -> None:
    md = render_markdown(document(), CALIBER, notes=["axis live: compiled artifacts differ"])
    assert "geometric mean speedup: +123.4% over 3 paired rows (1 flagged)" in md
    assert "## Unpaired rows (1)" in md
    assert "| tanh | torch.bfloat16 | [[8, 8]] | FAILED in B |" in md
    assert "- axis live: compiled artifacts differ" in md
    assert md.index("## Notes") < md.index("| operator |")


def test_geomean_is_computed_when_absent_and_no_unpaired_is_said() -> None:
    doc = document(geomean_speedup_pct=None, unpaired=[],
                   rows=[ab_row("[[1]]", 2.0, 1.0, 100.0, "faster"),
                         ab_row("[[2]]", 1.0, 2.0, -50.0, "slower", (-60.0, -40.0))])
    md = render_markdown(doc, CALIBER)
    # Logs +-ln 2 over two rows: mean 0, se ln 2, t(0.975, 1) = 12.7062: 2^12.7062 = 6682.65.
    assert "geometric mean speedup: +0.0% over 2 paired rows (0 flagged), interval over rows " \
           "and rounds [-100.0, +668165.1]" in md
    assert "unpaired rows: none" in md and "**slower**" in md
    assert "| operator | rows | geometric mean speedup % |" not in md  # one operator


def test_two_operators_get_a_geometric_mean_each() -> None:
    rows = [ab_row("[[1]]", 2.0, 1.0, 100.0, "faster"), ab_row("[[2]]", 2.0, 1.0, 100.0, "faster"),
            {**ab_row("[[1]]", 1.0, 1.1, -9.0909, "slower"), "op": "exp"}]
    md = render_markdown(document(rows=rows, geomean_speedup_pct=None), CALIBER)
    assert "| operator | rows | geometric mean speedup % | interval % |" in md
    assert "| tanh | 2 | +100.0 | [+100.0, +100.0] |" in md and "| exp | 1 | -9.1 | - |" in md


def test_not_live_axis_is_said_before_the_table() -> None:
    md = render_markdown(document(), CALIBER,
                         notes=["AXIS_NOT_LIVE axis=RLC_ENHANCE: equal artifacts, name not found"])
    assert "no row below says anything about the switch" in md
    assert md.index("AXIS_NOT_LIVE") < md.index("| operator |")


def test_an_aa_campaign_and_an_unrecorded_caliber_read_plainly() -> None:
    md = render_markdown(document(caliber={}), {"axis": "none"})
    assert "- axis: none (an A/A campaign: both sides identical; it measures the noise floor)" in md
    assert "- backend: not recorded" in md and "- noise floor: not recorded" in md
    assert "- image digest: none recorded" in md
    assert render_markdown(document(), CALIBER, noise_floor=3.0).count("- noise floor: 3.0%") == 1


def test_one_round_has_no_interval() -> None:
    row = ab_row("[[1]]", 1.0, 0.5, 100.0, "inconclusive", ci=None, rounds=1)
    md = render_markdown([row], {})
    assert table_rows(md)[0][7] == "-"
    assert "one round per side: no interval" in md


def one_round_rows() -> list[dict[str, Any]]:
    """A one-round campaign of a switch that does nothing: its single B run came out 2.5-3.5%
    quicker on every row of two operators."""
    return [{**ab_row(f"[[{n}]]", 1.0, 1.0 / (1 + pct / 100), pct, "inconclusive", ci=None,
                      rounds=1, min_pct=pct, max_pct=pct, p_value=None, p_adjusted=None),
             "op": op} for n, (op, pct) in enumerate([("tanh", 2.5), ("tanh", 3.0),
                                                       ("exp", 3.5), ("exp", 2.8)])]


@pytest.mark.parametrize("stored", [None, (1.9, 4.0)])
def test_one_round_prints_no_geometric_mean_interval(stored: tuple[float, float] | None) -> None:
    # Pinned: the interval over rows of one round excluded zero ([+2.1, +3.8]) for a switch
    # that does nothing; an ab.json written before the rule still holds one (`stored`).
    extra = {} if stored is None else {"geomean_speedup_pct": 2.95, "geomean_ci_low_pct":
                                       stored[0], "geomean_ci_high_pct": stored[1]}
    doc = document(rows=one_round_rows(), **{"geomean_speedup_pct": None, **extra})
    md = render_markdown(doc, {**CALIBER, "rounds": 1})
    assert "paired rows (0 flagged), interval over rows and rounds -\n" in md
    assert "| tanh | 2 | +2.7 | - |" in md and "| exp | 2 | +3.1 | - |" in md
    assert all(r[7] == "-" for r in table_rows(md))
    assert as_report(doc).geomean_ci_low_pct is None


def test_bad_rows_are_refused_naming_what_is_wrong() -> None:
    with pytest.raises(UsageError, match="ab.json: rows\\[0\\].verdict is 'better'; expected "
                                         "one of: faster, slower"):
        render_markdown([ab_row("[[1]]", 1.0, 1.0, 0.0, "better")], {})
    bad = ab_row("[[1]]", 1.0, 1.0, 0.0, "same")
    del bad["b_ms"]
    with pytest.raises(UsageError, match="ab.json: rows\\[0\\].b_ms is missing"):
        render_markdown([bad], {})
    # A speedup of -100% or less is B taking no time, or less than none; nan is no number.
    for pct in (-100.0, -150.0, math.nan):
        with pytest.raises(UsageError, match=r"rows\[0\].speedup_pct is .*expected a number above"):
            render_markdown([ab_row("[[1]]", 1.0, 1.0, pct, "same")], {})


def measured(shape: str, latency: float, markers: tuple[str, ...] = ()) -> Row:
    return Row(op="tanh", dtype="torch.float16", shape=shape, status="SUCCESS",
               latency_base_ms=1.0, latency_ms=latency, speedup=1.0 / latency, markers=markers)


def test_an_ab_report_from_summary_renders_as_its_ab_json_does() -> None:
    a = [Source(f"A/r{i}", "run", (measured("[[1]]", 2.0 + i / 100),
                                   measured("[[2]]", 1.0, (DIRECT_MARKER,)))) for i in range(3)]
    b = [Source(f"B/r{i}", "run", (measured("[[1]]", 1.0 + i / 100), measured("[[2]]", 0.5),
                                   measured("[[3]]", 1.0))) for i in range(3)]
    report = compare(a, b, noise_floor_pct=2.0)
    caliber = {k: v for k, v in CALIBER.items() if k != "noise_floor_pct"}
    md = render_markdown(report, caliber)
    rows = table_rows(md)
    assert [(r[2], r[8], r[9]) for r in rows] == [("[[1]]", "2.0", "**faster**"),
                                                  ("[[2]]", "2.0", "flagged")]
    assert rows[1][10] == f"A:{DIRECT_MARKER}" and "- noise floor: 2.0%" in md
    assert "| tanh | torch.float16 | [[3]] | only in B |" in md
    doc = json.loads(json.dumps(ab_data(report, caliber)))
    assert render_markdown(doc, caliber) == md
    assert as_report(doc).rows == report.rows


def test_a_row_read_same_by_its_equivalence_interval_shows_that_bound() -> None:
    # judged over five looks (ROUNDS=auto): the interval shown is the calls' (wider than the
    # floor), so the verdict cell says what decided same, and ab.json keeps it
    deltas = (0.004, -0.005, 0.003, -0.003, 0.005, -0.004)
    a = [Source(f"A/r{i}", "run", (measured("[[1]]", 1.0 + d),)) for i, d in enumerate(deltas)]
    b = [Source(f"B/r{i}", "run", (measured("[[1]]", 1.0),)) for i in range(len(deltas))]
    fixed = compare(a, b, noise_floor_pct=1.0)
    assert "same_bound_pct" not in ab_data(fixed, CALIBER)["rows"][0]
    method, (judged,) = looks.judge([fixed.rows[0].stats], [[2, 3, 4, 5, 6]],
                                    noise_floor_pct=1.0, planned=5)
    report = replace(fixed, rows=(replace(fixed.rows[0], stats=judged),), method=method)
    bound = judged.same_bound_pct
    assert bound is not None and bound < 1.0 < judged.ci_high_pct
    md = render_markdown(report, CALIBER)
    (row,) = table_rows(md)
    # the bound is a factor either way: its slower side, 1 / (1 + bound) - 1, is the nearer
    assert row[9] == f"same (-{bound / (1 + bound / 100):.1f}..+{bound:.1f})"
    assert row[7] == "[-1.2, +1.2]" and "the equivalence interval's reach beside same" in md
    doc = json.loads(json.dumps(ab_data(report, CALIBER)))
    assert doc["rows"][0]["same_bound_pct"] == bound
    assert as_report(doc).rows == report.rows and render_markdown(doc, CALIBER) == md
    # a row judged the same way but not read same keeps no bound in ab.json
    noisy = replace(judged, verdict=Verdict.INCONCLUSIVE)
    assert noisy.same_bound_pct is not None
    other = replace(report, rows=(replace(fixed.rows[0], stats=noisy),))
    assert "same_bound_pct" not in ab_data(other, CALIBER)["rows"][0]


# ---------------------------------------------------------------- PNG


def test_png_is_written(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    assert render_png(document(), tmp_path / AB_PNG) is True
    assert (tmp_path / AB_PNG).read_bytes().startswith(PNG_MAGIC)
    assert [p.name for p in tmp_path.iterdir()] == [AB_PNG]  # no temporary left behind
    assert render_png([], tmp_path / "empty.png") is True


def hide_matplotlib(monkeypatch: pytest.MonkeyPatch) -> None:
    # None in sys.modules makes `import` raise ImportError, even where it is installed.
    for name in ("matplotlib", "matplotlib.figure", "matplotlib.backends.backend_agg"):
        monkeypatch.setitem(sys.modules, name, None)


def test_png_without_matplotlib_returns_false_and_writes_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hide_matplotlib(monkeypatch)
    assert render_png(document(), tmp_path / AB_PNG) is False
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------- files and CLI


def campaign(tmp_path: Path, **overrides: Any) -> Path:
    (tmp_path / AB_JSON).write_text(json.dumps(document(**overrides)))
    return tmp_path


def test_cli_writes_ab_md_and_says_why_there_is_no_png(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    hide_matplotlib(monkeypatch)
    assert cli.main(["report", str(campaign(tmp_path))]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == str(tmp_path / AB_MD)
    assert out[1].startswith("ab.png not written: matplotlib is not installed")
    md = (tmp_path / AB_MD).read_text()
    assert "- axis live: compiled artifacts differ" in md  # the liveness of ab.json
    assert "- something the reader must know" in md and not (tmp_path / AB_PNG).exists()


def test_cli_writes_the_png_too(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib")
    assert cli.main(["report", str(campaign(tmp_path) / AB_JSON)]) == 0
    assert capsys.readouterr().out.splitlines() == [str(tmp_path / AB_MD), str(tmp_path / AB_PNG)]
    assert (tmp_path / AB_PNG).read_bytes().startswith(PNG_MAGIC)


def test_not_live_liveness_reads_as_the_marker(tmp_path: Path) -> None:
    path = campaign(tmp_path, liveness={"status": "not_live", "detail": "equal artifacts"})
    md_path, _ = write_report(path)
    assert "- AXIS_NOT_LIVE axis=RLC_ENHANCE: equal artifacts" in md_path.read_text()
    assert "no row below says anything about the switch" in md_path.read_text()
    # An older harness's [status, detail] is not a liveness verdict.
    with pytest.raises(UsageError, match="liveness is \\['unknown', 'equal'\\], not an object"):
        write_report(campaign(tmp_path, liveness=["unknown", "equal"]))
    with pytest.raises(UsageError, match="ab.json: liveness.status is 'dead'; expected one of"):
        write_report(campaign(tmp_path, liveness={"status": "dead"}))


@pytest.mark.parametrize("content, message", [
    (None, "no ab.json"),
    ("{oops", "is not JSON"),
    (json.dumps({"schema": "harness-receipt/1", "files": {}}), "is not an A/B result"),
])
def test_cli_exit_2_for_a_directory_without_an_ab_result(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str | None,
        message: str) -> None:
    if content is not None:
        (tmp_path / AB_JSON).write_text(content)
    assert cli.main(["report", str(tmp_path)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and message in err[0]


def test_an_interrupted_campaign_says_it_is_incomplete_and_which_units_finished(
        tmp_path: Path) -> None:
    units = [{"id": f"tanh/r{r}", "status": "ok" if r < 2 else "pending", "rc": None,
              "wall_s": None, "device": None, "attempts": 1, "reason": None} for r in range(3)]
    md, _ = write_report(campaign(tmp_path, status="interrupted", units=units,
                                  interrupted={"signal": "SIGTERM", "step": "tanh/r2"},
                                  finished_units=["tanh/r0", "tanh/r1"]))
    text = md.read_text()
    assert ("- INCOMPLETE: interrupted by SIGTERM during tanh/r2; finished units: tanh/r0, "
            "tanh/r1 (2 of 3)" in text)
    assert "**This campaign is incomplete" in text


def test_a_complete_campaign_has_no_incomplete_note(tmp_path: Path) -> None:
    md, _ = write_report(campaign(tmp_path, status="complete"))
    assert "INCOMPLETE" not in md.read_text()


@pytest.mark.parametrize(("rows", "needle"), [
    ([1, 2], "ab.json: rows[0] is 1, not an object"),
    (["x"], "ab.json: rows[0] is 'x', not an object"),
    ([{**ab_row("[[1]]", 1.0, 1.0, 0.0, "same"), "a_ms": "abc"}],
     "ab.json: rows[0].a_ms is 'abc', not a number"),
    ([ab_row("[[1]]", 1.0, 1.0, 0.0, "same"), {**ab_row("[[1]]", 1.0, 1.0, 0.0, "same"),
                                                "rounds": True}],
     "ab.json: rows[1].rounds is True, not an integer"),
    ([{**ab_row("[[1]]", 1.0, 1.0, 0.0, "same"), "round_speedups_pct": ["x"]}],
     "rows[0].round_speedups_pct is ['x'], not a list of numbers"),
    ([{**ab_row("[[1]]", 1.0, 1.0, 0.0, "same"), "flags": 3}], "rows[0].flags is 3, not a list"),
])
def test_ab_json_rows_that_are_not_objects_or_numbers_are_usage_errors(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], rows: list, needle: str) -> None:
    assert cli.main(["report", str(campaign(tmp_path, rows=rows))]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and needle in err and err.count("\n") == 1
    assert not (tmp_path / AB_MD).exists()


def test_ab_json_with_a_caliber_that_is_not_an_object_is_a_usage_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["report", str(campaign(tmp_path, caliber=[1]))]) == 2
    assert "ab.json: caliber is [1], not an object" in capsys.readouterr().err


# ---------------------------------------------------------------- the typed document


def campaign_data() -> dict[str, Any]:
    """ab.json's data as a suite campaign writes it: the A/B, then its campaign's parts."""
    a = [Source(f"A/r{i}", "run", (measured("[[1]]", 2.0 + i / 100),)) for i in range(3)]
    b = [Source(f"B/r{i}", "run", (measured("[[1]]", 1.0 + i / 100),)) for i in range(3)]
    data = ab_data(compare(a, b), CALIBER, notes=["a note"],
                       liveness={"status": "live", "detail": "rows differ"})
    data["operators"] = {
        "tanh": {"verdict": "faster", "rows": 1, "rounds": 3, "geomean_speedup_pct": 98.0,
                 "worst": {"dtype": "torch.float16", "shape": "[[1]]", "speedup_pct": 98.0,
                           "verdict": "faster"}, "units_failed": 0, "reason": None,
                 "artifacts": "differ"},
        "exp": {"verdict": "failed", "rows": 0, "rounds": 0, "geomean_speedup_pct": None,
                "worst": None, "units_failed": 1, "reason": "FAILED in A"}}
    data["commands"] = [["ZL_A=1", "python", "-m", "harness"]]
    data["sides"] = {"A": ["c/tanh/A/r0"], "B": ["c/tanh/B/r0"]}
    data["units"] = [{"id": "tanh/r0", "status": "ok", "rc": 0, "wall_s": 1.5, "device": "0",
                      "attempts": 1, "reason": None}]
    data.update(status="interrupted", interrupted={"signal": "SIGINT", "step": "exp/r0"},
                finished_units=["tanh/r0"])
    return data


def test_the_document_writes_back_what_it_read_key_for_key(tmp_path: Path) -> None:
    data = json.loads(json.dumps(campaign_data()))
    doc = parse(data)
    assert json.dumps(doc.to_json()) == json.dumps(data)  # same keys, same order, same values
    write_ab(tmp_path, doc)
    assert read_ab(tmp_path) == doc
    assert doc.operators and doc.operators["tanh"].worst and doc.status and doc.units
    assert doc.caliber.variable == "FLAGTREE_CUDA_RLC_ENHANCE" and doc.units[0].wall_s == 1.5
    assert doc.status.interrupted and doc.status.interrupted.signal == "SIGINT"
    assert document_of(as_report(doc), CALIBER).rows == doc.rows


@pytest.mark.parametrize(("change", "message"), [
    (lambda d: d["operators"]["tanh"].pop("verdict"), "operators.tanh.verdict is missing"),
    (lambda d: d["rows"][0].update(speedup_pct="fast"), "rows[0].speedup_pct is 'fast', not a"),
    (lambda d: d["units"][0].update(rc="0"), "units[0].rc is '0', not an integer"),
    (lambda d: d.update(status="stopped"), "status is 'stopped'; expected one of: complete"),
    (lambda d: d["commands"].append("python"), "commands[1] is 'python', not a list of strings"),
    (lambda d: d["caliber"].update(rounds="3"), "caliber.rounds is '3', not an integer"),
    (lambda d: d["caliber"]["image_digests"].update(A="sha"), "image_digests.A is 'sha', not a"),
])
def test_a_bad_field_is_named_with_its_file(tmp_path: Path, change: Any, message: str) -> None:
    data = json.loads(json.dumps(campaign_data()))
    change(data)
    (tmp_path / AB_JSON).write_text(json.dumps(data))
    with pytest.raises(UsageError) as info:
        read_ab(tmp_path)
    assert str(info.value).startswith(f"{tmp_path / AB_JSON}: ") and message in str(info.value)
    assert "\n" not in str(info.value)
