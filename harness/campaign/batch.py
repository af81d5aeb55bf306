"""`harness batch`: many operators, one `harness run` task each, through an executor."""

from __future__ import annotations

import shlex
import shutil
import signal
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from harness import errors, executors
from harness.campaign import ops as ops_
from harness.campaign import plan, where
from harness.contract.identity import RunIdentity, read_identity
from harness.contract.ops_status import OPS_STATUS_CSV, OpStatus, render_csv
from harness.contract.states import ERROR, FAILED, NOT_RUN, OK, RUNNING, SKIPPED, TASK_ENDS
from harness.errors import HarnessError, PreflightError
from harness.executors.base import Ended, Executor, Task
from harness.executors.procs import say
from harness.fsutil import atomic_write_text
from harness.history import recording
from harness.run import rundir
from harness.run.preflight import CHECKS, collect_preflight
from harness.run.rundir import run_dir_from_log
from harness.settings import cmdline, spec
from harness.settings.spec import Settings
from harness.settings.variables import WALL_MULTIPLE

# A batch takes every setting of `harness run` but these: what to run comes from OPS.
NOT_BATCH_VARS = ("OP", "OP_FILE", "TEST_NODE")
# Every child gets the batch's settings flags but these: BACKEND goes resolved, DEVICES as the
# child's one device, and a batch under DRY_RUN starts no child.
NOT_FORWARDED = ("BACKEND", "DEVICES", "DRY_RUN", *NOT_BATCH_VARS)
# The checks of `harness run` that hold for every operator of the batch (nodes are resolved
# per operator); a batch that runs checks OUT before it claims its directory.
BATCH_CHECKS = tuple(name for name in CHECKS if name not in ("test_node", "dtypes"))


def forwarded_flags(settings: Settings, flags: Mapping[str, object]) -> list[str]:
    """The settings flags every child gets: the resolved backend and what was given as a flag
    (values from the environment reach the child through its inherited environment)."""
    given = {var.make: flags.get(var.dest) for var in spec.VARS if var.make not in NOT_FORWARDED}
    return cmdline.flag_args({"BACKEND": settings.backend.name, **given})


def child_argv(forwarded: Sequence[str], op: str) -> list[str]:
    """`harness run` for one operator (the executor adds its device)."""
    return cmdline.harness_argv("run", *cmdline.flag_args({"OP": op}), *forwarded)


# --------------------------------------------------------------------------- status


def finished_status(end: Ended, log: Path) -> OpStatus:
    """The status of a task that ended, read from its log and its run_identity.json."""
    run_dir = run_dir_from_log(log)
    ident = (read_identity(run_dir) if run_dir is not None else None) or RunIdentity({})
    # exit 0 is also a run whose tests pytest skipped: its identity says so, and why
    skipped = end.state == OK and ident.state == SKIPPED
    return OpStatus(op=end.task, status=SKIPPED if skipped else end.state,
                    node=ident.node or "", rc=end.rc, rows=ident.rows,
                    backend=ident.backend or "",
                    device="" if end.where == "-" else end.where,
                    timer=ident.timer or "", wall_s=end.wall_s,
                    # resolved, as a run's own record is: the child names it relative to
                    # where it ran (OUT=runs), which a reader elsewhere would not find
                    run=str(run_dir.resolve()) if run_dir else "",
                    facts={k: v for k, v in end.facts.items() if v},
                    reason=_reason(end, ident, skipped))


def _reason(end: Ended, ident: RunIdentity, skipped: bool) -> str:
    """pytest's skip reason; the run's own reason where it ended as the executor saw it
    (failed, error), not its log's last line, which is the whole RUN_DONE summary; else the
    executor's (a limit, a signal, a child that never claimed a run)."""
    why = ident.reason
    if why and (skipped or end.state in (FAILED, ERROR) and ident.state == end.state):
        return why
    return end.reason or ""


class BatchRecord:
    """A claimed batch directory: ops_status.csv, rewritten atomically on every change so that
    a killed batch leaves a valid file, and one log per operator under logs/."""

    def __init__(self, out_root: Path, ops: Sequence[str]) -> None:
        self.dir = rundir.claim_run_dir(out_root, "batch", rundir.utc_stamp())
        (self.dir / "logs").mkdir()
        self.csv = self.dir / OPS_STATUS_CSV
        self.table = {op: OpStatus(op) for op in ops}
        self._save()

    def log(self, op: str) -> Path:
        return self.dir / "logs" / f"{op}.log"

    def record(self, status: OpStatus) -> int:
        """Record an operator's outcome; return how many operators have one now."""
        self.table[status.op] = status
        self._save()
        return sum(s.status not in (NOT_RUN, RUNNING) for s in self.table.values())

    def mark_running(self, op: str, device: str) -> None:
        """Record that `op` began (on `device`); its end replaces this."""
        if op in self.table:
            self.table[op] = replace(self.table[op], status=RUNNING, device=device)
            self._save()

    def counts(self) -> str:
        found = [s.status for s in self.table.values()]
        return " ".join(f"{name}={found.count(name)}" for name in TASK_ENDS)

    def _save(self) -> None:
        atomic_write_text(self.csv, render_csv(self.table.values(), executors.fact_names()))


class _Events:
    """The batch's side of the executor: ops_status.csv and a line per operator."""

    def __init__(self, record: BatchRecord, out: Callable[[str], None]) -> None:
        self.record, self.out = record, out

    def queued(self, task: Task, where: str) -> None:
        """Nothing to record: the operator stays not_run until it ends."""

    def started(self, task: Task, where: str, pid: int | None = None) -> None:
        """Record the operator running: a batch whose driver is killed outright leaves it
        running in ops_status.csv, not not_run, as if it had never begun."""
        self.record.mark_running(task.id, "" if where == "-" else where)
        self.out(f"[start] {task.id} device={where} pid={pid or '-'} log={task.log}")

    def ended(self, task: Task, end: Ended) -> None:
        s = finished_status(end, task.log)
        rows = "-" if s.rows is None else s.rows
        self.out(f"[{self.record.record(s)}/{len(self.record.table)}] {s.op} {s.status} "
                 f"rc={'' if s.rc is None else s.rc} rows={rows} wall={s.wall_s}s "
                 f"device={s.device or '-'} run={s.run or '-'}")
        if s.reason:
            self.out(f"    {s.reason}")


def run_batch(record: BatchRecord, ops: Sequence[str], forwarded: Sequence[str],
              executor: Executor, *, command: Callable[[str], list[str]] | None = None,
              out: Callable[[str], None] = say, timeout_s: float | None = None,
              walls: Mapping[str, float] | None = None) -> int:
    """Run every operator of `record` as a task of `executor`, each for at most `timeout_s`
    (UNIT_TIMEOUT; more for an operator of a known wall, plan.unit_limit); exit code 0 when
    every operator is ok or skipped, 1 otherwise; on a signal record the batch and raise
    Interrupted (the CLI exits 128 + the signal). A plan the executor refuses before anything
    ran (a cluster's sbatch) leaves no batch directory."""
    build = command or (lambda op: child_argv(forwarded, op))
    walls = walls or {}
    tasks = [Task(op, tuple(build(op)), record.log(op),
                  timeout_s=plan.unit_limit(timeout_s, walls.get(op))) for op in ops]
    out(f"batch directory: {record.dir} ({len(ops)} operators; executor {executor.name})")
    try:
        outcome = executor.run(tasks, _Events(record, out))
    except HarnessError:
        if all(s.status == NOT_RUN for s in record.table.values()):
            shutil.rmtree(record.dir)  # claimed a moment ago by this process; nothing ran
        raise
    for op, facts in outcome.facts.items():  # what the executor learned after the end
        if op in record.table and any(facts.values()):
            found = record.table[op]
            record.record(replace(found, facts={**found.facts,
                                                **{k: v for k, v in facts.items() if v}}))
    if outcome.signal is not None:
        out(f"BATCH_INTERRUPTED signal={signal.Signals(outcome.signal).name} "
            f"{record.counts()} status={record.csv}"
            + (" (the tasks keep running)" if outcome.detached else ""))
        raise errors.Interrupted(outcome.signal, "batch", record.dir)
    out(f"BATCH_DONE {record.counts()} status={record.csv}")
    all_ok = all(s.status in (OK, SKIPPED) for s in record.table.values())
    return errors.EXIT_OK if all_ok else errors.EXIT_BENCHMARK_FAILED


def describe_dry_run(settings: Settings, ops: Sequence[str], forwarded: Sequence[str],
                     executor: Executor, walls: Mapping[str, float] | None = None
                     ) -> tuple[list[str], int]:
    """The plan of a batch, for --dry-run, and its exit code (3 when an operator has no node)."""
    try:
        nodes = ops_.operators(settings, ops)
    except PreflightError as exc:  # reported with the batch's failed checks
        nodes = dict.fromkeys(ops, f"<unresolved: check {exc.check} failed>")
    where_to = settings.out / "batch" / rundir.utc_stamp()
    lines = [f"batch directory: {where_to} (not created); {len(ops)} operators",
             f"backend: {settings.backend.name}; executor {executor.name}: each operator runs "
             "in its own process on the next free device"]
    tasks = [Task(op, tuple(child_argv(forwarded, op)), where_to / "logs" / f"{op}.log")
             for op in ops]
    for i, task in enumerate(tasks):
        lines += [f"[{i + 1}/{len(ops)}] {task.id} node={nodes[task.id]}",
                  f"    {shlex.join(task.argv)}"]
    lines += executor.describe(tasks, walls or {})
    failed = any(node.startswith(("PREFLIGHT_FAILED", "<unresolved")) for node in nodes.values())
    return lines, errors.EXIT_PREFLIGHT if failed else errors.EXIT_OK


def main(settings: Settings, flags: Mapping[str, object], env: Mapping[str, str],
         out: Callable[[str], None] = say) -> int:
    """`harness batch`: validate, then print the plan (--dry-run) or run it; `flags` and `env`
    are what the user gave (OPS, WALLS_FROM, the executor's settings)."""
    ops = ops_.resolve_ops(settings, flags, env)
    forwarded = forwarded_flags(settings, flags)
    chosen = where.config(settings, flags, env)
    timeout_s = where.unit_timeout(flags, env)
    workers = where.workers(flags, env, sides=False)
    walls_path = flags.get("walls_from") or env.get("WALLS_FROM")
    walls = plan.walls_from(Path(str(walls_path))) if walls_path else {}
    if settings.dry_run:  # the whole plan first, then every check that would fail
        executor = where.executor(settings, chosen, settings.out / "batch" / "<ts>", out=out,
                                  env=env, workers=workers)
        checked = collect_preflight(settings, with_accelerator=False, checks=BATCH_CHECKS,
                                    report=out, remote=chosen.kind.remote)
        lines, rc = describe_dry_run(settings, ops, forwarded, executor, walls)
        lines.append("each operator stopped after " + (
            f"{timeout_s} s (UNIT_TIMEOUT"
            f"{f', or {WALL_MULTIPLE}x its wall in WALLS_FROM' if walls else ''})"
            if timeout_s else "no limit (UNIT_TIMEOUT=0)"))
        for line in lines:
            out(line)
        return max(rc, checked.write_failures(out, lambda line: print(line, file=sys.stderr)))
    where.preflight(chosen, settings.out, out)
    checked = collect_preflight(settings, checks=("out",))
    if checked.failures:
        raise checked.failures[0].error
    record = BatchRecord(settings.out, ops)
    executor = where.executor(settings, chosen, record.dir.resolve(), out=out, env=env,
                              workers=workers)
    try:
        return run_batch(record, ops, forwarded, executor, out=out, timeout_s=timeout_s,
                         walls=walls)
    finally:  # interrupted too: what finished is in the store
        if record.dir.is_dir():
            recording.record(flags, env, settings.out, record.dir, out)
