"""`harness ab`: a new campaign planned and run, or an earlier one resumed or extended."""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from harness import backends, stats
from harness.campaign import ab, checkout, driver, dryrun, ops, plan, stacks, where
from harness.campaign.document import (
    Campaign,
    ExecutorRecord,
    load,
    newest_alike,
)
from harness.contract.states import CampaignState
from harness.errors import (
    EXIT_OK,
    EXIT_PREFLIGHT,
    Interrupted,
    PreflightError,
    UsageError,
    choice_error,
)
from harness.executors import slurm
from harness.executors.base import Ended, Executor
from harness.history import recording
from harness.report import abjson, ci, gate
from harness.report.sources import AB_JSON
from harness.run import runner
from harness.run.preflight import Plan, PreflightResult, collect_preflight, run_preflight
from harness.settings import abspec, cmdline, spec, variables
from harness.settings.spec import Settings
from harness.stats import noisefloor

# Settings a resume may not change: they decide whether the new rounds compare with the old.
RESUME_FIXED = ("backend", "level", "mode")
# What a resume reads besides --resume, --only and the executor's flags: the fixed caliber
# (refused when it differs), where units run, how many rounds, and whether to only print.
RESUME_TAKES = ("BACKEND", "LEVEL", "MODE", "DEVICES", "ROUNDS", "DRY_RUN")
# The settings a unit's child gets; what to run comes from the unit (--node), DEVICES per child.
UNIT_VARS = tuple(v.make for v in spec.VARS if v.make not in (
    "OP", "OP_FILE", "TEST_NODE", "AXIS", "A", "B", "ROUNDS", "NOISE_FROM", "DEVICES"))


def _given(flags: Mapping[str, Any], env: Mapping[str, str], name: str) -> str | None:
    return spec.given(name, flags, env)


def settings_argv(settings: Settings) -> list[str]:
    """Every run setting, resolved, as flags (cmdline.to_argv): a campaign stores them, so that
    its units and a later resume run exactly the campaign's settings whatever the environment
    holds then, its paths absolute whatever directory the resume is typed in. What to run comes
    from each unit, its device from the executor."""
    def absolute(path: Path | None) -> Path | None:
        return None if path is None else Path(os.path.abspath(path))

    stored = dataclasses.replace(
        settings, shape_file=absolute(settings.shape_file),
        replay_from=absolute(settings.replay_from),
        flaggems_dir=absolute(settings.flaggems_dir), out=Path(os.path.abspath(settings.out)))
    return cmdline.to_argv(stored, op=None, op_file=None, test_node=None, devices=(),
                           dry_run=False)


def settings_from_argv(argv: list[str]) -> tuple[Settings, dict[str, Any]]:
    parser = argparse.ArgumentParser(add_help=False)
    spec.add_arguments(parser, UNIT_VARS)
    flags = vars(parser.parse_args(argv))
    return spec.resolve(flags), flags


def _workers(axis: ab.Axis, flags: Mapping[str, Any], env: Mapping[str, str]) -> str:
    """WORKERS for the campaign: 0 where each side's pytest runs in its image (a run in a
    container is a process of its own), else as given."""
    return "0" if axis.name == ab.AXIS_IMAGE else where.workers(flags, env)


def _executor(settings: Settings, cfg: slurm.SlurmConfig | None, directory: Path,
              campaign: Campaign, env: Mapping[str, str], out: Callable[[str], None],
              workers: str) -> Executor:
    """Where the campaign's units run; a cluster's submissions are kept in campaign.json,
    so that a resume re-attaches to them."""
    if cfg is not None and campaign.slurm is None:
        campaign.slurm = ExecutorRecord()
    return where.executor(settings, cfg, directory,
                          submissions=campaign.slurm.submissions if campaign.slurm else None,
                          saved=lambda: campaign.save(directory), out=out, env=env,
                          workers=workers)


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


def _operators(settings: Settings, flags: Mapping[str, Any], env: Mapping[str, str],
               out: Callable[[str], None], remote: bool = False
               ) -> tuple[dict[str, dict[str, Any]], Plan, PreflightResult | None]:
    """{op: {"node"} or {"reason"}}, the preflight plan of the first operator with a node and
    a dry run's preflight result (PreflightError when no operator has a node)."""
    if not ops.given(flags, env):
        first_plan, result = _preflight(settings, out, remote)
        return {first_plan.op: {"node": first_plan.node.nodeid}}, first_plan, result
    if settings.op or settings.test_node:
        raise UsageError("give OP (one operator) or OPS/OPS_FILE (several), not both")
    nodes = ops.operators(settings, ops.ops_from(flags, env))
    info = {op: ({"reason": n} if n.startswith("PREFLIGHT_FAILED") else {"node": n})
            for op, n in nodes.items()}
    first = next((v["node"] for v in info.values() if "node" in v), None)
    if first is None:
        for op, v in info.items():
            out(f"{op}: {v['reason']}")
        raise PreflightError("test_node", "no operator of OPS has a benchmark node")
    return info, *_preflight(dryrun.with_node(settings, first), out, remote)


def start(settings: Settings, flags: Mapping[str, Any], env: Mapping[str, str], axis: ab.Axis,
          ab_spec: abspec.AbSpec, out: Callable[[str], None] = print) -> int:
    """A new campaign: plan it, print it (DRY_RUN) or run it to its report. `flags` and `env`
    are what the user gave (the executor's settings, OPS, WALLS_FROM)."""
    # A floor or walls that cannot be used are refused before any check or collection runs.
    model = ab.noise_model_from(ab_spec.noise_from) if ab_spec.noise_from else None
    walls_path = flags.get("walls_from") or env.get("WALLS_FROM")
    walls = plan.walls_from(Path(walls_path)) if walls_path else {}
    cfg = where.config(settings, flags, env, task_image=axis.name != ab.AXIS_IMAGE)
    workers = _workers(axis, flags, env)
    timeout_s = where.unit_timeout(flags, env)  # refused before anything is planned or made
    commits = stacks.commits(settings, axis, ab_spec, out)
    with tempfile.TemporaryDirectory(prefix="zl-bench-") as scratch:
        info, first_plan, checked = _operators(
            stacks.scan_settings(settings, commits, Path(scratch)), flags, env, out,
            remote=cfg is not None)
    stacks.skip_one_sided(settings, commits, info, out)
    nodes = [v["node"] for v in info.values() if "node" in v]  # one that runs, where any does
    first = next((v["node"] for v in info.values() if "node" in v and "skipped" not in v),
                 nodes[0])
    axis, checked = stacks.sides(dryrun.with_node(settings, first), axis, ab_spec, commits, out,
                                 checked, local=cfg is None)
    label = next(iter(info)) if len(info) == 1 else "suite"
    parent = settings.out / "ab" / f"{axis.name}-{label}"
    campaign = plan.new_campaign(
        directory=parent / "<ts>", axis=axis,
        caliber=settings.caliber(), argv=settings_argv(settings), ops=info,
        rounds=ab_spec.rounds, walls=walls, walls_from=Path(walls_path) if walls_path else None)
    # With an A/A each row gets the floor of its latency; 1% is the least any row gets.
    campaign.noise_floor_pct, campaign.python = stats.MIN_NOISE_FLOOR_PCT, first_plan.python
    campaign.noise_floor_bands = model.to_json() if model else []
    campaign.noise_from = str(ab_spec.noise_from) if ab_spec.noise_from else None
    campaign.auto = {"min": ab_spec.auto[0], "max": ab_spec.auto[1]} if ab_spec.auto else None
    if (note := _unfinished_note(parent, campaign)) is not None:
        out(note)
    if settings.dry_run:
        where_to = parent / runner.utc_stamp()
        executor = _executor(settings, cfg, where_to, campaign, env, out, workers)
        for line in [*dryrun.describe(campaign, executor, where_to),
                     *dryrun.first_unit(campaign, settings, first_plan, executor, where_to)]:
            out(line)  # the whole plan first, then every check that would fail
        rc = checked.write_failures(out, _err) if checked else EXIT_OK
        where.preflight(cfg, settings.out, out, dry_run=True)
        # An operator without a node is in the plan with its PREFLIGHT_FAILED (as in batch).
        return max(rc, EXIT_PREFLIGHT if any("reason" in v for v in info.values()) else EXIT_OK)
    where.preflight(cfg, settings.out, out)
    if cfg is not None:  # what a resume submits with, unless given otherwise then
        campaign.slurm = ExecutorRecord(slurm.given_flags(flags, env))
    directory = runner.claim_run_dir(settings.out / "ab", f"{axis.name}-{label}",
                                     runner.utc_stamp())
    campaign.dir = str(directory)
    stacks.prepare(dryrun.with_node(settings, first), axis, commits, directory, out)
    campaign.save(directory)
    recording.record(flags, env, settings.out, directory, out)  # an interrupted one is there too
    executor = _executor(settings, cfg, directory, campaign, env, out, workers)
    return _drive_recorded(directory, campaign, settings, executor, flags, env, out, workers,
                           timeout_s)


def _drive_recorded(directory: Path, campaign: Campaign, settings: Settings, executor: Executor,
                    flags: Mapping[str, Any], env: Mapping[str, str],
                    out: Callable[[str], None], workers: str,
                    timeout_s: float | None, settled: Sequence[Ended] = ()) -> int:
    """Drive the campaign, then record it in the history store however it ended; write what
    CI reads, and exit 7 where FAIL_ON names a verdict the campaign holds (ci.conclude)."""
    def record() -> None:
        recording.record(flags, env, settings.out, directory, out)

    fail_on = gate.from_settings(flags, env)
    try:  # each finished round too: a driver killed outright leaves those rounds recorded
        rc = driver.drive(directory, campaign, settings, executor, out, timeout_s=timeout_s,
                          workers=workers, settled=settled, on_round=record)
    except Interrupted:  # the signal's exit stands; CI still gets what finished
        if campaign.state == CampaignState.INTERRUPTED:  # not a detached array: no ab.json
            ci.conclude(directory, EXIT_OK, fail_on, env, out)
        raise
    finally:
        record()
    return ci.conclude(directory, rc, fail_on, env, out)


def _unfinished_note(parent: Path, campaign: Campaign) -> str | None:
    """One line where the last campaign of this same command did not finish (Ctrl-C, a killed
    driver): a new one starts, and RESUME is what would complete that one."""
    earlier = newest_alike(parent, campaign)
    if earlier is None or earlier[1].state == CampaignState.DONE:
        return None
    directory, found = earlier
    return (f"note: the last campaign of this command, {directory}, is {found.state} with "
            f"{len(plan.units_to_run(found))} of {len(found.units)} units left; this starts a "
            f"new one; RESUME={directory} (harness ab --resume {directory}) completes that one")


def _err(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- resume


def _resume_settings(campaign: Campaign, flags: Mapping[str, Any], env: Mapping[str, str]
                     ) -> Settings:
    """The campaign's own settings; refused where BACKEND, LEVEL or MODE is given otherwise;
    DEVICES may change."""
    given = {}
    for name, key in (("BACKEND", "backend"), ("LEVEL", "level"), ("MODE", "mode")):
        if (value := _given(flags, env, name)) is not None:
            given[key] = backends.get(value).name if key == "backend" else value
    plan.check_caliber(campaign, given, RESUME_FIXED)
    settings, stored = settings_from_argv(campaign.argv)
    if (devices_value := _given(flags, env, "DEVICES")) is not None:
        settings = spec.resolve({**stored, "devices": devices_value})
    return settings


def _check_floor(directory: Path, campaign: Campaign) -> None:
    """A campaign started before a floor above 25% was refused is refused on resume: its
    verdicts would still lean on that floor."""
    ab.check_floor(noisefloor.NoiseModel.from_json(campaign.noise_floor_bands),
                   f"RESUME={str(directory)!r} (NOISE_FROM={campaign.noise_from!r}) holds",
                   "start the campaign again with NOISE_FROM an A/A whose floors are all at "
                   "most that")


def _added_rounds(directory: Path, campaign: Campaign, flags: Mapping[str, Any],
                  env: Mapping[str, str]) -> list:
    """The units ROUNDS and ONLY add to the campaign."""
    only = flags.get("only")
    if only is not None and only not in stats.OP_VERDICTS:
        raise choice_error("ONLY", only, stats.OP_VERDICTS)
    rounds_value = _given(flags, env, "ROUNDS")
    if rounds_value == abspec.AUTO:
        raise UsageError(f"ROUNDS={abspec.AUTO} is not accepted on resume: a ROUNDS=auto "
                         "campaign goes on adding rounds by itself; give a number to add rounds "
                         "up to it")
    rounds = (abspec.check_rounds(rounds_value, "ROUNDS", campaign.axis.name)
              if rounds_value else None)
    verdicts = _verdicts(directory, only)
    return plan.extend(campaign, rounds, only, verdicts)


def resume(flags: Mapping[str, Any], env: Mapping[str, str],
           out: Callable[[str], None] = print) -> int:
    """`harness ab --resume DIR [--rounds N] [--only VERDICT]`: run what is left, add rounds."""
    directory = Path(str(flags["resume"]))
    refuse_unused(flags, env)
    dry_run = _given(flags, env, "DRY_RUN") == "1"  # checked before anything is read or run
    timeout_s = where.unit_timeout(flags, env)
    campaign = load(directory)
    _check_floor(directory, campaign)
    settings = _resume_settings(campaign, flags, env)
    checkout.check_same_commit(directory, campaign, settings)
    # A campaign resumes where it ran unless EXECUTOR says otherwise.
    remote = slurm.executor(flags, env, "slurm" if campaign.slurm else "local") == "slurm"
    stored_flags = campaign.slurm.flags if campaign.slurm else {}
    cfg, kept = (slurm.resume_config(stored_flags, settings, flags, env,
                                     task_image=campaign.axis.name != ab.AXIS_IMAGE) if remote
                 else (None, {}))
    if flags.get("exclude") not in (None, ""):  # in memory: the driver writes it, under the lock
        plan.exclude(campaign, str(flags["exclude"]))
    new = _added_rounds(directory, campaign, flags, env)
    left_out = [op for op, info in campaign.ops.items() if info.excluded]
    if not dry_run:
        driver.check_no_driver(directory)
    settled = where.earlier_arrays(directory, campaign, remote)  # before anything is written
    out(f"resuming {directory}: {len(plan.units_to_run(campaign)) - len(settled)} units to run "
        f"({len(new)} added)" + (f"; excluded: {', '.join(left_out)}" if left_out else ""))
    workers = _workers(campaign.axis, flags, env)
    executor = _executor(settings, cfg, directory, campaign, env, out, workers)
    if dry_run:
        for line in dryrun.describe(campaign, executor, directory,
                                   "exists; nothing added to it"):
            out(line)
        return EXIT_OK
    where.preflight(cfg, directory, out)
    if cfg is not None and campaign.slurm is not None:
        campaign.slurm.flags = kept
    # The added rounds reach campaign.json only from the driver, which writes it once it holds
    # the campaign's lock: a resume refused because another driver runs changes nothing.
    return _drive_recorded(directory, campaign, settings, executor, flags, env, out, workers,
                           timeout_s, settled)


def refuse_resume_only(flags: Mapping[str, Any]) -> None:
    """EXCLUDE and ONLY change an existing campaign: refused, naming them, without RESUME."""
    if flags.get("exclude") not in (None, ""):
        raise UsageError(f"EXCLUDE={flags['exclude']!r} is only valid with RESUME (it finishes "
                         "an existing campaign without those operators); for a new campaign "
                         "leave them out of OPS")
    if flags.get("only") not in (None, ""):
        raise UsageError(f"ONLY={flags['only']!r} is only valid with RESUME (it adds rounds to "
                         "an existing campaign's operators of that verdict); a new campaign "
                         "runs every operator of OP or OPS")


def refuse_unused(flags: Mapping[str, Any], env: Mapping[str, str] | None = None) -> None:
    """A resume runs the campaign's own settings: a setting given with it that it would not
    use (OP=mm, DTYPES=...), by flag or exported, is refused rather than silently dropped."""
    env = {} if env is None else env
    by_make = {var.make: var for var in variables.TABLE}
    names = [v.make for v in spec.VARS if v.make not in RESUME_TAKES]
    unused = []
    for name in [*names, "OPS", "OPS_FILE", "WALLS_FROM"]:
        value, source = by_make[name].lookup(flags, env)
        if source != "default":  # named as the user wrote it: OP, or ZL_DTYPES exported
            unused.append(name if source == "flag" else by_make[name].label(source))
    if unused:
        raise UsageError(
            f"RESUME runs the campaign with its own settings; {', '.join(unused)} cannot be "
            "given with it (a resume takes ROUNDS, ONLY, EXCLUDE, DEVICES, DRY_RUN, EXECUTOR and "
            "the SLURM_ settings, and BACKEND, LEVEL, MODE only as the campaign has them; unset "
            "an exported one)")


def _verdicts(directory: Path, only: str | None) -> dict[str, str]:
    """Each operator's verdict in the campaign's ab.json, which ONLY picks operators by (none
    before a first ab.json was written); UsageError naming the file where it is corrupt."""
    if only is None or not (directory / AB_JSON).exists():
        return {}
    try:
        return {op: o.verdict for op, o in (abjson.read_ab(directory).operators or {}).items()}
    except UsageError as exc:
        raise UsageError(f"ONLY={only!r} picks operators by their verdict in the campaign's "
                         f"{AB_JSON}, which is corrupt: {exc}; a resume without ONLY "
                         "writes it afresh") from None
