"""The files array tasks leave in a plan's slurm/ folder: started files and done files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.executors.slurm import DONE_DIR, SLURM_DIR

STARTED_DIR = "started"  # one file per task that started: its own job id, for jobcomp


def started_path(directory: Path, task: str) -> Path:
    return directory / SLURM_DIR / STARTED_DIR / f"{task}.json"


def read_started(directory: Path) -> dict[str, str]:
    """{array task id: its own job id} of the tasks that started."""
    found = {}
    for path in (directory / SLURM_DIR / STARTED_DIR).glob("*.json"):
        try:
            found[path.stem] = str(json.loads(path.read_text(encoding="utf-8"))["job_id"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return found


def done_path(directory: Path, item: str) -> Path:
    return directory / SLURM_DIR / DONE_DIR / f"{item.replace('/', '-')}.json"


def read_done(directory: Path) -> dict[str, dict[str, Any]]:
    """Every finished item's done file, by item; a file being replaced is read next time."""
    found = {}
    for path in sorted((directory / SLURM_DIR / DONE_DIR).glob("*.json")):
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(doc, dict) and isinstance(doc.get("item"), str):
            found[doc["item"]] = doc
    return found
