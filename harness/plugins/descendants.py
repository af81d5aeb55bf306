"""What a pytest session left running: the descendants of this process, found and stopped.

A worker (and a run's own pytest, through harness.run.launch) becomes a subreaper, so that a
child whose parent ended is still found here; what is left at a session's end is stopped,
SIGTERM then SIGKILL, and reaped where it is this process's own.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import time
from collections.abc import Iterable
from pathlib import Path

PR_SET_CHILD_SUBREAPER = 36  # prctl(2): orphaned descendants are reparented to this process


def become_subreaper() -> bool:
    """Have this process adopt its orphaned descendants (Linux), so that a session's child
    whose parent ended is still found and stopped here; False where it cannot."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def children(pid: int) -> list[int]:
    """A process's live children (Linux /proc; none known elsewhere)."""
    found = []
    for path in Path(f"/proc/{pid}/task").glob("*/children"):
        with contextlib.suppress(OSError, ValueError):
            found += [int(p) for p in path.read_text().split()]
    return found


def descendants(pid: int, skip: Iterable[int] = ()) -> list[int]:
    """Every descendant of `pid`, parents first, less the subtrees of `skip`."""
    found: list[int] = []
    queue = [c for c in children(pid) if c not in set(skip)]
    while queue:
        child = queue.pop(0)
        if child not in found:
            found.append(child)
            queue += children(child)
    return found


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            return fh.read().rsplit(") ", 1)[1][:1] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def stop_processes(pids: list[int], grace_s: float) -> None:
    """SIGTERM each of `pids`, SIGKILL those still running after `grace_s`, and reap the ones
    that are this process's children (an orphan adopted included)."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while any(map(_running, pids)) and time.monotonic() < deadline:
        for pid in pids:
            _reap(pid)
        time.sleep(0.05)
    for pid in pids:
        if _running(pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        for pid in pids:  # only these: another child's exit status is its owner's to read
            _reap(pid)
        if not any(map(_running, pids)):
            break
        time.sleep(0.05)


def stop_left_children(grace_s: float, skip: Iterable[int] = (),
                       keep: Iterable[int] = ()) -> list[int]:
    """Stop what this process's descendants are, less the subtrees of `skip` (children that are
    not the session's) and the processes of `keep` (there before it began); the pids stopped."""
    kept = set(keep)
    pids = [pid for pid in descendants(os.getpid(), skip) if pid not in kept]
    if pids:
        stop_processes(pids, grace_s)
    return pids
