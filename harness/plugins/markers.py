"""Marker lines from inside a pytest run: one line each, where run.log and grep see them."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from harness.fsutil import atomic_write_json


def write_marker(config: pytest.Config, line: str) -> None:
    """Write `line` through pytest's terminal (the run's stdout), flushed at once."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(line, flush=True)
    else:
        print(line, flush=True)


def write_facts(config: pytest.Config, marker: str, path: Path, facts: Any) -> None:
    """A plugin's closing facts (a dataclass with `seconds` and `skipped`, a count by reason):
    one marker line, `marker k=v ... skipped_<reason>=n`, and the same as JSON at `path`."""
    facts.seconds = round(facts.seconds, 3)
    data = asdict(facts)
    words = [f"{k}={v}" for k, v in data.items() if k != "skipped"]
    words += [f"skipped_{k}={v}" for k, v in sorted(data["skipped"].items())]
    write_marker(config, " ".join([marker, *words]))
    atomic_write_json(path, data)
