"""Fixtures of the whole suite: a private device-lock folder for every test and its children."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from harness.executors import device_lock


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
