"""Path values no file system could open, refused as they are read, before anything exists."""

from __future__ import annotations

import os

from harness.errors import UsageError

# The variables that name a path: one no file system opens was met as a traceback once
# something was created (a campaign folder, a run directory).
PATH_VARS = frozenset({"FLAGGEMS_DIR", "OUT", "SHAPE_FILE", "REPLAY_FROM", "NOISE_FROM",
                       "OPS_FILE", "WALLS_FROM", "RESUME", "A_PYTHON", "B_PYTHON", "OP_FILE"})
NAME_MAX, PATH_MAX = 255, 4095  # bytes of a path component, of a whole path (Linux's)
OUT_ROOM = 600  # bytes the longest file a campaign writes under OUT adds to its path


def fits(make: str, label: str, value: str) -> str:
    """`value` of variable `make` (named `label` in the error), refused where it is a path with
    a component past NAME_MAX bytes, or whose whole (made absolute; OUT with the room a run
    adds) is past PATH_MAX."""
    if make not in PATH_VARS:
        return value
    room = OUT_ROOM if make == "OUT" else 0
    size = len(os.fsencode(os.path.abspath(value))) + room
    long = next((p for p in value.split("/") if len(os.fsencode(p)) > NAME_MAX), None)
    if long is None and size <= PATH_MAX:
        return value
    what = (f"its component {long[:40]!r}... is {len(os.fsencode(long))} bytes" if long
            else f"it is {size} bytes long made absolute"
            + (f" with the {room} a run adds under it" if room else ""))
    shown = f"{value[:80]!r}..." if len(value) > 80 else repr(value)
    raise UsageError(f"{label}={shown} is not accepted: {what}; expected a path whose every "
                     f"component is at most {NAME_MAX} bytes and whole at most {PATH_MAX}")
