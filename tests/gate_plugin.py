"""A pytest plugin for the integration tests: hold a benchmark until the test says go.

With ZL_TEST_GATE=DIR, each pytest process appends its pid to DIR/started at its first test; the
ZL_TEST_GATE_AT-th (default 1st) then writes DIR/ready (its pid) and waits for DIR/go, so that a
test can act (send a signal, touch the checkout) while that benchmark is surely running. Loaded
through PYTEST_PLUGINS, which the runner keeps ahead of its own plugins.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

GATE_VAR, AT_VAR = "ZL_TEST_GATE", "ZL_TEST_GATE_AT"
WAIT_S = 120.0  # a test that failed to stop the run leaves pytest this long at most
_seen = False


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    global _seen
    gate = os.environ.get(GATE_VAR)
    if not gate or _seen:
        return
    _seen = True
    with open(Path(gate, "started"), "a") as fh:
        fh.write(f"{os.getpid()}\n")
    if len(Path(gate, "started").read_text().splitlines()) != int(os.environ.get(AT_VAR, "1")):
        return
    # whole or not there: a test that polls for the file reads the pid, never an empty file
    Path(gate, "ready.part").write_text(f"{os.getpid()}\n")
    os.replace(Path(gate, "ready.part"), Path(gate, "ready"))
    deadline = time.monotonic() + WAIT_S
    while not Path(gate, "go").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
