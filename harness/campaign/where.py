"""Where a batch's or a campaign's tasks run: the executor that EXECUTOR names, built for it.

Each kind's differences live in its record (harness.executors); this module hands a record what
the layers above the executors know (the container mounts, a task's line in an image) and asks
it the rest.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from harness import executors
from harness.campaign.document import Campaign
from harness.contract.states import SUBMITTED
from harness.errors import UsageError
from harness.executors import Build, Chosen, Launch
from harness.executors.base import Ended, Executor
from harness.run.container import cluster_exec, cluster_mounts, mounts
from harness.run.identity import IMAGE_DIGEST_VAR
from harness.settings import variables
from harness.settings.spec import IN_IMAGE_VAR, REPO_ROOT, Settings


def unit_timeout(flags: Mapping[str, object], env: Mapping[str, str]) -> int | None:
    """UNIT_TIMEOUT in seconds, flag first; None for 0 (no limit). UsageError naming the
    spelling the user wrote when it is no whole number."""
    var = variables.named("UNIT_TIMEOUT")
    value, source = var.lookup(flags, env)
    text = str(value)
    if not re.fullmatch(r"[0-9]{1,9}", text):  # ASCII digits: str.isdigit takes '²' too
        raise UsageError(f"{var.label(source)}={text!r} is not accepted; expected seconds, a "
                         "whole number from 1 to 999999999, or 0 for no limit")
    return int(text) or None


def workers(flags: Mapping[str, object], env: Mapping[str, str], *, sides: bool = True
            ) -> str:
    """WORKERS, flag first: 0, 1, or (`sides`: an A/B campaign) the one side whose runs use
    workers. UsageError naming the spelling the user wrote for a side outside a campaign."""
    var = variables.named("WORKERS")
    value, source = var.lookup(flags, env)
    text = str(value)
    if text not in var.choices:
        raise UsageError(f"{var.label(source)}={text!r} is not accepted; expected one of "
                         f"{', '.join(var.choices)}")
    if text not in ("0", "1") and not sides:
        raise UsageError(f"{var.label(source)}={text!r} is not accepted here; expected 0 or 1 "
                         "(A or B name a side of an A/B campaign)")
    return text


def config(settings: Settings, flags: Mapping[str, object], env: Mapping[str, str],
           task_image: bool = True) -> Chosen:
    """The kind EXECUTOR names, its settings validated. `task_image` False: each run's pytest
    runs in its side's image (AXIS=image), not the task in one."""
    return executors.choose(settings, flags, env, task_image)


def preflight(chosen: Chosen, out_dir: Path, warn: Callable[[str], None],
              dry_run: bool = False) -> None:
    """What must hold before a directory is claimed for the tasks of that executor (OUT seen
    by a cluster's nodes ...). A dry run (`dry_run`), which may plan anywhere, says what the
    real run would stop at or warn of, and creates nothing."""
    chosen.kind.preflight(chosen.config, out_dir, warn, dry_run)


def executor(settings: Settings, chosen: Chosen, directory: Path, *,
             state: dict[str, Any] | None = None,
             saved: Callable[[], object] = lambda: None, out: Callable[[str], None] = print,
             env: Mapping[str, str] | None = None, workers: str = "0") -> Executor:
    """The executor that runs the tasks of a plan whose files live in `directory`; `state`:
    its kind's state, kept in the caller's document (`saved` after each change); `workers`:
    WORKERS."""
    return chosen.kind.build(Build(settings, chosen.config, directory, LAUNCH,
                                   {} if state is None else state, saved, out, env, workers))


def task_mounts(settings: Settings, directory: Path, cwd: Path) -> list[tuple[Path, bool]]:
    """(path, writable) that a task's container sees at the same path: what a local container
    run mounts (the checkout, OUT, the inputs named by path) and the campaign directory."""
    found = mounts(settings, cwd)
    directory = Path(os.path.abspath(directory))
    if not any(directory == m or m in directory.parents for m, _ in found):
        found.append((directory, True))
    return found


def task_in_image(settings: Settings, image: str, mounted: Sequence[tuple[Path, bool]],
                  cwd: Path, args: Sequence[str]) -> list[str]:
    """`python3 ARGS` of the harness in `image` under RUNNER's cluster runner, the image's
    digest recorded by the runs inside."""
    env = {"PYTHONPATH": str(REPO_ROOT), IN_IMAGE_VAR: "1", IMAGE_DIGEST_VAR: image}
    return cluster_exec(settings.runner, image, settings,
                        cluster_mounts(settings.runner, mounted), cwd, env, args)


LAUNCH = Launch(task_mounts, task_in_image)


def earlier_runs(directory: Path, campaign: Campaign, chosen: Chosen) -> list[Ended]:
    """What a resume on `chosen` finds of the campaign's earlier runs, by the kind that kept
    the campaign's executor document: the ends of units finished while no driver followed
    them, to record and never run again (UsageError where a task of it may still write into
    the campaign unseen)."""
    kept = executors.get(campaign.executor.name)
    placed = {u.id: u.device for u in campaign.units if u.status == SUBMITTED}
    return kept.settled(directory, placed, campaign.executor, chosen.kind is kept)
