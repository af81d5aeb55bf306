"""`harness slurm-task PLAN`: one array task runs its share of a plan's units on its node."""

from __future__ import annotations

import argparse
import json
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from harness import batch, campaign, cmdline, spec
from harness.errors import EXIT_BENCHMARK_FAILED, EXIT_OK, UsageError
from harness.fsutil import atomic_write_json
from harness.slurm import DONE_DIR, SLURM_DIR
from harness.supervise import Running, Scheduler, deferred_signals, stop_children

TASK_VAR = "SLURM_ARRAY_TASK_ID"
# The task already runs where it should: no image again.
HOST_RUNNER = cmdline.flag_args({"RUNNER": "host"})


STARTED_DIR = "started"  # one file per task that started: its own job id, for jobcomp


def started_path(directory: Path, task: str) -> Path:
    return directory / SLURM_DIR / STARTED_DIR / f"{task}.json"


def read_started(directory: Path) -> dict[str, str]:
    """{array task id: its own job id} of the tasks that started."""
    found = {}
    for path in (directory / SLURM_DIR / STARTED_DIR).glob("*.json"):
        try:
            found[path.stem] = str(json.loads(path.read_text(encoding="utf-8"))["job_id"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return found


def done_path(directory: Path, item: str) -> Path:
    return directory / SLURM_DIR / DONE_DIR / f"{item.replace('/', '-')}.json"


def read_done(directory: Path) -> dict[str, dict[str, Any]]:
    """Every finished item's done file, by item; a file being replaced is read next time."""
    found = {}
    for path in sorted((directory / SLURM_DIR / DONE_DIR).glob("*.json")):
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(doc, dict) and isinstance(doc.get("item"), str):
            found[doc["item"]] = doc
    return found


def load_plan(path: Path, env: Mapping[str, str]) -> tuple[dict[str, Any], int]:
    """The plan and this task's index (SLURM_ARRAY_TASK_ID); UsageError when they disagree."""
    try:
        plan = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UsageError(f"slurm-task: {str(path)!r} is not a plan ({exc})") from None
    value = env.get(TASK_VAR, "")
    if not value.isdigit() or int(value) >= len(plan.get("tasks") or ()):
        raise UsageError(f"{TASK_VAR}={value!r} is not accepted; expected a task index below "
                         f"{len(plan.get('tasks') or ())}")
    return plan, int(value)


def visible_devices(env: Mapping[str, str]) -> dict[str, str]:
    """The device visibility variables (of any backend) that Slurm set for this task: which
    devices its units see, kept in its started file for a later look."""
    from harness import backends

    names = {name for b in backends.registry().all() for name in b.visibility_vars}
    return {name: env[name] for name in sorted(names) if name in env}


def _settings(argv: list[str]) -> spec.Settings:
    parser = argparse.ArgumentParser(add_help=False)
    spec.add_arguments(parser)
    return spec.resolve(vars(parser.parse_args([*argv, *HOST_RUNNER])))


def _blocked(directory: Path, item: str) -> str | None:
    """Why a later round cannot run yet: its operator's round 0 did not finish."""
    unit = campaign.parse_unit_id(item)
    first = campaign.Unit(unit.op, 0).id
    if unit.round == 0 or (read_done(directory).get(first) or {}).get("status") in ("ok",
                                                                                     "failed"):
        return None
    status = campaign.status_map(campaign.load(directory)).get(first)
    return None if status in ("ok", "failed") else f"round 0 of {unit.op} did not finish"


class _Task:
    """Start an item's child, write its done file when it ends."""

    def __init__(self, plan: Mapping[str, Any], label: str, out: Callable[[str], None]) -> None:
        self.plan, self.label, self.out = plan, label, out
        self.directory = Path(plan["dir"])
        self.env, self.host = batch.child_env(), socket.gethostname()
        self.codes: list[str] = []

    def log(self, item: str) -> Path:
        return self.directory / "logs" / f"{item.replace('/', '-')}.log"

    def argv(self, item: str, device: str | None) -> list[str]:
        from harness import ab_suite

        argv = [*self.plan["argv"], *HOST_RUNNER]
        if self.plan["kind"] == "batch":
            return batch.child_argv(argv, item, device)
        node = self.plan["nodes"][campaign.parse_unit_id(item).op]
        return ab_suite.unit_argv(self.directory, argv, node, item, device)

    def start(self, item: str, device: str | None) -> subprocess.Popen:
        self.log(item).parent.mkdir(exist_ok=True)
        with open(self.log(item), "ab") as fh:
            return subprocess.Popen(self.argv(item, device), stdout=fh,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    env=self.env, start_new_session=True)

    def on_start(self, job: Running) -> None:
        self.out(f"[start] {job.op} device={job.device or '-'} log={self.log(job.op)}")

    def done(self, item: str, status: str, *, rc: int | None = None, wall_s: float | None = None,
             device: str | None = None, reason: str | None = None) -> None:
        atomic_write_json(done_path(self.directory, item), {
            "item": item, "status": status, "rc": rc, "wall_s": wall_s, "device": device,
            "host": self.host, "task": self.label, "reason": reason})
        self.codes.append(status)
        self.out(f"[done] {item} {status} rc={'' if rc is None else rc}")

    def on_finish(self, job: Running, rc: int | None, interrupted: bool) -> None:
        # scancel signals every process of the task: a unit killed by it before the task's own
        # handler ran was stopped, not broken.
        stopped = rc is not None and -rc in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
        status = batch.status_for(rc, interrupted=interrupted or stopped)
        reason = batch.last_line(self.log(job.op)) if status in ("failed", "error") else None
        self.done(job.op, status, rc=rc, wall_s=round(time.monotonic() - job.started, 2),
                  device=job.device, reason=reason)


def run_task(plan_path: Path, env: Mapping[str, str], out: Callable[[str], None] = print
             ) -> int:
    """Run this task's items: one at a time per device of its node (node mode) or on the one
    device Slurm gave it; 0 when every item ended ok."""
    plan, index = load_plan(plan_path, env)
    items = list(plan["tasks"][index])
    task = _Task(plan, f"{env.get('SLURM_ARRAY_JOB_ID', '?')}_{index}", out)
    started = started_path(task.directory, task.label)
    started.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(started, {"job_id": env.get("SLURM_JOB_ID"), "host": task.host,
                                "visible": visible_devices(env)})
    runnable = []
    for item in items:
        why = _blocked(task.directory, item) if plan["kind"] == "ab" else None
        if why:
            task.done(item, campaign.PENDING, reason=why)
        else:
            runnable.append(item)
    settings = _settings(plan["argv"])
    devices = batch.worker_devices(settings) if plan["mode"] == "node" else [None]
    out(f"task {task.label} on {task.host}: {len(runnable)} of {len(items)} items over "
        f"devices {','.join(d or '-' for d in devices)}")
    scheduler = Scheduler(devices, task.start, task.on_start, task.on_finish,
                          stop=stop_children)
    with deferred_signals(scheduler.request_stop):
        signum = scheduler.run(runnable)
    if signum is not None:
        return 128 + signum
    ok = all(code in ("ok", campaign.PENDING) for code in task.codes)
    return EXIT_OK if ok else EXIT_BENCHMARK_FAILED
