"""A run directory: claimed with a bare mkdir, and found again from a child's log."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from harness.contract.boundary import RUN_DIR_LINE
from harness.errors import PreflightError


def run_dir_from_log(log: Path) -> Path | None:
    """The run directory a `harness run` child claimed, from its header; None when it
    claimed none (or never started)."""
    if not log.is_file():
        return None
    with open(log, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            if line.startswith(RUN_DIR_LINE):
                return Path(line[len(RUN_DIR_LINE):].rstrip("\n"))
    return None


def utc_stamp(now: dt.datetime | None = None) -> str:
    now = now or dt.datetime.now(dt.timezone.utc)
    return now.strftime("%Y%m%d-%H%M%S")


def claim_run_dir(root: Path, op: str, stamp: str) -> Path:
    """Create runs/<op>/<stamp>, retreating to -2, -3 ... when another run holds the name.

    The bare mkdir is the claim: it succeeds for exactly one process, so two runs never share
    a directory even when they start in the same second.
    """
    parent = root / op
    for n in range(1, 1000):
        candidate = parent / (stamp if n == 1 else f"{stamp}-{n}")
        try:
            parent.mkdir(parents=True, exist_ok=True)  # a file in its place: FileExistsError
            candidate.mkdir()
        except FileExistsError:
            if parent.is_dir():
                continue
            raise _unclaimable(root, parent, "a file is in the way") from None
        except OSError as exc:  # preflight checked OUT; this is what changed since
            raise _unclaimable(root, Path(exc.filename or candidate), exc.strerror) from None
        return candidate
    raise RuntimeError(f"could not claim a run directory under {parent}")


def _unclaimable(root: Path, path: Path, why: str | None) -> PreflightError:
    return PreflightError("out", f"cannot create {str(path)!r} under OUT={str(root)!r}: {why}; "
                          "expected a directory this user can create run directories in")
