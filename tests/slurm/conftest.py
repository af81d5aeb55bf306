"""The session's Slurm cluster: brought up once for the tests marked slurm, torn down after."""

from __future__ import annotations

import shutil
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.slurm import cluster as slurm_cluster


@pytest.fixture(scope="session")
def slurm() -> Iterator[slurm_cluster.Cluster]:
    """A running single-node cluster; its `env` (SLURM_CONF) is for subprocess calls.

    Skips saying why where the cluster cannot come up (not root, no packages), unless
    ZL_SLURM_REQUIRED=1 (CI), where that is a failure.
    """
    try:
        required = slurm_cluster.required()
    except ValueError as exc:
        pytest.fail(str(exc), pytrace=False)
    reason = slurm_cluster.unavailable()
    if reason and required:
        pytest.fail(f"{slurm_cluster.REQUIRED_ENV}=1 but {reason}", pytrace=False)
    if reason:
        pytest.skip(reason)
    # Under /tmp, not pytest's basetemp: munge's socket path must stay short, and slurm.conf
    # cannot quote a path holding spaces.
    root = Path(tempfile.mkdtemp(prefix="zl-slurm-", dir="/tmp"))
    # A SIGTERM (a CI timeout) would end pytest without teardown and leave the daemons running:
    # read it as Ctrl-C, which pytest unwinds through this fixture's finally.
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        cluster = slurm_cluster.start(root)
        try:
            yield cluster
        finally:
            cluster.stop()
    finally:
        signal.signal(signal.SIGTERM, previous)
        shutil.rmtree(root, ignore_errors=True)
