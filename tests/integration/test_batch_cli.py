"""`harness batch` and `make batch` as subprocesses: statuses, logs, and no child left behind."""

from __future__ import annotations

import csv
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.settings.spec import EMBEDDED_SUITE, REPO_ROOT
from tests.procs import alive, children, interrupt_driver, wait_for

from .test_run_cli import harness, make

pytestmark = pytest.mark.integration
TINY_SHAPES = "tanh:\n  shapes:\n    - [8, 8]\nadd:\n  shapes:\n    - [8, 8]\n"


def private_suite(tmp_path: Path) -> Path:
    """A copy of the cpu suite: runs elsewhere cannot mix their record logs into ours, and an
    interrupted run leaves its partial record log here, not in the checkout."""
    return shutil.copytree(EMBEDDED_SUITE, tmp_path / "suite",
                           ignore=shutil.ignore_patterns("__pycache__", "result_*.log"))


def status_rows(out: Path) -> list[dict[str, str]]:
    (batch_dir,) = (out / "batch").iterdir()
    with open(batch_dir / "ops_status.csv", newline="") as fh:
        return list(csv.DictReader(fh))


def group_members(pgid: int) -> list[int]:
    """Live (not zombie) processes of a process group, from /proc."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            members.append(int(stat.parent.name))
    return members






def test_batch_runs_each_op_in_its_own_process_and_records_every_outcome(tmp_path):
    shapes = tmp_path / "shapes.yaml"
    shapes.write_text(TINY_SHAPES)
    suite = private_suite(tmp_path)
    out = tmp_path / "runs"
    proc = harness("batch", "--backend", "cpu", "--ops", "tanh,doesnotexist,add", "--out",
                   str(out), "--level", "core", "--shape-mode", "file", "--shape-file",
                   str(shapes), "--flaggems-dir", str(suite))
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-2000:]
    rows = status_rows(out)
    assert list(rows[0]) == ["op", "node", "status", "rc", "rows", "backend", "device", "timer",
                             "wall_s", "run", "slurm_task", "slurm_state", "reason"]
    assert [(r["op"], r["status"], r["rc"]) for r in rows] == [
        ("tanh", "ok", "0"), ("doesnotexist", "error", "3"), ("add", "ok", "0")]
    for row in (rows[0], rows[2]):
        assert int(row["rows"]) == 2 and row["backend"] == "cpu" and row["timer"] == "direct"
        assert row["node"] == f"benchmark/test_{row['op']}.py::test_{row['op']}"
        assert float(row["wall_s"]) > 0
        run_dir = Path(row["run"])
        assert run_dir.parent == out / row["op"] and (run_dir / "results.csv").is_file()
        log = (run_dir / "run.log").read_text()
        assert "# shape_mode: file" in log and f"# flaggems_dir: {suite}" in log  # forwarded
    assert rows[1]["run"] == "" and rows[1]["rows"] == ""
    # the children's output is in their logs, not on the console
    logs = next((out / "batch").iterdir()) / "logs"
    assert "Operator: tanh  Performance Test" in (logs / "tanh.log").read_text()
    assert "PREFLIGHT_FAILED check=test_node" in (logs / "doesnotexist.log").read_text()
    assert "Performance Test" not in proc.stdout
    assert [line.split()[1] for line in proc.stdout.splitlines()
            if line.startswith("[start] ")] == ["tanh", "doesnotexist", "add"]
    assert "[2/3] doesnotexist error rc=3" in proc.stdout
    assert "BATCH_DONE ok=2 failed=0 error=1 not_run=0 interrupted=0" in proc.stdout


@pytest.mark.parametrize("workers", ["0", "1"])
def test_ctrl_c_leaves_no_child_behind_and_records_what_did_not_run(tmp_path, workers):
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    batch = subprocess.Popen(
        [sys.executable, "-m", "harness.cli", "batch", "--backend", "cpu", "--ops", "tanh,add",
         "--level", "core", "--out", str(tmp_path / "runs"), "--flaggems-dir",
         str(private_suite(tmp_path)), "--workers", workers],
        cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = ""
        while not line.startswith("[start] tanh"):
            line = batch.stdout.readline()
            assert line, batch.stderr.read()
        child = int(line.split("pid=")[1].split()[0])
        # pytest (in a group of its own) is live: under the child, or the batch's worker
        parent, needle = (child, "-m pytest") if workers == "0" else (
            batch.pid, "harness.plugins.worker")
        wait_for(lambda: children(parent, needle), 300, f"{needle} under {parent}")
        (pytest_pid,) = children(parent, needle)
        time.sleep(0.5)  # into the session: the worker's tests, not its start, are stopped
        batch.send_signal(signal.SIGINT)
        rest, err = batch.communicate(timeout=300)  # seconds, or never
    finally:
        if batch.poll() is None:
            batch.kill()
    assert batch.returncode == 130, rest + err
    assert group_members(child) == [] and group_members(pytest_pid) == []
    assert "BATCH_INTERRUPTED signal=SIGINT" in rest and "interrupted" in err
    assert [(r["op"], r["status"]) for r in status_rows(tmp_path / "runs")] == [
        ("tanh", "interrupted"), ("add", "not_run")]


_DRIVER = """
import json, os, sys
from harness.campaign import batch
from harness.executors import local
from harness.executors.local import LocalExecutor
from harness.settings import spec

out, pids = sys.argv[1], sys.argv[2]
settings = spec.resolve({"backend": "cuda", "devices": "0,1", "runner": "host", "out": out}, {})
# each child starts a grandchild in its group, then ignores SIGTERM: only SIGKILL ends it
child = ("import signal, subprocess, sys, time; "
         "g = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)']); "
         "signal.signal(signal.SIGTERM, signal.SIG_IGN); "
         "open(sys.argv[1], 'a').write('%d %d\\\\n' % (__import__('os').getpid(), g.pid)); "
         "time.sleep(300)")
try:
    ops = ["a", "b", "c"]
    batch.run_batch(batch.BatchRecord(settings.out, ops), ops, [],
                    LocalExecutor(local.worker_devices(settings), grace_s=1.0),
                    command=lambda op: [sys.executable, "-c", child, pids])
except KeyboardInterrupt:
    sys.exit(130)
"""


def test_sigterm_kills_children_that_ignore_sigterm_and_their_grandchildren(tmp_path):
    rc, output, started = interrupt_driver(_DRIVER, tmp_path, signal.SIGTERM,
                                           "two children on two devices")
    assert rc == 130, output
    assert len(started) == 4
    wait_for(lambda: not any(alive(p) for p in started), 5, "every child and grandchild gone")
    rows = status_rows(tmp_path / "runs")
    assert [(r["op"], r["status"], r["device"]) for r in rows] == [
        ("a", "interrupted", "0"), ("b", "interrupted", "1"), ("c", "not_run", "")]
    assert {r["rc"] for r in rows[:2]} == {"-9"}  # SIGTERM was ignored: it took SIGKILL
    assert "BATCH_INTERRUPTED signal=SIGTERM" in output


def test_make_batch_dry_run_prints_the_plan_and_runs_nothing(tmp_path):
    proc = make("batch", "BACKEND=cpu", "OPS=add", "DRY_RUN=1", f"OUT={tmp_path}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "[1/1] add node=benchmark/test_add.py::test_add" in proc.stdout
    assert "-m harness.cli run --op add --backend cpu" in proc.stdout
    assert not any(tmp_path.iterdir())


def test_make_batch_reads_an_ops_file(tmp_path):
    ops = tmp_path / "ops.txt"
    ops.write_text("# smallest first\ntanh\nadd  # binary\n")
    proc = make("batch", "BACKEND=cpu", f"OPS_FILE={ops}", "DRY_RUN=1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "[1/2] tanh " in proc.stdout and "[2/2] add " in proc.stdout


@pytest.mark.parametrize(("args", "code", "needle"), [
    (["--backend", "cpu"], 2, "nothing to run"),
    (["--backend", "cpu", "--ops", "tanh,tanh"], 2, "'tanh' is listed twice"),
    (["--backend", "cpu", "--ops", "tanh,nope", "--dry-run"], 3,
     "PREFLIGHT_FAILED check=test_node detail=no benchmark node for OP='nope'"),
])
def test_batch_refuses_bad_input_before_running_anything(args, code, needle, tmp_path):
    proc = harness("batch", *args, "--out", str(tmp_path))
    assert proc.returncode == code, proc.stdout + proc.stderr
    assert needle in proc.stdout + proc.stderr
    assert not any(tmp_path.iterdir())
