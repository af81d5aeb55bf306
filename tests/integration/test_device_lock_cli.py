"""Two harness runs on one device: the second refuses (a bound) or waits, naming the holder."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from harness import backends
from harness.executors import device_lock
from harness.settings.spec import REPO_ROOT

pytestmark = pytest.mark.integration
SHAPES = "tanh:\n  shapes:\n    - [8, 8]\n"


def harness(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], cwd=REPO_ROOT,
                          env={**os.environ, "PYTHONPATH": str(REPO_ROOT), **env},
                          capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("command", [["run", "--op", "tanh"], ["batch", "--ops", "tanh"],
                                     ["ab", "--op", "tanh", "--axis", "none", "--rounds", "2"]])
def test_a_run_batch_or_campaign_on_a_held_device_refuses_naming_its_holder(tmp_path, command):
    # Regression: two campaigns on one device both ran to the end, each spoiling the other's
    # timings, and nothing said so.
    shapes = tmp_path / "s.yaml"
    shapes.write_text(SHAPES)
    with device_lock.holding(backends.get("cpu"), [None], what="another campaign"):
        proc = harness(*command, "--backend", "cpu", "--shape-mode", "file", "--shape-file",
                       str(shapes), "--out", str(tmp_path / "runs"),
                       **{device_lock.WAIT_VAR: "0"})
    assert proc.returncode == 3, proc.stdout[-2000:] + proc.stderr[-2000:]
    (line,) = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert line.startswith(f"error: device cpu-host is held by another harness run (pid="
                           f"{os.getpid()} ") and 'by="another campaign"' in line, line
    assert "ZL_DEVICE_WAIT=0" in line
    assert not list((tmp_path / "runs").glob("**/results.csv"))  # nothing was measured
