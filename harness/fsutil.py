"""Atomic file writes: a temporary file in the same directory, then a rename."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


def atomic_write_text(path: str | os.PathLike[str], text: str) -> Path:
    """Write `text` to `path` so that readers see either the old file or the whole new one."""
    target = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def atomic_write_json(path: str | os.PathLike[str], data: Any) -> Path:
    """Write `data` as indented, key-sorted JSON, atomically."""
    return atomic_write_text(path, json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")
