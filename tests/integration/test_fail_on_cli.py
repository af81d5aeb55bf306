"""FAIL_ON on the cpu suite: ab's exit 7, junit.xml and the step summary, on resume and report."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from lxml import etree

from harness.report import abjson, gate

from .test_ab_cli import harness
from .test_ab_suite_cli import interrupt_after_first_unit, suite_args, the_campaign
from .test_run_cli import make

pytestmark = pytest.mark.integration
SCHEMA = etree.XMLSchema(etree.parse(str(Path(__file__).parents[1] / "data" / "junit.xsd")))


def test_fail_on_makes_ab_exit_7_and_ci_reads_junit_and_the_step_summary(tmp_path):
    args = suite_args(tmp_path, "add,boom", 2)  # boom fails every round
    refused = harness(*args, "--fail-on", "slower,regressed")
    assert refused.returncode == 2 and not (tmp_path / "runs").exists()  # before anything
    assert refused.stderr.startswith("error: FAIL_ON (--fail-on)='slower,regressed' is not "
                                     "accepted") and refused.stderr.count("\n") == 1

    page = tmp_path / "step-summary.md"
    proc = harness(*args, env={"ZL_FAIL_ON": "failed", "GITHUB_STEP_SUMMARY": str(page)})
    assert proc.returncode == 7, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "FAIL_ON=failed: 1 operator(s) tripped: boom (failed)" in proc.stdout
    directory = the_campaign(tmp_path)
    xml = etree.parse(str(directory / "junit.xml"))
    SCHEMA.assertValid(xml)
    cases = {c.get("name"): c for c in xml.iter("testcase")}
    assert set(cases) == {"add", "boom"}
    assert cases["boom"].find("error") is not None and cases["add"].find("error") is None
    summary = (directory / "ci-summary.md").read_text()
    assert page.read_text() == summary + "\n"
    assert "### failed (1)" in summary and "--axis none --rounds 2" in summary
    assert len(summary.splitlines()) < 60

    # Each word, with its exit, as the campaign's verdicts say; report regenerates the files.
    # Untripped, it exits as the campaign did: 1, for boom's failed units, as ab did.
    doc = abjson.read_ab(directory)
    assert gate.campaign_exit(doc) == 1
    for word in gate.WORDS:
        expected = 7 if gate.tripped(doc, gate.parse(word)) else 1
        again = harness("report", str(directory), "--fail-on", word)
        assert again.returncode == expected, (word, again.stdout, again.stderr)
        failing = {c.get("name") for c in etree.parse(str(directory / "junit.xml")).iter(
            "testcase") if c.find("failure") is not None}
        assert failing == set(gate.tripped(doc, gate.parse(word))) - {"boom"}, word
    assert harness("report", str(directory)).returncode == 0  # no FAIL_ON: never 7

    # A resume of the campaign exits as the campaign does: 1 for boom, 7 once FAIL_ON names it.
    assert harness("ab", "--resume", str(directory)).returncode == 1
    resumed = make("ab", f"RESUME={directory}", "FAIL_ON=failed")  # make's own exit is 2
    assert "Error 7" in resumed.stderr, resumed.stdout[-3000:] + resumed.stderr[-2000:]


def test_an_interrupted_campaign_keeps_its_signals_exit_and_still_writes_junit(tmp_path,
                                                                              monkeypatch):
    monkeypatch.setenv("ZL_FAIL_ON", "failed,changed")
    rc, output = interrupt_after_first_unit(suite_args(tmp_path, "tanh,add", 2), signal.SIGTERM)
    assert rc == 128 + signal.SIGTERM, output[-3000:]
    directory = the_campaign(tmp_path)
    xml = etree.parse(str(directory / "junit.xml"))
    SCHEMA.assertValid(xml)
    assert {c.get("name") for c in xml.iter("testcase")} == {"tanh", "add"}
    assert "FAIL_ON=failed,changed" in (directory / "ci-summary.md").read_text()
    # Gating its report again exits as the campaign did, never 0 for one cut short: it read
    # "FAIL_ON=slower: no operator tripped" with exit 0 under ab.md's "INCOMPLETE".
    again = harness("report", str(directory), "--fail-on", "slower")
    assert again.returncode == 1, again.stdout[-2000:] + again.stderr[-2000:]
    assert "**interrupted** (SIGTERM)" in (directory / "ci-summary.md").read_text()
