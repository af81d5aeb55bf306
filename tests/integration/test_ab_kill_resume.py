"""Acceptance: kill -9 of a campaign's driver, then resume at once.

No unit runs twice at the same time, no finished file changes afterwards, and the report is the
one the final files give, as an uninterrupted campaign's would be.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from harness.campaign import compare, document
from harness.campaign.plan import SIDES, parse_unit_id
from harness.report import abjson
from harness.settings.spec import REPO_ROOT
from tests.procs import alive, children, wait_for

from .test_ab_cli import harness
from .test_ab_suite_cli import suite_args, the_campaign, units

pytestmark = pytest.mark.integration


def run_dirs_of(directory: Path, unit_id: str) -> list[Path]:
    unit = parse_unit_id(unit_id)
    return [directory / unit.op / side / f"r{unit.round}" for side in SIDES]


def file_hashes(dirs: list[Path]) -> dict[str, str]:
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest()
            for d in dirs for p in sorted(d.rglob("*")) if p.is_file()}


def started(pid: int) -> str | None:
    """When `pid` started (its /proc stat field 22), None when gone: a pid and its start name
    one process, where a pid alone may be another's once recycled."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except OSError:
        return None


def descendants(pid: int) -> list[tuple[int, str | None]]:
    found, todo = [], [pid]
    while todo:
        kids = children(todo.pop())
        found += [(kid, started(kid)) for kid in kids]
        todo += kids
    return found


def living(orphans: list[tuple[int, str | None]]) -> list[int]:
    """The orphans still alive: the same processes, not others given their pids since."""
    return [pid for pid, start in orphans if alive(pid) and started(pid) == start]


def kill_driver_while_a_unit_runs(args: list[str], tmp_path: Path
                                  ) -> tuple[Path, str, list[int]]:
    """Start `harness ab`; once a unit is ok and the next one holds its lock and runs, SIGKILL
    the driver alone. (campaign directory, the unit it was running, the orphans it left)."""
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    with open(tmp_path / "driver.out", "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "harness.cli", *args], cwd=REPO_ROOT,
                                env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        def running_after_an_ok() -> str | None:
            found = list((tmp_path / "runs").glob("ab/*/*/campaign.json"))
            if not found:
                return None
            states = {u["id"]: u["status"] for u in json.loads(found[0].read_text())["units"]}
            if "ok" not in states.values():
                return None
            busy = [uid for uid, s in states.items() if s == "running"]
            log = found[0].parent / "logs" / f"{busy[0].replace('/', '-')}.log" if busy else None
            # AB_STEP is printed under the unit's lock, just before its first side starts
            return busy[0] if log and log.is_file() and "AB_STEP" in log.read_text() else None

        wait_for(running_after_an_ok, 120, "a unit running after one finished", poll=0.1)
        running = running_after_an_ok()
        assert running is not None
        orphans = descendants(proc.pid)
        os.kill(proc.pid, signal.SIGKILL)  # the driver only, not its group
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    return the_campaign(tmp_path), running, orphans


def command_of(pid: int) -> str:
    try:
        text = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return "(gone)"
    return text if len(text) <= 400 else f"{text[:200]} ... {text[-200:]}"


def watch_overlap(directory: Path, unit_id: str, orphans: list[tuple[int, str | None]],
                  stop: threading.Event,
                  seen: list[str]) -> None:
    """Record any moment the resumed attempt had set aside the killed one's run directory (it
    does so under the unit's lock, before it runs a side) while an orphan of the killed driver
    still lived."""
    while not stop.is_set():
        aside = [p for d in run_dirs_of(directory, unit_id)
                 for p in d.parent.glob(f"{d.name}.attempt*")]
        alive_now = living(orphans)
        if aside and alive_now:
            seen.append(f"{[str(p) for p in aside]} set aside while {alive_now} lived: "
                        f"{[command_of(pid) for pid in alive_now]}")
        time.sleep(0.02)


def test_kill_9_of_the_driver_then_resume_runs_no_unit_twice_at_once(tmp_path):
    args = suite_args(tmp_path, "tanh,add", 2)
    directory, running, orphans = kill_driver_while_a_unit_runs(args, tmp_path)
    assert orphans, "the killed driver left no unit process: nothing was running"
    before = units(directory)
    finished = sorted(uid for uid, u in before.items() if u["status"] == "ok")
    assert finished and running not in finished
    kept = file_hashes([d for uid in finished for d in run_dirs_of(directory, uid)])
    assert kept

    stop, overlaps = threading.Event(), []
    watcher = threading.Thread(target=watch_overlap,
                               args=(directory, running, orphans, stop, overlaps))
    watcher.start()
    try:
        resumed = harness("ab", "--resume", str(directory))
    finally:
        stop.set()
        watcher.join()
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-2000:]
    if overlaps:
        pytest.fail("\n".join(overlaps[:3]))  # in full: which process outlived the lock
    assert not living(orphans)

    after = units(directory)
    assert set(after) == {"tanh/r0", "tanh/r1", "add/r0", "add/r1"}
    assert all(u["status"] == "ok" for u in after.values()), after
    assert {uid: after[uid]["attempts"] for uid in finished} == {
        uid: before[uid]["attempts"] for uid in finished}
    assert after[running]["attempts"] == before[running]["attempts"] + 1
    assert file_hashes([d for uid in finished for d in run_dirs_of(directory, uid)]) == kept

    # The report is the one the final files give: recomputed from them, it is ab.json's, and
    # it rests on the four units' run directories, never on the killed attempt's.
    doc = json.loads((directory / "ab.json").read_text())
    campaign = document.load(directory)
    result, _, failures = compare.compare_ops(directory, campaign, campaign.noise_floor_pct)
    assert not failures and doc["rows"] == [abjson.row_json(r) for r in result.rows]
    assert doc["status"] == "complete" and {r["rounds"] for r in doc["rows"]} == {2}
    assert {(u["id"], u["status"]) for u in doc["units"]} == {(uid, "ok") for uid in after}
    assert sorted(doc["sides"]["A"] + doc["sides"]["B"]) == sorted(
        str(d) for uid in after for d in run_dirs_of(directory, uid))
    assert {op: o["rounds"] for op, o in doc["operators"].items()} == {"tanh": 2, "add": 2}
    assert harness("receipt", "verify", str(directory)).returncode == 0

    # A late write of an orphan would show here: nothing changes once the resume is done.
    every = [d for uid in after for d in run_dirs_of(directory, uid)]
    final = file_hashes([*every, directory / "logs"])
    time.sleep(2)
    assert file_hashes([*every, directory / "logs"]) == final
    assert b"\0" not in (directory / "logs" / f"{running.replace('/', '-')}.log").read_bytes()
