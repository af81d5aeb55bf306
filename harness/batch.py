"""`harness batch`: many operators, one `harness run` process each, scheduled over DEVICES."""

from __future__ import annotations

import csv
import io
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness import cmdline, errors, runner, spec, supervise
from harness.devices import select_devices
from harness.errors import PreflightError, UsageError
from harness.fsutil import atomic_write_text
from harness.identity import read_identity
from harness.preflight import CHECKS, collect_preflight
from harness.providers import flaggems
from harness.spec import OP_NAME, Settings
from harness.supervise import (
    GRACE_S,
    Running,
    Scheduler,
    deferred_signals,
    run_dir_from_log,
    say,
    stop_children,
)

COLUMNS = ("op", "node", "status", "rc", "rows", "backend", "device", "timer", "wall_s", "run",
           "slurm_task", "slurm_state")  # EXECUTOR=slurm: the array task and how it ended
STATUSES = ("ok", "failed", "error", "not_run", "interrupted")
# A batch takes every setting of `harness run` but these: what to run comes from OPS.
NOT_BATCH_VARS = ("OP", "OP_FILE", "TEST_NODE")
# Every child gets the batch's settings flags but these: BACKEND goes resolved, DEVICES as the
# child's one device, and a batch under DRY_RUN starts no child.
NOT_FORWARDED = ("BACKEND", "DEVICES", "DRY_RUN", *NOT_BATCH_VARS)
# A child runs exactly its --op: these must not reach it from the caller's environment.
CHILD_ENV_DROP = supervise.RUN_CHILD_ENV_DROP
# The checks of `harness run` that hold for every operator of the batch (nodes are resolved
# per operator); a batch that runs checks OUT before it claims its directory.
BATCH_CHECKS = tuple(name for name in CHECKS if name not in ("test_node", "dtypes"))
ALL_OPS = "all"  # OPS=all: every node of the tree


# --------------------------------------------------------------------------- what to run


def check_ops(items: Iterable[str], label: str) -> list[str]:
    """Validate operator names: non-empty, safe as a file name, each listed once."""
    ops: list[str] = []
    for item in items:
        if not OP_NAME.fullmatch(item):
            raise UsageError(f"{label}: {item!r} is not an operator name; expected letters, "
                             "digits, '_', '.', '-' (one operator per item)")
        if item in ops:
            raise UsageError(f"{label}: {item!r} is listed twice")
        ops.append(item)
    if not ops:
        raise UsageError(f"{label} names no operator")
    return ops


def parse_ops(value: str, label: str = "OPS") -> list[str]:
    """Operators of --ops: comma-separated, blanks around the commas ignored."""
    return check_ops((item.strip() for item in value.split(",") if item.strip()), label)


def parse_ops_file(text: str, label: str = "OPS_FILE") -> list[str]:
    """Operators of an ops file: one per line; `#` starts a comment; blank lines are skipped."""
    lines = (line.split("#", 1)[0].strip() for line in text.splitlines())
    return check_ops((line for line in lines if line), label)


def ops_from(flags: Mapping[str, object], env: Mapping[str, str]) -> list[str]:
    """OPS or OPS_FILE from the flags, else from the environment (flags win as a pair)."""
    ops, ops_file = flags.get("ops"), flags.get("ops_file")
    if not (ops or ops_file):
        ops, ops_file = env.get("OPS"), env.get("OPS_FILE")
    if ops and ops_file:
        raise UsageError("give OPS or OPS_FILE, not both")
    if ops:
        return parse_ops(str(ops))
    if not ops_file:
        raise UsageError("nothing to run: give OPS (--ops a,b,c) or OPS_FILE (--ops-file FILE)")
    path = Path(str(ops_file))
    label = f"OPS_FILE={str(path)!r}"
    if not path.exists():
        raise UsageError(f"{label} does not exist")
    if not path.is_file():
        raise UsageError(f"{label} is not a file; expected a file with one operator per line")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{label} cannot be read as UTF-8 text ({exc.__class__.__name__}); "
                         "expected a file with one operator per line") from None
    return parse_ops_file(text, label)


def all_ops(settings: Settings) -> dict[str, str]:
    """OPS=all: every benchmark node of the FlagGems tree outside its parallel files, by the
    operator name a run gives it; a name two nodes share gets -2, -3 ... on the later ones."""
    fg_dir = settings.flaggems_dir
    if fg_dir is None:
        raise PreflightError("flaggems_dir", f"FLAGGEMS_DIR is not set (BACKEND="
                             f"{settings.backend.name} has no embedded suite)")
    flaggems.check_layout(fg_dir)
    found: dict[str, str] = {}
    for node in flaggems.scan_tree(fg_dir):
        if "parallel" in node.path.rpartition("/")[2] or not node.function:
            continue
        name = base = flaggems.op_name_for(node)
        n = 1
        while name in found:
            n += 1
            name = f"{base}-{n}"
        found[name] = node.nodeid
    if not found:
        raise PreflightError("test_node", f"OPS='all': no benchmark node under {str(fg_dir)!r}")
    return found


def resolve_ops(settings: Settings, flags: Mapping[str, object], env: Mapping[str, str]
                ) -> list[str]:
    """The operators of OPS or OPS_FILE; OPS=all names every node of the tree (all_ops)."""
    ops = ops_from(flags, env)
    return list(all_ops(settings)) if ops == [ALL_OPS] else ops


def worker_devices(settings: Settings) -> list[str | None]:
    """One entry per worker: the devices of select_devices, or [None] for one unpinned
    worker where the backend has no accelerator or none is found."""
    return list(select_devices(settings) or [None])


def forwarded_flags(settings: Settings, flags: Mapping[str, object]) -> list[str]:
    """The settings flags every child gets: the resolved backend and what was given as a flag
    (values from the environment reach the child through its inherited environment)."""
    given = {var.make: flags.get(var.dest) for var in spec.VARS if var.make not in NOT_FORWARDED}
    return cmdline.flag_args({"BACKEND": settings.backend.name, **given})


def child_argv(forwarded: Sequence[str], op: str, device: str | None) -> list[str]:
    """`harness run` for one operator, pinned to `device` when there is one."""
    return cmdline.harness_argv("run", *cmdline.flag_args({"OP": op}), *forwarded,
                                *cmdline.flag_args({"DEVICES": device}))


def child_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of every child (default: this process's), less CHILD_ENV_DROP."""
    return supervise.child_env(environ, CHILD_ENV_DROP)


# --------------------------------------------------------------------------- status


@dataclass(frozen=True)
class OpStatus:
    """One line of ops_status.csv."""

    op: str
    status: str = "not_run"
    node: str = ""
    rc: int | None = None
    rows: int | None = None
    backend: str = ""
    device: str = ""
    timer: str = ""
    wall_s: float | None = None
    run: str = ""
    slurm_task: str = ""
    slurm_state: str = ""

    def row(self) -> dict[str, str]:
        return {c: "" if getattr(self, c) is None else str(getattr(self, c)) for c in COLUMNS}


def status_for(rc: int | None, *, interrupted: bool = False) -> str:
    """ok (0), failed (1: a benchmark failed), error (2-5: usage, preflight, pytest's own; or a
    crash or signal), not_run (never started), interrupted (stopped by the batch's Ctrl-C)."""
    if interrupted:
        return "interrupted"
    if rc is None:
        return "not_run"
    return {0: "ok", 1: "failed"}.get(rc, "error")


def render_csv(statuses: Iterable[OpStatus]) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(s.row() for s in statuses)
    return buf.getvalue()


def last_line(log: Path, tail: int = 4096) -> str:
    """The last non-blank line of a child's log: why an operator failed, most of the time."""
    with open(log, "rb") as fh:
        fh.seek(max(0, fh.seek(0, os.SEEK_END) - tail))
        lines = fh.read().decode("utf-8", errors="replace").splitlines()
    return next((line.strip() for line in reversed(lines) if line.strip()), "(empty log)")


def finished_status(op: str, device: str | None, rc: int | None, wall_s: float, log: Path,
                    interrupted: bool = False) -> OpStatus:
    """The status of a child that exited, read from its log and its run_identity.json."""
    run_dir = run_dir_from_log(log)
    ident: dict[str, object] = (read_identity(run_dir) if run_dir is not None else None) or {}
    return OpStatus(op=op, status=status_for(rc, interrupted=interrupted),
                    node=str(ident.get("node") or ""), rc=rc, rows=ident.get("rows"),
                    backend=str(ident.get("backend") or ""), device=device or "",
                    timer=str(ident.get("timer") or ""), wall_s=round(wall_s, 2),
                    run=str(run_dir) if run_dir else "")


# --------------------------------------------------------------------------- the batch


class BatchRecord:
    """A claimed batch directory: ops_status.csv, rewritten atomically on every change so that
    a killed batch leaves a valid file, and one log per operator under logs/."""

    def __init__(self, out_root: Path, ops: Sequence[str]) -> None:
        self.dir = runner.claim_run_dir(out_root, "batch", runner.utc_stamp())
        (self.dir / "logs").mkdir()
        self.csv = self.dir / "ops_status.csv"
        self.table = {op: OpStatus(op) for op in ops}
        self._save()

    def log(self, op: str) -> Path:
        return self.dir / "logs" / f"{op}.log"

    def record(self, status: OpStatus) -> int:
        """Record an operator's outcome; return how many operators have one now."""
        self.table[status.op] = status
        self._save()
        return sum(s.status != "not_run" for s in self.table.values())

    def counts(self) -> str:
        found = [s.status for s in self.table.values()]
        return " ".join(f"{name}={found.count(name)}" for name in STATUSES)

    def _save(self) -> None:
        atomic_write_text(self.csv, render_csv(self.table.values()))


def _progress(done: int, total: int, s: OpStatus) -> str:
    rows = "-" if s.rows is None else s.rows
    return (f"[{done}/{total}] {s.op} {s.status} rc={'' if s.rc is None else s.rc} rows={rows} "
            f"wall={s.wall_s}s device={s.device or '-'} run={s.run or '-'}")


def run_batch(settings: Settings, ops: Sequence[str], forwarded: Sequence[str], *,
              command: Callable[[str, str | None], list[str]] | None = None,
              out: Callable[[str], None] = say, grace_s: float = GRACE_S,
              poll_s: float = 0.1) -> int:
    """Run every operator in its own process; exit code 0 all ok, 1 otherwise; on SIGINT or
    SIGTERM stop every child, record the batch, and raise KeyboardInterrupt."""
    build = command or (lambda op, device: child_argv(forwarded, op, device))
    devices, record, env = worker_devices(settings), BatchRecord(settings.out, ops), child_env()
    out(f"batch directory: {record.dir} ({len(ops)} operators, {len(devices)} worker(s) on "
        f"devices {','.join(d or '-' for d in devices)})")

    def start(op: str, device: str | None) -> subprocess.Popen:
        return supervise.start_child(build(op, device), env, record.log(op))

    def on_start(job: Running) -> None:
        out(f"[start] {job.op} device={job.device or '-'} pid={job.child.pid} "
            f"log={record.log(job.op)}")

    def on_finish(job: Running, rc: int | None, interrupted: bool) -> None:
        status = finished_status(job.op, job.device, rc, time.monotonic() - job.started,
                                 record.log(job.op), interrupted)
        out(_progress(record.record(status), len(ops), status))
        if status.status in ("failed", "error"):
            out(f"    {last_line(record.log(job.op))}")

    scheduler = Scheduler(devices, start, on_start, on_finish,
                          stop=lambda children: stop_children(children, grace_s), poll_s=poll_s)
    with deferred_signals(scheduler.request_stop):
        signum = scheduler.run(ops)
    if signum is not None:
        out(f"BATCH_INTERRUPTED signal={signal.Signals(signum).name} {record.counts()} "
            f"status={record.csv}")
        raise KeyboardInterrupt
    out(f"BATCH_DONE {record.counts()} status={record.csv}")
    all_ok = all(s.status == "ok" for s in record.table.values())
    return errors.EXIT_OK if all_ok else errors.EXIT_BENCHMARK_FAILED


def resolve_nodes(settings: Settings, ops: Sequence[str]) -> dict[str, str]:
    """Each operator's benchmark node, or the PREFLIGHT_FAILED line that says why it has none;
    a FlagGems directory that cannot hold any node raises PreflightError."""
    fg_dir = settings.flaggems_dir
    if fg_dir is None:
        raise PreflightError("flaggems_dir", f"FLAGGEMS_DIR is not set (BACKEND="
                             f"{settings.backend.name} has no embedded suite)")
    flaggems.check_layout(fg_dir)
    nodes = flaggems.scan_tree(fg_dir)
    found = {}
    for op in ops:
        try:
            found[op] = flaggems.resolve_node(nodes, op=op, flaggems_dir=fg_dir).nodeid
        except PreflightError as exc:
            found[op] = str(exc)
    return found


def describe_dry_run(settings: Settings, ops: Sequence[str], forwarded: Sequence[str]
                     ) -> tuple[list[str], int]:
    """The plan of a batch, for --dry-run, and its exit code (3 when an operator has no node)."""
    devices = worker_devices(settings)
    try:
        nodes = resolve_nodes(settings, ops)
    except PreflightError as exc:  # reported with the batch's failed checks
        nodes = dict.fromkeys(ops, f"<unresolved: check {exc.check} failed>")
    lines = [f"batch directory: {settings.out / 'batch' / runner.utc_stamp()} (not created)",
             f"backend: {settings.backend.name}; {len(devices)} worker(s), one per device: "
             f"{','.join(d or '-' for d in devices)} (no device: the host, unpinned)",
             "each operator runs in its own process on the next free device; "
             "shown: the assignment when every operator takes equally long"]
    for i, op in enumerate(ops):
        device = devices[i % len(devices)]
        lines += [f"[{i + 1}/{len(ops)}] {op} device={device or '-'} node={nodes[op]}",
                  f"    {shlex.join(child_argv(forwarded, op, device))}"]
    failed = any(node.startswith(("PREFLIGHT_FAILED", "<unresolved")) for node in nodes.values())
    return lines, errors.EXIT_PREFLIGHT if failed else errors.EXIT_OK


def main(settings: Settings, flags: Mapping[str, object], out: Callable[[str], None] = say
         ) -> int:
    """`harness batch`: validate, then print the plan (--dry-run) or run it."""
    ops = resolve_ops(settings, flags, os.environ)
    forwarded = forwarded_flags(settings, flags)
    from harness import slurm

    if slurm.executor(flags, os.environ) == "slurm":
        from harness import slurm_drive

        return slurm_drive.batch_main(settings, flags, ops, forwarded, out)
    if settings.dry_run:  # the whole plan first, then every check that would fail
        checked = collect_preflight(settings, with_accelerator=False, checks=BATCH_CHECKS,
                                    report=out)
        lines, rc = describe_dry_run(settings, ops, forwarded)
        for line in lines:
            out(line)
        return max(rc, checked.write_failures(out, lambda line: print(line, file=sys.stderr)))
    checked = collect_preflight(settings, checks=("out",))
    if checked.failures:
        raise checked.failures[0].error
    return run_batch(settings, ops, forwarded, out=out)
