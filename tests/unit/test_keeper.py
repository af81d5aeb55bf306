"""A container owned by its run (harness/run/keeper.py), through the fake engine, whose
containers outlive a killed client as a real engine's do."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.run import keeper
from harness.settings.spec import REPO_ROOT

FAKE = REPO_ROOT / "tests" / "fake_engine"
# An owner: a container started in keeper.owned, its pid printed, then a wait for stdin.
OWNER = """
import subprocess, sys
from harness.run import keeper
name = sys.argv[1]
with keeper.owned("docker", name):
    subprocess.Popen(["docker", "run", "--rm", "--init", "--name", name, "img", "python3",
                      "-c", "import os, time; print(os.getpid(), flush=True); time.sleep(600)"])
    print(sys.stdin.readline(), flush=True)
"""


@pytest.fixture
def engine_env(tmp_path) -> dict[str, str]:
    return {**os.environ, "PATH": f"{FAKE}{os.pathsep}{os.environ['PATH']}",
            "PYTHONPATH": str(REPO_ROOT), "FAKE_ENGINE_LOG": str(tmp_path / "engine.log"),
            "FAKE_ENGINE_PYTHON": sys.executable}


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def owner(engine_env: dict[str, str], name: str) -> tuple[subprocess.Popen, int]:
    """The owner process and the pid of its container's command, once it runs."""
    proc = subprocess.Popen([sys.executable, "-c", OWNER, name], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env=engine_env,
                            start_new_session=True)
    assert proc.stdout is not None
    return proc, int(proc.stdout.readline())


def test_a_run_that_ends_stops_its_container_though_the_client_was_killed(engine_env, tmp_path):
    # Regression: the container of a unit past its limit ran on after its client was killed.
    proc, box = owner(engine_env, "zl-test-end")
    client = next(int(p.parent.name) for p in Path("/proc").glob("[0-9]*/cmdline")
                  if b"--name\0zl-test-end" in p.read_bytes())
    os.kill(client, signal.SIGKILL)
    assert alive(box)  # a killed client leaves its container running, as docker's does
    proc.communicate("go\n")
    assert proc.returncode == 0 and not alive(box)
    ops = (tmp_path / "containers" / "ops.log").read_text().splitlines()
    assert ops == ["rm zl-test-end"]  # the run's own removal; its keeper had nothing to do


def test_an_owner_killed_outright_has_its_keeper_stop_the_container(engine_env, tmp_path):
    proc, box = owner(engine_env, "zl-test-kill")
    os.killpg(proc.pid, signal.SIGKILL)  # the owner and its client; the keeper has a session
    proc.wait()
    deadline = time.monotonic() + 120  # the keeper's `stop` grace, on a loaded host
    while alive(box) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(box)
    ops = (tmp_path / "containers" / "ops.log").read_text().splitlines()
    assert ops[0] == "stop zl-test-kill"


def test_a_name_is_this_processs_and_unique():
    first, second = keeper.container_name(), keeper.container_name()
    assert first != second and first.startswith(f"zl-{os.getpid()}-")
