"""Send FlagGems' `--record log` file into the run directory instead of the checkout.

FlagGems names the file after the invocation's arguments and opens it in the working directory,
so two runs of one node from one checkout would write the same file; redirected to ZL_RUN_DIR,
each run's record log is its own and nothing is left in the checkout.
"""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path

import pytest

LOGGER = "flag_gems_benchmark"  # the logger FlagGems' benchmark conftest records with


def redirect(logger: logging.Logger, run_dir: Path) -> list[Path]:
    """Replace the logger's file handlers by handlers writing into `run_dir`; return the new
    paths. What the old file already holds is carried over, and the old file removed."""
    moved = []
    for handler in list(logger.handlers):
        if not isinstance(handler, logging.FileHandler):
            continue
        old = Path(handler.baseFilename)
        handler.close()
        logger.removeHandler(handler)
        new = run_dir / old.name.replace("::", "__")
        with contextlib.suppress(OSError):
            new.write_bytes(old.read_bytes())
            old.unlink()
        replacement = logging.FileHandler(new, mode="a", encoding="utf-8")
        replacement.setLevel(handler.level)
        replacement.setFormatter(handler.formatter)
        logger.addHandler(replacement)
        moved.append(new)
    return moved


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    # trylast: FlagGems' conftest attaches its handler in its own pytest_configure.
    run_dir = os.environ.get("ZL_RUN_DIR")
    if run_dir:
        redirect(logging.getLogger(LOGGER), Path(run_dir))
