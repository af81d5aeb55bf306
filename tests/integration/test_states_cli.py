"""Terminal states of a campaign's operators: skipped with pytest's reason, failed with 0 rows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .test_ab_cli import harness
from .test_ab_suite_cli import SHAPES, the_campaign, units
from .test_batch_cli import private_suite

pytestmark = pytest.mark.integration
HOSTILE = {
    "test_skipmod.py": '''import pytest

pytest.skip("vLLM not installed", allow_module_level=True)


@pytest.mark.skipmod
def test_skipmod():
    pass
''',
    "test_skiptest.py": '''import pytest


@pytest.mark.skiptest
def test_skiptest():
    pytest.skip("needs vLLM")
''',
    "test_quits.py": '''import os

import pytest


@pytest.mark.quits
def test_quits():
    os._exit(0)
''',
}


def campaign(tmp_path: Path, ops: str, rounds: int = 1):
    shapes = tmp_path / "shapes.yaml"
    shapes.write_text(SHAPES)
    suite = private_suite(tmp_path)
    for name, text in HOSTILE.items():
        (suite / "benchmark" / name).write_text(text)
    return harness("ab", "--backend", "cpu", "--ops", ops, "--axis", "none",
                   "--rounds", str(rounds), "--shape-mode", "file", "--shape-file",
                   str(shapes), "--flaggems-dir", str(suite), "--out", str(tmp_path / "runs"))


def test_operators_pytest_skipped_read_skipped_with_its_reason_and_the_campaign_exits_0(
        tmp_path):
    # Regression: a benchmark pytest skipped (FlagGems' test_inplace_fused_experts, "vLLM not
    # installed") read ok with 0 rows.
    proc = campaign(tmp_path, "skipmod,skiptest,tanh", rounds=2)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    directory = the_campaign(tmp_path)
    found = units(directory)
    assert (found["skipmod/r0"]["status"], found["skipmod/r0"]["reason"]) == (
        "skipped", "vLLM not installed")
    assert (found["skiptest/r0"]["status"], found["skiptest/r0"]["reason"]) == (
        "skipped", "needs vLLM")
    ops = json.loads((directory / "ab.json").read_text())["operators"]
    assert (ops["skipmod"]["verdict"], ops["skipmod"]["reason"]) == (
        "skipped", "vLLM not installed")
    assert ops["skiptest"]["verdict"] == "skipped" and ops["tanh"]["rows"] == 2
    assert "skipmod/r0 skipped" in proc.stdout  # the progress line
    # Round 1 of an operator skipped in round 0 is skipped with its reason, and no pytest
    # starts for it: its run directories hold the identity alone.
    assert (found["skipmod/r1"]["status"], found["skipmod/r1"]["reason"]) == (
        "skipped", "vLLM not installed")
    assert found["skiptest/r1"]["status"] == "skipped"
    for side in "AB":
        assert sorted(p.name for p in (directory / "skipmod" / side / "r1").iterdir()) == [
            "run_identity.json"]
        assert (directory / "skipmod" / side / "r0" / "run.log").is_file()
    assert found["tanh/r1"]["status"] == "ok" and ops["tanh"]["rows"] == 2
    # tanh's A/A at 2 rounds reads as the host's noise lets it (inconclusive when quiet, another
    # verdict once under CI's load); the two skipped are counted whatever it reads
    tanh = ops["tanh"]["verdict"]
    counts = [f"{int(v == tanh)} {v}" for v in ("faster", "slower", "same", "failed")]
    line = ", ".join([*counts, "2 skipped", *([f"1 {tanh}"] if tanh in (
        "inconclusive", "flagged") else [])]) + " of 3 operators"
    assert line in proc.stdout and line in (directory / "ab.md").read_text()
    assert "| skipmod | skipped |" in (directory / "ab.md").read_text()
    resumed = harness("ab", "--resume", str(directory))  # nothing is left to run
    assert resumed.returncode == 0 and units(directory)["skipmod/r0"]["attempts"] == 1


def test_an_operator_that_exits_0_without_rows_is_failed_and_the_campaign_exits_1(tmp_path):
    # Regression: a benchmark that called os._exit(0) read ok with 0 rows, and the campaign
    # exited 0 while its suite line said "1 failed".
    proc = campaign(tmp_path, "quits")
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-2000:]
    (directory,) = (tmp_path / "runs" / "ab").glob("*/*")
    unit = units(directory)["quits/r0"]
    assert unit["status"] == "failed" and "0 rows" in unit["reason"], unit
    assert "1 failed" in proc.stdout
