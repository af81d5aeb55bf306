"""EXECUTOR=slurm as an executor kind: its settings, preflight, job arrays, and what it keeps."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.errors import PreflightError, UsageError
from harness.executors import Build, Env, ExecutorDoc, ExecutorKind, Flags, Launch
from harness.executors.base import Ended
from harness.executors.slurm import Slurm, SlurmConfig, config, preflight, script_text, task
from harness.executors.slurm.array import SlurmExecutor, alive_jobs, job_of, taken_over
from harness.settings import cmdline, variables
from harness.settings.spec import CLUSTER_RUNNERS, REPO_ROOT, Settings

POLL_VAR = "ZL_SLURM_POLL_S"  # seconds between two squeue calls (the tests shorten it)
TASK_COMMAND = "slurm-task"
# The SLURM_* settings of the variables table: what a campaign keeps for its resume.
VARIABLES = tuple(var.make for var in variables.group(variables.EXECUTOR)
                  if var.make.startswith("SLURM_"))
FACTS = ("slurm_task", "slurm_state")  # the array task a unit ran in, and how that task ended


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


def flags(given: Flags, env: Env) -> dict[str, object]:
    """The flags with RUNNER defaulting to host (a task runs on its node's stack unless RUNNER
    names a cluster runner); a runner that puts a task in a container here is refused."""
    found = dict(given)
    runner = variables.named("RUNNER").given(given, env)
    if not runner:
        found["runner"] = "host"
    elif runner not in ("host", *CLUSTER_RUNNERS):
        raise UsageError(f"RUNNER={runner!r} is not accepted with EXECUTOR=slurm; "
                         f"expected one of: host, {', '.join(CLUSTER_RUNNERS)}")
    return found


def check(cfg: SlurmConfig, out_dir: Path, warn: Callable[[str], None], dry_run: bool
          ) -> None:
    """sbatch on PATH and OUT seen by the nodes. A dry run, which may plan a cluster's
    campaign anywhere, says what the real run would stop at or warn of, and creates
    nothing."""
    try:
        preflight(out_dir, warn, create=not dry_run)
    except PreflightError as exc:
        if not dry_run:
            raise
        warn(f"note: not on a Slurm login node here; the real run would stop: {exc}")


def build(given: Build, client: Slurm | None = None) -> SlurmExecutor:
    """Job arrays whose files live under the plan's directory, their submissions kept in the
    caller's state; each task runs `harness slurm-task` on its node, in the image where
    RUNNER names a cluster runner."""
    settings, cfg = given.settings, given.config
    directory = Path(os.path.abspath(given.directory))
    cwd = Path.cwd()
    mounts = given.launch.mounts(settings, directory, cwd)
    name = f"zl-{directory.parent.name}"[:64]

    def script(plan: Path) -> str:
        return script_text(settings, cfg, name,
                           task_command(settings, cfg, plan, cwd, mounts, given.launch))

    plan = {"dir": str(directory), "backend": settings.backend.name,
            "devices": list(settings.devices), "workers": given.workers != "0"}
    seconds = poll_s(variables.environ() if given.env is None else given.env)
    return SlurmExecutor(client or Slurm(), cfg, directory, script, plan=plan,
                         submissions=given.state.setdefault("submissions", []),
                         saved=given.saved, cwd=cwd, poll_s=seconds, out=given.out)


def task_command(settings: Settings, cfg: SlurmConfig, plan: Path, cwd: Path,
                 mounts: Sequence[tuple[Path, bool]], launch: Launch) -> list[str]:
    """What one array task runs: `harness slurm-task PLAN`, in the image where RUNNER says;
    on the node's host where no task image is set (AXIS=image: each run's pytest runs in its
    side's image, runner.invocation)."""
    argv = cmdline.harness_argv(TASK_COMMAND, str(plan))
    if settings.runner == "host" or cfg.image is None:
        return ["env", f"PYTHONPATH={REPO_ROOT}", *argv]
    return launch.in_image(settings, cfg.image, mounts, cwd, argv[1:])  # its own python3


def settled(directory: Path, placed: Mapping[str, str | None], doc: ExecutorDoc,
            follows: bool, client: Slurm | None = None) -> list[Ended]:
    """What a resume finds of the campaign's earlier job arrays: the ends of units that their
    tasks finished while no driver followed them, to record and never run again. UsageError
    where a task may still write into the campaign and this resume would not follow it
    (`follows` False: it runs elsewhere): while a job is queued (any the campaign submitted:
    one whose scancel Slurm had not carried out when the driver stopped waiting too), or while
    Slurm cannot say of a job that holds units handed to it."""
    handed = sorted({job for where in placed.values() if (job := job_of(where))})
    jobs = sorted({*handed, *(str(s.get("job")) for s in doc.state.get("submissions", ()))})
    if not jobs:
        return []
    try:
        alive, why = alive_jobs(client or Slurm(), jobs), "squeue did not answer"
    except PreflightError as exc:
        alive, why = None, str(exc)
    where = f"RESUME={str(directory)!r}"
    if not follows and alive:
        raise UsageError(
            f"{where}: Slurm job(s) {', '.join(sorted(alive))} of this campaign still have "
            "tasks queued or running, which write into it; resume with EXECUTOR=slurm to "
            f"follow them, or scancel {' '.join(sorted(alive))} and resume")
    if not follows and alive is None and handed:
        raise UsageError(
            f"{where}: units of this campaign were handed to Slurm job(s) {', '.join(handed)} "
            f"and Slurm cannot say whether they still run ({why}); resume where squeue "
            "answers")
    if alive is None:  # followed by the resume's own executor, which asks again
        return []
    return list(taken_over(directory, {item: at for item, at in placed.items()
                                       if job_of(at) not in alive}).values())


def receipt(state: Mapping[str, Any] | None) -> dict[str, Any]:
    """The batch scripts the cluster ran, by sha256 (None: the campaign ran elsewhere)."""
    return {"slurm": None if state is None else state.get("submissions", [])}


def before(campaign: Mapping[str, Any]) -> ExecutorDoc | None:
    """A campaign.json of before executor documents kept {"flags", "submissions"} as
    "slurm"."""
    kept = campaign.get("slurm")
    if not isinstance(kept, dict):
        return None
    return ExecutorDoc("slurm", dict(kept.get("flags") or {}),
                       {"submissions": list(kept.get("submissions") or [])})


def run_task(plan: Path, env: Env, out: Callable[[str], None]) -> int:
    return task.run_task(plan, env, out=out)


KIND = ExecutorKind(
    name="slurm", build=build, flags=flags, variables=VARIABLES, config=config, preflight=check,
    own_runners=CLUSTER_RUNNERS, runs="runs Slurm tasks", remote=True, keeps=True,
    settled=settled, facts=FACTS, receipt=receipt, before=before, task_command=TASK_COMMAND,
    run_task=run_task)
