"""EXECUTOR=slurm: the settings, the batch script, and sbatch/squeue/scontrol/scancel calls."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.errors import PreflightError, UsageError
from harness.executors.slurm import text as slurm_text
from harness.executors.slurm.text import TaskState
from harness.settings import variables
from harness.settings.spec import CLUSTER_RUNNERS, Settings

SLURM_DIR = "slurm"  # under a campaign or batch: scripts, plans, task logs, done files
DONE_DIR = "done"  # one JSON file per finished unit, written by the task that ran it
NODE_LOCAL = ("/tmp", "/var/tmp", "/dev/shm", "/scratch/local")  # not seen by other nodes
_IMAGE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/:#-]*@sha256:[0-9a-f]{64}")

Run = Callable[..., subprocess.CompletedProcess]


@dataclass(frozen=True)
class SlurmConfig:
    """The Slurm variables, validated."""

    partition: str | None = None
    account: str | None = None
    time: str | None = None
    parallel: int | None = None
    args: tuple[str, ...] = ()
    unit: str = "gpu"
    image: str | None = None
    detach: bool = False


def _value(name: str, flags: Mapping[str, object], env: Mapping[str, str]) -> str | None:
    return variables.named(name).given(flags, env)


def config(settings: Settings, flags: Mapping[str, object], env: Mapping[str, str],
           task_image: bool = True) -> SlurmConfig:
    """SlurmConfig from flags and the environment, the backend's unit as the default.
    `task_image` False: the tasks run on the nodes' host and each run's pytest in an image of
    its own (AXIS=image), so SLURM_IMAGE has no use and is refused."""
    image = _value("SLURM_IMAGE", flags, env)
    if not task_image and image:
        raise UsageError(f"SLURM_IMAGE={image!r} is not used with AXIS=image: each side's "
                         "runs use its own image (A_IMAGE, B_IMAGE); leave SLURM_IMAGE unset")
    if settings.runner in CLUSTER_RUNNERS and not image and task_image:
        raise UsageError(f"RUNNER={settings.runner!r} needs SLURM_IMAGE: the harness image "
                         "of BACKEND by digest (name@sha256:...), where the nodes pull it")
    if image and not _IMAGE.fullmatch(image):
        raise UsageError(f"SLURM_IMAGE={image!r} is not accepted; expected an image by "
                         "digest, e.g. registry/zl-flaggems@sha256:<64 hex digits>")
    return SlurmConfig(
        partition=slurm_text.check_name("SLURM_PARTITION", _value("SLURM_PARTITION", flags,
                                                                   env)),
        account=slurm_text.check_name("SLURM_ACCOUNT", _value("SLURM_ACCOUNT", flags, env)),
        time=slurm_text.check_time(_value("SLURM_TIME", flags, env)),
        parallel=slurm_text.check_parallel(_value("SLURM_PARALLEL", flags, env)),
        args=slurm_text.check_args(_value("SLURM_ARGS", flags, env)),
        unit=slurm_text.check_unit(_value("SLURM_UNIT", flags, env), settings.backend.slurm_unit),
        image=image, detach=bool(flags.get("detach")))


# --------------------------------------------------------------------------- the script


def script_text(settings: Settings, cfg: SlurmConfig, name: str, command: Sequence[str]
                ) -> str:
    """The batch script: the resources as #SBATCH lines, then the task's one command."""
    lines = ["#!/bin/bash", "# Written by the harness: one array task runs its share of the "
             "units of the plan it names.", f"#SBATCH --job-name={name}"]
    for option, value in (("partition", cfg.partition), ("account", cfg.account),
                          ("time", cfg.time)):
        if value:
            lines.append(f"#SBATCH --{option}={value}")
    if cfg.unit == "node":
        lines += ["#SBATCH --nodes=1", "#SBATCH --exclusive"]
    else:
        lines.append("#SBATCH --ntasks=1")
        if settings.backend.is_accelerator:
            lines.append("#SBATCH --gres=gpu:1")
    return "\n".join([*lines, f"exec {shlex.join(command)}", ""])


def sbatch_argv(cfg: SlurmConfig, tasks: int, script: Path, logs: Path, cwd: Path,
                after: str | None = None) -> list[str]:
    """The sbatch command line of one array (after: a job whose end it waits for)."""
    argv = ["sbatch", "--parsable", f"--array={slurm_text.array_spec(tasks, cfg.parallel)}",
            f"--output={logs / '%A_%a.out'}", f"--chdir={cwd}"]
    if after:
        argv.append(f"--dependency=afterany:{after}")
    return [*argv, *cfg.args, str(script)]


@dataclass(frozen=True)
class Stage:
    """One array of a submission: its key (file names), its tasks' items, the job it waits on."""

    key: str
    tasks: list[list[str]]


# --------------------------------------------------------------------------- Slurm's commands


class Slurm:
    """sbatch, squeue, scontrol and scancel; `run` is subprocess.run or a test's stand-in."""

    def __init__(self, run: Run = subprocess.run) -> None:
        self.run = run
        self._jobcomp: str | None = None
        self._jobcomp_asked = False

    def _call(self, argv: list[str]) -> subprocess.CompletedProcess:
        try:
            return self.run(argv, capture_output=True, text=True, timeout=120)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise PreflightError("slurm", f"{argv[0]} failed: {exc}") from None

    def submit(self, argv: list[str]) -> str:
        proc = self._call(argv)
        if proc.returncode != 0:
            raise PreflightError("sbatch", f"sbatch exited {proc.returncode}: "
                                 f"{(proc.stderr or proc.stdout).strip()[:500]}")
        return slurm_text.parse_sbatch(proc.stdout)

    def queued(self, jobs: Sequence[str]) -> dict[str, TaskState] | None:
        """Tasks still queued or running; None when squeue could not answer this time."""
        proc = self._call(["squeue", "--array", "--noheader", "--format=%i|%T|%r",
                           f"--jobs={','.join(jobs)}"])
        if proc.returncode != 0:
            # A job purged from the controller: squeue knows no such id any more.
            return {} if "Invalid job id" in proc.stderr else None
        try:
            return slurm_text.parse_squeue(proc.stdout)
        except ValueError as exc:  # another squeue than the one this was written for
            raise PreflightError("squeue", str(exc)) from None

    def ended(self, jobs: Sequence[str], tasks: Mapping[str, str | None]
              ) -> dict[str, TaskState]:
        """How the `tasks` of `jobs` ended ({task: its own job id where known}), from scontrol
        while the controller remembers them, else from the jobcomp/filetxt log where the
        cluster writes one (its lines name a task by `ArrayJobId`/`ArrayTaskId` or its own
        job id)."""
        found: dict[str, TaskState] = {}
        for job in jobs:
            proc = self._call(["scontrol", "-o", "show", "job", job])
            if proc.returncode == 0:
                found.update(slurm_text.parse_scontrol_jobs(proc.stdout))
        wanted = {task: job for task, job in tasks.items() if task not in found}
        log = self.jobcomp_log() if wanted else None
        if log and Path(log).is_file():
            lines = slurm_text.parse_jobcomp(Path(log).read_text(encoding="utf-8",
                                                                 errors="replace"))
            for task, own_job in wanted.items():
                line = lines.get(task) or (lines.get(own_job) if own_job else None)
                if line:
                    found[task] = TaskState(task, line.state, None, line.exit_code)
        return found

    def jobcomp_log(self) -> str | None:
        if not self._jobcomp_asked:
            proc = self._call(["scontrol", "show", "config"])
            self._jobcomp = (slurm_text.jobcomp_log(slurm_text.parse_config(proc.stdout))
                             if proc.returncode == 0 else None)
            self._jobcomp_asked = True
        return self._jobcomp or None

    def cancel(self, jobs: Sequence[str]) -> None:
        self._call(["scancel", *jobs])


def preflight(out_dir: Path, warn: Callable[[str], None],
              which: Callable[[str], str | None] = shutil.which, create: bool = True) -> None:
    """sbatch on PATH (exit 3 otherwise); OUT writable, and a warning where other nodes
    cannot see it. `create` False (a dry run): OUT is neither created nor probed."""
    if which("sbatch") is None:
        raise PreflightError("sbatch", "EXECUTOR=slurm needs sbatch on PATH (a Slurm login "
                             "node); none was found")
    where = Path(os.path.abspath(out_dir))
    if where.exists() and not where.is_dir():
        raise UsageError(f"OUT={str(out_dir)!r} is not accepted; it is a file, not a directory")
    if any(where == Path(p) or Path(p) in where.parents for p in NODE_LOCAL):
        warn(f"warning: OUT={str(out_dir)!r} is under a node-local path; array tasks on "
             "other nodes cannot write there")
    if not create:
        return
    try:
        where.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise PreflightError("out", f"OUT={str(out_dir)!r} cannot be created ({exc})") from None
    if not os.access(where, os.W_OK):
        raise PreflightError("out", f"OUT={str(out_dir)!r} is not writable")
