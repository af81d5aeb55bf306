"""Campaigns and batches whose pytest runs in workers that stay up: each run ends as it would in
a fresh process, and a worker's crash or hang costs that worker, never the next operator."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .test_ab_cli import harness
from .test_ab_suite_cli import SHAPES, units
from .test_batch_cli import private_suite

pytestmark = pytest.mark.integration
HOSTILE = {
    "test_segv.py": '''import os
import signal

import pytest


@pytest.mark.segv
def test_segv():
    os.kill(os.getpid(), signal.SIGSEGV)
''',
    "test_hangs.py": '''import time

import pytest


@pytest.mark.hangs
def test_hangs():
    time.sleep(300)
''',
}


def campaign(tmp_path: Path, name: str, ops: str, *flags: str):
    shapes = tmp_path / "shapes.yaml"
    shapes.write_text(SHAPES)
    suite = tmp_path / "suite"
    if not suite.exists():
        private_suite(tmp_path)
        for file, text in HOSTILE.items():
            (suite / "benchmark" / file).write_text(text)
    proc = harness("ab", "--backend", "cpu", "--ops", ops, "--axis", "none", "--rounds", "1",
                   "--shape-mode", "file", "--shape-file", str(shapes), "--flaggems-dir",
                   str(suite), "--out", str(tmp_path / name), *flags)
    (directory,) = (tmp_path / name / "ab" / "none-suite").iterdir()
    return proc, directory


def launches(directory: Path) -> dict[str, list[dict]]:
    found = {}
    for identity in sorted(directory.glob("*/[AB]/r*/run_identity.json")):
        rel = str(identity.parent.relative_to(directory))
        found[rel] = json.loads(identity.read_text())["launch"]
    return found


def test_a_crash_and_a_hang_end_as_in_fresh_processes_and_the_next_operator_gets_a_new_worker(
        tmp_path):
    proc, directory = campaign(tmp_path, "runs", "segv,hangs,add", "--unit-timeout", "15")
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-2000:]
    found = units(directory)
    # what a campaign of fresh processes records for the same units (test_states_cli, and
    # this test with --workers 0 before it was cut to the worker half for time)
    assert {u: (found[u]["status"], found[u]["reason"]) for u in found} == {
        "segv/r0": ("crashed", "killed by SIGSEGV (rc 245)"),
        "hangs/r0": ("timeout", "timeout after 15 s"),
        "add/r0": ("ok", None)}
    ran = launches(directory)
    assert all(launch[-1]["kind"] == "worker" for launch in ran.values()), ran
    # segv killed the worker that ran it; the hang's was stopped with its unit; add's side A
    # ran in a worker started after both, and each side had its own
    assert ran["segv/A/r0"][0]["retired"].startswith("the worker died")
    assert ran["hangs/A/r0"][0]["retired"].startswith("the worker died")  # stopped at the limit
    assert ran["add/A/r0"][0]["pid"] not in {ran["segv/A/r0"][0]["pid"],
                                             ran["hangs/A/r0"][0]["pid"]}
    assert ran["add/A/r0"][0]["session"] == 1
    assert ran["add/A/r0"][0]["pid"] != ran["add/B/r0"][0]["pid"]


def test_workers_naming_one_side_run_that_side_in_workers_and_the_other_fresh(tmp_path):
    proc, directory = campaign(tmp_path, "runs", "tanh,add", "--workers", "B")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    ran = launches(directory)
    assert {rel: launch[0]["kind"] for rel, launch in ran.items()} == {
        "add/A/r0": "process", "add/B/r0": "worker", "tanh/A/r0": "process",
        "tanh/B/r0": "worker"}
    assert ran["add/B/r0"][0]["pid"] == ran["tanh/B/r0"][0]["pid"]  # one worker for side B
    assert "how pytest ran: side A: 2 in a fresh process; side B: 2 in a worker" in (
        directory / "ab.md").read_text()
    assert "pytest: in workers that stay up" in harness(
        "ab", "--resume", str(directory), "--dry-run").stdout
    assert "pytest: side A in workers that stay up, side B in fresh processes (WORKERS=A)" in \
        harness("ab", "--resume", str(directory), "--dry-run", "--workers", "A").stdout


def test_a_batch_refuses_a_side_for_workers_in_one_line(tmp_path):
    proc = harness("batch", "--backend", "cpu", "--ops", "tanh", "--workers", "A",
                   "--out", str(tmp_path / "runs"))
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1] == (
        "error: WORKERS (--workers)='A' is not accepted here; expected 0 or 1 (A or B name a "
        "side of an A/B campaign)")
    assert not (tmp_path / "runs").exists()
