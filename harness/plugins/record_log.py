"""Open FlagGems' `--record log` file in the run directory, never in the checkout.

FlagGems' conftest opens `result_<args>.log` with mode "w" in the working directory, the FlagGems
checkout that other runs and a user's own pytest share: opened there, it would truncate their file
of the same name. While the conftests configure, a FileHandler for a `result_*.log` in the working
directory opens in ZL_PLUGIN_RUN_DIR instead, so nothing in the checkout is created, truncated or
removed. When configuration is done, the files this process records into are listed in
ZL_PLUGIN_RUN_DIR/RECORD_LOGS_FILE (a JSON list): the runner reads exactly those.
"""

from __future__ import annotations

import fnmatch
import hashlib
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from harness.contract import boundary
from harness.contract.boundary import RECORD_LOG_GLOB, RECORD_LOGS_FILE
from harness.fsutil import atomic_write_json

READER = "the record_log plugin"
LOGGER = "flag_gems_benchmark"  # the logger FlagGems' benchmark conftest records with

NAME_MAX = 255  # bytes of one file name on the file systems a run directory lives on
# The patch of FileHandler's constructor, from configure to session start.
REDIRECT = pytest.StashKey[pytest.MonkeyPatch]()


def target(filename: str | os.PathLike[str], cwd: Path, run_dir: Path) -> Path | None:
    """Where a record log named `filename` opens instead: in `run_dir` when it is a
    `result_*.log` in `cwd` (`::` spelled `__`); None for any other file.

    FlagGems spells every pytest argument into the name, an absolute --shape_file included: a
    name past NAME_MAX bytes, which no file system opens, keeps its first part and ends in a
    hash of the whole (the runner reads the files the plugin lists, whatever their names)."""
    path = Path(filename)
    if not fnmatch.fnmatchcase(path.name, RECORD_LOG_GLOB):
        return None
    if (cwd / path).parent.resolve() != cwd.resolve():
        return None
    name = path.name.replace("::", "__")
    if len(name.encode()) > NAME_MAX:
        digest = hashlib.sha256(name.encode()).hexdigest()[:16]
        head = name.encode()[:NAME_MAX - len(digest) - 6].decode(errors="ignore")
        name = f"{head}-{digest}.log"
    return run_dir / name


def _redirect_to(run_dir: Path, open_handler: Callable[..., None]) -> Callable[..., None]:
    def __init__(self: logging.FileHandler, filename: str | os.PathLike[str], *args: Any,
                 **kwargs: Any) -> None:
        moved = target(filename, Path.cwd(), run_dir)
        open_handler(self, filename if moved is None else moved, *args, **kwargs)

    return __init__


def record_logs(logger: logging.Logger) -> list[str]:
    """The files the logger's file handlers write, less pytest's own --log-file (which pytest
    attaches to every logger that does not propagate, FlagGems' included)."""
    return [h.baseFilename for h in logger.handlers if isinstance(h, logging.FileHandler)
            and not type(h).__module__.startswith("_pytest")]


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    # tryfirst: before FlagGems' conftest opens its handler in its own pytest_configure. The
    # constructor is patched, not the class, so that isinstance checks keep working.
    run_dir = boundary.read(boundary.RUN_DIR, READER, pytest.UsageError)
    patch = config.stash[REDIRECT] = pytest.MonkeyPatch()
    patch.setattr(logging.FileHandler, "__init__",
                  _redirect_to(run_dir, logging.FileHandler.__init__))


def pytest_sessionstart(session: pytest.Session) -> None:
    # Every conftest has configured by now: the redirect has done its job.
    session.config.stash[REDIRECT].undo()
    run_dir = boundary.read(boundary.RUN_DIR, READER, pytest.UsageError)
    atomic_write_json(Path(run_dir, RECORD_LOGS_FILE), record_logs(logging.getLogger(LOGGER)))


def pytest_unconfigure(config: pytest.Config) -> None:
    patch = config.stash.get(REDIRECT, None)
    if patch is not None:  # a configure that failed never reached sessionstart
        patch.undo()
