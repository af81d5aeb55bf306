"""Runs, batches and campaigns record themselves in the history store as they end."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys

import pytest

from .test_run_cli import harness

pytest.importorskip("sqlalchemy")
pytestmark = pytest.mark.integration


def _env():  # this interpreter's path: where the history extra may live outside site-packages
    return {"PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}


def test_a_run_a_batch_and_a_campaign_are_in_the_default_store_when_they_end(tmp_path):
    out = tmp_path / "runs"
    shapes = tmp_path / "shapes.yaml"  # one small shape each: what is recorded, not its cost
    shapes.write_text("".join(f"{op}:\n  shapes:\n    - [8, 8]\n" for op in ("sum", "tanh", "add")))
    one = ("--backend", "cpu", "--shape-mode", "file", "--shape-file", str(shapes),
           "--out", str(out))
    run = harness("run", *one, "--op", "sum", env=_env())
    assert run.returncode == 0, run.stderr
    batch = harness("batch", *one, "--ops", "tanh", env=_env())
    assert batch.returncode == 0, batch.stderr
    ab = harness("ab", *one, "--op", "add", "--axis", "none", "--rounds", "2", env=_env())
    assert ab.returncode == 0, ab.stderr
    assert (out / "history.sqlite").is_file()
    listed = harness("history", "list", "--format", "json", "--out", str(out), env=_env())
    records = json.loads(listed.stdout)
    assert [(r["kind"], r["state"], r["ops"]) for r in records] == [
        ("campaign", "done", 1), ("batch", "complete", 1), ("run", "ok", 1)]
    # the batch's own run counts once, in the batch; the campaign's side runs in the campaign
    trend = harness("history", "trend", "tanh", "--format", "csv", "--out", str(out),
                    env=_env())
    assert trend.returncode == 0 and "tanh,torch.float32" in trend.stdout
    again = harness("history", "import", records[0]["path"], "--out", str(out), env=_env())
    assert again.returncode == 0 and " unchanged " in again.stdout


def test_a_campaign_killed_mid_way_is_in_the_store_up_to_its_last_finished_round(tmp_path):
    """SIGKILL of the driver (its finally never runs) once round 0 has finished and a round 1
    unit runs: the store holds round 0's rows of both operators and sides, no later one."""
    from harness.settings.spec import REPO_ROOT
    from tests.procs import alive, children, wait_for

    from .test_ab_suite_cli import suite_args

    out = tmp_path / "runs"
    env = {**os.environ, **_env()}
    with open(tmp_path / "driver.out", "w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "harness.cli",
                                 *suite_args(tmp_path, "tanh,add", 2)], cwd=REPO_ROOT,
                                env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        def round_1_runs() -> bool:
            found = list(out.glob("ab/*/*/campaign.json"))
            units = json.loads(found[0].read_text())["units"] if found else []
            states = {u["id"]: u["status"] for u in units}
            return ({states.get("tanh/r0"), states.get("add/r0")} == {"ok"}
                    and "running" in (states.get("tanh/r1"), states.get("add/r1")))

        wait_for(round_1_runs, 300, "round 1 running after round 0 finished", poll=0.1)
        orphans = children(proc.pid)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    for pid in orphans:  # the unit it was running: this test started it
        if alive(pid):
            os.kill(pid, signal.SIGKILL)
    with sqlite3.connect(out / "history.sqlite") as db:
        (state,) = db.execute("select state from records where kind = 'campaign'").fetchone()
        rows = set(db.execute("select op, side, round from rows").fetchall())
    assert state == "running"
    assert rows == {(op, side, 0) for op in ("tanh", "add") for side in ("A", "B")}
