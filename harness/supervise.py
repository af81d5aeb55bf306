"""Child processes over devices: one at a time per device, stopped and reaped on a signal.

`harness batch` runs its operators and the parallel warmup its shards through this: each child
leads its own session (its process group is the child and its pytest), a device never holds two
measurements at once, and SIGINT, SIGTERM or SIGHUP stop every child's group, SIGTERM first and
SIGKILL after GRACE_S, before the interrupt goes on.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Protocol

GRACE_S = 5.0  # SIGTERM, then this long for a child's process group to exit, then SIGKILL


class Child(Protocol):
    pid: int

    def poll(self) -> int | None: ...


@dataclass
class Running:
    op: str
    device: str | None
    child: Child
    started: float


class Scheduler:
    """One slot per device; a free slot takes the next queued operator.

    One thread polls every child, and a slot starts its next operator only after its child
    has exited, so two measurements never share a device. SIGINT and SIGTERM only set a flag
    that the loop reads: no exception can land between starting a child and recording it.
    """

    def __init__(self, devices: Sequence[str | None], start: Callable[[str, str | None], Child],
                 on_start: Callable[[Running], None],
                 on_finish: Callable[[Running, int | None, bool], None],
                 stop: Callable[[list[Child]], None], poll_s: float = 0.1) -> None:
        self.devices = list(devices)
        self.start, self.on_start, self.on_finish, self.stop = start, on_start, on_finish, stop
        self.poll_s = poll_s
        self.running: dict[int, Running] = {}  # slot -> its operator
        self.signal: int | None = None

    def request_stop(self, signum: int) -> None:
        self.signal = signum

    def run(self, ops: Sequence[str], ready: Callable[[str], bool] | None = None
            ) -> int | None:
        """Run every operator, the first queued one that `ready` accepts first; return the
        signal that stopped the batch, or None. Operators that are still not ready when
        nothing runs (nothing could make them ready) are left unrun."""
        queue = deque(ops)
        try:
            while (queue or self.running) and self.signal is None:
                for slot, device in enumerate(self.devices):
                    if slot not in self.running and (op := self._next(queue, ready)) is not None:
                        started = time.monotonic()
                        job = Running(op, device, self.start(op, device), started)
                        self.running[slot] = job
                        self.on_start(job)
                if not self.running:
                    break  # the queue holds only operators that can never become ready
                self._reap()
                if self.running:
                    time.sleep(self.poll_s)
        finally:
            self._stop_running()
        return self.signal

    def _next(self, queue: deque[str], ready: Callable[[str], bool] | None) -> str | None:
        for op in queue:
            if ready is None or ready(op):
                queue.remove(op)
                return op
        return None

    def _reap(self) -> None:
        for slot, job in list(self.running.items()):
            rc = job.child.poll()
            if rc is not None:
                del self.running[slot]
                self.on_finish(job, rc, False)

    def _stop_running(self) -> None:
        """Stop the children still running (those that already exited keep their status)."""
        self._reap()
        jobs = list(self.running.values())
        if jobs:
            self.stop([job.child for job in jobs])
        for job in jobs:
            self.on_finish(job, job.child.poll(), True)
        self.running.clear()


def _signal_group(pgid: int, signum: int) -> bool:
    """Signal a process group; False when it has no process left."""
    try:
        os.killpg(pgid, signum)
    except (ProcessLookupError, PermissionError):  # EPERM: a recycled id, not ours: gone too
        return False
    return True


def stop_children(children: Sequence[subprocess.Popen], grace_s: float = GRACE_S) -> None:
    """SIGTERM each child's process group (each child leads its own session, so the group is
    the child and its pytest), wait up to `grace_s` for the groups to empty, SIGKILL the rest."""
    for child in children:
        _signal_group(child.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        for child in children:
            child.poll()  # reap the leader: a zombie still counts as a member of its group
        if not any(_signal_group(c.pid, 0) for c in children):
            break
        time.sleep(0.05)
    for child in children:
        _signal_group(child.pid, signal.SIGKILL)
        child.wait()


@contextmanager
def deferred_signals(handler: Callable[[int], None]) -> Iterator[None]:
    """Route SIGINT, SIGTERM and SIGHUP (a closed terminal) to `handler` for the block (main
    thread only; a signal the caller ignores stays ignored, as a background job's SIGINT does)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {}
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(signum) is not signal.SIG_IGN:
            previous[signum] = signal.signal(signum, lambda s, _frame: handler(s))
    try:
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)
