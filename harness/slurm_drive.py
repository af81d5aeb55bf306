"""EXECUTOR=slurm drivers: a campaign's or a batch's units as job arrays, followed to the end."""

from __future__ import annotations

import dataclasses
import os
import shlex
import shutil
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from harness import ab_suite, batch, campaign, slurm_text
from harness.campaign import Unit
from harness.errors import (
    EXIT_BENCHMARK_FAILED,
    EXIT_OK,
    HarnessError,
    Interrupted,
    UsageError,
)
from harness.slurm import Slurm, SlurmConfig, Stage, sbatch_argv, write_stage
from harness.slurm_task import done_path, read_done, read_started
from harness.slurm_text import TaskState
from harness.spec import Settings
from harness.supervise import deferred_signals

POLL_VAR = "ZL_SLURM_POLL_S"  # seconds between two squeue calls (the tests shorten it)
CANCEL_WAIT_S = 120.0  # after scancel, how long to wait for the tasks to leave the queue


def poll_s(env: Mapping[str, str]) -> float:
    value = env.get(POLL_VAR) or "10"
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not 0 < seconds <= 3600:
        raise UsageError(f"{POLL_VAR}={value!r} is not accepted; expected seconds, "
                         "more than 0 and at most 3600")
    return seconds


def stage_tasks(items: Sequence[str], cfg: SlurmConfig) -> list[list[str]]:
    """gpu mode: one item a task; node mode: task i of K takes items i, i+K, ... (K =
    SLURM_PARALLEL nodes, 1 when unset)."""
    if cfg.unit == "gpu":
        return [[item] for item in items]
    return [[items[i] for i in share]
            for share in slurm_text.shares(len(items), cfg.parallel or 1)]


def campaign_stages(todo: Sequence[Unit], cfg: SlurmConfig, n: int) -> list[Stage]:
    """Round 0 first, then every later round in an array that waits for it: a later round
    replays its operator's A/r0 records."""
    first = [u.id for u in todo if u.round == 0]
    later = [u.id for u in todo if u.round > 0]
    return [Stage(f"s{n}-{name}", stage_tasks(ids, cfg))
            for name, ids in (("r0", first), ("later", later)) if ids]


def estimate(stages: Sequence[Stage], walls: Mapping[str, float], cfg: SlurmConfig,
             op_of: Callable[[str], str]) -> list[str]:
    """The makespan of the stages on the array's parallelism, from earlier walls."""
    if not walls:
        return ["estimated makespan: no walls (WALLS_FROM) to estimate from"]
    known = sorted(walls.values())
    fallback = known[len(known) // 2]
    total, guessed = 0.0, 0
    for stage in stages:
        task_walls = []
        for items in stage.tasks:
            guessed += sum(op_of(i) not in walls for i in items)
            task_walls.append(sum(walls.get(op_of(i), fallback) for i in items))
        total += slurm_text.makespan(task_walls, cfg.parallel or len(task_walls))
    slots = (f"on {cfg.parallel} array slot(s)" if cfg.parallel
             else "with every task at once (no SLURM_PARALLEL)")
    notes = [f"{guessed} item(s) without a wall taken as the median, {fallback:.0f} s"] \
        if guessed else []
    if cfg.unit == "node":  # the node runs a task's units over its devices at once
        notes.append("a task's units counted one after another: an upper bound")
    return [f"estimated makespan: {total:.0f} s {slots}, longest first"
            + (f" ({'; '.join(notes)})" if notes else "")]


def describe(directory: Path, settings: Settings, cfg: SlurmConfig, stages: Sequence[Stage],
             plan: Mapping[str, Any], cwd: Path) -> list[str]:
    """DRY_RUN: each stage's batch script and sbatch command line, nothing written."""
    from harness.slurm import script_text, task_command, task_mounts

    lines = [f"executor: slurm, SLURM_UNIT={cfg.unit}, RUNNER={settings.runner}"]
    directory = Path(os.path.abspath(directory))
    base = directory / "slurm"
    for i, stage in enumerate(stages):
        command = task_command(settings, cfg, base / f"{stage.key}.plan.json", cwd,
                               task_mounts(settings, directory, cwd))
        after = f"JOB_OF_{stages[i - 1].key}" if i else None
        lines += [f"--- {base / (stage.key + '.sbatch')} ({len(stage.tasks)} task(s): "
                  + "; ".join(",".join(t) for t in stage.tasks[:8])
                  + ("; ..." if len(stage.tasks) > 8 else "") + ")",
                  *script_text(settings, cfg, f"zl-{directory.parent.name}", command
                               ).splitlines(),
                  "--- submit: " + shlex.join(sbatch_argv(
                      cfg, len(stage.tasks), base / f"{stage.key}.sbatch", base / "logs", cwd,
                      after))]
    return lines


def describe_campaign(doc: Mapping[str, Any], settings: Settings, cfg: SlurmConfig,
                      directory: Path) -> list[str]:
    """DRY_RUN of a campaign on Slurm: its arrays and the makespan from its walls."""
    stages = campaign_stages(campaign.units_to_run(doc), cfg, _submission_number(doc))
    plan = {"kind": "ab", "dir": str(directory)}
    return [*describe(directory, settings, cfg, stages, plan, Path.cwd()),
            *estimate(stages, doc.get("walls") or _own_walls(doc), cfg,
                      lambda item: campaign.parse_unit_id(item).op)]


def _own_walls(doc: Mapping[str, Any]) -> dict[str, float]:
    """Seconds per operator from the campaign's own finished units (a resume's estimate)."""
    per_op: dict[str, list[float]] = {}
    for unit in doc["units"]:
        if unit.get("wall_s") is not None:
            per_op.setdefault(unit["op"], []).append(float(unit["wall_s"]))
    return {op: sorted(w)[len(w) // 2] for op, w in per_op.items()}


def _submission_number(doc: Mapping[str, Any]) -> int:
    """1 for a campaign's first submission, 2 for its first resubmission, ..."""
    keys = {s["key"].split("-")[0] for s in (doc.get("slurm") or {}).get("submissions", ())}
    return len(keys) + 1


class Watch:
    """Follow submitted arrays until every task ended: progress from the done files and the
    task states, scancel on a signal (unless detached)."""

    def __init__(self, slurm: Slurm, directory: Path, jobs: Mapping[str, list[list[str]]],
                 on_done: Callable[[str, dict], None], out: Callable[[str], None],
                 detach: bool, poll: float | None = None) -> None:
        self.slurm, self.directory, self.jobs = slurm, directory, dict(jobs)
        self.on_done, self.out, self.detach = on_done, out, detach
        self.poll_s = poll_s(os.environ) if poll is None else poll
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
                self.on_done(item, doc)

    def _progress(self, queued: Mapping[str, TaskState], last: str) -> str:
        running = {t for t, s in queued.items() if s.state == "RUNNING"}
        left = [i for i in self.items if i not in self.seen]
        busy = sum(f"{job}_{n}" in running for job, n in (self.items[i] for i in left))
        counts = (f"[slurm {','.join(self.jobs)}] done={len(self.seen)} running={busy} "
                  f"pending={len(left) - busy} failed={self.failed}")
        if counts != last:  # a line when a count changes, not at every poll
            eta = campaign.eta_from_rate(time.monotonic() - self.began, len(self.seen), len(left))
            self.out(f"{counts} eta={'-' if eta is None else f'{eta:.0f}s'}")
        return counts

    def run(self) -> tuple[int | None, dict[str, TaskState]]:
        """(the signal that stopped the watch or None, how each task without a done file
        ended); a detached watch returns at the signal with the tasks still running."""
        last, cancelled_at = "", None
        with deferred_signals(self.request_stop):
            while True:
                queued = self.slurm.queued(list(self.jobs))
                self._collect()  # after squeue: a task writes its done files before it leaves
                if queued is None and last != "no answer":
                    self.out("warning: squeue did not answer; asking again")
                    last = "no answer"
                if queued is not None:
                    last = self._progress(queued, last)
                    if not queued:
                        break
                if self.signal is not None and self.detach:
                    return self.signal, {}
                if self.signal is not None and cancelled_at is None:
                    self.out(f"cancelling: scancel {' '.join(self.jobs)}")
                    self.slurm.cancel(list(self.jobs))
                    cancelled_at = time.monotonic()
                if cancelled_at is not None and time.monotonic() - cancelled_at > CANCEL_WAIT_S:
                    break
                time.sleep(self.poll_s)
        self._collect()
        missing = [i for i in self.items if i not in self.seen]
        started = read_started(self.directory)
        tasks = {f"{job}_{n}": None for job, n in (self.items[i] for i in missing)}
        ended = (self.slurm.ended(list(self.jobs), {t: started.get(t) for t in tasks})
                 if missing else {})
        return self.signal, {
            i: slurm_text.settled(f"{job}_{n}", ended, started)
            for i in missing for job, n in [self.items[i]]}



# --------------------------------------------------------------------------- ab


def _queued_jobs(slurm: Slurm, doc: Mapping[str, Any]) -> dict[str, list[list[str]]]:
    jobs = {s["job"]: s["tasks"] for s in (doc.get("slurm") or {}).get("submissions", ())}
    if not jobs:
        return {}
    queued = slurm.queued(list(jobs))
    alive = {t.split("_")[0] for t in (queued or {})} if queued is not None else set(jobs)
    return {job: tasks for job, tasks in jobs.items() if job in alive}


def submit_campaign(directory: Path, doc: dict[str, Any], settings: Settings, cfg: SlurmConfig,
                    slurm: Slurm, out: Callable[[str], None]) -> dict[str, list[list[str]]]:
    """Write and submit the arrays of every unit still to run; their jobs and tasks."""
    todo = campaign.units_to_run(doc)
    record = doc.setdefault("slurm", {"submissions": []})
    stages = campaign_stages(todo, cfg, _submission_number(doc))
    plan = {"kind": "ab", "dir": str(directory), "argv": doc["argv"], "mode": cfg.unit,
            "nodes": {op: i.get("node") for op, i in doc["ops"].items()}}
    cwd, jobs, after = Path.cwd(), {}, None
    for unit in todo:
        done_path(directory, unit.id).unlink(missing_ok=True)  # an earlier attempt's end
    for stage in stages:
        script, sha = write_stage(directory, settings, cfg, stage, plan, cwd)
        argv = sbatch_argv(cfg, len(stage.tasks), script, directory / "slurm" / "logs", cwd,
                           after)
        try:
            after = slurm.submit(argv)
        except HarnessError:
            _withdraw(doc, jobs, slurm, out)
            raise
        jobs[after] = stage.tasks
        record["submissions"].append({"job": after, "key": stage.key, "argv": argv,
                                      "script": str(script), "script_sha256": sha,
                                      "tasks": stage.tasks})
        out(f"submitted job {after}: {len(stage.tasks)} task(s): {shlex.join(argv)}")
        for item in (i for t in stage.tasks for i in t):
            entry = campaign.unit_entry(doc, item)
            entry.update(status="submitted", attempts=entry["attempts"] + 1)
    return jobs


def _withdraw(doc: dict[str, Any], jobs: Mapping[str, list[list[str]]], slurm: Slurm,
              out: Callable[[str], None]) -> None:
    """A later array could not be submitted: cancel the ones that were, so that the campaign
    is as it was before (its units not run) and a resume submits them all again."""
    if jobs:
        out(f"cancelling what was submitted: scancel {' '.join(jobs)}")
        slurm.cancel(list(jobs))
    for item in (i for tasks in jobs.values() for t in tasks for i in t):
        campaign.unit_entry(doc, item)["status"] = campaign.PENDING


def _submit_or_attach(directory: Path, doc: dict[str, Any], settings: Settings,
                      cfg: SlurmConfig, slurm: Slurm, out: Callable[[str], None]
                      ) -> dict[str, list[list[str]]]:
    """The campaign's arrays still queued, or else new ones for every unit left to run."""
    jobs = _queued_jobs(slurm, doc)
    if jobs:
        out(f"re-attaching to job(s) {', '.join(jobs)} of {directory}")
        return jobs
    (directory / campaign.LOGS_DIR).mkdir(exist_ok=True)
    for side in campaign.SIDES:
        for kind in ("flaggems", "triton"):
            (ab_suite.ab_unit.side_cache(directory, side) / kind).mkdir(parents=True,
                                                                       exist_ok=True)
    try:
        return submit_campaign(directory, doc, settings, cfg, slurm, out)
    except HarnessError:
        shutil.rmtree(directory / campaign.CACHE_DIR, ignore_errors=True)
        campaign.save(directory, doc)
        raise


def _recorder(directory: Path, doc: dict[str, Any], out: Callable[[str], None]
              ) -> Callable[[str, dict], None]:
    """Record a unit's done file in campaign.json and say how it ended."""
    def on_done(item: str, done: dict) -> None:
        entry = campaign.unit_entry(doc, item)
        entry.update(status=done["status"], rc=done.get("rc"), wall_s=done.get("wall_s"),
                     reason=done.get("reason"), slurm_task=done.get("task"),
                     device=f"{done.get('host')}:{done.get('device') or '-'}")
        campaign.save(directory, doc)
        out(f"{item} {done['status']} rc={'' if done.get('rc') is None else done['rc']} "
            f"wall={done.get('wall_s')}s task={done.get('task')} host={done.get('host')}"
            + (f"\n    {done['reason']}" if done.get("reason") else ""))
    return on_done


def drive_campaign(directory: Path, doc: dict[str, Any], settings: Settings, cfg: SlurmConfig,
                   out: Callable[[str], None] = print, slurm: Slurm | None = None) -> int:
    """Submit (or re-attach to) the campaign's arrays, follow them, then write the report."""
    from harness import ab_finish

    slurm = slurm or Slurm()
    directory = directory.resolve()
    with ab_suite._sole_driver(directory):
        jobs = _submit_or_attach(directory, doc, settings, cfg, slurm, out)
        doc["state"] = "running"
        campaign.save(directory, doc)
        signum, missing = Watch(slurm, directory, jobs, _recorder(directory, doc, out), out,
                                cfg.detach).run()
        if signum is not None and cfg.detach:
            doc["state"] = "submitted"
            campaign.save(directory, doc)
            out(f"detached: job(s) {', '.join(jobs)} keep running; "
                f"harness ab --resume {directory} re-attaches")
            raise Interrupted(signum, "detach", directory)
        for item, state in missing.items():
            entry = campaign.unit_entry(doc, item)
            status = "interrupted" if signum is not None else "error"
            entry.update(status=status, reason=state.describe(), slurm_task=state.task)
            out(f"{item} {status}: {state.describe()}")
        ab_suite._drop_caches(directory, doc)
        if signum is not None:  # as a local campaign: the partial report, exit 128 + signum
            with deferred_signals(lambda _signum: None):  # a second signal: finish writing
                raise ab_finish.interrupted(directory, doc, settings, signum, sorted(missing),
                                            out)
        return _end_campaign(directory, doc, settings, out, ab_finish.finish)


def _end_campaign(directory: Path, doc: dict[str, Any], settings: Settings,
                  out: Callable[[str], None], finish: Callable) -> int:
    doc["state"] = "measured"
    campaign.save(directory, doc)
    rc = finish(directory, doc, settings, out)
    doc["state"] = "done"
    campaign.save(directory, doc)
    return rc


# --------------------------------------------------------------------------- batch


def batch_main(settings: Settings, flags: Mapping[str, Any], ops: Sequence[str],
               forwarded: Sequence[str], out: Callable[[str], None] = print) -> int:
    """`harness batch` under EXECUTOR=slurm: the plan (DRY_RUN) or the array, followed."""
    from harness import slurm

    cfg = slurm.config(settings, flags, os.environ)
    if not settings.dry_run:
        slurm.preflight(settings.out, out)
        return run_batch(settings, ops, forwarded, cfg, out)
    where = settings.out / "batch" / "<ts>"
    stages = [Stage("s1", stage_tasks(list(ops), cfg))]
    plan = {"kind": "batch", "dir": str(where)}
    walls_path = flags.get("walls_from") or os.environ.get("WALLS_FROM")
    walls = campaign.walls_from(Path(str(walls_path))) if walls_path else {}
    lines = [f"batch directory: {where} (not created); {len(ops)} operators",
             *describe(where, settings, cfg, stages, plan, Path.cwd()),
             *estimate(stages, walls, cfg, lambda op: op)]
    for line in lines:
        out(line)
    return EXIT_OK


def _final_states(slurm: Slurm, record: batch.BatchRecord, job: str, directory: Path) -> None:
    """Each operator's array task state once the array ended (COMPLETED, FAILED, ...)."""
    started = read_started(directory)
    tasks = {s.slurm_task for s in record.table.values() if s.slurm_task and not s.slurm_state}
    ended = slurm.ended([job], {t: started.get(t) for t in tasks}) if tasks else {}
    for status in list(record.table.values()):
        if (state := ended.get(status.slurm_task)) and not status.slurm_state:
            record.record(dataclasses.replace(status, slurm_state=state.state))


def run_batch(settings: Settings, ops: Sequence[str], forwarded: Sequence[str],
              cfg: SlurmConfig, out: Callable[[str], None] = print,
              slurm: Slurm | None = None) -> int:
    """`harness batch --executor slurm`: one array over the operators; ops_status.csv."""
    slurm = slurm or Slurm()
    record = batch.BatchRecord(settings.out, ops)
    directory = record.dir.resolve()
    stage = Stage("s1", stage_tasks(list(ops), cfg))
    plan = {"kind": "batch", "dir": str(directory), "argv": list(forwarded), "mode": cfg.unit}
    cwd = Path.cwd()
    script, _ = write_stage(directory, settings, cfg, stage, plan, cwd)
    argv = sbatch_argv(cfg, len(stage.tasks), script, directory / "slurm" / "logs", cwd)
    try:
        job = slurm.submit(argv)
    except HarnessError:
        shutil.rmtree(directory)  # claimed a moment ago by this process; nothing ran in it
        raise
    out(f"batch directory: {directory} (job {job}, {len(stage.tasks)} task(s)): "
        f"{shlex.join(argv)}")

    def on_done(op: str, done: dict) -> None:
        status = dataclasses.replace(batch.finished_status(
            op, f"{done.get('host')}:{done.get('device') or '-'}", done.get("rc"),
            float(done.get("wall_s") or 0), record.log(op), done["status"] == "interrupted"),
            slurm_task=str(done.get("task") or ""))
        out(batch._progress(record.record(status), len(ops), status))
        if done.get("reason"):
            out(f"    {done['reason']}")

    signum, missing = Watch(slurm, directory, {job: stage.tasks}, on_done, out,
                            cfg.detach).run()
    for op, state in missing.items():
        record.record(batch.OpStatus(op, status="interrupted" if signum else "error",
                                     slurm_task=state.task, slurm_state=state.state))
        out(f"{op}: {state.describe()}")
    _final_states(slurm, record, job, directory)
    if signum is not None:
        out(f"BATCH_INTERRUPTED signal={signal.Signals(signum).name} {record.counts()} "
            f"status={record.csv}" + (f" (job {job} keeps running)" if cfg.detach else ""))
        raise KeyboardInterrupt
    out(f"BATCH_DONE {record.counts()} status={record.csv}")
    ok = all(s.status == "ok" for s in record.table.values())
    return EXIT_OK if ok else EXIT_BENCHMARK_FAILED
