"""EXECUTOR=slurm on the real single-node cluster: ab and batch submit arrays of the cpu suite's
units, follow them to the same report as a local run, and survive scancel and Ctrl-C."""

from __future__ import annotations

import csv
import json
import re
import time
from pathlib import Path

import pytest

from tests.slurm import cases, jobs
from tests.slurm.cluster import Cluster

pytestmark = pytest.mark.slurm


def env_of(cluster: Cluster) -> dict[str, str]:
    return {**cluster.env, "ZL_SLURM_POLL_S": "0.3"}


def queued(cluster: Cluster, job: str) -> list[str]:
    """squeue's lines of a job (its array's pending ranges and running tasks)."""
    return cluster.run("squeue", "-h", "-j", job, "-o", "%i %T", check=False).stdout.split("\n")


def array_job(shared: Path) -> str:
    doc = json.loads((cases.campaign_dir(shared) / "campaign.json").read_text())
    return doc["executor"]["state"]["submissions"][0]["job"]


def test_ab_on_slurm_writes_the_local_executors_report(slurm, tmp_path):
    # The acceptance campaign: a real axis, two rounds, each unit an array task.
    local, remote = tmp_path / "local", tmp_path / "remote"
    local.mkdir(), remote.mkdir()
    args = ["--ops", "tanh,add", "--axis", "OMP_NUM_THREADS", "--a", "1", "--b", "2",
            "--rounds", "2"]
    proc = cases.harness(env_of(slurm), "ab", *cases.common_args(remote), *args)
    assert proc.returncode == 0, cases.says(proc)
    mine = [a for a in cases.common_args(local) if a not in ("--executor", "slurm")]
    here = cases.harness(env_of(slurm), "ab", *mine, *args)
    assert here.returncode == 0, cases.says(here)
    on_slurm, on_host = cases.campaign_dir(remote), cases.campaign_dir(local)
    cases.arrays_of(on_slurm)
    def headings(directory: Path) -> list[str]:
        # the report's structure; the counts some headings hold, and which verdicts' sections
        # (### Inconclusive: ..., under a level-2 heading) appear, are the timings' to decide
        return [re.sub(r"\d+", "N", line) for line in
                (directory / "ab.md").read_text().splitlines() if re.match(r"#{1,2} ", line)]

    heading = headings(on_slurm)
    assert heading == headings(on_host)
    assert any("suite" in line.lower() for line in heading), heading
    doc, ref = (json.loads((d / "ab.json").read_text()) for d in (on_slurm, on_host))
    assert sorted(doc) == sorted(ref) and set(doc["operators"]) == {"tanh", "add"}
    assert "AB_DONE" in proc.stdout and "AB_DONE" in here.stdout


def test_a_task_cancelled_with_scancel_is_reported_cancelled_and_resume_reruns_only_it(
        slurm, tmp_path):
    env = env_of(slurm)
    started = cases._start(env, ["ab", *cases.common_args(tmp_path), "--ops", "tanh,add",
                                 "--axis", "none", "--rounds", "1", "--slurm-parallel", "1"])
    try:
        cases.wait_for(lambda: list((tmp_path / "runs" / "ab").glob("*/*/campaign.json"))
                       and (cases.campaign_dir(tmp_path) / "campaign.json").read_text()
                       .count('"job"'), 120, "the array to be submitted", poll=0.2)
        job = array_job(tmp_path)
        slurm.run("scancel", f"{job}_1")  # pending behind %1: Slurm alone ends it
        output, _ = started.communicate(timeout=300)
    finally:
        if started.poll() is None:
            started.kill()
    assert started.returncode == 1, output[-3000:]
    directory = cases.campaign_dir(tmp_path)
    plan = json.loads((directory / "slurm" / "s1-r0.plan.json").read_text())
    cancelled = cases.plan_ids(plan)[1][0]
    unit = cases.units(directory)[cancelled]
    # Pending behind %1, it never ran: CANCELLED, with no exit code of its own
    assert unit["status"] == "error" and unit["reason"] == (
        f"slurm task {job}_1 CANCELLED reason=cancelled_while_pending"), unit
    assert f"] {cancelled} error rc=" in output
    assert f"    slurm task {job}_1 CANCELLED" in output
    resumed = cases.harness(env, "ab", "--resume", str(directory))
    assert resumed.returncode == 0, cases.says(resumed)
    assert cases.plan_ids(json.loads((directory / "slurm" / "s2-r0.plan.json").read_text())
                          ) == [[cancelled]]
    assert all(u["status"] == "ok" for u in cases.units(directory).values())


def test_ctrl_c_cancels_the_array_and_leaves_nothing_in_squeue(slurm, tmp_path):
    cases.interrupt_then_resume(env_of(slurm), tmp_path)
    job = array_job(tmp_path)
    assert queued(slurm, job) == [""]
    assert all(r["JobState"] in jobs.ENDED for r in jobs.jobs(slurm, job))


def test_batch_of_every_operator_records_each_ones_slurm_task_and_state(slurm, tmp_path):
    proc = cases.harness(env_of(slurm), "batch", *cases.common_args(tmp_path), "--ops", "all")
    (batch_dir,) = (tmp_path / "runs" / "batch").iterdir()
    with open(batch_dir / "ops_status.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) >= 2 and proc.returncode in (0, 1), cases.says(proc)
    job = rows[0]["slurm_task"].split("_")[0]
    for row in rows:
        assert row["slurm_task"].startswith(f"{job}_"), row
        assert row["slurm_state"] == ("COMPLETED" if row["status"] == "ok" else "FAILED"), row
    assert len({r["slurm_task"] for r in rows}) == len(rows)  # gpu mode: a task an operator


def test_every_gpu_task_sees_its_own_device_and_node_tasks_split_the_units(slurm, tmp_path):
    gpu, node = tmp_path / "gpu", tmp_path / "node"
    gpu.mkdir(), node.mkdir()
    proc = cases.harness(env_of(slurm), "batch", *cases.common_args(gpu),
                         "--ops", "tanh,add", "--slurm-args=--gres=gpu:1")
    assert proc.returncode == 0, cases.says(proc)
    (batch_dir,) = (gpu / "runs" / "batch").iterdir()
    seen = [json.loads(p.read_text())["visible"]
            for p in (batch_dir / "slurm" / "started").glob("*.json")]
    # Slurm sets every stack's variable to the same device: one value a task, its own
    values = [set(found.values()) for found in seen]
    assert len(seen) == 2 and all(len(v) == 1 for v in values), seen
    assert len(set.union(*values)) == 2, seen
    start = time.monotonic()
    cases.batch_node_mode(env_of(slurm), node)
    assert time.monotonic() - start < 300


