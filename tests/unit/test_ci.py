"""FAIL_ON, junit.xml and ci-summary.md: what a CI job gates on and shows."""

from __future__ import annotations

import shlex
from dataclasses import asdict
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest
from lxml import etree

from harness.errors import UsageError
from harness.report import ci, cisummary, gate, junit, rerun, suite_report
from harness.report.abjson import AbDocument, Caliber, parse

SCHEMA = etree.XMLSchema(etree.parse(str(Path(__file__).parents[1] / "data" / "junit.xsd")))
CALIBER = {"axis": "OMP_NUM_THREADS", "axis_var": "OMP_NUM_THREADS", "a": "1", "b": "2",
           "rounds": 3, "backend": "cpu", "level": "core", "mode": "auto"}
# One operator of each verdict a campaign gives, with the rows that make it.
VERDICT_ROWS = {"slow": ["slower", "same"], "fast": ["faster"], "same": ["same"],
                "unsure": ["inconclusive"], "odd": ["flagged"], "broke": [], "skip": [],
                "wait": [], "out": [], "crashy": ["same"]}


def row(op: str, verdict: str, n: int) -> dict:
    speedup = {"slower": -12.0, "faster": 9.0}.get(verdict, 0.5) - n
    return {"op": op, "dtype": "torch.float32", "shape": f"[{8 << n}]", "occurrence": 1,
            "a_ms": 1.0, "b_ms": 1.0 / (1 + speedup / 100), "speedup_pct": speedup,
            "min_pct": speedup - 1, "max_pct": speedup + 1, "ci_low_pct": speedup - 1,
            "ci_high_pct": speedup + 1, "rounds": 3, "verdict": verdict, "flags": []}


def campaign_doc(ops: dict[str, list[str]] = VERDICT_ROWS) -> AbDocument:
    """ab.json of a suite campaign with `ops` (operator: its rows' verdicts): broke failed,
    skip skipped, wait pending, out excluded, crashy crashed in one round of three."""
    rows = [row(op, v, n) for op, found in ops.items() for n, v in enumerate(found)]
    info = {op: {"rounds": 3, "reason": "boom" if op == "broke" else None,
                 "skipped": op == "skip", "pending": op == "wait",
                 "excluded": "EXCLUDE=out" if op == "out" else None,
                 "units_failed": 1 if op == "crashy" else 0} for op in ops}
    operators = suite_report.operator_summaries(rows, info)
    units = [{"id": f"{op}/r{r}", "status": "crashed" if (op, r) == ("crashy", 2) else "ok",
              "wall_s": 2.5, "reason": "signal SIGSEGV" if op == "crashy" else None}
             for op in ops for r in range(3)]
    return parse({"schema": "harness-ab/1", "caliber": CALIBER, "rows": rows, "unpaired": [],
                  "geomean_speedup_pct": -1.5, "geomean_ci_low_pct": -3.0,
                  "geomean_ci_high_pct": 0.1, "units": units,
                  "operators": {op: asdict(o) for op, o in operators.items()}})


@pytest.mark.parametrize(("words", "expected"), [
    ("slower", {"slow"}),
    ("faster", {"fast"}),
    ("any-called", {"slow", "fast"}),
    ("changed", {"slow", "fast", "unsure", "odd"}),
    ("failed", {"broke", "wait", "crashy"}),  # no row, never ran, or a unit crashed
    ("slower,failed", {"slow", "broke", "wait", "crashy"}),
    ("", set()),
])
def test_each_fail_on_word_names_the_operators_of_its_verdicts(words, expected):
    trips = gate.tripped(campaign_doc(), gate.parse(words))
    assert set(trips) == expected
    assert all(set(found) <= set(words.split(",")) for found in trips.values())


def test_same_skipped_and_excluded_never_trip_any_word():
    everything = gate.parse(",".join(gate.WORDS))
    assert not {"same", "skip", "out"} & set(gate.tripped(campaign_doc(), everything))


@pytest.mark.parametrize("bad", ["slow", "slower,", "SLOWER", "slower;faster", "regressed"])
def test_a_bad_fail_on_is_one_line_naming_it_and_every_word(bad):
    with pytest.raises(UsageError) as info:
        gate.from_settings({}, {"ZL_FAIL_ON": bad})
    message = str(info.value)
    assert message.startswith(f"ZL_FAIL_ON={bad!r} is not accepted") and "\n" not in message
    assert all(word in message for word in gate.WORDS)


def test_the_flag_beats_the_environment():
    assert gate.from_settings({"fail_on": "faster"}, {"ZL_FAIL_ON": "slower"}).words == (
        "faster",)
    with pytest.raises(UsageError, match=r"FAIL_ON \(--fail-on\)='x'"):
        gate.from_settings({"fail_on": "x"}, {})


@pytest.mark.parametrize(("rc", "tripped", "expected"), [
    (0, True, 7), (1, True, 7), (0, False, 0), (1, False, 1),
    (6, True, 6),  # the axis never reached the compiler: its verdicts mean nothing
])
def test_the_exit_is_7_only_over_0_and_1(rc, tripped, expected):
    assert gate.exit_code(rc, {"mm": ("slower",)} if tripped else {}) == expected


def cases(xml: bytes) -> dict[str, ET.Element]:
    return {c.get("name"): c for c in ET.fromstring(xml).iter("testcase")}


def test_junit_is_valid_against_the_schema_ci_reads_with_one_case_per_operator():
    doc = campaign_doc()
    fail_on = gate.parse("slower,changed,failed")
    xml = junit.junit_xml(doc, gate.tripped(doc, fail_on), fail_on, "2026-12-03T08:00:00+00:00")
    SCHEMA.assertValid(etree.fromstring(xml))
    found = cases(xml)
    assert list(found) == list(VERDICT_ROWS)
    assert {c.get("classname") for c in found.values()} == {"ab.OMP_NUM_THREADS"}
    failing = {op for op, c in found.items() if c.find("failure") is not None}
    assert failing == {"slow", "fast", "unsure", "odd"}
    message = found["slow"].find("failure").get("message")
    assert message.startswith("slow: slower (FAIL_ON slower,changed), 2 rows, geomean")
    assert "torch.float32 [8]: slower -12.0% [-13.0, -11.0]" in message
    assert {op for op, c in found.items() if c.find("skipped") is not None} == {"skip", "out"}
    assert found["crashy"].find("error").get("message") == "crashy/r2 crashed: signal SIGSEGV"
    assert found["broke"].find("error").get("message") == "broke: failed: boom"
    assert found["wait"].find("error") is not None  # pending, and FAIL_ON names failed
    suite = ET.fromstring(xml).find("testsuite")
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors"),
            suite.get("skipped")) == ("10", "4", "3", "2")
    assert found["slow"].get("time") == "7.500"


def test_without_fail_on_no_case_fails_but_a_crash_is_still_an_error():
    doc = campaign_doc()
    xml = junit.junit_xml(doc, {}, gate.FailOn())
    SCHEMA.assertValid(etree.fromstring(xml))
    found = cases(xml)
    assert not [c for c in found.values() if c.find("failure") is not None]
    assert {op for op, c in found.items() if c.find("error") is not None} == {"broke", "crashy"}
    assert found["wait"].find("skipped").get("message").startswith("pending")


def test_the_schema_refuses_what_ci_would_not_read():
    """The check can fail: a case with no name, or a failure before a skipped."""
    bad = (b"<testsuites><testsuite name='x' tests='1'><testcase classname='c'/>"
           b"</testsuite></testsuites>")
    assert not SCHEMA.validate(etree.fromstring(bad))
    wrong_order = (b"<testsuite name='x' tests='1'><testcase name='a' classname='c'>"
                   b"<failure/><skipped/></testcase></testsuite>")
    assert not SCHEMA.validate(etree.fromstring(wrong_order))


def test_the_step_summary_leads_with_counts_and_lists_failed_then_called_with_reruns():
    doc = campaign_doc()
    fail_on = gate.parse("slower")
    text = cisummary.render(doc, fail_on, gate.tripped(doc, fail_on))
    lines = text.splitlines()
    assert lines[0] == "## A/B OMP_NUM_THREADS: 1 vs 2 (10 operators, cpu)"
    assert lines[2].startswith("slower 1 · failed 1 · pending 1 · inconclusive 1 · flagged 1 "
                               "· same 2 · faster 1 · skipped 1 · excluded 1; geometric mean "
                               "speedup **-1.5%** [-3.0, +0.1] over")
    assert lines[2].endswith(" over 7 rows (1 flagged)")  # the mean counts a flagged row
    assert "**FAIL_ON=slower: 1 operator(s) hold such a verdict, exit 7**: slow" in text
    sections = [line for line in lines if line.startswith("### ")]
    assert sections == ["### failed (3)", "### slower (1)", "### faster (1)"]
    slow = next(line for line in lines if line.startswith("- **slow**"))
    assert slow.endswith("`harness ab --backend cpu --axis OMP_NUM_THREADS --a 1 --b 2 "
                         "--rounds 3 --op slow`")


def test_the_step_summary_stays_short_at_suite_scale_largest_regressions_first():
    ops = {f"op{i:04d}": (["slower"] * (1 + i % 5) if i % 3 == 0 else ["faster"] if i % 3 == 1
                          else []) for i in range(1112)}
    doc = campaign_doc(ops)
    text = cisummary.render(doc, gate.FailOn(), {})
    assert len(text.splitlines()) < 60 and len(text) < 8000
    listed = [line.split("**")[1] for line in text.splitlines() if line.startswith("- **op")]
    slower = sorted((o.geomean_speedup_pct, op) for op, o in doc.operators.items()
                    if o.verdict == "slower")
    assert listed[8:16] == [op for _, op in slower[:8]]  # the largest regressions first
    assert slower[0][0] < slower[-1][0]
    assert "- and 363 more: ab.md lists every operator" in text


def test_ci_files_are_written_beside_ab_json_and_appended_to_the_step_summary(tmp_path):
    doc = campaign_doc()
    page = tmp_path / "page.md"
    page.write_text("earlier step\n")
    trips = ci.write_ci_files(tmp_path, doc, gate.parse("faster"),
                              {ci.STEP_SUMMARY_VAR: str(page)})
    assert trips == {"fast": ("faster",)}
    summary = (tmp_path / cisummary.CI_SUMMARY_MD).read_text()
    assert page.read_text() == "earlier step\n" + summary + "\n"
    SCHEMA.assertValid(etree.parse(str(tmp_path / junit.JUNIT_XML)))


@pytest.mark.parametrize(("caliber", "expected"), [
    (CALIBER, "--axis OMP_NUM_THREADS --a 1 --b 2 --rounds 3 --op mm"),
    ({**CALIBER, "axis": "MY_SWITCH", "axis_var": "MY_SWITCH", "level": "comprehensive"},
     "--axis env:MY_SWITCH --a 1 --b 2 --rounds 3 --level comprehensive --op mm"),
    ({"axis": "none", "backend": "cpu", "rounds": 2}, "--axis none --rounds 2 --op mm"),
    ({"axis": "python", "a": "/a/python", "b": "/b b/python", "backend": "cpu", "rounds": 3},
     "--axis python --a-python /a/python --b-python '/b b/python' --rounds 3 --op mm"),
    # a shapes file and a FlagGems tree of its own: without them the rerun was refused
    # ("SHAPE_MODE='file' needs SHAPE_FILE") or ran another tree
    ({"axis": "none", "backend": "cpu", "rounds": 2, "shape_mode": "file",
      "shape_file": "/s/my shapes.yaml", "flaggems_dir": "/src/FlagGems"},
     "--axis none --rounds 2 --shape-mode file --shape-file '/s/my shapes.yaml' "
     "--flaggems-dir /src/FlagGems --op mm"),
])
def test_the_rerun_command_is_the_campaigns_for_one_operator(caliber, expected):
    found = rerun.command(Caliber(caliber), "mm")
    assert found == f"harness ab --backend cpu {expected}"
    assert shlex.split(found)[-2:] == ["--op", "mm"]


def _doc_with(ops: dict[str, list[str]], **extra) -> AbDocument:
    """campaign_doc's document with ab.json keys of `extra` (status, liveness) set, and the
    excluded operator `out` holding a failed unit, as an operator excluded after it failed."""
    from dataclasses import replace

    doc = campaign_doc(ops)
    data = {**doc.to_json(), **extra}
    if "out" in data["operators"]:
        data["operators"]["out"]["units_failed"] = 1
    return replace(parse(data))


def test_an_operator_excluded_after_its_unit_failed_trips_nothing_and_none_is_no_gate():
    # Regression: `--exclude esc --fail-on failed` exited 7 naming esc, while junit.xml said
    # it was skipped (excluded), and the campaign exited 0 without FAIL_ON.
    doc = _doc_with({"out": [], "same": ["same"]})
    assert gate.tripped(doc, gate.parse("failed,changed")) == {}
    assert gate.campaign_exit(doc) == 0
    assert gate.parse("none") == gate.FailOn() == gate.parse(" none ")  # DESIGN.md's default


def test_gating_a_report_again_exits_as_the_campaign_did_never_0_for_one_cut_short():
    ok = _doc_with({"same": ["same"]})
    assert gate.campaign_exit(ok) == 0
    cut = _doc_with({"same": ["same"]}, status="interrupted", interrupted={
        "signal": "SIGTERM", "step": "units"}, finished_units=["same/r0"])
    assert gate.campaign_exit(cut) == 1
    assert gate.campaign_exit(_doc_with({"wait": [], "same": ["same"]})) == 1  # pending
    not_live = _doc_with({"slow": ["slower"]}, liveness={"status": "not_live", "note": "-"})
    assert gate.campaign_exit(not_live) == 6
    # ...and its summary says what the job exits, and why the verdicts are not the last word
    fail_on = gate.parse("slower")
    text = cisummary.render(not_live, fail_on, gate.tripped(not_live, fail_on), 6)
    assert "hold such a verdict, exit 6**" in text and "**AXIS_NOT_LIVE**" in text
    text = cisummary.render(cut, fail_on, {}, 143)
    assert "**interrupted** (SIGTERM): its verdicts are those of the units that finished" in text


def test_junit_xml_holds_no_character_xml_refuses(tmp_path):
    # Regression: an exception's ANSI colours in a unit's reason made the whole file invalid
    # XML, and CI lost the test report.
    doc = campaign_doc()
    data = doc.to_json()
    for unit in data["units"]:
        if unit["status"] == "crashed":
            unit["reason"] = 'bad \x1b[31mred\x1b[0m <b>x</b> & "q" \x00'
    xml = junit.junit_xml(parse(data), {}, gate.FailOn())
    root = etree.fromstring(xml)  # lxml refuses a control character; it parses now
    (error,) = [e for e in root.iter("error") if e.get("type") == "crashed"]
    assert error.get("message").endswith('bad \\x1b[31mred\\x1b[0m <b>x</b> & "q" \\x00')


def test_a_step_summary_that_cannot_be_appended_to_is_warned_of_and_the_exit_stands(
        tmp_path, capsys):
    # Regression: GITHUB_STEP_SUMMARY naming a directory raised IsADirectoryError: exit 1 for
    # a campaign that passed, and 1 for one stopped by SIGTERM (143).
    doc = campaign_doc({"same": ["same"]})
    (tmp_path / "ab.json").write_text(__import__("json").dumps(doc.to_json()))
    env = {ci.STEP_SUMMARY_VAR: str(tmp_path)}
    assert ci.conclude(tmp_path, 0, gate.FailOn(), env, lambda line: None) == 0
    assert ci.conclude(tmp_path, 143, gate.parse("failed"), env, lambda line: None) == 143
    err = capsys.readouterr().err
    assert f"warning: {ci.STEP_SUMMARY_VAR}={str(tmp_path)!r} could not be appended to" in err
    assert (tmp_path / cisummary.CI_SUMMARY_MD).is_file()


def test_a_long_reason_is_cut_in_the_step_summary_and_says_so():
    # it was cut at 160 characters with nothing to say the rest is in ab.md
    doc = campaign_doc({"broke": []})
    data = doc.to_json()
    data["operators"]["broke"]["reason"] = "x" * 170 + "END"
    text = cisummary.render(parse(data), gate.parse("failed"), {"broke": ("failed",)})
    (line,) = [ln for ln in text.splitlines() if ln.startswith("- **broke**")]
    assert "x" * (cisummary.REASON_CHARS - 1) + "…" in line and "END" not in line
