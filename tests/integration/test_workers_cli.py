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
    ends = {}
    for workers in ("0", "1"):
        proc, directory = campaign(tmp_path, f"w{workers}", "tanh,segv,hangs,add",
                                   "--workers", workers, "--unit-timeout", "15")
        assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-2000:]
        found = units(directory)
        ends[workers] = {u: (found[u]["status"], found[u]["reason"]) for u in found}
        ran = launches(directory)
    assert ends["0"] == ends["1"], ends
    assert ends["1"]["segv/r0"][0] == "crashed" and "SIGSEGV" in ends["1"]["segv/r0"][1]
    assert ends["1"]["hangs/r0"][0] == "timeout" and ends["1"]["tanh/r0"][0] == "ok"
    assert ends["1"]["add/r0"][0] == "ok"
    # tanh's side A ran first in its worker; segv killed the worker that ran it; the hang's
    # worker was stopped with its unit; add's side A ran in a worker started after both
    assert all(launch[-1]["kind"] == "worker" for launch in ran.values()), ran
    before = {ran["tanh/A/r0"][0]["pid"], ran["segv/A/r0"][0]["pid"]}
    assert ran["add/A/r0"][0]["pid"] not in before and ran["add/A/r0"][0]["session"] == 1
    assert ran["segv/A/r0"][0]["retired"].startswith("the worker died")
    assert ran["tanh/A/r0"][0]["pid"] != ran["tanh/B/r0"][0]["pid"]  # a worker per side


def test_workers_naming_one_side_run_that_side_in_workers_and_the_other_fresh(tmp_path):
    proc, directory = campaign(tmp_path, "runs", "tanh,add", "--workers", "B")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    ran = launches(directory)
    assert {rel: launch[0]["kind"] for rel, launch in ran.items()} == {
        "add/A/r0": "process", "add/B/r0": "worker", "tanh/A/r0": "process",
        "tanh/B/r0": "worker"}
    assert ran["add/B/r0"][0]["pid"] == ran["tanh/B/r0"][0]["pid"]  # one worker for side B
    assert "pytest: in workers that stay up" in harness(
        "ab", "--resume", str(directory), "--dry-run").stdout


def test_a_batch_refuses_a_side_for_workers_in_one_line(tmp_path):
    proc = harness("batch", "--backend", "cpu", "--ops", "tanh", "--workers", "A",
                   "--out", str(tmp_path / "runs"))
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1] == (
        "error: WORKERS (--workers)='A' is not accepted here; expected 0 or 1 (A or B name a "
        "side of an A/B campaign)")
    assert not (tmp_path / "runs").exists()
