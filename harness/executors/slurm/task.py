"""`harness slurm-task PLAN`: one array task runs its share of a plan's tasks on its node."""

from __future__ import annotations

import json
import signal
import socket
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from harness import backends
from harness.contract.states import CRASHED, INTERRUPTED, NOT_RUN, OK, RAN_TO_END
from harness.errors import EXIT_BENCHMARK_FAILED, EXIT_OK, UsageError
from harness.executors.base import Ended, Task
from harness.executors.devices import select_ids
from harness.executors.local import LocalExecutor
from harness.executors.slurm.files import done_path, read_done, started_path
from harness.fsutil import atomic_write_json

TASK_VAR = "SLURM_ARRAY_TASK_ID"
# scancel signals every process of the task: a child killed by one of these before the
# task's own handler ran was stopped, not broken.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def load_plan(path: Path, env: Mapping[str, str]) -> tuple[dict[str, Any], int]:
    """The plan and this task's index (SLURM_ARRAY_TASK_ID); UsageError when they disagree."""
    try:
        plan = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UsageError(f"slurm-task: {str(path)!r} is not a plan ({exc})") from None
    if not isinstance(plan, dict):
        raise UsageError(f"slurm-task: {str(path)!r} is not a plan (not a JSON object)")
    value = env.get(TASK_VAR, "")
    if not value.isdigit() or int(value) >= len(plan.get("tasks") or ()):
        raise UsageError(f"{TASK_VAR}={value!r} is not accepted; expected a task index below "
                         f"{len(plan.get('tasks') or ())}")
    return plan, int(value)


def visible_devices(env: Mapping[str, str]) -> dict[str, str]:
    """The device visibility variables (of any backend) that Slurm set for this task: which
    devices its units see, kept in its started file for a later look."""
    names = {name for b in backends.registry().all() for name in b.visibility_vars}
    return {name: env[name] for name in sorted(names) if name in env}


def blocked(directory: Path, task: Task) -> str | None:
    """Why a task cannot run: the task it waits for (in an earlier array) did not end in
    a state it may follow."""
    if task.after is None:
        return None
    status = (read_done(directory).get(task.after) or {}).get("status")
    return None if status in RAN_TO_END else f"{task.after} did not finish"


class _Done:
    """The events of the task's local run, written as done files."""

    def __init__(self, directory: Path, label: str, out: Callable[[str], None]) -> None:
        self.directory, self.label, self.out = directory, label, out
        self.host = socket.gethostname()
        self.states: list[str] = []

    def queued(self, task: Task, where: str) -> None:
        """A task's own run never queues."""

    def started(self, task: Task, where: str, pid: int | None = None) -> None:
        self.out(f"[start] {task.id} device={where} log={task.log}")

    def ended(self, task: Task, end: Ended) -> None:
        state = end.state
        if state == CRASHED and end.rc is not None and -end.rc in STOP_SIGNALS:
            state, end = INTERRUPTED, Ended(end.task, INTERRUPTED, end.rc, end.wall_s, end.where)
        device = None if end.where == "-" else end.where
        atomic_write_json(done_path(self.directory, task.id), {
            "item": task.id, "status": state, "rc": end.rc, "wall_s": end.wall_s,
            "device": device, "host": self.host, "task": self.label, "reason": end.reason})
        self.states.append(state)
        self.out(f"[done] {task.id} {state} rc={'' if end.rc is None else end.rc}")


def run_task(plan_path: Path, env: Mapping[str, str], out: Callable[[str], None] = print
             ) -> int:
    """Run this task's share: one at a time per device of its node (node mode) or on the one
    device Slurm gave it; 0 when every task ended ok (or could not start yet)."""
    plan, index = load_plan(plan_path, env)
    directory = Path(plan["dir"])
    try:
        tasks = [Task.from_json(t) for t in plan["tasks"][index]]
    except UsageError as exc:
        raise UsageError(f"slurm-task: {str(plan_path)!r}: {exc}") from None
    done = _Done(directory, f"{env.get('SLURM_ARRAY_JOB_ID', '?')}_{index}", out)
    started = started_path(directory, done.label)
    started.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(started, {"job_id": env.get("SLURM_JOB_ID"), "host": done.host,
                                "visible": visible_devices(env)})
    runnable = []
    for task in tasks:
        why = blocked(directory, task)
        if why:
            done.ended(task, Ended(task.id, NOT_RUN, reason=why))
        else:
            runnable.append(task)
    devices: list[str | None] = [None]
    if plan.get("mode") == "node":
        ids = select_ids(backends.get(plan["backend"]), plan.get("devices") or (), env)
        devices = [*ids] if ids else [None]
    out(f"task {done.label} on {done.host}: {len(runnable)} of {len(tasks)} items over "
        f"devices {','.join(d or '-' for d in devices)}")
    outcome = LocalExecutor(devices, resident=bool(plan.get("workers")),
                            backend=backends.get(plan["backend"]) if plan.get("backend")
                            else None).run(runnable, done)
    if outcome.signal is not None:
        return 128 + outcome.signal
    ok = all(state in (OK, NOT_RUN) for state in done.states)
    return EXIT_OK if ok else EXIT_BENCHMARK_FAILED
