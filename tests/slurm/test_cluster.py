"""The test cluster does what a Slurm executor relies on: arrays, gres GPUs, states, cancels."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from tests.slurm import cluster, jobs

pytestmark = pytest.mark.slurm

# Each task writes its id, its visible devices (or "unset") and when it ran, then sleeps so
# that the tasks of an array overlap.
REPORT = """#!/bin/bash
task=${SLURM_ARRAY_TASK_ID:-job}
echo "$task ${CUDA_VISIBLE_DEVICES-unset} $(date +%s.%N)" > "$1/$task.start"
sleep "${2:-0}"
date +%s.%N > "$1/$task.end"
"""


def job_script(tmp_path: Path, body: str = REPORT) -> Path:
    script = tmp_path / "task.sh"
    script.write_text(body)
    return script


def common(tmp_path: Path) -> list[str]:
    return [f"--chdir={tmp_path}", f"--output={tmp_path}/slurm-%A_%a.out"]


def test_an_array_of_gpu_tasks_runs_side_by_side_on_distinct_devices(slurm, tmp_path):
    job = jobs.submit(slurm, *common(tmp_path), "--array=0-3%4", "--gres=gpu:1",
                      str(job_script(tmp_path)), str(tmp_path), "3")
    records = jobs.wait_ended(slurm, job)
    assert sorted(jobs.task_key(r) for r in records) == [f"{job}_{i}" for i in range(4)]
    assert {r["JobState"] for r in records} == {"COMPLETED"}
    assert {jobs.exit_code(r) for r in records} == {(0, 0)}
    starts = [(tmp_path / f"{i}.start").read_text().split() for i in range(4)]
    assert [s[0] for s in starts] == ["0", "1", "2", "3"]
    devices = [s[1] for s in starts]
    assert all(d.isdigit() for d in devices), devices
    # All four ran at once (each started before any ended), so their devices must differ.
    first_end = min(float((tmp_path / f"{i}.end").read_text()) for i in range(4))
    assert max(float(s[2]) for s in starts) < first_end
    assert sorted(devices) == ["0", "1", "2", "3"]


def test_an_exclusive_job_gets_the_whole_node_and_every_device(slurm, tmp_path):
    """Slurm 22.05 gives an --exclusive job all of the node's gres, asked for or not."""
    job = jobs.submit(slurm, *common(tmp_path), "--exclusive", str(job_script(tmp_path)),
                      str(tmp_path))
    [record] = jobs.wait_ended(slurm, job)
    assert record["JobState"] == "COMPLETED"
    assert record["NumCPUs"] == "8"  # the whole node, as declared
    assert (tmp_path / "job.start").read_text().split()[1] == "0,1,2,3"


def test_a_job_that_asks_for_no_gres_sees_no_visible_devices(slurm, tmp_path):
    job = jobs.submit(slurm, *common(tmp_path), str(job_script(tmp_path)), str(tmp_path))
    [record] = jobs.wait_ended(slurm, job)
    assert record["JobState"] == "COMPLETED"
    assert jobs.ended(slurm, job)[job]["JobState"] == "COMPLETED"
    assert (tmp_path / "job.start").read_text().split()[1] == "unset"


def test_a_cancelled_array_task_reads_cancelled_and_its_sibling_completes(slurm, tmp_path):
    script = job_script(tmp_path, '#!/bin/bash\nsleep "$((SLURM_ARRAY_TASK_ID * 120))"\n')
    job = jobs.submit(slurm, *common(tmp_path), "--array=0-1", str(script))
    jobs.wait_state(slurm, f"{job}_1", "RUNNING")
    slurm.run("scancel", f"{job}_1")
    ended = {jobs.task_key(r): r for r in jobs.wait_ended(slurm, job)}
    assert ended[f"{job}_0"]["JobState"] == "COMPLETED"
    assert ended[f"{job}_1"]["JobState"] == "CANCELLED"
    logged = jobs.ended(slurm, job)
    assert {key: r["JobState"] for key, r in logged.items()} == {
        f"{job}_0": "COMPLETED", f"{job}_1": "CANCELLED"}


def test_a_failing_task_reads_failed_with_its_exit_status_in_both_sources(slurm, tmp_path):
    script = job_script(tmp_path, '#!/bin/bash\nexit "$((SLURM_ARRAY_TASK_ID + 3))"\n')
    job = jobs.submit(slurm, *common(tmp_path), "--array=0-1", str(script))
    ended = {jobs.task_key(r): r for r in jobs.wait_ended(slurm, job)}
    assert [(ended[f"{job}_{i}"]["JobState"], jobs.exit_code(ended[f"{job}_{i}"]))
            for i in range(2)] == [("FAILED", (3, 0)), ("FAILED", (4, 0))]
    logged = jobs.ended(slurm, job)
    assert [jobs.exit_code(logged[f"{job}_{i}"]) for i in range(2)] == [(3, 0), (4, 0)]


def processes_under(root: Path) -> list[str]:
    """Command lines of live processes that name `root` (each daemon names its files)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if str(root) in text:
            found.append(text)
    return found


def test_a_bring_up_that_fails_says_which_daemon_died_and_leaves_none_running(
        slurm, tmp_path, monkeypatch):
    good = cluster.daemon_argv
    monkeypatch.setattr(cluster, "daemon_argv",
                        lambda spec: [*good(spec)[:2], ["slurmd", "--no-such-option"]])
    root = Path(tempfile.mkdtemp(prefix="zl-slurm-", dir="/tmp"))
    try:
        with pytest.raises(RuntimeError, match=r"waiting for the node to be idle: slurmd exited"):
            cluster.start(root, timeout=30)
        assert processes_under(root) == []
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_the_queue_is_empty_once_every_job_has_ended(slurm):
    assert jobs.queue(slurm) == []
