"""EXECUTOR=local: each task a child process on this host, one at a time per device."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path

from harness.backends import Backend
from harness.contract.states import RAN_TO_END
from harness.executors import (
    Build,
    Env,
    ExecutorKind,
    Flags,
    device_lock,
    procs,
    refuse_owned_runner,
)
from harness.executors.base import Ended, Events, Outcome, Task, reason_for, state_for
from harness.executors.devices import select_devices
from harness.executors.procs import (
    GRACE_S,
    POLL_S,
    Running,
    Scheduler,
    deferred_signals,
    stop_children,
)
from harness.executors.workers import WorkerHost
from harness.settings import cmdline
from harness.settings.spec import Settings


def deal(tasks: Sequence[Task], devices: Sequence[str | None],
         walls: Mapping[str, float] | None = None) -> list[tuple[str | None, Task]]:
    """The device each task would run on when every task takes its wall (1 s when unknown):
    the next task goes to the device that frees first, as the scheduler does."""
    walls = walls or {}
    free = [(0.0, slot) for slot in range(len(devices))]
    placed = []
    for task in tasks:
        at, slot = min(free)
        free[slot] = (at + walls.get(task.id, 1.0), slot)
        placed.append((devices[slot], task))
    return placed


SHOWN_TASKS = 24  # a device's tasks a plan lists before it counts the rest


class LocalExecutor:
    """Run tasks as children of this process over `devices` (None: one unpinned worker).

    Each child leads its own session, gets `env` (default: procs.child_env of this process,
    less the variables that would redirect a run) with the task's own variables over it, and
    DEVICES for its device (`pin`; False where each task's argv names its device), and appends
    its output to the task's log. SIGINT, SIGTERM and SIGHUP stop every running child's group;
    a task still running after its `timeout_s` has its group stopped alone, and ends timeout.
    `resident`: the tasks' runs get their pytest from workers that stay up for the plan
    (executors.workers; one per environment and device); otherwise each pytest is a process
    of its own. `note`: how a plan says so, where the caller knows better. `backend`: the
    devices are held (device_lock) from the first `run` or `session` until it ends, as one
    holder with every child, worker and side; None holds nothing.
    """

    name = "local"

    def __init__(self, devices: Sequence[str | None], env: Mapping[str, str] | None = None,
                 grace_s: float = GRACE_S, poll_s: float = POLL_S, pin: bool = True,
                 resident: bool = False, note: str | None = None,
                 backend: Backend | None = None) -> None:
        self.devices = list(devices) or [None]
        self.env = dict(env) if env is not None else procs.child_env(
            drop=procs.RUN_CHILD_ENV_DROP)
        self.grace_s, self.poll_s, self.pin = grace_s, poll_s, pin
        self.slots = len(self.devices)
        self.resident, self.note = resident, note
        self.backend = backend
        self._host: WorkerHost | None = None
        self._held: dict[str, str] | None = None  # while a session holds the devices

    def describe(self, tasks: Sequence[Task], walls: Mapping[str, float]) -> list[str]:
        """Each device's tasks, when every task takes its wall (1 s when unknown), and how
        their runs get their pytest."""
        placed = deal(tasks, self.devices, walls)
        mine = {device: [f"{t.id}{t.note}" for d, t in placed if d == device]
                for device in self.devices}
        return [*(f"device {device or '-'}: " + ", ".join(ids[:SHOWN_TASKS])
                  + (f", ... ({len(ids)} in all)" if len(ids) > SHOWN_TASKS else "")
                  for device, ids in mine.items()),
                self.note or "pytest: " + (
                    "in workers that stay up, one per side and device (WORKERS=1)"
                    if self.resident else "a fresh process per run (WORKERS=0)")]

    def place(self, task: Task) -> str | None:
        return self.devices[0]

    def argv(self, task: Task, device: str | None) -> list[str]:
        """The task's command line on `device`."""
        return [*task.argv, *cmdline.flag_args({"DEVICES": device if self.pin else None})]

    @contextmanager
    def session(self) -> Iterator[WorkerHost | None]:
        """The devices held and the workers of every `run` until it exits (no workers unless
        resident: two per device, so that an A/B campaign's sides each keep theirs)."""
        if self._held is not None:
            yield self._host
            return
        with ExitStack() as stack:
            held: dict[str, str] = {}
            if self.backend is not None:
                held = stack.enter_context(device_lock.holding(
                    self.backend, self.devices, out=procs.say))
            if self.resident:
                self._host = stack.enter_context(WorkerHost(max_idle=2 * len(self.devices)))
            self._held = held
            try:
                yield self._host
            finally:
                self._host, self._held = None, None

    def run(self, tasks: Sequence[Task], events: Events) -> Outcome:
        with self.session() as host:
            return self._run(tasks, events, {**(host.env() if host else {}),
                                             **(self._held or {})})

    def _run(self, tasks: Sequence[Task], events: Events, host: Mapping[str, str]) -> Outcome:
        by_id = {t.id: t for t in tasks}
        states: dict[str, str] = {}

        def ready(task_id: str) -> bool:
            after = by_id[task_id].after
            return after is None or after not in by_id or states.get(after) in RAN_TO_END

        def start(task_id: str, device: str | None) -> procs.Child:
            task = by_id[task_id]
            Path(task.log).parent.mkdir(parents=True, exist_ok=True)
            # A rerun appends to the log: the earlier attempt's lines stay readable.
            return procs.start_child(self.argv(task, device), {**self.env, **host, **task.env},
                                     task.log, append=True)

        def on_start(job: Running) -> None:
            events.started(by_id[job.op], job.device or "-", job.child.pid)

        def on_finish(job: Running, rc: int | None, interrupted: bool) -> None:
            task = by_id[job.op]
            state = state_for(rc, interrupted=interrupted, timed_out=job.timed_out)
            states[task.id] = state
            reason = reason_for(state, task.log, rc=rc, timeout_s=task.timeout_s)
            events.ended(task, Ended(task.id, state, rc, round(time.monotonic() - job.started, 2),
                                     job.device or "-", reason))

        scheduler = Scheduler(self.devices, start, on_start, on_finish,
                              stop=lambda children: stop_children(
                                  children, self.grace_s, scheduler.signal or signal.SIGTERM),
                              poll_s=self.poll_s, limit=lambda task_id: by_id[task_id].timeout_s)
        with deferred_signals(scheduler.request_stop):
            signum = scheduler.run([t.id for t in tasks], ready=ready)
        return Outcome(signum)


# --------------------------------------------------------------------------- the kind


def worker_devices(settings: Settings, env: Mapping[str, str] | None = None
                   ) -> list[str | None]:
    """One entry per worker: the devices of select_devices, or [None] for one unpinned
    worker where the backend has no accelerator or none is found."""
    devices = select_devices(settings, env)
    return [*devices] if devices else [None]


def build(given: Build) -> LocalExecutor:
    """This host's devices, one task at a time on each; WORKERS other than 0 hosts workers."""
    workers, note = given.workers, None
    if workers in ("A", "B"):
        note = (f"pytest: side {workers} in workers that stay up, side "
                f"{'B' if workers == 'A' else 'A'} in fresh processes (WORKERS={workers})")
    # Its units' own bytecode too: each unit is a process of its own, and a suite has thousands.
    env = {**procs.child_env(drop=procs.RUN_CHILD_ENV_DROP),
           **procs.bytecode_env(given.settings.out)}
    return LocalExecutor(worker_devices(given.settings, given.env), env=env,
                         resident=workers != "0", note=note, backend=given.settings.backend)


def flags(given: Flags, env: Env) -> dict[str, object]:
    """The flags as given; a runner that only another kind's tasks take is refused."""
    refuse_owned_runner(given, env, KIND)
    return dict(given)


KIND = ExecutorKind(name="local", build=build, flags=flags)
