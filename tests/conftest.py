"""Fixtures of the whole suite: a private device-lock folder for every test and its children,
and SIGINT delivered to them whatever the suite was started from."""

from __future__ import annotations

import os
import signal
import tempfile
from collections.abc import Iterator

import pytest

from harness.executors import device_lock


def pytest_configure(config: pytest.Config) -> None:
    """A suite started as a background job (`cmd &` in a script, as CI may run it) inherits
    SIGINT ignored, one under nohup SIGHUP, and so would every process it starts; the harness
    rightly keeps an ignored signal ignored, so each test of that signal failed there (13 in
    one run, 3 in another). A handler of this process's own, or the default, is the default
    again in a child at exec."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    for signum in (signal.SIGHUP, signal.SIGTERM):
        if signal.getsignal(signum) is signal.SIG_IGN:
            signal.signal(signum, signal.SIG_DFL)
    # The cpu suite's measurement budget, for every run a test starts: these tests check what
    # the harness does with the suite, not what it measures (those that time use the seeded
    # work clock, or bound how far a row moves). Its own 25 + 100 ms a measurement was about
    # a third of the campaigns' CPU time (test_ab_suite_cli: 127 s of CPU, 91 s at this budget).
    for name, ms in (("CPU_SUITE_WARMUP_MS", "2"), ("CPU_SUITE_ITER_MS", "10")):
        os.environ.setdefault(name, ms)
    # One bytecode folder for every run a test starts (runner.pycache_prefix): each test's own
    # OUT/.pycache made each run's first session compile torch again, 4.5 s of CPU apiece.
    os.environ.setdefault("PYTHONPYCACHEPREFIX", os.path.join(
        tempfile.gettempdir(), f"harness-tests-pycache-{os.getuid()}"))


@pytest.fixture(autouse=True, scope="session")
def private_device_locks(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Device locks in a folder of this test run: other test runs on the host, and a user's
    campaigns, hold the host-wide folder's cpu lock (their CLI children inherit this one)."""
    before = {name: os.environ.get(name) for name in (device_lock.DIR_VAR, device_lock.HELD_VAR)}
    os.environ[device_lock.DIR_VAR] = str(tmp_path_factory.mktemp("device-locks"))
    os.environ.pop(device_lock.HELD_VAR, None)  # a suite run under a holder still locks
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
