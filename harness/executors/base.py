"""The executor seam: tasks, the states a task ends in, the events an executor reports."""

from __future__ import annotations

import os
import signal
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from harness.contract.states import CRASHED, ERROR, FAILED, INTERRUPTED, NOT_RUN, OK, TIMEOUT
from harness.errors import UsageError

# A harness child exits with its own child's code, and Python's sys.exit(-N) reads 256 - N
# to its parent: 193..255 are no code of the harness's (0-6, 128 + N for its own signal).
_PASSED_ON = range(256 - 63, 256)


def signal_of(rc: int | None) -> signal.Signals | None:
    """The signal that killed the child (a negative code) or the child's own child (256 - N,
    passed on by a harness child); None for any other code."""
    if rc is None:
        return None
    number = -rc if rc < 0 else 256 - rc if rc in _PASSED_ON else 0
    try:
        return signal.Signals(number) if number else None
    except ValueError:
        return None


def state_for(rc: int | None, *, interrupted: bool = False, timed_out: bool = False) -> str:
    """ok (0), failed (1: a benchmark failed), error (2-5: usage, preflight, pytest's own; any
    other code), crashed (killed by a signal, see signal_of), not_run (never started),
    interrupted (stopped by the caller's signal), timeout (stopped at its limit)."""
    if interrupted:
        return INTERRUPTED
    if timed_out:
        return TIMEOUT
    if rc is None:
        return NOT_RUN
    if rc in (0, 1):
        return OK if rc == 0 else FAILED
    return CRASHED if signal_of(rc) is not None else ERROR


@dataclass(frozen=True)
class Task:
    """One child run: its id, the command it runs, the log it appends to.

    `argv` names no device: the executor adds DEVICES for the device it places the task on
    (unless told the argv names its own). `env` holds variables of this task alone, set over
    the executor's environment.
    `after` is the id of a task of the same plan that must end in RAN_TO_END first; `stage`
    groups tasks that start only after the previous group ended (a cluster submits one array
    per stage, in order; a local executor runs the tasks in the order given). `timeout_s`: the
    executor stops a task still running after that many seconds (None: no limit).
    """

    id: str
    argv: tuple[str, ...]
    log: Path
    after: str | None = None
    stage: str = ""
    note: str = ""  # what a printed plan shows after the id, e.g. a unit's side order
    env: Mapping[str, str] = field(default_factory=dict)
    timeout_s: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "argv": list(self.argv), "log": str(self.log),
                "after": self.after, "stage": self.stage, "env": dict(self.env),
                "timeout_s": self.timeout_s}

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> Task:
        """A task of a plan file; UsageError naming the field that is missing or wrong."""
        try:
            argv = doc["argv"]
            if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
                raise TypeError("argv")
            env = doc.get("env") or {}
            if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
                raise TypeError("env")
            limit = doc.get("timeout_s")
            if limit is not None and (isinstance(limit, bool)
                                      or not isinstance(limit, (int, float)) or limit <= 0):
                raise TypeError("timeout_s")
            return cls(str(doc["id"]), tuple(argv), Path(doc["log"]), doc.get("after"),
                       str(doc.get("stage") or ""), env=dict(env), timeout_s=limit)
        except (KeyError, TypeError) as exc:
            raise UsageError(f"a task of the plan has no valid {exc.args[0]!s}; expected "
                             "id, argv (a list of strings), log, env (strings) and timeout_s "
                             "(seconds, or null)") from None


@dataclass(frozen=True)
class Ended:
    """How a task ended: its state, exit code, wall, where it ran and, when it did not end
    ok, why (its log's last line, or the executor's account). `facts` are the executor's own
    (a cluster's task and state), kept with the task's record."""

    task: str
    state: str
    rc: int | None = None
    wall_s: float | None = None
    where: str = "-"
    reason: str | None = None
    facts: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Outcome:
    """How a run of a plan ended: the signal that stopped it (None: every task that could
    run ran), whether its tasks go on elsewhere (a detached cluster array), and what the
    executor learned of each task after it ended (a cluster's final task state), by task."""

    signal: int | None = None
    detached: bool = False
    facts: Mapping[str, Mapping[str, str]] = field(default_factory=dict)


class Events(Protocol):
    """What an executor tells its caller, in the caller's thread."""

    def queued(self, task: Task, where: str) -> None:
        """The task was handed to a queue that starts it later (a cluster array)."""

    def started(self, task: Task, where: str, pid: int | None = None) -> None:
        """The task started on `where` (a device, or - for an unpinned worker), as process
        `pid` where it runs on this host."""

    def ended(self, task: Task, end: Ended) -> None: ...


class Executor(Protocol):
    """Runs a plan of tasks and reports each one's start and end.

    `run` returns when every task that could run has ended, or when a signal stopped it (it
    stops what it started, or leaves a detached cluster array running). A task whose `after`
    did not end in RAN_TO_END is never started and gets no event.
    """

    name: str
    slots: int  # tasks at once, for an estimate; 0 where a cluster's queue decides

    def describe(self, tasks: Sequence[Task], walls: Mapping[str, float]) -> list[str]:
        """Where the tasks would run, with `walls` (seconds by task id) where known."""
        ...

    def place(self, task: Task) -> str | None:
        """The device a task would start on first (None: unpinned, or the cluster's choice)."""
        ...

    def run(self, tasks: Sequence[Task], events: Events) -> Outcome: ...

    def session(self) -> AbstractContextManager[object]:
        """Keep what several `run` calls share until it exits (this host's workers): a
        ROUNDS=auto campaign runs each round its looks add in the session of the first."""
        ...


def last_line(log: Path, tail: int = 4096) -> str:
    """The last non-blank line of a task's log: why it failed, most of the time."""
    try:
        with open(log, "rb") as fh:
            fh.seek(max(0, fh.seek(0, os.SEEK_END) - tail))
            lines = fh.read().decode("utf-8", errors="replace").splitlines()
    except FileNotFoundError:
        return "(no log)"
    return next((line.strip() for line in reversed(lines) if line.strip()), "(empty log)")


def reason_for(state: str, log: Path, *, rc: int | None = None,
               timeout_s: float | None = None) -> str | None:
    """Why a task did not end ok: its limit (timeout), the signal that killed it (crashed,
    from `rc`), its log's last line (failed, error); None otherwise."""
    if state == TIMEOUT:
        return f"timeout after {timeout_s:g} s" if timeout_s is not None else "timeout"
    if state == CRASHED:
        sig = signal_of(rc)
        name = sig.name if sig is not None else "a signal"
        return f"killed by {name}" if rc is None or rc < 0 else f"killed by {name} (rc {rc})"
    return last_line(log) if state in (FAILED, ERROR) else None
