"""Marker lines from inside a pytest run: one line each, where run.log and grep see them."""

from __future__ import annotations

import pytest


def write_marker(config: pytest.Config, line: str) -> None:
    """Write `line` through pytest's terminal (the run's stdout), flushed at once."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(line, flush=True)
    else:
        print(line, flush=True)
