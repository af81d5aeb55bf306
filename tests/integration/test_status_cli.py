"""harness status on a cpu-suite campaign while it runs, after kill -9 of its driver, and done."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from harness.settings.spec import REPO_ROOT
from tests.procs import wait_for

from .test_ab_cli import harness
from .test_ab_kill_resume import descendants, living
from .test_ab_suite_cli import suite_args, the_campaign
from .test_run_cli import make

pytestmark = pytest.mark.integration


def snapshot(directory: Path) -> dict[str, tuple[int, str]]:
    return {str(p.relative_to(directory)): (p.stat().st_mtime_ns,
                                             hashlib.sha256(p.read_bytes()).hexdigest())
            for p in sorted(directory.rglob("*")) if p.is_file()}


def status(directory: Path) -> list[str]:
    proc = harness("status", str(directory))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stderr == ""
    return proc.stdout.splitlines()


def running_after_an_ok(out: Path) -> str | None:
    found = list(out.glob("ab/*/*/campaign.json"))
    if not found:
        return None
    states = {u["id"]: u["status"] for u in json.loads(found[0].read_text())["units"]}
    busy = [uid for uid, s in states.items() if s == "running"]
    log = found[0].parent / "logs" / f"{busy[0].replace('/', '-')}.log" if busy else None
    return busy[0] if "ok" in states.values() and log and log.is_file() \
        and "AB_STEP" in log.read_text() else None


def test_status_while_it_runs_after_kill_9_of_its_driver_and_once_it_is_done(tmp_path):
    args = suite_args(tmp_path, "tanh,add", 2)
    # Units long enough that the one found running still runs when status looks: with warm
    # workers a cpu-suite unit at the tests' 10 ms a measurement ended within that look.
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "CPU_SUITE_ITER_MS": "100"}
    with open(tmp_path / "driver.out", "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "harness.cli", *args], cwd=REPO_ROOT,
                                env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: running_after_an_ok(tmp_path / "runs"), 300,
                 "a unit running after one finished", poll=0.1)
        directory = the_campaign(tmp_path)
        lines = status(directory)  # from another process, as a second terminal would
        orphans = descendants(proc.pid)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert lines[0].startswith(f"campaign {directory}: running; none (A=0, B=1), 2 operator")
    assert lines[1].startswith(f"driver: pid {proc.pid} on {socket.gethostname()}, running")
    done, running, pending = (int(lines[2].split(word, 1)[0].split()[-1])
                              for word in (" done", " running", " pending"))
    assert lines[2].startswith("units: ") and lines[2].endswith(" 0 failed (of 4)"), lines[2]
    assert done >= 1 and running == 1 and done + running + pending == 4, lines[2]
    assert lines[3] == "running:" and lines[4].split(" on ")[0].endswith("running")
    assert any(line.startswith("eta: ") for line in lines)

    wait_for(lambda: not living(orphans), 300, "the killed driver's units to end")
    before = snapshot(directory)
    lines = status(directory)
    assert snapshot(directory) == before  # nothing written, not even a lock file's time
    assert lines[1] == (f"driver: pid {proc.pid} on {socket.gethostname()} is gone; the "
                        f"campaign is running and nothing runs it: harness ab --resume "
                        f"{directory} completes it")
    assert "were running:" in lines and "eta: - (no driver runs the campaign)" in lines

    resumed = harness("ab", "--resume", str(directory))
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-2000:]
    before = snapshot(directory)
    done = make("status", f"RUN={directory}")
    assert done.returncode == 0, done.stdout + done.stderr
    assert snapshot(directory) == before
    lines = done.stdout.splitlines()
    assert f"campaign {directory}: done; none (A=0, B=1), 2 operator(s)" in lines
    assert "driver: none, the campaign is done" in lines
    assert "units: 4 done, 0 running, 0 pending, 0 failed (of 4)" in lines
    verdicts = next(line for line in lines if line.startswith("verdicts (final (ab.json)): "))
    ab = json.loads((directory / "ab.json").read_text())
    assert sum(int(word) for word in verdicts.split(": ", 1)[1].split(";")[0].split()[::2]) == 2
    assert {line.split(":")[0].strip() for line in lines if line.startswith("  ")} >= set(
        ab["operators"])

    # Mid-campaign, as the files would be with add's last round still to run: interim verdicts
    # of tanh alone, judged from its runs.
    copy = shutil.copytree(directory, tmp_path / "copy")
    doc = json.loads((copy / "campaign.json").read_text())
    doc["state"] = "running"
    for unit in doc["units"]:
        if unit["id"] == "add/r1":
            unit["status"] = "not_run"
    (copy / "campaign.json").write_text(json.dumps(doc))
    lines = status(copy)
    at = next(i for i, line in enumerate(lines) if line.startswith(
        "verdicts (interim, operators whose rounds are all in): 1 "))
    # judged over tanh's rows alone; the final verdict's false-discovery control also counts
    # add's rows, so the two may differ on a row near its bound (a CI run read "faster" here
    # and "inconclusive" in ab.json); the rows and rounds, and so the geomean, are the same
    tanh = ab["operators"]["tanh"]
    verdict, rest = lines[at + 1].removeprefix("  tanh: ").split(", ", 1)
    assert verdict in {"faster", "slower", "same", "inconclusive"}
    assert rest.startswith(f"geomean {tanh['geomean_speedup_pct']:+.1f}%, {tanh['rows']} rows")
    assert not any(line.startswith("  add:") for line in lines[at:])
    assert "units: 3 done, 0 running, 1 pending, 0 failed (of 4)" in lines


def test_status_of_a_folder_that_is_no_campaign_is_one_line_and_exit_2(tmp_path):
    proc = harness("status", str(tmp_path))
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith(f"error: RUN={str(tmp_path)!r} is not a campaign directory")
    assert proc.stderr.count("\n") == 1
