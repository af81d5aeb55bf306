"""Where a batch's or a campaign's tasks run: the executor that EXECUTOR names, built for it."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from harness import slurm, variables
from harness.errors import UsageError
from harness.executors.devices import select_devices
from harness.executors.local import LocalExecutor
from harness.executors.slurm.array import SlurmExecutor
from harness.slurm import Slurm, SlurmConfig
from harness.spec import Settings

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


def worker_devices(settings: Settings, env: Mapping[str, str] | None = None
                   ) -> list[str | None]:
    """One entry per worker: the devices of select_devices, or [None] for one unpinned
    worker where the backend has no accelerator or none is found."""
    return list(select_devices(settings, env) or [None])


def local(settings: Settings, env: Mapping[str, str] | None = None) -> LocalExecutor:
    """This host's devices, one task at a time on each."""
    return LocalExecutor(worker_devices(settings, env))


def cluster(settings: Settings, cfg: SlurmConfig, directory: Path, *,
            record: dict[str, Any] | None = None, saved: Callable[[], None] = lambda: None,
            out: Callable[[str], None] = print, client: Slurm | None = None,
            env: Mapping[str, str] | None = None) -> SlurmExecutor:
    """Job arrays whose files live under `directory`; each task runs `harness slurm-task`
    on its node, in the image where RUNNER names a cluster runner."""
    directory = Path(os.path.abspath(directory))
    cwd = Path.cwd()
    mounts = slurm.task_mounts(settings, directory, cwd)
    name = f"zl-{directory.parent.name}"[:64]

    def script(plan: Path) -> str:
        return slurm.script_text(settings, cfg, name,
                                 slurm.task_command(settings, cfg, plan, cwd, mounts))

    plan = {"dir": str(directory), "backend": settings.backend.name,
            "devices": list(settings.devices)}
    seconds = poll_s(variables.environ() if env is None else env)
    return SlurmExecutor(client or Slurm(), cfg, directory, script, plan=plan, record=record,
                         saved=saved, cwd=cwd, poll_s=seconds, out=out)
