"""Child processes over devices: started, one at a time per device, stopped and reaped on a signal.

The local executor runs its tasks through this, and `harness run` its pytest (GroupStopper):
each child leads its own session (its process group is the child and what it started), a
device never holds two measurements at once, and SIGINT, SIGTERM or SIGHUP stop every child's
group, SIGTERM first and SIGKILL after GRACE_S, before the interrupt goes on.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from harness.errors import EXIT_SIGNAL_BASE
from harness.settings import variables
from harness.settings.spec import REPO_ROOT, VARS_BY_MAKE

GRACE_S = 5.0  # SIGTERM, then this long for a child's process group to exit, then SIGKILL
# A `harness run` child runs exactly the node its flags name: these must not reach it from the
# caller's environment, where they would redirect it (or make it print instead of run).
RUN_CHILD_ENV_DROP = tuple(VARS_BY_MAKE[name].env_name
                           for name in ("OP", "OP_FILE", "TEST_NODE", "DRY_RUN"))
# A run's own pytest gets less: a batch or warmup stopping that run (GRACE_S) then sees it reap
# its pytest and exit before the batch's SIGKILL, which would leave pytest's group running.
CHILD_GRACE_S = 2.0


def say(line: str) -> None:
    """Print a progress line at once (a child's parent is often read through a pipe)."""
    print(line, flush=True)


def child_env(environ: Mapping[str, str] | None = None, drop: Sequence[str] = ()
              ) -> dict[str, str]:
    """The environment of a harness child: the caller's (default: this process's) less `drop`,
    this checkout first on PYTHONPATH, output unbuffered so its log shows progress."""
    environ = variables.environ() if environ is None else environ
    env = {k: v for k, v in environ.items() if k not in drop}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def bytecode_env(out: Path, in_image: bool = False) -> dict[str, str]:
    """Where a harness child's (a unit's) or a run's bytecode goes, written whatever the
    caller's PYTHONDONTWRITEBYTECODE (empty is unset): a caller's PYTHONPYCACHEPREFIX, shared
    by every run on the host (a fresh prefix cost a cpu run 4.5 s of its 7 s start), else
    OUT/.pycache, as always in an image. With a prefix set Python reads no bytecode beside the
    sources, so a process without one compiled all it imported (a unit's own imports: 0.18 s
    and 0.52 s on two H100 hosts, 0.11 s with bytecode, each of a suite's thousands of units)."""
    given = variables.environ().get("PYTHONPYCACHEPREFIX", "")
    prefix = Path(given if given and not in_image else out / ".pycache").resolve()
    return {"PYTHONPYCACHEPREFIX": str(prefix), "PYTHONDONTWRITEBYTECODE": ""}


PR_SET_PDEATHSIG = 1  # prctl(2): the signal a process gets when its parent dies


def die_with_parent() -> Callable[[], None] | None:
    """What a child runs before exec so that it gets SIGTERM when the process that started it
    dies, even by SIGKILL: no unit or pytest outlives a killed driver (Linux's parent-death
    signal; None elsewhere, where children are stopped only by a living parent).

    The C function is looked up here, in the parent: between fork and exec the child only
    calls it. A parent that died before the call is seen as a new parent id: exit at once.
    """
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def before_exec() -> None:
        prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
        if os.getppid() != parent:
            os._exit(128 + int(signal.SIGTERM))

    return before_exec


def start_child(argv: Sequence[str], env: Mapping[str, str], log: Path, *,
                append: bool = False) -> subprocess.Popen:
    """Start `argv` in its own session (so stop_children reaches its whole group), stdin
    closed, stdout and stderr into `log` (created or truncated; `append`: added to); it gets
    SIGTERM if this process dies (die_with_parent)."""
    with open(log, "ab" if append else "wb") as fh:  # the child holds its own descriptor
        return subprocess.Popen(list(argv), stdout=fh, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=dict(env), start_new_session=True,
                                preexec_fn=die_with_parent())


class Child(Protocol):
    """What the scheduler and stop_children use of a child: subprocess.Popen, or a fake."""

    pid: int

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...


@dataclass
class Running:
    op: str
    device: str | None
    child: Child
    started: float
    deadline: float | None = None  # time.monotonic() past which it is stopped
    timed_out: bool = False  # stopped at its deadline


# How often a scheduler looks at its children: the next unit starts at the first look after
# one ended, and a suite's campaign runs thousands of units (at 0.1 s, a suite's units waited
# about 2 minutes in all).
POLL_S = 0.02


class Scheduler:
    """One slot per device; a free slot takes the next queued operator.

    One thread polls every child, and a slot starts its next operator only after its child
    has exited, so two measurements never share a device. SIGINT and SIGTERM only set a flag
    that the loop reads: no exception can land between starting a child and recording it.
    An operator still running `limit(op)` seconds after it started is stopped (`stop`) and
    finishes with `timed_out` set; the slot then takes the next one.
    """

    def __init__(self, devices: Sequence[str | None], start: Callable[[str, str | None], Child],
                 on_start: Callable[[Running], None],
                 on_finish: Callable[[Running, int | None, bool], None],
                 stop: Callable[[list[Child]], None], poll_s: float = POLL_S,
                 limit: Callable[[str], float | None] = lambda op: None) -> None:
        self.devices = list(devices)
        self.start, self.on_start, self.on_finish, self.stop = start, on_start, on_finish, stop
        self.poll_s, self.limit = poll_s, limit
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
                        started, seconds = time.monotonic(), self.limit(op)
                        job = Running(op, device, self.start(op, device), started,
                                      None if seconds is None else started + seconds)
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
            if rc is None and job.deadline is not None and time.monotonic() >= job.deadline:
                job.timed_out = True
                self.stop([job.child])  # its group, as a signal would; the others run on
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


def stop_children(children: Sequence[Child], grace_s: float = GRACE_S,
                  signum: int = signal.SIGTERM) -> None:
    """SIGTERM (or `signum`, the signal the caller got) each child's process group (each child
    leads its own session, so the group is the child and its pytest), wait up to `grace_s` for
    the groups to empty, SIGKILL the rest."""
    for child in children:
        _signal_group(child.pid, signum)
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


class GroupStopper:
    """Stop the watched child's process group on the first signal, while the caller reads its
    output.

    `request_stop` (a `deferred_signals` handler) records the signal and stops the group from a
    thread, so the caller's read ends at end of file with everything the child wrote kept. A
    signal that lands before the child is watched stops it as soon as it is, and so is every
    child watched after the signal (a second attempt started before the caller saw it); with
    no child at all, the stopper is a flag the caller reads between steps.
    """

    def __init__(self, grace_s: float = GRACE_S) -> None:
        self.grace_s = grace_s
        self.signal: int | None = None
        self._child: Child | None = None
        self._stopped: list[Child] = []  # the children a thread is stopping
        self._threads: list[threading.Thread] = []

    def request_stop(self, signum: int) -> None:
        if self.signal is None:
            self.signal = signum
        self._stop()

    def watch(self, child: Child) -> None:
        self._child = child
        if self.signal is not None:
            self._stop()

    def join(self) -> None:
        """Wait until every stopped group is gone (no-op when nothing was stopped)."""
        for thread in self._threads:
            thread.join()

    def _stop(self) -> None:
        # A second signal landing between the check and the append stops a child twice,
        # which is harmless: its group is gone or going, and Popen.wait is thread-safe.
        child = self._child
        if child is None or any(c is child for c in self._stopped):
            return
        self._stopped.append(child)
        thread = threading.Thread(target=stop_children, args=([child], self.grace_s),
                                  daemon=True)
        self._threads.append(thread)
        thread.start()


def _route(handler: Callable[[int], None]) -> dict[int, Any]:
    """Route SIGINT, SIGTERM and SIGHUP (a closed terminal) to `handler`; the handlers they
    had, to put back. Main thread only (elsewhere: nothing routed); a signal the caller ignores
    stays ignored, as a background job's SIGINT does."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    return {signum: signal.signal(signum, lambda s, _frame: handler(s))
            for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
            if signal.getsignal(signum) is not signal.SIG_IGN}


def _put_back(previous: Mapping[int, Any]) -> None:
    for signum, old in previous.items():
        signal.signal(signum, old)


@contextmanager
def deferred_signals(handler: Callable[[int], None]) -> Iterator[None]:
    """Route SIGINT, SIGTERM and SIGHUP to `handler` for the block (`_route`)."""
    previous = _route(handler)
    try:
        yield
    finally:
        _put_back(previous)


class HeldSignal:
    """Between `hold` and `release`, the first SIGINT, SIGTERM or SIGHUP is held (`_route`):
    work that writes what is already measured ends before the signal is acted on. A second one
    restores the previous handlers and raises KeyboardInterrupt at once (its `exit_code`
    128 + N), for a user who will not wait."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self._previous: dict[int, Any] = {}

    def hold(self) -> None:
        if not self._previous:
            self._previous = _route(self._held)

    def _held(self, signum: int) -> None:
        if self.signum is None:
            self.signum = signum
            return
        self.release()
        stop = KeyboardInterrupt(f"interrupted by a second {signal.Signals(signum).name}")
        stop.exit_code = EXIT_SIGNAL_BASE + signum  # type: ignore[attr-defined]  # the CLI's
        raise stop

    def take(self) -> int | None:
        """The signal held, no longer held (its caller acts on it)."""
        signum, self.signum = self.signum, None
        return signum

    def release(self) -> None:
        _put_back(self._previous)
        self._previous = {}


OWNER_FILE = "owner.pid"


def owned_tempdir(prefix: str) -> str:
    """A new folder under the temporary directory holding this process's pid, after removing
    the folders of `prefix` whose owner is gone (a process killed by SIGKILL cannot remove its
    own); a folder whose owner is alive, or unknown, is left."""
    for folder in Path(tempfile.gettempdir()).glob(f"{prefix}*"):
        try:
            os.kill(int((folder / OWNER_FILE).read_text()), 0)
        except ProcessLookupError:
            shutil.rmtree(folder, ignore_errors=True)
        except (OSError, ValueError):  # another user's, or its owner is writing it now
            continue
    made = tempfile.mkdtemp(prefix=prefix)
    Path(made, OWNER_FILE).write_text(str(os.getpid()))
    return made
