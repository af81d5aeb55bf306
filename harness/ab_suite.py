"""`harness ab`: a campaign of units (operator, round) over DEVICES, its resume, and its report."""

from __future__ import annotations

import argparse
import dataclasses
import fcntl
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from harness import (
    ab,
    ab_unit,
    artifacts,
    backends,
    batch,
    campaign,
    cmdline,
    runner,
    spec,
    stats,
    supervise,
)
from harness.campaign import CACHE_DIR, LOGS_DIR, SIDES, Unit
from harness.errors import (
    EXIT_OK,
    EXIT_PREFLIGHT,
    PreflightError,
    UsageError,
    choice_error,
)
from harness.preflight import Plan, PreflightResult, collect_preflight, run_preflight
from harness.spec import Settings
from harness.supervise import GRACE_S, Running, Scheduler, deferred_signals, stop_children

LOCK_FILE = ".driver.lock"  # held by the one driver of a campaign
# Settings a resume may not change: they decide whether the new rounds compare with the old.
RESUME_FIXED = ("backend", "level", "mode")
# What a resume reads besides --resume, --only and the executor's flags: the fixed caliber
# (refused when it differs), where units run, how many rounds, and whether to only print.
RESUME_TAKES = ("BACKEND", "LEVEL", "MODE", "DEVICES", "ROUNDS", "DRY_RUN")
# The settings a unit's child gets; what to run comes from the unit (--node), DEVICES per child.
UNIT_VARS = tuple(v.make for v in spec.VARS if v.make not in (
    "OP", "OP_FILE", "TEST_NODE", "AXIS", "A", "B", "ROUNDS", "NOISE_FROM", "DEVICES"))


def _given(flags: Mapping[str, Any], env: Mapping[str, str], name: str) -> str | None:
    return spec.VARS_BY_MAKE[name].given(flags, env)


def settings_argv(settings: Settings) -> list[str]:
    """Every run setting, resolved, as flags (cmdline.to_argv): a campaign stores them, so that
    its units and a later resume run exactly the campaign's settings whatever the environment
    holds then. What to run comes from each unit, its device from the driver."""
    return cmdline.to_argv(settings, op=None, op_file=None, test_node=None, devices=(),
                           dry_run=False)


def settings_from_argv(argv: list[str]) -> tuple[Settings, dict[str, Any]]:
    parser = argparse.ArgumentParser(add_help=False)
    spec.add_arguments(parser, UNIT_VARS)
    flags = vars(parser.parse_args(argv))
    return spec.resolve(flags), flags


def unit_argv(directory: Path, argv: list[str], node: str, unit: str, device: str | None
              ) -> list[str]:
    """`harness ab-unit` for one unit: the campaign's settings, its node, pinned to `device`."""
    return cmdline.harness_argv("ab-unit", str(directory), unit, *argv,
                                *cmdline.flag_args({"TEST_NODE": node, "DEVICES": device}))


# --------------------------------------------------------------------------- a new campaign


def _preflight(settings: Settings, out: Callable[[str], None], remote: bool = False
               ) -> tuple[Plan, PreflightResult | None]:
    """The plan of a run; a dry run makes every check it can and keeps the failures for after
    its plan (None: a real run, whose preflight stops at the first failure). `remote`: the
    units run on a cluster's nodes, so this host needs no accelerator."""
    if not settings.dry_run:
        return run_preflight(settings, with_accelerator=not remote, report=out,
                             remote=remote), None
    result = collect_preflight(settings, with_accelerator=False, report=out, remote=remote)
    return runner.placeholder_plan(settings, result.plan), result


def _operators(settings: Settings, flags: Mapping[str, Any], out: Callable[[str], None],
               remote: bool = False
               ) -> tuple[dict[str, dict[str, Any]], Plan, PreflightResult | None]:
    """{op: {"node"} or {"reason"}}, the preflight plan of the first operator with a node and
    a dry run's preflight result (PreflightError when no operator has a node)."""
    many = any(flags.get(k) or os.environ.get(k.upper()) for k in ("ops", "ops_file"))
    if not many:
        plan, result = _preflight(settings, out, remote)
        return {plan.op: {"node": plan.node.nodeid}}, plan, result
    if settings.op or settings.test_node:
        raise UsageError("give OP (one operator) or OPS/OPS_FILE (several), not both")
    ops = batch.ops_from(flags, os.environ)
    nodes = (batch.all_ops(settings) if ops == [batch.ALL_OPS]
             else batch.resolve_nodes(settings, ops))
    info = {op: ({"reason": n} if n.startswith("PREFLIGHT_FAILED") else {"node": n})
            for op, n in nodes.items()}
    first = next((v["node"] for v in info.values() if "node" in v), None)
    if first is None:
        for op, v in info.items():
            out(f"{op}: {v['reason']}")
        raise PreflightError("test_node", "no operator of OPS has a benchmark node")
    return info, *_preflight(_with_node(settings, first), out, remote)


def start(settings: Settings, flags: Mapping[str, Any], axis: ab.Axis, ab_spec: spec.AbSpec,
          out: Callable[[str], None] = print) -> int:
    """A new campaign: plan it, print it (DRY_RUN) or run it to its report."""
    from harness import slurm, slurm_drive

    remote = slurm.executor(flags, os.environ) == "slurm"
    cfg = slurm.config(settings, flags, os.environ) if remote else None
    ops, plan, checked = _operators(settings, flags, out, remote)
    walls_path = flags.get("walls_from") or os.environ.get("WALLS_FROM")
    walls = campaign.walls_from(Path(walls_path)) if walls_path else {}
    floor = (ab.noise_floor_from(ab_spec.noise_from) if ab_spec.noise_from
             else stats.MIN_NOISE_FLOOR_PCT)
    label = next(iter(ops)) if len(ops) == 1 else "suite"
    parent = settings.out / "ab" / f"{axis.name}-{label}"
    doc = campaign.new_document(
        directory=parent / "<ts>", axis={"name": axis.name, "variable": axis.variable,
                                         "a": ab_spec.a, "b": ab_spec.b},
        caliber=settings.caliber(), argv=settings_argv(settings), ops=ops,
        rounds=ab_spec.rounds, walls=walls, walls_from=Path(walls_path) if walls_path else None)
    doc.update({"noise_floor_pct": floor, "python": plan.python,
                "noise_from": str(ab_spec.noise_from) if ab_spec.noise_from else None})
    devices = [] if remote else batch.worker_devices(settings)
    if settings.dry_run:
        where = parent / runner.utc_stamp()
        for line in [*describe(doc, devices, where),
                     *_first_unit(doc, settings, plan, where, bool(devices)),
                     *(slurm_drive.describe_campaign(doc, settings, cfg, where) if cfg else ())]:
            out(line)  # the whole plan first, then every check that would fail
        rc = checked.write_failures(out, _err) if checked else EXIT_OK
        # An operator without a node is in the plan with its PREFLIGHT_FAILED (as in batch).
        return max(rc, EXIT_PREFLIGHT if any("reason" in v for v in ops.values()) else EXIT_OK)
    if cfg:
        slurm.preflight(settings.out, out)
        doc["slurm"] = {"flags": slurm.given_flags(flags, os.environ), "submissions": []}
    directory = runner.claim_run_dir(settings.out / "ab", f"{axis.name}-{label}",
                                     runner.utc_stamp())
    doc["dir"] = str(directory)
    campaign.save(directory, doc)
    if cfg:
        return slurm_drive.drive_campaign(directory, doc, settings, cfg, out)
    return drive(directory, doc, settings, devices, out)


def describe(doc: Mapping[str, Any], devices: list[str | None], directory: Path,
             state: str = "not created") -> list[str]:
    """The unit plan per device and the side caches, for DRY_RUN."""
    axis = doc["axis"]
    lines = [f"campaign: {directory} ({state})",
             f"axis: {axis['name']} -> {axis['variable'] or 'no variable (A/A)'}; "
             f"A={axis['a']} B={axis['b']}"]
    for op, info in doc["ops"].items():
        lines.append(f"operator {op}: {info.get('node') or info.get('reason')}")
    switch = ab.Axis(axis["name"], axis["variable"])
    for side in SIDES:
        value = switch.env(axis["a"] if side == "A" else axis["b"])
        env = {**value, **ab_unit.cache_env(directory, side)}
        mode = "A/r0 tunes and records" if side == "A" else "replays A/r0 strictly"
        lines.append(f"side {side}: " + " ".join(f"{k}={v}" for k, v in env.items())
                     + f" ({mode}; cache removed at the end)")
    todo = campaign.units_to_run(doc)
    placed = campaign.deal(todo, devices, doc.get("walls")) if devices else []
    lines.append(f"{len(todo)} units, round-major, longest first within a round "
                 f"({'walls from ' + doc['walls_from'] if doc.get('walls_from') else 'no walls'})"
                 "; a unit runs its sides back to back: r0 A B, r1 B A, ...")
    for device in devices:
        mine = [u for d, u in placed if d == device]
        lines.append(f"device {device or '-'}: "
                     + ", ".join(f"{u.id}[{''.join(u.sides)}]" for u in mine))
    return lines


def _first_unit(doc: Mapping[str, Any], settings: Settings, plan: Any, directory: Path,
                devices: bool = True) -> list[str]:
    """The first unit's child command line and the pytest run of its side A."""
    todo = campaign.units_to_run(doc)
    if not todo:
        return []
    unit = todo[0]
    node = doc["ops"][unit.op]["node"]
    device = (batch.worker_devices(settings) if devices else [None])[0]
    argv = unit_argv(directory, doc["argv"], node, unit.id, device)
    step = ab.Step("A", unit.round, doc["axis"]["a"])
    pinned = dataclasses.replace(settings, devices=(device,)) if device else settings
    run = ab.side_settings(_with_node(pinned, node), step, directory / unit.op)
    env = {**ab.Axis(doc["axis"]["name"], doc["axis"]["variable"]).env(step.value),
           **ab_unit.cache_env(directory, "A")}
    return [f"first unit: {shlex.join(argv)}", "its side A, the campaign's first run:",
            *runner.describe_dry_run(run, plan, directory / unit.run_rel("A"), env)]


def _err(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _with_node(settings: Settings, node: str) -> Settings:
    return dataclasses.replace(settings, op=None, op_file=None, test_node=node)


# --------------------------------------------------------------------------- resume


def resume(flags: Mapping[str, Any], out: Callable[[str], None] = print) -> int:
    """`harness ab --resume DIR [--rounds N] [--only VERDICT]`: run what is left, add rounds."""
    directory = Path(str(flags["resume"]))
    refuse_unused(flags)
    doc = campaign.load(directory)
    given = {}
    for name, key in (("BACKEND", "backend"), ("LEVEL", "level"), ("MODE", "mode")):
        if (value := _given(flags, os.environ, name)) is not None:
            given[key] = backends.get(value).name if key == "backend" else value
    campaign.check_caliber(doc, given, RESUME_FIXED)
    from harness import slurm, slurm_drive

    # A campaign resumes where it ran unless EXECUTOR says otherwise.
    remote = slurm.executor(flags, os.environ, "slurm" if doc.get("slurm") else "local"
                            ) == "slurm"
    settings, stored = settings_from_argv(doc["argv"])
    if (devices_value := _given(flags, os.environ, "DEVICES")) is not None:
        settings = spec.resolve({**stored, "devices": devices_value})
    cfg, kept = slurm.resume_config(doc, settings, flags, os.environ) if remote else (None, {})
    only = flags.get("only")
    if only is not None and only not in stats.OP_VERDICTS:
        raise choice_error("ONLY", only, stats.OP_VERDICTS)
    rounds_value = _given(flags, os.environ, "ROUNDS")
    rounds = (spec.resolve_ab({"axis": "-", "rounds": rounds_value}, {}).rounds
              if rounds_value else None)
    verdicts = {op: v["verdict"] for op, v in (_load_operators(directory)).items()}
    new = campaign.extend(doc, rounds, only, verdicts)
    out(f"resuming {directory}: {len(campaign.units_to_run(doc))} units to run "
        f"({len(new)} added)")
    devices = [] if cfg else batch.worker_devices(settings)
    if _given(flags, os.environ, "DRY_RUN") == "1":
        for line in [*describe(doc, devices, directory, "exists; nothing added to it"),
                     *(slurm_drive.describe_campaign(doc, settings, cfg, directory)
                       if cfg else ())]:
            out(line)
        return EXIT_OK
    campaign.save(directory, doc)
    if cfg:
        slurm.preflight(directory, out)
        doc.setdefault("slurm", {"flags": {}, "submissions": []})["flags"] = kept
        return slurm_drive.drive_campaign(directory, doc, settings, cfg, out)
    return drive(directory, doc, settings, devices, out)


def refuse_unused(flags: Mapping[str, Any]) -> None:
    """A resume runs the campaign's own settings: a setting given with it that it would not
    use (OP=mm, DTYPES=...) is refused rather than silently dropped."""
    unused = [var.make for var in spec.VARS
              if var.make not in RESUME_TAKES and flags.get(var.dest) not in (None, "")]
    unused += [name for name, dest in (("OPS", "ops"), ("OPS_FILE", "ops_file"),
                                       ("WALLS_FROM", "walls_from"))
               if flags.get(dest) not in (None, "")]
    if unused:
        raise UsageError(
            f"RESUME runs the campaign with its own settings; {', '.join(unused)} cannot be "
            "given with it (a resume takes ROUNDS, ONLY, DEVICES, DRY_RUN, EXECUTOR and the "
            "SLURM_ settings, and BACKEND, LEVEL, MODE only as the campaign has them)")


def _load_operators(directory: Path) -> dict[str, Any]:
    from harness import comparison

    try:
        return comparison.load_ab(directory).get("operators") or {}
    except UsageError:
        return {}


# --------------------------------------------------------------------------- running units


class _Units:
    """The driver's side of the scheduler: start a unit's child, record how it ended."""

    def __init__(self, directory: Path, doc: dict[str, Any], total_todo: int,
                 out: Callable[[str], None], workers: int = 1) -> None:
        self.directory, self.doc, self.out = directory, doc, out
        self.status = campaign.status_map(doc)
        self.env, self.began = batch.child_env(), time.monotonic()
        self.total_todo, self.workers = total_todo, workers
        self.walls: list[float] = []  # of the units that ran to their end in this session
        self.running: dict[str, float] = {}  # unit -> when it started
        self.stopped: list[str] = []  # the units a signal stopped

    def log(self, unit_id: str) -> Path:
        return self.directory / LOGS_DIR / f"{unit_id.replace('/', '-')}.log"

    def ready(self, unit_id: str) -> bool:
        return campaign.ready(campaign.parse_unit_id(unit_id), self.status)

    def start(self, unit_id: str, device: str | None) -> subprocess.Popen:
        entry = campaign.unit_entry(self.doc, unit_id)
        entry.update(status="running", device=device, attempts=entry["attempts"] + 1)
        self.status[unit_id] = "running"
        campaign.save(self.directory, self.doc)  # a killed driver leaves the unit to rerun
        node = self.doc["ops"][entry["op"]]["node"]
        argv = unit_argv(self.directory, self.doc["argv"], node, unit_id, device)
        # A rerun of the unit appends to its log: the earlier attempt's lines stay readable.
        return supervise.start_child(argv, self.env, self.log(unit_id), append=True)

    def on_start(self, job: Running) -> None:
        self.running[job.op] = job.started
        unit = campaign.parse_unit_id(job.op)
        self.out(f"[start] {job.op} sides={' '.join(unit.sides)} device={job.device or '-'} "
                 f"log={self.log(job.op)}")

    def on_finish(self, job: Running, rc: int | None, interrupted: bool) -> None:
        entry = campaign.unit_entry(self.doc, job.op)
        state = batch.status_for(rc, interrupted=interrupted)
        reason = batch.last_line(self.log(job.op)) if state in ("failed", "error") else None
        entry.update(status=state, rc=rc, wall_s=round(time.monotonic() - job.started, 2),
                     reason=reason)
        self.status[job.op] = state
        campaign.save(self.directory, self.doc)
        del self.running[job.op]
        if interrupted:
            self.stopped.append(job.op)
        else:
            self.walls.append(entry["wall_s"])
        units = self.doc["units"]
        done = sum(u["status"] in campaign.FINISHED for u in units)
        now = time.monotonic()
        elapsed = now - self.began
        eta = campaign.eta_from_walls(
            self.walls, [now - t for t in self.running.values()],
            self.total_todo - len(self.walls) - len(self.running), self.workers)
        self.out(f"[{done}/{len(units)}] {job.op} {state} rc={'' if rc is None else rc} "
                 f"wall={entry['wall_s']}s device={job.device or '-'} elapsed={elapsed:.0f}s "
                 f"eta={'-' if eta is None else f'{eta:.0f}s'}"
                 + (f"\n    {reason}" if reason else ""))


@contextmanager
def _sole_driver(directory: Path) -> Iterator[None]:
    """Hold the campaign's lock: two drivers would run its units twice and overwrite each
    other's campaign.json."""
    with open(directory / LOCK_FILE, "a") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise UsageError(f"campaign {str(directory)!r} is being run by another harness "
                             "process; wait for it, or stop it and resume") from None
        yield


def drive(directory: Path, doc: dict[str, Any], settings: Settings, devices: list[str | None],
          out: Callable[[str], None] = print, grace_s: float = GRACE_S,
          poll_s: float = 0.1) -> int:
    """Run every unit not finished, one child process each, then write the report. SIGINT,
    SIGTERM or SIGHUP stop every unit's process group (the unit stops its pytest); the
    campaign is written as interrupted from the units that finished, and errors.Interrupted
    raised."""
    from harness import ab_finish

    todo = campaign.units_to_run(doc)
    with _sole_driver(directory):
        (directory / LOGS_DIR).mkdir(exist_ok=True)
        for side in SIDES:
            for kind in ("flaggems", "triton"):
                (ab_unit.side_cache(directory, side) / kind).mkdir(parents=True, exist_ok=True)
        out(f"campaign directory: {directory} ({len(todo)} units to run of "
            f"{len(doc['units'])}, {len(devices)} worker(s) on devices "
            f"{','.join(d or '-' for d in devices)})")
        units = _Units(directory, doc, len(todo), out, workers=len(devices))
        scheduler = Scheduler(devices, units.start, units.on_start, units.on_finish,
                              stop=lambda children: stop_children(
                                  children, grace_s, scheduler.signal or signal.SIGTERM),
                              poll_s=poll_s)
        doc["state"] = "running"
        doc.pop("interrupted", None)  # a resume: the earlier stop is history
        campaign.save(directory, doc)
        try:
            with deferred_signals(scheduler.request_stop):
                signum = scheduler.run([u.id for u in todo], ready=units.ready)
        finally:
            _drop_caches(directory, doc)
        blocked = sorted({u["op"] for u in doc["units"] if u["status"] == campaign.PENDING})
        if signum is None and blocked:
            out(f"round 0 of {', '.join(blocked)} did not finish, so their later rounds did not "
                f"run: harness ab --resume {directory} reruns them")
        if signum is not None:
            with deferred_signals(lambda _signum: None):  # a second signal: finish writing
                raise ab_finish.interrupted(directory, doc, settings, signum, units.stopped,
                                            out)
        doc["state"] = "measured"
        campaign.save(directory, doc)
        rc = ab_finish.finish(directory, doc, settings, out)
        doc["state"] = "done"
        campaign.save(directory, doc)
        return rc


def _drop_caches(directory: Path, doc: dict[str, Any]) -> None:
    """Fingerprint what each side's cache compiled (kept in campaign.json for liveness), then
    remove the caches: a resume starts them afresh."""
    seen = doc.setdefault("side_artifacts", {})
    for side in SIDES:
        cache = ab_unit.side_cache(directory, side)
        if (cache / "triton").is_dir():
            found = artifacts.artifact_hashes(cache / "triton", cache.resolve())
            seen[side] = sorted({*seen.get(side, ()), *found})
    campaign.save(directory, doc)
    shutil.rmtree(directory / CACHE_DIR, ignore_errors=True)


def run_unit_command(directory: Path, unit_id: str, settings: Settings,
                     out: Callable[[str], None] = print) -> int:
    """`harness ab-unit DIR UNIT`: a unit's two sides (the driver and a Slurm task call it)."""
    doc = campaign.load(directory)
    entry = campaign.unit_entry(doc, unit_id)
    unit = Unit(entry["op"], entry["round"])
    plan = run_preflight(settings, report=out)
    return ab_unit.run_unit(settings, plan, directory, unit, doc["axis"], out)

