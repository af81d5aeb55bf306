"""A pytest plugin for the integration tests: hold the first test until the test says go.

With ZL_TEST_GATE=DIR, the first test's setup writes DIR/ready (this pytest's pid) and waits for
DIR/go, so that a test can act (send a signal, touch the checkout) while a benchmark is surely
running. Loaded through PYTEST_PLUGINS, which the runner keeps ahead of its own plugins.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

GATE_VAR = "ZL_TEST_GATE"
WAIT_S = 300.0


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    gate = os.environ.get(GATE_VAR)
    if not gate or Path(gate, "ready").exists():
        return
    Path(gate, "ready").write_text(f"{os.getpid()}\n")
    deadline = time.monotonic() + WAIT_S
    while not Path(gate, "go").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
