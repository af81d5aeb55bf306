"""Record a run, batch or campaign in the store HISTORY names as it ends (or as it goes)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from harness.settings import variables


def record(flags: Mapping[str, object], environ: Mapping[str, str], out: Path,
           directory: Path, write_line: Callable[[str], None]) -> None:
    """Import `directory` into the store of HISTORY (default: OUT/history.sqlite).

    Never raises for the store's sake: a store that cannot be written costs one line. Without
    the extra installed the default store is skipped quietly; a HISTORY given says why not.
    """
    value, source = variables.named("HISTORY").lookup(flags, environ)
    if value == "off":
        return
    # imported here: SQLAlchemy's import is a third of the harness's, and a campaign's every
    # unit is a process of its own that records nothing
    try:  # the store needs the `history` extra; a harness without it runs as before
        from harness.history import importer
    except ImportError as exc:  # pragma: no cover - exercised where the extra is absent
        if source != "default":
            write_line(f"history: {directory} not recorded: the store needs SQLAlchemy "
                       f"({exc}); pip install 'harness[history]', then harness history "
                       f"import {directory}")
        return
    importer.record(value, out, directory, write_line)
