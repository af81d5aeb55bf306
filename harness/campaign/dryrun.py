"""A campaign's plan in words, for DRY_RUN: its axis, operators, sides, units and first run."""

from __future__ import annotations

import dataclasses
import shlex
from pathlib import Path

from harness.campaign import ab, driver, plan, projection
from harness.campaign.document import Campaign, walls_by_op
from harness.campaign.plan import SIDES
from harness.campaign.unit import cache_env, side_base
from harness.contract.states import FINISHED
from harness.executors.base import Executor
from harness.run import runner
from harness.run.preflight import Plan
from harness.settings import cmdline
from harness.settings.spec import Settings


def describe(campaign: Campaign, executor: Executor, directory: Path,
             state: str = "not created", workers: str = "1") -> list[str]:
    """The campaign's plan, for DRY_RUN: its operators, each side's switch and cache, the
    units and where the executor would run them, and their wall projected (`workers`:
    WORKERS)."""
    axis = campaign.axis
    lines = [f"campaign: {directory} ({state})",
             f"axis: {axis.name} -> {axis.kind.plan_text(axis, directory)}; A={axis.a} "
             f"B={axis.b}"]
    for op, op_info in campaign.ops.items():
        lines.append(f"operator {op}: {op_info.node or op_info.reason}"
                     + (f" (skipped: {op_info.skipped})" if op_info.skipped else ""))
    for side in SIDES:
        env = {**axis.side_env(side), **cache_env(directory, side)}
        mode = (f"{side}/r0 tunes and records" if side == "A" or axis.tune == "each"
                else "replays A/r0 strictly")
        if axis.python(side) or axis.image(side):
            mode = f"runs {axis.python(side) or axis.image(side)}; {mode}"
        lines.append(f"side {side}: " + " ".join(f"{k}={v}" for k, v in env.items())
                     + f" ({mode}; cache removed at the end)")
    tasks = driver.unit_tasks(directory, campaign)
    walls = campaign.walls or walls_by_op(campaign)
    lines.append(f"{len(tasks)} units, round-major, longest first within a round "
                 f"({'walls from ' + campaign.walls_from if campaign.walls_from else 'no walls'})"
                 "; a unit runs its sides back to back: r0 A B, r1 B A, ...")
    if campaign.auto:
        lines.append(auto_line(campaign))
    by_task = {t.id: walls[plan.parse_unit_id(t.id).op] for t in tasks
               if plan.parse_unit_id(t.id).op in walls}
    source = projection.for_plan(campaign, directory)
    projected = projection.projection([plan.parse_unit_id(t.id) for t in tasks], source,
                                      workers=workers)
    if projected is None and source.notes:  # what would have given walls, and why it did not
        projected = f"no projected wall: {'; '.join(source.notes)}"
    return [*lines, *executor.describe(tasks, by_task), *([projected] if projected else [])]


def first_unit(campaign: Campaign, settings: Settings, first_plan: Plan,
                executor: Executor, directory: Path) -> list[str]:
    """The first unit's child command line and the pytest run of its side A."""
    tasks = driver.unit_tasks(directory, campaign)
    if not tasks:
        return []
    task = tasks[0]
    unit = plan.parse_unit_id(task.id)
    node = campaign.ops[unit.op].node or ""
    device = executor.place(task)
    argv = [*task.argv, *cmdline.flag_args({"DEVICES": device})]
    step = ab.SideRun("A", unit.round, campaign.axis.a)
    pinned = dataclasses.replace(settings, devices=(device,)) if device else settings
    pinned = side_base(pinned, campaign.axis, directory, "A")
    run = ab.side_settings(with_node(pinned, node), step, directory / unit.op, campaign.axis)
    env = {**campaign.axis.side_env("A"), **cache_env(directory, "A")}
    if (python := campaign.axis.python("A")) is not None:
        first_plan = dataclasses.replace(first_plan, python=python)
    return [f"first unit: {shlex.join(argv)}", "its side A, the campaign's first run:",
            *runner.describe_dry_run(run, first_plan, directory / unit.run_rel("A"), env,
                                     campaign.axis.image("A"))]


def with_node(settings: Settings, node: str) -> Settings:
    """`settings` running one benchmark node instead of OP or OP_FILE."""
    return dataclasses.replace(settings, op=None, op_file=None, test_node=node)


def auto_line(campaign: Campaign) -> str:
    """What ROUNDS=auto may still add: the units of MAX_ROUNDS for each operator that runs (a
    resume's ROUNDS past it counting as planned), and of those how many ran already."""
    assert campaign.auto is not None
    most, runnable = campaign.auto["max"], [op for op, i in campaign.ops.items()
                                            if not (i.reason or i.skipped or i.excluded)]
    total = sum(max(most, campaign.ops[op].rounds) for op in runnable)
    ran = sum(1 for u in campaign.units if u.op in runnable and u.status in FINISHED)
    planned = (f"these are MIN_ROUNDS ({campaign.auto['min']}) an operator" if not ran else
               f"{ran} units of its operators ran")
    return (f"ROUNDS=auto: {planned}; after each round, one more for each operator with a row "
            f"undecided that MAX_ROUNDS ({most}) may still decide: {total} units at most in all")

