"""Runs, batches and campaigns record themselves in the history store as they end."""

from __future__ import annotations

import json
import os
import sys

import pytest

from .test_run_cli import harness

pytest.importorskip("sqlalchemy")
pytestmark = pytest.mark.integration


def _env():  # this interpreter's path: where the history extra may live outside site-packages
    return {"PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}


def test_a_run_a_batch_and_a_campaign_are_in_the_default_store_when_they_end(tmp_path):
    out = tmp_path / "runs"
    run = harness("run", "--backend", "cpu", "--op", "sum", "--out", str(out), env=_env())
    assert run.returncode == 0, run.stderr
    batch = harness("batch", "--backend", "cpu", "--ops", "tanh", "--out", str(out), env=_env())
    assert batch.returncode == 0, batch.stderr
    ab = harness("ab", "--backend", "cpu", "--op", "add", "--axis", "none", "--rounds", "2",
                 "--out", str(out), env=_env())
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
