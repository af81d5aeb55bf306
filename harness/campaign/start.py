"""`harness ab`: a new campaign planned and printed (DRY_RUN) or run to its report."""

from __future__ import annotations

import argparse
import dataclasses
import os
import signal
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from harness import stats
from harness.axes import Axis
from harness.campaign import ab, driver, dryrun, ops, plan, stacks, where
from harness.campaign.document import Campaign, newest_alike
from harness.contract.states import CampaignState
from harness.errors import EXIT_OK, EXIT_PREFLIGHT, Interrupted, PreflightError, UsageError
from harness.executors import Chosen, ExecutorDoc, procs
from harness.executors.base import Ended, Executor
from harness.history import recording
from harness.report import ci, gate
from harness.run import rundir, runner
from harness.run.preflight import Plan, PreflightResult, collect_preflight, run_preflight
from harness.settings import abspec, cmdline, spec
from harness.settings.spec import Settings

# The settings a unit's child gets; what to run comes from the unit (--node), DEVICES per child.
UNIT_VARS = tuple(v.make for v in spec.VARS if v.make not in (
    "OP", "OP_FILE", "TEST_NODE", "AXIS", "A", "B", "ROUNDS", "NOISE_FROM", "DEVICES"))


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


def campaign_workers(axis: Axis, flags: Mapping[str, Any], env: Mapping[str, str]) -> str:
    """WORKERS for the campaign: 0 where each side's pytest runs in its image (a run in a
    container is a process of its own), else as given."""
    return "0" if axis.kind.side_images else where.workers(flags, env)


def campaign_executor(settings: Settings, chosen: Chosen, directory: Path,
                      campaign: Campaign, env: Mapping[str, str], out: Callable[[str], None],
                      workers: str) -> Executor:
    """Where the campaign's units run. A kind that keeps state between runs (a cluster's
    submissions) keeps it in campaign.json's executor document, so that a resume re-attaches
    to them; a run elsewhere leaves that document as it is."""
    if chosen.kind.keeps and campaign.executor.name != chosen.kind.name:
        campaign.executor = ExecutorDoc(chosen.kind.name)
    state = campaign.executor.state if campaign.executor.name == chosen.kind.name else {}
    return where.executor(settings, chosen, directory, state=state,
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


def start(settings: Settings, flags: Mapping[str, Any], env: Mapping[str, str], axis: Axis,
          ab_spec: abspec.AbSpec, out: Callable[[str], None] = print,
          claimed: Callable[[Path], None] = lambda directory: None) -> int:
    """A new campaign: plan it, print it (DRY_RUN) or run it to its report. `flags` and `env`
    are what the user gave (executor settings, OPS, WALLS_FROM); `claimed` gets its folder."""
    # A floor or walls that cannot be used are refused before any check or collection runs.
    model = ab.noise_model_from(aa, settings.caliber()) if (aa := ab_spec.noise_from) else None
    walls_path = flags.get("walls_from") or env.get("WALLS_FROM")
    walls = plan.walls_from(Path(walls_path)) if walls_path else {}
    chosen = where.config(settings, flags, env, task_image=not axis.kind.side_images)
    workers = campaign_workers(axis, flags, env)
    timeout_s = where.unit_timeout(flags, env)  # refused before anything is planned or made
    commits = stacks.commits(settings, axis, ab_spec, out)
    with tempfile.TemporaryDirectory(prefix="zl-bench-") as scratch:
        info, first_plan, checked = _operators(
            stacks.scan_settings(settings, commits, Path(scratch)), flags, env, out,
            remote=chosen.kind.remote)
    stacks.skip_one_sided(settings, commits, info, out)
    nodes = [v["node"] for v in info.values() if "node" in v]  # one that runs, where any does
    first = next((v["node"] for v in info.values() if "node" in v and "skipped" not in v),
                 nodes[0])
    axis, checked = stacks.sides(dryrun.with_node(settings, first), axis, ab_spec, commits, out,
                                 checked, local=not chosen.kind.remote)
    label = next(iter(info)) if len(info) == 1 else "suite"
    parent = settings.out / "ab" / f"{axis.name}-{label}"
    campaign = plan.new_campaign(
        directory=parent / "<ts>", axis=axis,
        caliber=settings.caliber(), argv=settings_argv(settings), ops=info,
        rounds=ab_spec.rounds, walls=walls, walls_from=Path(walls_path) if walls_path else None)
    # With an A/A each row gets the floor of its latency; 1% (or NOISE_FLOOR) is the least.
    campaign.noise_floor_pct = ab_spec.floor_pct or stats.MIN_NOISE_FLOOR_PCT
    campaign.python = first_plan.python
    campaign.noise_floor_bands = model.to_json() if model else []
    campaign.noise_from = str(ab_spec.noise_from) if ab_spec.noise_from else None
    campaign.auto = {"min": ab_spec.auto[0], "max": ab_spec.auto[1]} if ab_spec.auto else None
    if (note := _unfinished_note(parent, campaign)) is not None:
        out(note)
    if settings.dry_run:
        where_to = parent / rundir.utc_stamp()
        executor = campaign_executor(settings, chosen, where_to, campaign, env, out, workers)
        for line in [*dryrun.describe(campaign, executor, where_to, workers=workers),
                     *dryrun.first_unit(campaign, settings, first_plan, executor, where_to)]:
            out(line)  # the whole plan first, then every check that would fail
        rc = checked.write_failures(out, _err) if checked else EXIT_OK
        where.preflight(chosen, settings.out, out, dry_run=True)
        # An operator without a node is in the plan with its PREFLIGHT_FAILED (as in batch).
        return max(rc, EXIT_PREFLIGHT if any("reason" in v for v in info.values()) else EXIT_OK)
    where.preflight(chosen, settings.out, out)
    # what a resume runs on, with these settings unless given otherwise then
    campaign.executor = ExecutorDoc(chosen.kind.name, chosen.given)
    directory = rundir.claim_run_dir(settings.out / "ab", f"{axis.name}-{label}",
                                     rundir.utc_stamp())
    campaign.dir = str(directory)
    claimed(directory)
    stacks.prepare(dryrun.with_node(settings, first), axis, commits, directory, out)
    campaign.save(directory)
    recording.record(flags, env, settings.out, directory, out)  # an interrupted one is there too
    executor = campaign_executor(settings, chosen, directory, campaign, env, out, workers)
    return drive_recorded(directory, campaign, settings, executor, flags, env, out, workers,
                           timeout_s)


def drive_recorded(directory: Path, campaign: Campaign, settings: Settings, executor: Executor,
                    flags: Mapping[str, Any], env: Mapping[str, str],
                    out: Callable[[str], None], workers: str,
                    timeout_s: float | None, settled: Sequence[Ended] = ()) -> int:
    """Drive the campaign, then record it in the history store however it ended; write what
    CI reads, and exit 7 where FAIL_ON names a verdict the campaign holds (ci.conclude)."""
    def record() -> None:
        recording.record(flags, env, settings.out, directory, out)

    fail_on = gate.from_settings(flags, env)
    # once every unit has ended, a signal waits for the report, receipt, store and CI files,
    # which only write down what is measured: stopped midway they would disagree. Then it
    # stands: the exit is 128 + N, and a bisection running this campaign stops too
    late = procs.HeldSignal()
    try:
        try:  # each finished round too: a driver killed outright leaves those rounds recorded
            rc = driver.drive(directory, campaign, settings, executor, out, timeout_s=timeout_s,
                              workers=workers, settled=settled, on_round=record, held=late)
        except Interrupted as stop:  # the signal's exit stands; CI still gets what finished
            if campaign.state == CampaignState.INTERRUPTED:  # not a detached array: no ab.json
                ci.conclude(directory, stop.exit_code, fail_on, env, out)
            raise
        finally:
            record()
        rc = ci.conclude(directory, rc, fail_on, env, out)
    finally:
        late.release()
    if late.signum is not None:
        out(f"{signal.Signals(late.signum).name} came after the last unit had ended: the "
            "campaign's files were written first")
        raise Interrupted(late.signum, "its report (every unit had ended)", directory)
    return rc


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
