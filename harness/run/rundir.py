"""What a `harness run` child's log says of its run directory."""

from __future__ import annotations

from pathlib import Path

from harness.contract.boundary import RUN_DIR_LINE


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
