"""Where a batch's or a campaign's tasks run: the executor that EXECUTOR names, built for it."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.campaign.document import Campaign
from harness.contract.states import SUBMITTED
from harness.errors import PreflightError, UsageError
from harness.executors import slurm
from harness.executors.base import Ended, Executor
from harness.executors.devices import select_devices
from harness.executors.local import LocalExecutor
from harness.executors.slurm import Slurm, SlurmConfig
from harness.executors.slurm.array import SlurmExecutor, alive_jobs, job_of, taken_over
from harness.run.container import cluster_exec, cluster_mounts, mounts
from harness.run.identity import IMAGE_DIGEST_VAR
from harness.settings import cmdline, variables
from harness.settings.spec import IN_IMAGE_VAR, REPO_ROOT, Settings

POLL_VAR = "ZL_SLURM_POLL_S"  # seconds between two squeue calls (the tests shorten it)


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


def worker_devices(settings: Settings, env: Mapping[str, str] | None = None
                   ) -> list[str | None]:
    """One entry per worker: the devices of select_devices, or [None] for one unpinned
    worker where the backend has no accelerator or none is found."""
    devices = select_devices(settings, env)
    return [*devices] if devices else [None]


def config(settings: Settings, flags: Mapping[str, object], env: Mapping[str, str],
           task_image: bool = True) -> SlurmConfig | None:
    """The cluster settings when EXECUTOR names a cluster; None for this host. `task_image`
    False: a cluster runner runs each run's pytest in its own image, not the task (AXIS=image)."""
    return (slurm.config(settings, flags, env, task_image)
            if slurm.executor(flags, env) == "slurm" else None)


def preflight(cfg: SlurmConfig | None, out_dir: Path, warn: Callable[[str], None],
              dry_run: bool = False) -> None:
    """What must hold before a directory is claimed for tasks of that executor: sbatch on
    PATH and OUT seen by the nodes, for a cluster; nothing more here for this host. A dry run
    (`dry_run`), which may plan a cluster's campaign anywhere, says what the real run would
    stop at or warn of, and creates nothing."""
    if cfg is None:
        return
    try:
        slurm.preflight(out_dir, warn, create=not dry_run)
    except PreflightError as exc:
        if not dry_run:
            raise
        warn(f"note: not on a Slurm login node here; the real run would stop: {exc}")


def executor(settings: Settings, cfg: SlurmConfig | None, directory: Path, *,
             submissions: list[dict[str, Any]] | None = None,
             saved: Callable[[], object] = lambda: None, out: Callable[[str], None] = print,
             env: Mapping[str, str] | None = None, workers: str = "0") -> Executor:
    """The executor that runs the tasks of a plan whose files live in `directory`: this
    host's devices (cfg None), or Slurm arrays that keep `submissions`; `workers`: WORKERS."""
    if cfg is None:
        return local(settings, env, workers)
    return cluster(settings, cfg, directory, submissions=submissions, saved=saved, out=out,
                   env=env, workers=workers)


def local(settings: Settings, env: Mapping[str, str] | None = None,
          workers: str = "0") -> LocalExecutor:
    """This host's devices, one task at a time on each; WORKERS other than 0 hosts workers."""
    note = None
    if workers in ("A", "B"):
        note = (f"pytest: side {workers} in workers that stay up, side "
                f"{'B' if workers == 'A' else 'A'} in fresh processes (WORKERS={workers})")
    return LocalExecutor(worker_devices(settings, env), resident=workers != "0", note=note,
                         backend=settings.backend)


def cluster(settings: Settings, cfg: SlurmConfig, directory: Path, *,
            submissions: list[dict[str, Any]] | None = None,
            saved: Callable[[], object] = lambda: None,
            out: Callable[[str], None] = print, client: Slurm | None = None,
            env: Mapping[str, str] | None = None, workers: str = "0") -> SlurmExecutor:
    """Job arrays whose files live under `directory`; each task runs `harness slurm-task`
    on its node, in the image where RUNNER names a cluster runner."""
    directory = Path(os.path.abspath(directory))
    cwd = Path.cwd()
    mounts = task_mounts(settings, directory, cwd)
    name = f"zl-{directory.parent.name}"[:64]

    def script(plan: Path) -> str:
        return slurm.script_text(settings, cfg, name,
                                 task_command(settings, cfg, plan, cwd, mounts))

    plan = {"dir": str(directory), "backend": settings.backend.name,
            "devices": list(settings.devices), "workers": workers != "0"}
    seconds = poll_s(variables.environ() if env is None else env)
    return SlurmExecutor(client or Slurm(), cfg, directory, script, plan=plan,
                         submissions=submissions,
                         saved=saved, cwd=cwd, poll_s=seconds, out=out)


def task_mounts(settings: Settings, directory: Path, cwd: Path) -> list[tuple[Path, bool]]:
    """(path, writable) that a task's container sees at the same path: what a local container
    run mounts (the checkout, OUT, the inputs named by path) and the campaign directory."""
    found = mounts(settings, cwd)
    directory = Path(os.path.abspath(directory))
    if not any(directory == m or m in directory.parents for m, _ in found):
        found.append((directory, True))
    return found


def task_command(settings: Settings, cfg: SlurmConfig, plan: Path, cwd: Path,
                 mounts: Sequence[tuple[Path, bool]]) -> list[str]:
    """What one array task runs: `harness slurm-task PLAN`, in the image where RUNNER says;
    on the node's host where no task image is set (AXIS=image: each run's pytest runs in its
    side's image, runner.invocation)."""
    task = cmdline.harness_argv("slurm-task", str(plan))
    if settings.runner == "host" or cfg.image is None:
        return ["env", f"PYTHONPATH={REPO_ROOT}", *task]
    env = {"PYTHONPATH": str(REPO_ROOT), IN_IMAGE_VAR: "1", IMAGE_DIGEST_VAR: cfg.image}
    # in the image, its own python3 runs the same arguments
    return cluster_exec(settings.runner, cfg.image, settings,
                        cluster_mounts(settings.runner, mounts), cwd, env, task[1:])


def earlier_arrays(directory: Path, campaign: Campaign, remote: bool,
                   client: Slurm | None = None) -> list[Ended]:
    """What a resume (`remote`: on Slurm) finds of the campaign's earlier job arrays: the ends
    of units that their tasks finished while no driver followed them, to record and never run
    again. UsageError where a task may still write into the campaign and this resume would
    not follow it: run here (EXECUTOR=local) while a job is queued (any the campaign
    submitted: one whose scancel Slurm had not carried out when the driver stopped waiting
    too), or while Slurm cannot say of a job that holds units handed to it."""
    placed = {u.id: u.device for u in campaign.units if u.status == SUBMITTED}
    handed = sorted({job for where in placed.values() if (job := job_of(where))})
    jobs = sorted({*handed, *(str(s.get("job")) for s in
                              (campaign.slurm.submissions if campaign.slurm else ()))})
    if not jobs:
        return []
    try:
        alive, why = alive_jobs(client or Slurm(), jobs), "squeue did not answer"
    except PreflightError as exc:
        alive, why = None, str(exc)
    where = f"RESUME={str(directory)!r}"
    if not remote and alive:
        raise UsageError(
            f"{where}: Slurm job(s) {', '.join(sorted(alive))} of this campaign still have "
            "tasks queued or running, which write into it; resume with EXECUTOR=slurm to "
            f"follow them, or scancel {' '.join(sorted(alive))} and resume")
    if not remote and alive is None and handed:
        raise UsageError(
            f"{where}: units of this campaign were handed to Slurm job(s) {', '.join(handed)} "
            f"and Slurm cannot say whether they still run ({why}); resume where squeue "
            "answers")
    if alive is None:  # followed by the resume's own executor, which asks again
        return []
    return list(taken_over(directory, {item: at for item, at in placed.items()
                                       if job_of(at) not in alive}).values())
