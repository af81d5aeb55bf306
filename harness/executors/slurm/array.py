"""A plan's tasks as Slurm job arrays: written, submitted (or re-attached), followed to the end."""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

from harness.contract.states import ERROR, INTERRUPTED, RAN_TO_END, TIMEOUT
from harness.errors import HarnessError
from harness.executors.base import Ended, Events, Outcome, Task
from harness.executors.procs import deferred_signals
from harness.executors.slurm import DONE_DIR, SLURM_DIR, Slurm, SlurmConfig, Stage, sbatch_argv
from harness.executors.slurm import text as slurm_text
from harness.executors.slurm.files import done_path, read_done, read_started
from harness.executors.slurm.text import TaskState
from harness.fsutil import atomic_write_json, atomic_write_text

CANCEL_WAIT_S = 120.0  # after scancel, how long to wait for the tasks to leave the queue
HOST_RUNNER = ("--runner", "host")  # a task already runs where it should: no image again
Script = Callable[[Path], str]  # a stage's plan file -> its batch script
PLACE = "slurm:"  # where a task handed to an array task is: slurm:JOB_N


def stage_tasks(items: Sequence[str], cfg: SlurmConfig) -> list[list[str]]:
    """gpu mode: one item a task; node mode: task i of K takes items i, i+K, ... (K =
    SLURM_PARALLEL nodes, 1 when unset)."""
    if cfg.unit == "gpu":
        return [[item] for item in items]
    return [[items[i] for i in share]
            for share in slurm_text.shares(len(items), cfg.parallel or 1)]


def submission_number(submissions: Sequence[Mapping[str, Any]]) -> int:
    """1 for a plan's first submission, 2 for its first resubmission, ..."""
    keys = {s["key"].split("-")[0] for s in submissions}
    return len(keys) + 1


def plan_stages(tasks: Sequence[Task], cfg: SlurmConfig, n: int) -> list[Stage]:
    """One array per stage of the tasks, in the order the stages first appear; each waits
    for the one before it."""
    order = list(dict.fromkeys(t.stage for t in tasks))
    return [Stage(f"s{n}-{name}" if name else f"s{n}",
                  stage_tasks([t.id for t in tasks if t.stage == name], cfg)) for name in order]


def alive_jobs(slurm: Slurm, jobs: Sequence[str]) -> set[str] | None:
    """The `jobs` that still have tasks queued or running; None when squeue could not answer
    (PreflightError where it cannot be run at all)."""
    if not jobs:
        return set()
    queued = slurm.queued(list(jobs))
    return None if queued is None else {t.split("_")[0] for t in queued} & set(jobs)


def job_of(where: str | None) -> str | None:
    """The array job of a place written by `submit` (slurm:JOB_N); None for another place."""
    if not where or not where.startswith(PLACE):
        return None
    return where[len(PLACE):].split("_")[0]


def taken_over(directory: Path, placed: Mapping[str, str | None]) -> dict[str, Ended]:
    """The tasks handed to an array task (`placed`: id -> slurm:JOB_N) whose done file that
    same array task wrote says they ran to their end: a later run records these ends and never
    runs them again (a done file of another place is an earlier attempt's)."""
    done = read_done(directory)
    found = {}
    for item, where in placed.items():
        doc = done.get(item) or {}
        if job_of(where) and doc.get("task") == str(where)[len(PLACE):] \
                and doc.get("status") in RAN_TO_END:
            found[item] = ended_from_done(item, doc)
    return found


def estimate(stages: Sequence[Stage], walls: Mapping[str, float], cfg: SlurmConfig,
             key_of: Callable[[str], str]) -> list[str]:
    """The makespan of the stages on the array's parallelism, from earlier walls (by
    `key_of(task id)`)."""
    if not walls:
        return ["estimated makespan: no walls (WALLS_FROM) to estimate from"]
    known = sorted(walls.values())
    fallback = known[len(known) // 2]
    total, guessed = 0.0, 0
    for stage in stages:
        task_walls = []
        for items in stage.tasks:
            guessed += sum(key_of(i) not in walls for i in items)
            task_walls.append(sum(walls.get(key_of(i), fallback) for i in items))
        total += slurm_text.makespan(task_walls, cfg.parallel or len(task_walls))
    slots = (f"on {cfg.parallel} array slot(s)" if cfg.parallel
             else "with every task at once (no SLURM_PARALLEL)")
    notes = [f"{guessed} item(s) without a wall taken as the median, {fallback:.0f} s"] \
        if guessed else []
    if cfg.unit == "node":  # the node runs a task's units over its devices at once
        notes.append("a task's units counted one after another: an upper bound")
    return [f"estimated makespan: {total:.0f} s {slots}, longest first"
            + (f" ({'; '.join(notes)})" if notes else "")]


class SlurmExecutor:
    """Run a plan's tasks as job arrays whose files live under `directory`/slurm.

    `submissions` is the caller's list, kept in its own document: the arrays submitted, so that
    a later run re-attaches to those still queued; `saved` is called after each change to it.
    `script` writes the batch script that runs `harness slurm-task PLAN`.
    """

    name = "slurm"
    slots = 0

    def __init__(self, slurm: Slurm, cfg: SlurmConfig, directory: Path, script: Script, *,
                 plan: Mapping[str, Any], submissions: list[dict[str, Any]] | None = None,
                 saved: Callable[[], object] = lambda: None, cwd: Path | None = None,
                 poll_s: float = 10.0, out: Callable[[str], None] = print) -> None:
        self.slurm, self.cfg, self.directory, self.script = slurm, cfg, directory, script
        self.plan = dict(plan)  # what every task needs besides its items (backend, devices)
        self.submissions = submissions if submissions is not None else []
        self.saved, self.cwd, self.poll_s, self.out = saved, cwd or Path.cwd(), poll_s, out
        self.base = directory / SLURM_DIR

    # ------------------------------------------------------------------ plan and submit

    def place(self, task: Task) -> str | None:
        return None  # Slurm gives the task its device

    def stages(self, tasks: Sequence[Task]) -> list[Stage]:
        return plan_stages(tasks, self.cfg, submission_number(self.submissions))

    def describe(self, tasks: Sequence[Task], walls: Mapping[str, float]) -> list[str]:
        """Each array's batch script and sbatch command line, and the makespan from `walls`;
        nothing written."""
        stages = self.stages(tasks)
        lines = [f"executor: slurm, SLURM_UNIT={self.cfg.unit}"]
        for i, stage in enumerate(stages):
            after = f"JOB_OF_{stages[i - 1].key}" if i else None
            lines += [f"--- {self.base / (stage.key + '.sbatch')} ({len(stage.tasks)} task(s): "
                      + "; ".join(",".join(t) for t in stage.tasks[:8])
                      + ("; ..." if len(stage.tasks) > 8 else "") + ")",
                      *self.script(self.base / f"{stage.key}.plan.json").splitlines(),
                      "--- submit: " + shlex.join(self._sbatch(stage, after))]
        return [*lines, *estimate(stages, walls, self.cfg, lambda task_id: task_id)]

    def _sbatch(self, stage: Stage, after: str | None) -> list[str]:
        return sbatch_argv(self.cfg, len(stage.tasks), self.base / f"{stage.key}.sbatch",
                           self.base / "logs", self.cwd, after)

    def _write(self, stage: Stage, by_id: Mapping[str, Task]) -> str:
        """The stage's plan and batch script; the script's sha256."""
        import hashlib

        (self.base / "logs").mkdir(parents=True, exist_ok=True)
        (self.base / DONE_DIR).mkdir(exist_ok=True)
        plan_path = self.base / f"{stage.key}.plan.json"
        # a task in the image runs its units on the image's host; a task on the node's host
        # (AXIS=image) keeps the runner that puts each run's pytest in its side's image
        runner = HOST_RUNNER if self.cfg.image else ()
        tasks = [[{**by_id[i].to_json(), "argv": [*by_id[i].argv, *runner]} for i in t]
                 for t in stage.tasks]
        atomic_write_json(plan_path, {**self.plan, "mode": self.cfg.unit, "tasks": tasks})
        text = self.script(plan_path)
        atomic_write_text(self.base / f"{stage.key}.sbatch", text)
        return hashlib.sha256(text.encode()).hexdigest()

    def submit(self, tasks: Sequence[Task], events: Events) -> dict[str, list[list[str]]]:
        """Write and submit an array per stage; their jobs and tasks. A failed submission
        cancels the arrays already submitted and raises."""
        by_id = {t.id: t for t in tasks}
        jobs: dict[str, list[list[str]]] = {}
        after = None
        for task in tasks:
            done_path(self.directory, task.id).unlink(missing_ok=True)  # an earlier attempt's
        for stage in self.stages(tasks):
            sha = self._write(stage, by_id)
            argv = self._sbatch(stage, after)
            try:
                after = self.slurm.submit(argv)
            except HarnessError:
                if jobs:
                    self.out(f"cancelling what was submitted: scancel {' '.join(jobs)}")
                    self.slurm.cancel(list(jobs))
                raise
            jobs[after] = stage.tasks
            self.submissions.append({
                "job": after, "key": stage.key, "argv": argv, "tasks": stage.tasks,
                "script": str(self.base / f"{stage.key}.sbatch"), "script_sha256": sha})
            self.out(f"submitted job {after}: {len(stage.tasks)} task(s): {shlex.join(argv)}")
            for n, items in enumerate(stage.tasks):
                for item in items:
                    events.queued(by_id[item], f"{PLACE}{after}_{n}")
            self.saved()
        return jobs

    def queued_jobs(self) -> dict[str, list[list[str]]]:
        """The recorded arrays that are still queued or running."""
        jobs = {s["job"]: s["tasks"] for s in self.submissions}
        alive = alive_jobs(self.slurm, list(jobs))
        return {job: tasks for job, tasks in jobs.items() if alive is None or job in alive}

    # ------------------------------------------------------------------ run

    def session(self) -> AbstractContextManager[object]:
        """Nothing outlives a `run` here: each task keeps its own workers on its node."""
        return nullcontext()

    def run(self, tasks: Sequence[Task], events: Events) -> Outcome:
        """Re-attach to the recorded arrays still queued, or submit new ones; follow them.
        Done files become `ended` events; a task that left none ends interrupted (after a
        signal) or error, with Slurm's account of it."""
        jobs = self.queued_jobs()
        if jobs:
            self.out(f"re-attaching to job(s) {', '.join(jobs)} of {self.directory}")
        else:
            jobs = self.submit(tasks, events)
        by_id = {t.id: t for t in tasks}
        watch = Watch(self.slurm, self.directory, jobs, lambda item, done: events.ended(
            by_id[item], ended_from_done(item, done)), self.out, self.cfg.detach, self.poll_s,
            time_limit=self.cfg.time)
        signum, missing = watch.run()
        if signum is not None and self.cfg.detach:
            self.out(f"detached: job(s) {', '.join(jobs)} keep running")
            return Outcome(signum, detached=True)
        for item, state in missing.items():
            end = end_state(state, signum)
            reason = (timeout_reason(state, self.cfg.time) if end == TIMEOUT
                      else state.describe())
            events.ended(by_id[item], Ended(
                item, end, reason=reason,
                facts={"slurm_task": state.task or "", "slurm_state": state.state or ""}))
        return Outcome(signum, facts=self._final_states(jobs, set(missing)))

    def _final_states(self, jobs: Mapping[str, list[list[str]]], missing: set[str]
                      ) -> dict[str, dict[str, str]]:
        """How each array task that wrote done files ended (COMPLETED, FAILED, ...), by item."""
        started = read_started(self.directory)
        where = {item: f"{job}_{n}" for job, tasks in jobs.items()
                 for n, items in enumerate(tasks) for item in items if item not in missing}
        if not where:
            return {}
        ended = self.slurm.ended(list(jobs), {t: started.get(t) for t in set(where.values())})
        return {item: {"slurm_state": ended[task].state}
                for item, task in where.items() if task in ended}


def end_state(state: TaskState, signum: int | None) -> str:
    """How a task that Slurm ended reads: timeout where SLURM_TIME ran out, interrupted where
    the caller's signal cancelled it, error otherwise (it died without a word)."""
    if state.state == "TIMEOUT":
        return TIMEOUT
    return INTERRUPTED if signum is not None else ERROR


def timeout_reason(state: TaskState, limit: str | None) -> str:
    return f"timeout after SLURM_TIME={limit or '(the partition default)'} ({state.describe()})"


def ended_from_done(item: str, done: Mapping[str, Any]) -> Ended:
    """A task's end as its array task wrote it in its done file."""
    return Ended(item, str(done.get("status")), done.get("rc"), done.get("wall_s"),
                 f"{done.get('host')}:{done.get('device') or '-'}", done.get("reason"),
                 {"slurm_task": str(done.get("task") or "")})


class Watch:
    """Follow submitted arrays until every task ended: progress from the done files and the
    task states, scancel on a signal (unless detached).

    A done file that says interrupted is reported last, once Slurm says how its task ended:
    a task that SLURM_TIME (`time_limit`) stopped wrote it at Slurm's SIGTERM, and reads
    timeout."""

    def __init__(self, slurm: Slurm, directory: Path, jobs: Mapping[str, list[list[str]]],
                 on_done: Callable[[str, dict], None], out: Callable[[str], None],
                 detach: bool, poll_s: float = 10.0, time_limit: str | None = None) -> None:
        self.slurm, self.directory, self.jobs = slurm, directory, dict(jobs)
        self.on_done, self.out, self.detach, self.poll_s = on_done, out, detach, poll_s
        self.time_limit = time_limit
        self.stopped: dict[str, dict] = {}  # item -> its done file that says interrupted
        self.items = {item: (job, i) for job, tasks in self.jobs.items()
                      for i, task in enumerate(tasks) for item in task}
        self.seen: set[str] = set()
        self.failed = 0  # items that ended other than ok
        self.signal: int | None = None
        self.began = time.monotonic()

    def request_stop(self, signum: int) -> None:
        self.signal = signum

    def _collect(self) -> None:
        for item, doc in read_done(self.directory).items():
            if item in self.items and item not in self.seen:
                self.seen.add(item)
                self.failed += doc.get("status") != "ok"
                if doc.get("status") == INTERRUPTED:
                    self.stopped[item] = doc
                else:
                    self.on_done(item, doc)

    def _progress(self, queued: Mapping[str, TaskState], last: str) -> str:
        running = {t for t, s in queued.items() if s.state == "RUNNING"}
        left = [i for i in self.items if i not in self.seen]
        busy = sum(f"{job}_{n}" in running for job, n in (self.items[i] for i in left))
        counts = (f"[slurm {','.join(self.jobs)}] done={len(self.seen)} running={busy} "
                  f"pending={len(left) - busy} failed={self.failed}")
        if counts != last:  # a line when a count changes, not at every poll
            elapsed, done = time.monotonic() - self.began, len(self.seen)
            eta = None if done == 0 else elapsed / done * len(left)
            self.out(f"{counts} eta={'-' if eta is None else f'{eta:.0f}s'}")
        return counts

    def _follow(self) -> bool:
        """Poll until the arrays left the queue; False when a detached watch was stopped."""
        last, cancelled_at = "", None
        while True:
            queued = self.slurm.queued(list(self.jobs))
            self._collect()  # after squeue: a task writes its done files before it leaves
            if queued is None and last != "no answer":
                self.out("warning: squeue did not answer; asking again")
                last = "no answer"
            if queued is not None:
                last = self._progress(queued, last)
                if not queued:
                    return True
            if self.signal is not None and self.detach:
                return False
            if self.signal is not None and cancelled_at is None:
                self.out(f"cancelling: scancel {' '.join(self.jobs)}")
                self.slurm.cancel(list(self.jobs))
                cancelled_at = time.monotonic()
            if cancelled_at is not None and time.monotonic() - cancelled_at > CANCEL_WAIT_S:
                return True
            time.sleep(self.poll_s)

    def run(self) -> tuple[int | None, dict[str, TaskState]]:
        """(the signal that stopped the watch or None, how each task without a done file
        ended); a detached watch returns at the signal with the tasks still running."""
        with deferred_signals(self.request_stop):
            if not self._follow():
                self._report_stopped({})
                return self.signal, {}
        self._collect()
        missing = [i for i in self.items if i not in self.seen]
        started = read_started(self.directory)
        tasks = {f"{job}_{n}": None for job, n in (self.items[i] for i in
                                                   [*missing, *self.stopped])}
        ended = (self.slurm.ended(list(self.jobs), {t: started.get(t) for t in tasks})
                 if tasks else {})
        self._report_stopped(ended)
        return self.signal, {
            i: slurm_text.settled(f"{job}_{n}", ended, started)
            for i in missing for job, n in [self.items[i]]}

    def _report_stopped(self, ended: Mapping[str, TaskState]) -> None:
        """The interrupted done files: timeout where Slurm ended their task at its limit."""
        for item, doc in self.stopped.items():
            job, n = self.items[item]
            state = ended.get(f"{job}_{n}")
            if state is not None and end_state(state, self.signal) == TIMEOUT:
                doc = {**doc, "status": TIMEOUT,
                       "reason": timeout_reason(state, self.time_limit)}
            self.on_done(item, doc)
