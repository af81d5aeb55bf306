"""SIGTERM, SIGHUP and SIGINT to `harness run` and `harness ab`: no pytest left, run marked."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from harness.settings.spec import REPO_ROOT
from tests.gate_plugin import AT_VAR, GATE_VAR
from tests.procs import alive, communicate_or_dump, wait_for

from .test_batch_cli import group_members
from .test_run_cli import harness, suite_files

pytestmark = pytest.mark.integration
SIGNALS = [signal.SIGTERM, signal.SIGHUP, signal.SIGINT]
TINY = "add:\n  shapes:\n    - [64, 64]\n"


def interrupt(args: list[str], gate: Path, signum: int, at: int = 1
              ) -> tuple[subprocess.CompletedProcess, int]:
    """Start `harness ARGS`, wait until the `at`-th pytest holds its first benchmark, send the
    harness `signum`; return its outcome and that pytest's pid."""
    gate.mkdir()
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), GATE_VAR: str(gate), AT_VAR: str(at),
           "PYTEST_PLUGINS": "tests.gate_plugin", "PYTHONFAULTHANDLER": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "harness.cli", *args], cwd=REPO_ROOT,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: (gate / "ready").exists() or proc.poll() is not None, 180,
                 f"pytest number {at} at its first benchmark")
        assert proc.poll() is None, proc.communicate()
        pytest_pid = int((gate / "ready").read_text())
        proc.send_signal(signum)
        stdout, stderr = communicate_or_dump(proc, 120)  # seconds (17 at most seen), or never
    finally:
        if proc.poll() is None:
            proc.kill()
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr), pytest_pid


def assert_no_pytest_left(pytest_pid: int) -> None:
    try:
        wait_for(lambda: not alive(pytest_pid), 5, "pytest gone")
        assert group_members(pytest_pid) == []  # it led its own group: nothing it started
    finally:
        if group_members(pytest_pid):  # the test failed: leave no pytest behind it
            os.killpg(pytest_pid, signal.SIGKILL)


@pytest.mark.parametrize("signum", SIGNALS, ids=lambda s: s.name)
def test_signal_to_harness_run_stops_pytest_and_marks_the_run_interrupted(signum, tmp_path):
    # Regression: SIGTERM to `harness run` left pytest writing into a run nobody finished.
    before = suite_files()
    out = tmp_path / "runs"
    proc, pytest_pid = interrupt(["run", "--backend", "cpu", "--op", "add", "--out", str(out),
                                  "--isolate-tuner-cache", "1"], tmp_path / "gate", signum)
    assert proc.returncode == 128 + signum, proc.stdout[-2000:] + proc.stderr
    assert_no_pytest_left(pytest_pid)
    (run_dir,) = (out / "add").iterdir()
    step = "benchmark/test_add.py::test_add"
    log = (run_dir / "run.log").read_text()
    assert log.startswith("# harness run header\n")
    assert f"RUN_INTERRUPTED signal={signum.name} step={step} " in log
    assert log.rstrip().endswith(f"dir={run_dir}")
    ident = json.loads((run_dir / "run_identity.json").read_text())
    assert ident["status"] == "interrupted" and ident["signal"] == signum.name
    assert (run_dir / "results.csv").is_file()
    assert not (run_dir / "tuner_cache").exists()
    assert proc.stderr.strip() == (f"interrupted by {signum.name} during {step}; what "
                                   f"finished is kept in {run_dir}")
    assert suite_files() == before


@pytest.mark.parametrize(("signum", "at", "finished"), [
    (signal.SIGTERM, 3, ["add/r0"]), (signal.SIGHUP, 1, []), (signal.SIGINT, 2, [])],
    ids=["SIGTERM", "SIGHUP", "SIGINT"])
def test_signal_to_harness_ab_keeps_a_partial_campaign_that_report_renders(signum, at, finished,
                                                                          tmp_path):
    # Regression: SIGTERM to `harness ab` orphaned pytest and left a campaign with no status.
    # The driver runs each unit (an operator's round, both sides) as a child: the signal must
    # reach the unit's pytest through it, and the campaign keep the units that finished.
    shapes = tmp_path / "shapes.yaml"
    shapes.write_text(TINY)
    out = tmp_path / "runs"
    proc, pytest_pid = interrupt(["ab", "--backend", "cpu", "--op", "add", "--axis", "none",
                                  "--rounds", "2", "--shape-mode", "file", "--shape-file",
                                  str(shapes), "--out", str(out)],
                                 tmp_path / "gate", signum, at)
    assert proc.returncode == 128 + signum, proc.stdout[-2000:] + proc.stderr
    assert_no_pytest_left(pytest_pid)
    (campaign,) = (out / "ab" / "none-add").iterdir()
    unit, run = [("add/r0", "A/r0"), ("add/r0", "B/r0"), ("add/r1", "B/r1")][at - 1]
    doc = json.loads((campaign / "ab.json").read_text())
    assert doc["status"] == "interrupted" and doc["finished_units"] == finished
    assert doc["interrupted"] == {"signal": signum.name, "step": unit}
    assert len(doc["rows"]) == (2 if finished else 0)  # one shape, two dtypes
    # Units left for resume are not failures, and an operator has the rounds that finished
    # (an H200 campaign cut short read "units failed 1" for every operator).
    assert doc["operators"]["add"]["units_failed"] == 0
    assert doc["operators"]["add"]["rounds"] == len(finished)
    state = json.loads((campaign / "campaign.json").read_text())
    assert state["state"] == "interrupted"
    assert state["interrupted"] == {"signal": signum.name, "step": unit,
                                    "finished_units": finished}
    run_log = (campaign / "add" / run / "run.log").read_text()
    assert f"RUN_INTERRUPTED signal={signum.name} step=add/{run} " in run_log
    marker = f"AB_INTERRUPTED signal={signum.name} step={unit} " \
             f"finished_units={','.join(finished) or '-'} "
    assert marker in proc.stdout and f" dir={campaign} " in proc.stdout
    assert list(campaign.rglob("tuner_cache")) == [] and not (campaign / "cache").exists()
    assert proc.stderr.strip() == (f"interrupted by {signum.name} during {unit}; what "
                                   f"finished is kept in {campaign}")
    (campaign / "ab.md").unlink()
    report = harness("report", str(campaign))
    assert report.returncode == 0, report.stderr
    md = (campaign / "ab.md").read_text()
    units = ", ".join(finished) or "none"
    assert (f"INCOMPLETE: interrupted by {signum.name} during {unit}; finished units: "
            f"{units} ({len(finished)} of 2)") in md
    receipt = json.loads((campaign / "receipt.json").read_text())
    assert receipt["campaign"]["status"] == "interrupted"
