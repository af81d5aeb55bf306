"""The device scheduler and the signal handling that batch and parallel warmup share."""

from __future__ import annotations

import os
import signal
import time
from itertools import pairwise

import pytest

from harness import supervise


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

    def on_finish(self, job: supervise.Running, rc: int | None, interrupted: bool) -> None:
        device, began = self.started[job.op]
        assert device == job.device
        self.intervals.append((device, job.op, began, time.monotonic()))
        self.finished.append((job.op, rc, interrupted))

    def stop(self, children: list) -> None:
        for child in children:
            child.stopped = True
        self.stopped.extend(children)


def _scheduler(rec: Recorder, devices, on_start=lambda job: None) -> supervise.Scheduler:
    return supervise.Scheduler(devices, rec.start, on_start, rec.on_finish, rec.stop, poll_s=0.002)


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
    holder: list[supervise.Scheduler] = []

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
    with supervise.deferred_signals(seen.append):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)  # the handler runs between bytecodes of the main thread
    assert seen == [signal.SIGINT]
    assert signal.getsignal(signal.SIGINT) is before


def test_a_queued_item_that_is_not_ready_waits_while_a_later_ready_one_takes_the_device():
    # mm/r1 may start only after mm/r0 finished; add/r0 is ready and goes in its place
    rec = Recorder({"mm/r0": 0.05, "mm/r1": 0.01, "add/r0": 0.01})
    done: set[str] = set()
    original = rec.on_finish

    def on_finish(job, rc, interrupted):
        done.add(job.op)
        original(job, rc, interrupted)

    scheduler = supervise.Scheduler(["0", "1"], rec.start, lambda job: None, on_finish, rec.stop,
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
