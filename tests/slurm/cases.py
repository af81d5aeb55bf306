"""EXECUTOR=slurm cases, each a function of the environment that reaches a Slurm (the fake one
of tests/fake_slurm here; a real cluster's login environment in tests/slurm) and a directory
that every node sees."""

from __future__ import annotations

import contextlib
import csv
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from harness.settings.spec import EMBEDDED_SUITE, REPO_ROOT
from tests.gate_plugin import AT_VAR, GATE_VAR
from tests.procs import wait_for

SHAPES = "tanh:\n  shapes:\n    - [8, 8]\nadd:\n  shapes:\n    - [8, 8]\n"



def plan_ids(plan: dict) -> list[list[str]]:
    """The ids of each array task's share in a plan file (each task is written whole)."""
    return [[task["id"] for task in share] for share in plan["tasks"]]

def private_suite(shared: Path) -> Path:
    """A copy of the cpu suite where every node sees it, its record logs apart from others'."""
    return shutil.copytree(EMBEDDED_SUITE, shared / "suite",
                           ignore=shutil.ignore_patterns("__pycache__", "result_*.log"))


def harness(env: Mapping[str, str], *args: str, timeout: float = 900
            ) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], cwd=REPO_ROOT,
                          env={**env, "PYTHONPATH": str(REPO_ROOT)}, capture_output=True,
                          text=True, timeout=timeout)


def common_args(shared: Path) -> list[str]:
    shapes = shared / "shapes.yaml"
    shapes.write_text(SHAPES)
    return ["--backend", "cpu", "--shape-mode", "file", "--shape-file", str(shapes),
            "--flaggems-dir", str(private_suite(shared)), "--out", str(shared / "runs"),
            "--executor", "slurm"]


def campaign_dir(shared: Path) -> Path:
    (directory,) = (shared / "runs" / "ab").glob("*/*")
    return directory


def units(directory: Path) -> dict[str, dict]:
    doc = json.loads((directory / "campaign.json").read_text())
    return {u["id"]: u for u in doc["units"]}


def says(proc: subprocess.CompletedProcess) -> str:
    return proc.stdout[-4000:] + proc.stderr[-2000:]


def ab_suite_campaign(env: Mapping[str, str], shared: Path) -> None:
    """Two operators, two rounds: every unit runs in an array task and the report is
    written; the receipt names each batch script by its sha256."""
    proc = harness(env, "ab", *common_args(shared), "--ops", "tanh,add", "--axis", "none",
                   "--rounds", "2")
    assert proc.returncode == 0, says(proc)
    arrays_of(campaign_dir(shared))


def arrays_of(directory: Path) -> None:
    """What a finished two-round campaign of tanh and add on Slurm holds: every unit ok in an
    array task, each batch script named in the receipt by its sha256, the later rounds' array
    submitted after round 0's, and both operators in ab.json."""
    found = units(directory)
    assert sorted(found) == ["add/r0", "add/r1", "tanh/r0", "tanh/r1"]
    assert all(u["status"] == "ok" and u["slurm_task"] for u in found.values())
    receipt = json.loads((directory / "receipt.json").read_text())
    scripts = receipt["campaign"]["slurm"]
    assert [s["key"] for s in scripts] == ["s1-r0", "s1-later"]
    for s in scripts:
        assert hashlib.sha256(Path(s["script"]).read_bytes()).hexdigest() == s["script_sha256"]
    assert "--dependency=afterany:" + scripts[0]["job"] in scripts[1]["argv"]
    assert {r["op"] for r in json.loads((directory / "ab.json").read_text())["rows"]} == {
        "tanh", "add"}


def batch_node_mode(env: Mapping[str, str], shared: Path) -> None:
    """Node mode: two tasks share three operators, one of which has no benchmark; the
    failure is recorded and never stops the others."""
    proc = harness(env, "batch", *common_args(shared), "--ops", "tanh,add,nosuchop",
                   "--slurm-unit", "node", "--slurm-parallel", "2")
    assert proc.returncode == 1, says(proc)
    (batch_dir,) = (shared / "runs" / "batch").iterdir()
    with open(batch_dir / "ops_status.csv", newline="") as fh:
        rows = {r["op"]: r for r in csv.DictReader(fh)}
    assert rows["tanh"]["status"] == rows["add"]["status"] == "ok"
    assert rows["nosuchop"]["status"] == "error" and rows["nosuchop"]["rc"] == "3"
    assert "--array=0-1%2" in proc.stdout
    plan = json.loads((batch_dir / "slurm" / "s1.plan.json").read_text())
    assert plan_ids(plan) == [["tanh", "nosuchop"], ["add"]]
    # each operator ran once, in the task its plan gave it: no overlap between the tasks
    job = rows["tanh"]["slurm_task"].split("_")[0]
    assert {op: r["slurm_task"] for op, r in rows.items()} == {
        "tanh": f"{job}_0", "nosuchop": f"{job}_0", "add": f"{job}_1"}


def _start(env: Mapping[str, str], args: list[str], gate: Path | None = None, at: int = 1,
           output: Path | None = None) -> subprocess.Popen:
    """`harness ARGS` running; with `gate`, its `at`-th pytest held at its first benchmark
    until the test creates gate/go (tests/gate_plugin), so that a task cannot finish before
    the test has acted, however slow the machine."""
    held = {} if gate is None else {GATE_VAR: str(gate), AT_VAR: str(at),
                                    "PYTEST_PLUGINS": "tests.gate_plugin"}
    if gate is not None:
        gate.mkdir()
    with contextlib.ExitStack() as stack:  # the child has its own copy of the file
        sink = subprocess.PIPE if output is None else stack.enter_context(output.open("w"))
        return subprocess.Popen([sys.executable, "-m", "harness.cli", *args], cwd=REPO_ROOT,
                                env={**env, **held, "PYTHONPATH": str(REPO_ROOT)}, text=True,
                                stdout=sink, stderr=subprocess.STDOUT)


def _first_unit_ok(shared: Path) -> bool:
    found = list((shared / "runs" / "ab").glob("*/*/campaign.json"))
    return bool(found) and any(u["status"] == "ok" for u in units(found[0].parent).values())


def interrupt_then_resume(env: Mapping[str, str], shared: Path) -> None:
    """Ctrl-C cancels the arrays (scancel) and marks the campaign interrupted; resume
    resubmits only the units that did not finish."""
    # The second unit's first pytest (the third of the campaign: two sides a unit) is held:
    # it cannot end ok between the test's look and the signal (it did, on a loaded machine).
    gate = shared / "gate"
    proc = _start(env, ["ab", *common_args(shared), "--ops", "tanh,add", "--axis", "none",
                        "--rounds", "1", "--slurm-parallel", "1"], gate, at=3)
    try:
        wait_for(lambda: _first_unit_ok(shared) and (gate / "ready").exists(), 600,
                 "the first unit to finish and the second to start", poll=0.2)
        proc.send_signal(signal.SIGINT)
        output, _ = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, output[-3000:]
    assert "cancelling: scancel" in output and "AB_INTERRUPTED" in output
    directory = campaign_dir(shared)
    before = units(directory)
    done = [u for u, v in before.items() if v["status"] == "ok"]
    assert len(done) == 1
    left = [u for u in before if u not in done]
    # cancelled while pending (Slurm says CANCELLED) or while running (its task stopped it)
    assert before[left[0]]["status"] == "interrupted", before[left[0]]
    resumed = harness(env, "ab", "--resume", str(directory))
    assert resumed.returncode == 0, says(resumed)
    after = units(directory)
    assert all(u["status"] == "ok" for u in after.values())
    assert after[done[0]]["attempts"] == 1 and after[done[0]]["slurm_task"] == before[
        done[0]]["slurm_task"]
    plan = json.loads((directory / "slurm" / "s2-r0.plan.json").read_text())
    assert plan_ids(plan) == [left]  # only what did not finish went back to the cluster


def detach_then_reattach(env: Mapping[str, str], shared: Path) -> None:
    """With --detach, Ctrl-C leaves the array running; resume re-attaches to it (no new
    submission) and writes the report."""
    # The task's pytest is held until the resume has re-attached: a task that ended before the
    # resume began (a loaded machine) would leave nothing to re-attach to.
    gate = shared / "gate"
    proc = _start(env, ["ab", *common_args(shared), "--op", "tanh", "--axis", "none",
                        "--rounds", "1", "--detach"], gate)
    try:
        wait_for(lambda: (gate / "ready").exists(), 600, "the task's pytest to start", poll=0.2)
        proc.send_signal(signal.SIGINT)
        output, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130 and "detached: job(s)" in output, output[-3000:]
    directory = campaign_dir(shared)
    assert json.loads((directory / "campaign.json").read_text())["state"] == "submitted"
    said = shared / "resume.out"
    resume = _start(env, ["ab", "--resume", str(directory)], output=said)
    try:
        wait_for(lambda: "re-attaching to job(s)" in said.read_text() or resume.poll() is not None,
                 300, "the resume to re-attach", poll=0.2)
        (gate / "go").touch()
        resume.wait(timeout=600)
    finally:
        (gate / "go").touch()
        if resume.poll() is None:
            resume.kill()
    stdout = said.read_text()
    assert resume.returncode == 0, stdout[-4000:]
    assert "re-attaching to job(s)" in stdout and "submitted job" not in stdout
    assert units(directory)["tanh/r0"]["status"] == "ok"
    assert not list((directory / "slurm").glob("s2-*"))


def environment(extra: Mapping[str, str]) -> dict[str, str]:
    return {**os.environ, **extra}
