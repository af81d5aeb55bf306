"""A run's pytest output copied as it comes, and what its pytest left running stopped with it."""

from __future__ import annotations

import os
import select
import subprocess
import time
from collections.abc import Callable
from typing import IO, Any

from harness.executors import procs as supervise
from harness.plugins import descendants

POLL_S = 0.5  # how often a quiet output checks whether pytest itself has ended


def adopt_orphans() -> tuple[int, ...]:
    """Make this process the one a pytest's orphaned descendants are reparented to, so that
    `stop_left` finds them (a child that left pytest's process group included); the
    descendants it has already, which are not the pytest's to stop (a container's keeper)."""
    descendants.become_subreaper()
    return tuple(descendants.descendants(os.getpid()))


def stop_left(proc: Any, keep: tuple[int, ...] = ()) -> list[int]:
    """Stop what a pytest of a process of its own left running after it ended: this
    process's descendants (its orphans, adopted) but those of `keep`, then its process group;
    the pids found. A worker's session is the worker's to clean (harness.plugins.worker)."""
    if not isinstance(proc, subprocess.Popen):
        return []
    pids = descendants.stop_left_children(supervise.CHILD_GRACE_S, skip=(proc.pid,), keep=keep)
    supervise.stop_children([proc], supervise.CHILD_GRACE_S)
    return pids


def _discard(_: bytes) -> None:
    pass


def copy_output(proc: Any, log: IO[bytes], echo: Callable[[bytes], None],
                keep: tuple[int, ...] = ()) -> tuple[int, list[int]]:
    """Copy pytest's output to `log` and `echo` until it ends; (its exit code, the pids of
    what it left running, stopped). A child pytest left holding the output open would keep
    the copy waiting: once pytest has ended, what it left is stopped, and the rest read."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    left: list[int] | None = None
    ended = 0.0
    while True:
        if select.select([fd], [], [], POLL_S)[0]:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            log.write(chunk)
            log.flush()
            try:
                echo(chunk)
            except OSError:  # the terminal went away (SIGHUP): run.log still gets everything
                echo = _discard
        elif left is None and proc.poll() is not None:
            left, ended = stop_left(proc, keep), time.monotonic()
        elif left is not None and time.monotonic() - ended > supervise.GRACE_S:
            break  # held open by what no signal of ours reaches: the run goes on without it
    proc.stdout.close()
    rc = proc.wait()
    return rc, left if left is not None else stop_left(proc, keep)
