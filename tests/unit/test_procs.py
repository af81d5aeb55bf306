"""The device scheduler and the signal handling that batch and parallel warmup share."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from itertools import pairwise
from pathlib import Path

import pytest

from harness.executors import procs
from harness.run import rundir
from harness.settings.spec import REPO_ROOT
from tests.procs import alive, wait_for


class FakeChild:
    """A child that exits with `rc` after `duration` seconds of wall time."""

    pids = iter(range(10_000, 20_000))

    def __init__(self, duration: float, rc: int = 0) -> None:
        self.pid = next(self.pids)
        self.done_at = time.monotonic() + duration
        self.rc = rc
        self.stopped = False

    def poll(self) -> int | None:
        if self.stopped:
            return -15
        return self.rc if time.monotonic() >= self.done_at else None


class Recorder:
    """Start and finish callbacks that record (device, op, start, end) intervals."""

    def __init__(self, durations: dict[str, float], rcs: dict[str, int] | None = None) -> None:
        self.durations, self.rcs = durations, rcs or {}
        self.started: dict[str, tuple[str | None, float]] = {}
        self.intervals: list[tuple[str | None, str, float, float]] = []
        self.finished: list[tuple[str, int | None, bool]] = []
        self.stopped: list[FakeChild] = []

    def start(self, op: str, device: str | None) -> FakeChild:
        self.started[op] = (device, time.monotonic())
        return FakeChild(self.durations[op], self.rcs.get(op, 0))

    def on_finish(self, job: procs.Running, rc: int | None, interrupted: bool) -> None:
        device, began = self.started[job.op]
        assert device == job.device
        self.intervals.append((device, job.op, began, time.monotonic()))
        self.finished.append((job.op, rc, interrupted))

    def stop(self, children: list) -> None:
        for child in children:
            child.stopped = True
        self.stopped.extend(children)


def _scheduler(rec: Recorder, devices, on_start=lambda job: None) -> procs.Scheduler:
    return procs.Scheduler(devices, rec.start, on_start, rec.on_finish, rec.stop, poll_s=0.002)


def test_scheduler_never_runs_two_ops_on_one_device_at_once():
    durations = {f"op{i}": 0.01 + 0.015 * (i % 4) for i in range(14)}
    rec = Recorder(durations)
    assert _scheduler(rec, ["0", "1", "2"]).run(list(durations)) is None
    assert sorted(op for _, op, _, _ in rec.intervals) == sorted(durations)
    for device in ("0", "1", "2"):
        spans = sorted((s, e) for d, _, s, e in rec.intervals if d == device)
        assert spans, device  # every device took work
        assert all(prev_end <= start for (_, prev_end), (start, _) in pairwise(spans))
    # and the devices did work side by side: the batch took well under the serial time
    total = max(e for *_, e in rec.intervals) - min(s for _, _, s, _ in rec.intervals)
    assert total < 0.7 * sum(durations.values())


def test_scheduler_takes_ops_in_queue_order_and_a_failure_does_not_stop_it():
    rec = Recorder({"a": 0.01, "b": 0.01, "c": 0.01}, rcs={"a": 1, "b": -11})
    _scheduler(rec, [None]).run(["a", "b", "c"])
    assert rec.finished == [("a", 1, False), ("b", -11, False), ("c", 0, False)]


def test_scheduler_stop_marks_running_interrupted_and_starts_nothing_more():
    rec = Recorder({"a": 0.01, "b": 30, "c": 30, "d": 0.01})
    holder: list[procs.Scheduler] = []

    def on_start(job):
        if job.op == "c":  # both devices are busy with long ops now
            holder[0].request_stop(signal.SIGINT)

    holder.append(_scheduler(rec, ["0", "1"], on_start))
    assert holder[0].run(["a", "b", "c", "d"]) == signal.SIGINT
    assert ("a", 0, False) in rec.finished
    assert sorted(f for f in rec.finished if f[2]) == [("b", -15, True), ("c", -15, True)]
    assert "d" not in rec.started and len(rec.stopped) == 2


def test_scheduler_stops_its_children_when_a_callback_raises():
    rec = Recorder({"a": 30, "b": 30})

    def on_start(job):
        if job.op == "b":
            raise RuntimeError("a bug")

    with pytest.raises(RuntimeError, match="a bug"):
        _scheduler(rec, ["0", "1"], on_start).run(["a", "b"])
    assert {op for op, _, interrupted in rec.finished if interrupted} == {"a", "b"}


def test_deferred_signals_turn_sigint_into_a_flag_and_restore_the_handler():
    seen: list[int] = []
    before = signal.getsignal(signal.SIGINT)
    with procs.deferred_signals(seen.append):
        os.kill(os.getpid(), signal.SIGINT)
        # the handler runs between bytecodes of the main thread once the signal is taken,
        # which a loaded machine may delay past any fixed sleep: wait for it
        wait_for(lambda: seen, 60, "the handler to see SIGINT", poll=0.01)
    assert seen == [signal.SIGINT]
    assert signal.getsignal(signal.SIGINT) is before


# --------------------------------------------------------------------------- starting a child

_TALKER = r"""
import os, sys
print("out", flush=True)
print("err", file=sys.stderr, flush=True)
print("stdin=" + repr(sys.stdin.read()), "session=" + str(os.getsid(0) == os.getpid()))
print("ZL_KEEP=" + os.environ.get("ZL_KEEP", "-"), "OP=" + os.environ.get("OP", "-"))
"""


def test_start_child_leads_its_own_session_logs_both_streams_and_closes_stdin(tmp_path):
    log = tmp_path / "a child's log; 1.log"
    env = procs.child_env({"ZL_KEEP": "1", "OP": "mm", "PATH": os.environ["PATH"]},
                              procs.RUN_CHILD_ENV_DROP)
    child = procs.start_child([sys.executable, "-c", _TALKER], env, log)
    assert child.wait(timeout=30) == 0
    lines = log.read_text().splitlines()
    assert {"out", "err", "stdin='' session=True", "ZL_KEEP=1 OP=-"} <= set(lines)


def test_child_env_puts_this_checkout_first_and_unbuffers_output():
    env = procs.child_env({"PYTHONPATH": "/elsewhere", "ZL_DRY_RUN": "1"}, ("ZL_DRY_RUN",))
    assert env["PYTHONPATH"].split(os.pathsep) == [str(REPO_ROOT), "/elsewhere"]
    assert env["PYTHONUNBUFFERED"] == "1" and "ZL_DRY_RUN" not in env
    assert procs.child_env({})["PYTHONPATH"] == str(REPO_ROOT)


def test_run_dir_from_log_reads_the_header_and_keeps_spaces(tmp_path):
    log = tmp_path / "x.log"
    assert rundir.run_dir_from_log(log) is None  # never started
    log.write_text("preflight ok\n# harness run header\n# run_dir: /r/a b; c/20260101\n# op: x\n")
    assert rundir.run_dir_from_log(log) == Path("/r/a b; c/20260101")
    log.write_text("PREFLIGHT_FAILED check=test_node detail=none\n")
    assert rundir.run_dir_from_log(log) is None


def _sleeper() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                            start_new_session=True)


def test_group_stopper_stops_a_child_the_signal_arrived_before():
    # A signal between starting pytest and watching it must still stop pytest.
    stopper = procs.GroupStopper(grace_s=1.0)
    stopper.request_stop(signal.SIGTERM)
    stopper.request_stop(signal.SIGINT)
    child = _sleeper()
    stopper.watch(child)
    stopper.join()
    assert child.wait(timeout=50) == -signal.SIGTERM
    assert stopper.signal == signal.SIGTERM  # the first signal names the interrupt


def test_group_stopper_kills_a_group_that_ignores_sigterm():
    child = subprocess.Popen(
        [sys.executable, "-c", "import signal, sys, time; "
         "signal.signal(signal.SIGTERM, signal.SIG_IGN); print(flush=True); time.sleep(60)"],
        start_new_session=True, stdout=subprocess.PIPE)
    child.stdout.readline()  # SIGTERM is ignored from here on
    stopper = procs.GroupStopper(grace_s=0.5)
    stopper.watch(child)
    stopper.request_stop(signal.SIGHUP)
    stopper.join()
    # SIGKILL, not the child's own end after its 60 s sleep: any wait below it shows the kill
    assert child.wait(timeout=50) == -signal.SIGKILL
    child.stdout.close()


def test_group_stopper_stops_a_child_watched_after_it_stopped_another():
    # the signal stopped the first attempt; a second one the caller started before it read
    # the flag is stopped too, not left running beside the stopped one's successor
    stopper = procs.GroupStopper(grace_s=1.0)
    first, second = _sleeper(), _sleeper()
    stopper.watch(first)
    stopper.request_stop(signal.SIGTERM)
    stopper.watch(second)
    stopper.request_stop(signal.SIGINT)  # a second signal starts nothing more
    stopper.join()
    assert first.wait(timeout=50) == -signal.SIGTERM
    assert second.wait(timeout=50) == -signal.SIGTERM


def test_group_stopper_without_a_child_is_only_a_flag():
    stopper = procs.GroupStopper()
    stopper.request_stop(signal.SIGHUP)
    stopper.join()
    assert stopper.signal == signal.SIGHUP


def test_a_queued_item_that_is_not_ready_waits_while_a_later_ready_one_takes_the_device():
    # mm/r1 may start only after mm/r0 finished; add/r0 is ready and goes in its place
    rec = Recorder({"mm/r0": 0.05, "mm/r1": 0.01, "add/r0": 0.01})
    done: set[str] = set()
    original = rec.on_finish

    def on_finish(job, rc, interrupted):
        done.add(job.op)
        original(job, rc, interrupted)

    scheduler = procs.Scheduler(["0", "1"], rec.start, lambda job: None, on_finish, rec.stop,
                                    poll_s=0.002)
    scheduler.run(["mm/r0", "mm/r1", "add/r0"],
                  ready=lambda op: not op.endswith("/r1") or "mm/r0" in done)
    times = {op: (began, end) for _, op, began, end in rec.intervals}
    assert times["mm/r1"][0] >= times["mm/r0"][1]
    assert times["add/r0"][0] < times["mm/r0"][1]


def test_items_that_can_never_become_ready_are_left_unrun_instead_of_hanging():
    rec = Recorder({"x": 0.0, "y": 0.01})
    assert _scheduler(rec, [None]).run(["x", "y"], ready=lambda op: op == "y") is None
    assert [op for op, _, _ in rec.finished] == ["y"]


_DRIVER = """
import sys, time
from pathlib import Path
from harness.executors import procs
sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]
child = procs.start_child(sleeper, {}, Path(sys.argv[1]))
print(child.pid, flush=True)
time.sleep(60)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux's parent-death signal")
def test_a_child_does_not_outlive_a_parent_killed_by_sigkill(tmp_path):
    # Regression: kill -9 of `harness ab` left its units (own sessions) running; a resume then
    # ran the same unit beside them.
    driver = subprocess.Popen([sys.executable, "-c", _DRIVER, str(tmp_path / "log")],
                              stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    try:
        child = int(driver.stdout.readline())
        assert alive(child)
        driver.kill()
        driver.wait()
        wait_for(lambda: not alive(child), 50, "the orphaned child gone")
    finally:
        if driver.poll() is None:
            driver.kill()


def test_die_with_parent_is_a_function_the_child_runs_before_exec():
    hook = procs.die_with_parent()
    if sys.platform.startswith("linux"):
        assert callable(hook)
    else:
        assert hook is None
