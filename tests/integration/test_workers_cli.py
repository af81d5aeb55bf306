"""Campaigns and batches whose pytest runs in workers that stay up: each run ends as it would in
a fresh process, and a worker's crash or hang costs that worker, never the next operator."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.campaign import projection
from harness.campaign.document import load

from .test_ab_cli import harness
from .test_ab_suite_cli import SHAPES, units
from .test_batch_cli import private_suite

pytestmark = pytest.mark.integration
HANG_LIMIT_S = 60
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
    # The limit must outlast every unit that ends on its own (add ran past 15 s on a loaded
    # machine and read timeout); the hang never ends, so it only waits the limit out.
    proc, directory = campaign(tmp_path, "runs", "segv,hangs,add", "--unit-timeout",
                               str(HANG_LIMIT_S))
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-2000:]
    found = units(directory)
    # what a campaign of fresh processes records for the same units (test_states_cli, and
    # this test with --workers 0 before it was cut to the worker half for time)
    assert {u: (found[u]["status"], found[u]["reason"]) for u in found} == {
        "segv/r0": ("crashed", "killed by SIGSEGV (rc 245)"),
        "hangs/r0": ("timeout", f"timeout after {HANG_LIMIT_S} s"),
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
    proc, directory = campaign(tmp_path, "runs", "tanh,add", "--workers", "B", "--rounds", "2")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    ran = launches(directory)
    assert {rel: launch[0]["kind"] for rel, launch in ran.items()} == {
        f"{op}/{side}/r{r}": "process" if side == "A" else "worker"
        for op in ("add", "tanh") for side in "AB" for r in (0, 1)}
    # one worker for side B in each round, and each round its own: what a worker process
    # keeps of itself must vary between rounds as a fresh process's does
    pids = {r: {ran[f"{op}/B/r{r}"][0]["pid"] for op in ("add", "tanh")} for r in (0, 1)}
    assert len(pids[0]) == len(pids[1]) == 1 and pids[0] != pids[1]
    assert sorted(ran[f"{op}/B/r1"][0].get("new_because", "") for op in ("add", "tanh")) == [
        "", "its generation 'r1' is new (its environment's worker served 'r0')"]
    # a worker's own seconds around each session: in its launch, and after the session in
    # the run's breakdown (worker_checks), which still sums to the run's wall
    for rel, launch in ran.items():
        phases = json.loads((directory / rel / "time_breakdown.json").read_text())["phases"]
        wall = json.loads((directory / rel / "time_breakdown.json").read_text())["wall_s"]
        assert sum(phases.values()) == pytest.approx(wall, abs=1e-4)
        if rel.split("/")[1] == "A":
            assert "worker_s" not in launch[0] and phases["worker_checks"] == 0.0
            continue
        seconds = launch[0]["worker_s"]
        # `ahead`: the fingerprint the worker took as it waited for the session, outside it
        assert set(seconds) == {"ahead", "prepare", "restore", "garbage", "compare",
                                "device"}, seconds
        assert all(v >= 0 for v in seconds.values()) and seconds["restore"] > 0
        assert phases["worker_checks"] == pytest.approx(
            sum(seconds[k] for k in ("restore", "garbage", "compare", "device")), abs=1e-5)
    # what the suite's projection sets apart: side B's one worker start a round, in that
    # round's first unit; side A's fresh processes pay their own start in every unit
    found = load(directory)
    starts = projection.unit_starts(projection.worker_starts(directory, found), found)
    assert sorted(unit.rpartition("/r")[2] for unit in starts) == ["0", "1"], starts
    for unit, seconds in starts.items():
        op, _, r = unit.rpartition("/r")
        assert "new_because" in ran[f"{op}/B/r{r}"][0]
        phases = json.loads((directory / op / "B" / f"r{r}" / "time_breakdown.json").read_text())
        assert seconds == pytest.approx(phases["phases"]["startup"]) and seconds > 0
    assert "how pytest ran: side A: 4 in a fresh process; side B: 4 in a worker (2 started)" in (
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


# Benchmarks that leave their process worse than they found it, as a hostile pass wrote them.
LEAVING = {
    "test_patch.py": '''import time

import pytest
import torch

from . import base, consts, cpu_ops

ORIGINAL = {"add_": torch.Tensor.add_, "softmax": torch.nn.functional.softmax}


def slow_add_(self, *args, **kwargs):
    time.sleep(0.0005)
    return ORIGINAL["add_"](self, *args, **kwargs)


def slow_softmax(*args, **kwargs):
    time.sleep(0.0005)
    return ORIGINAL["softmax"](*args, **kwargs)


@pytest.mark.patch
def test_patch():
    torch.Tensor.add_ = slow_add_
    torch.nn.functional.softmax = slow_softmax
    base.UnaryPointwiseBenchmark(op_name="patch", torch_op=torch.tanh,
                                 gems_op=cpu_ops.tanh_via_exp,
                                 dtypes=consts.CPU_FLOAT_DTYPES).run()
''',
    "test_cut.py": '''import os

import pytest
import torch

from . import base, cpu_ops


@pytest.mark.cut
def test_cut():
    base.UnaryPointwiseBenchmark(op_name="cut", torch_op=torch.tanh,
                                 gems_op=cpu_ops.tanh_via_exp, dtypes=[torch.float32]).run()
    os._exit(0)  # before its bfloat16 rows
''',
    "test_leak.py": '''import subprocess
import sys

import pytest
import torch

from . import base, cpu_ops


@pytest.mark.leak
def test_leak():
    child = subprocess.Popen([sys.executable, "-c", "while True: pass"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    print(f"LEAKED_CHILD {child.pid}", flush=True)
    base.UnaryPointwiseBenchmark(op_name="leak", torch_op=torch.tanh,
                                 gems_op=cpu_ops.tanh_via_exp, dtypes=[torch.float32]).run()
''',
}
LEAVING_SHAPES = "".join(f"{op}:\n  shapes:\n    - [8, 8]\n"
                         for op in ("patch", "cut", "leak", "tanh", "softmax"))


def leaving_campaign(tmp_path: Path, ops: str, *flags: str):
    shapes = tmp_path / "shapes.yaml"
    shapes.write_text(LEAVING_SHAPES)
    suite = private_suite(tmp_path)
    for file, text in LEAVING.items():
        (suite / "benchmark" / file).write_text(text)
    proc = harness("ab", "--backend", "cpu", "--ops", ops, "--axis", "none",
                   "--shape-mode", "file", "--shape-file", str(shapes), "--flaggems-dir",
                   str(suite), "--out", str(tmp_path / "runs"), *flags)
    (directory,) = (tmp_path / "runs" / "ab" / "none-suite").iterdir()
    return proc, directory


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            return fh.read().rsplit(") ", 1)[1][:1] not in ("Z", "X")
    except OSError:
        return False


def test_a_benchmark_that_patches_torch_costs_its_worker_and_an_a_a_beside_it_calls_nothing(
        tmp_path):
    # Regression: a benchmark that set torch.Tensor.add_ to a slow wrapper and replaced
    # torch.nn.functional.softmax left its worker alive; the next operator in it was timed
    # patched (tanh 0.74 ms against 0.019 ms alone) and an A/A read tanh "faster +4803%".
    proc, directory = leaving_campaign(tmp_path, "patch,tanh,softmax", "--rounds", "2")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    ran = launches(directory)
    for side in "AB":
        for r in (0, 1):
            patched = ran[f"patch/{side}/r{r}"][0]
            assert patched["kind"] == "worker"
            assert patched["retired"].startswith(
                "the session changed what a later session would use: "
                "torch._tensor.Tensor.add_ (added), torch.nn.functional.softmax"), patched
            # round-major: tanh runs next on this side, in a worker that patch never touched
            assert ran[f"tanh/{side}/r{r}"][0]["pid"] != patched["pid"]
    # The leak read 48x; an A/A of real CPU timings beside other tests (xdist) can read a row
    # slower by chance, so the bound is on how far a row moved, far under the leak's 48x.
    doc = json.loads((directory / "ab.json").read_text())
    moved = {(r["op"], r["shape"]): r["speedup_pct"] for r in doc["rows"]}
    assert moved and all(abs(v) < 200 for v in moved.values()), moved


def test_a_session_cut_short_fails_with_what_is_missing_and_a_leaked_child_ends_with_its_run(
        tmp_path):
    # Regression: a benchmark that called os._exit(0) after its float32 rows read ok with the
    # rows it had, with workers and without; a benchmark's busy child ran on after AB_DONE.
    # Side A runs in fresh processes, side B in workers: each case is tried both ways.
    proc, directory = leaving_campaign(tmp_path, "cut,leak", "--rounds", "1", "--workers", "B")
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-2000:]
    found = units(directory)
    assert found["cut/r0"]["status"] == "failed", found["cut/r0"]
    assert "cut short: pytest exited 0 without finishing its session inside " \
        "benchmark/test_cut.py::test_cut" in found["cut/r0"]["reason"]
    for side in "AB":
        ident = json.loads((directory / "cut" / side / "r0" / "run_identity.json").read_text())
        assert (ident["state"], ident["partial"], ident["rows"]) == ("failed", True, 1)
        assert "the 1 it had (float32) are kept, never compared" in ident["reason"]
        assert (directory / "cut" / side / "r0" / "results.csv").is_file()  # kept
    ops = json.loads((directory / "ab.json").read_text())["operators"]
    assert ops["cut"]["verdict"] == "failed" and not ops["cut"].get("rows"), ops["cut"]
    assert found["leak/r0"]["status"] == "ok", found["leak/r0"]
    ran = launches(directory)
    for side in "AB":
        log = (directory / "leak" / side / "r0" / "run.log").read_text()
        child = int(log.split("LEAKED_CHILD ", 1)[1].split()[0])
        assert not _running(child), f"side {side}: pid {child} outlived its run"
        facts = ran[f"leak/{side}/r0"][0]
        if side == "A":
            assert facts["kind"] == "process" and facts["left_running"] == [child]
        else:
            assert facts["retired"] == ("the session left child processes running "
                                        f"(stopped): {child}")
