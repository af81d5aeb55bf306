"""harness status: a campaign's units, driver, time left and verdicts, read without a write."""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from harness.axes import Axis
from harness.campaign import plan, watch
from harness.campaign.document import Campaign, DriverRecord, load
from harness.contract.ops_status import OPS_STATUS_CSV, OpStatus, render_csv
from harness.contract.states import CampaignState
from harness.errors import UsageError
from harness.fsutil import take_lock
from harness.report.sources import DRIVER_LOCK
from tests.abdata import write_data

NOW = dt.datetime(2026, 12, 3, 9, 0, 0, tzinfo=dt.timezone.utc)


def campaign_on_disk(directory: Path, pid: int) -> Campaign:
    """tanh and add, two rounds: tanh/r0 ok (4 s), add/r0 running for 30 s, the rest pending."""
    campaign = plan.new_campaign(
        directory=directory, axis=Axis("OMP_NUM_THREADS", "OMP_NUM_THREADS", "1", "2"),
        caliber={}, argv=[], rounds=2, walls={}, walls_from=None,
        ops={"tanh": {"node": "benchmark/test_tanh.py::test_tanh"},
             "add": {"node": "benchmark/test_add.py::test_add"}})
    done, running = campaign.unit("tanh/r0"), campaign.unit("add/r0")
    done.status, done.wall_s, done.device = "ok", 4.0, "cpu:0"
    running.status, running.device = "running", "cpu:0"
    running.started_utc = (NOW - dt.timedelta(seconds=30)).isoformat(timespec="seconds")
    campaign.state = CampaignState.RUNNING
    campaign.driver = DriverRecord(pid, socket.gethostname(), "2026-12-03T08:59:00+00:00")
    campaign.save(directory)
    return campaign


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def snapshot(directory: Path) -> dict[str, tuple[int, str]]:
    return {str(p.relative_to(directory)): (p.stat().st_mtime_ns,
                                             hashlib.sha256(p.read_bytes()).hexdigest())
            for p in sorted(directory.rglob("*")) if p.is_file()}


def test_a_running_campaign_shows_its_units_driver_and_eta(tmp_path):
    campaign_on_disk(tmp_path, os.getpid())
    fd = take_lock(tmp_path / DRIVER_LOCK, lambda: RuntimeError("held"))
    try:
        lines = watch.view_lines(watch.campaign_view(tmp_path, load(tmp_path), now=NOW))
    finally:
        os.close(fd)
    assert lines[0] == (f"campaign {tmp_path}: running; OMP_NUM_THREADS (A=1, B=2), "
                        "2 operator(s)")
    assert lines[1] == (f"driver: pid {os.getpid()} on {socket.gethostname()}, running since "
                        "2026-12-03T08:59:00+00:00")
    assert lines[2] == "units: 1 done, 1 running, 2 pending, 0 failed (of 4)"
    assert lines[3:5] == ["running:", "  add/r0 running on cpu:0 for 30 s"]
    # the running unit is past the mean wall (4 s): the two pending take 4 s each on 1 device
    assert lines[5] == "eta: 8 s (mean unit wall 4.0 s over 1 units, 1 device(s))"
    assert lines[6] == "verdicts (interim, operators whose rounds are all in): none yet"


def test_after_kill_9_of_the_driver_it_says_the_driver_is_gone_and_how_to_resume(tmp_path):
    pid = dead_pid()
    campaign_on_disk(tmp_path, pid)
    lines = watch.view_lines(watch.campaign_view(tmp_path, load(tmp_path), now=NOW))
    assert lines[1] == (f"driver: pid {pid} on {socket.gethostname()} is gone; the campaign "
                        f"is running and nothing runs it: harness ab --resume {tmp_path} "
                        "completes it")
    assert "were running:" in lines
    assert "  add/r0 running on cpu:0 for 30 s when its driver went: stopped" in lines
    assert "eta: - (no driver runs the campaign)" in lines


def test_a_live_pid_without_the_lock_is_not_taken_for_the_driver(tmp_path):
    campaign_on_disk(tmp_path, os.getpid())  # this process runs, yet holds no lock
    driver = watch.driver_of(tmp_path, load(tmp_path))
    assert not driver.alive and "is gone (that pid exists but does not hold" in driver.text


def test_status_never_writes_in_the_campaign(tmp_path):
    campaign_on_disk(tmp_path, dead_pid())
    (tmp_path / DRIVER_LOCK).write_text("")
    before = snapshot(tmp_path)
    names = sorted(os.listdir(tmp_path))
    assert watch.status_lines(tmp_path)[2].startswith("units: 1 done, 1 running")
    assert snapshot(tmp_path) == before and sorted(os.listdir(tmp_path)) == names


def test_a_finished_campaign_gives_ab_jsons_verdicts(tmp_path):
    campaign = campaign_on_disk(tmp_path, dead_pid())
    for unit in campaign.units:
        unit.status, unit.wall_s = "ok", 3.0
    campaign.unit("add/r1").status = "crashed"
    campaign.unit("add/r1").reason = "signal SIGKILL"
    campaign.state = CampaignState.DONE
    campaign.save(tmp_path)
    write_data(tmp_path, {"schema": "harness-ab/1", "rows": [], "geomean_speedup_pct": None,
                          "operators": {"tanh": {"verdict": "slower", "rows": 2, "rounds": 2,
                                                 "geomean_speedup_pct": -7.5},
                                        "add": {"verdict": "failed", "reason": "boom"}}})
    lines = watch.status_lines(tmp_path)
    assert lines[1] == "driver: none, the campaign is done"
    assert lines[2] == "units: 3 done, 0 running, 0 pending, 1 failed (of 4)"
    assert "  add/r1 crashed on -: signal SIGKILL" in lines
    assert "eta: - (ended)" in lines
    at = lines.index("verdicts (final (ab.json)): 1 slower, 1 failed; no paired rows")
    assert lines[at + 1:] == ["  tanh: slower, geomean -7.5%, 2 rows, 2 rounds",
                              "  add: failed, geomean -, 0 rows, 0 rounds (boom)"]


@pytest.mark.parametrize("make", [lambda p: None, lambda p: (p / "campaign.json").write_text("{")])
def test_a_folder_that_is_no_campaign_is_one_line(tmp_path, make):
    make(tmp_path)
    with pytest.raises(UsageError) as info:
        watch.status_lines(tmp_path)
    assert str(info.value).startswith(f"RUN={str(tmp_path)!r}") and "\n" not in str(info.value)


def test_a_batch_folder_counts_its_operators(tmp_path):
    (tmp_path / OPS_STATUS_CSV).write_text(render_csv([
        OpStatus("tanh", "ok", wall_s=5.0, device="0"), OpStatus("add", "failed",
                                                                 reason="boom", device="0"),
        OpStatus("mm"), OpStatus("sum")]))
    assert watch.status_lines(tmp_path) == [
        f"batch {tmp_path}: 4 operators",
        "operators: 1 done, 2 pending or running, 1 failed, 0 interrupted",
        "  add failed: boom", "eta: 10 s"]


@pytest.mark.parametrize(("seconds", "text"), [(None, "?"), (4.4, "4 s"), (184, "3 min 04 s"),
                                               (7500, "2 h 05 min")])
def test_durations_read_at_a_glance(seconds, text):
    assert watch.duration(seconds) == text
