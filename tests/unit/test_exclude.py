"""EXCLUDE: a resume that finishes a campaign without some operators, kept by later resumes."""

from __future__ import annotations

import sys

import pytest

from harness.axes import Axis
from harness.campaign import document, plan, resume, start
from harness.errors import UsageError
from harness.report import suite_report


def _campaign(tmp_path, rounds=2):
    doc = plan.new_campaign(
        directory=tmp_path, axis=Axis("none", None), caliber={}, argv=[],
        ops={op: {"node": f"benchmark/test_{op}.py::test_{op}"} for op in ("add", "hang", "mm")},
        rounds=rounds, walls={}, walls_from=None)
    doc.python = sys.executable
    return doc


def test_excluded_units_are_not_run_and_a_later_exclude_replaces_the_list(tmp_path):
    doc = _campaign(tmp_path)
    doc.unit("hang/r0").status = "ok"
    doc.unit("hang/r1").status = "timeout"
    assert plan.exclude(doc, "hang") == ["hang"]
    assert doc.ops["hang"].excluded == plan.EXCLUDE_REASON
    assert [doc.unit(u).status for u in ("hang/r0", "hang/r1")] == ["ok", "excluded"]
    assert "hang" not in {u.op for u in plan.units_to_run(doc)}
    assert plan.extend(doc, 3, None, {}) and "hang/r2" not in doc.status_map()  # no new rounds
    doc.save(tmp_path)
    kept = document.load(tmp_path)  # kept with the campaign for a later resume
    assert kept.ops["hang"].excluded and kept.unit("hang/r1").status == "excluded"
    plan.exclude(kept, "none")  # taken back: its unfinished units run again
    assert kept.ops["hang"].excluded is None and kept.unit("hang/r1").status == "not_run"
    assert kept.unit("hang/r0").status == "ok"


def test_an_unknown_operator_names_the_closest_and_nothing_is_written(tmp_path):
    doc = _campaign(tmp_path)
    doc.argv = start.settings_argv(start.spec.resolve({"backend": "cpu"}, {},
                                                      which=lambda _: None))
    doc.caliber = {}
    doc.save(tmp_path)
    before = (tmp_path / plan.CAMPAIGN_JSON).read_bytes()
    with pytest.raises(UsageError) as info:
        resume.resume({"resume": str(tmp_path), "exclude": "hang,mmm"}, {}, out=lambda _: None)
    assert str(info.value).startswith("EXCLUDE='mmm' is not an operator of this campaign; "
                                      "closest: mm")
    assert info.value.exit_code == 2
    assert (tmp_path / plan.CAMPAIGN_JSON).read_bytes() == before


def test_exclude_without_resume_is_refused_naming_it():
    with pytest.raises(UsageError, match="^EXCLUDE='hang' is only valid with RESUME"):
        start.refuse_resume_only({"exclude": "hang"})
    start.refuse_resume_only({"exclude": None})
    # Regression: ONLY without RESUME was dropped in silence and every operator ran.
    with pytest.raises(UsageError, match="^ONLY='inconclusive' is only valid with RESUME"):
        start.refuse_resume_only({"only": "inconclusive"})
    start.refuse_resume_only({"only": None, "exclude": ""})


def test_the_report_lists_an_excluded_operator_apart_with_its_reason():
    ops = {"add": {"rounds": 1, "reason": "no round finished", "pending": False},
           "hang": {"rounds": 0, "reason": None, "pending": True,
                    "excluded": plan.EXCLUDE_REASON}}
    found = suite_report.operator_summaries([], ops)
    assert found["hang"].verdict == "excluded" and found["hang"].reason == plan.EXCLUDE_REASON
    assert suite_report.suite_line(found) == ("suite: 0 faster, 0 slower, 0 same, 1 failed, "
                                              "1 excluded of 2 operators")
    table = "\n".join(suite_report.operators_table(found))
    assert "| hang | excluded |" in table and plan.EXCLUDE_REASON in table


@pytest.mark.parametrize(("text", "says"), [
    # Regression: "closest: none" read as the operator or keyword none, and TANH found no tanh.
    ("zzzzzz", "EXCLUDE='zzzzzz' is not an operator of this campaign, nor close to one "),
    ("HANG", "EXCLUDE='HANG' is not an operator of this campaign; closest: hang "),
    ("none,hang", "EXCLUDE=none takes every operator back and is given alone, not with hang"),
    # Regression: a blank list (" ", ",") took every operator back as EXCLUDE=none does.
    (" ", "EXCLUDE=' ' names no operator"), (",", "EXCLUDE=',' names no operator"),
    # Regression: the empty item was dropped, as OPS dropped it
    ("hang,,slow", "EXCLUDE='hang,,slow': item 2 is empty; expected names separated by "),
])
def test_an_unknown_name_is_refused_saying_what_is_close(tmp_path, text, says):
    with pytest.raises(UsageError) as info:
        plan.exclude(_campaign(tmp_path), text)
    assert str(info.value).startswith(says)
