"""A user's own FlagGems pytest sharing the checkout with a harness run keeps its record log."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys

import pytest

from harness.settings.spec import EMBEDDED_SUITE, REPO_ROOT
from tests.gate_plugin import GATE_VAR
from tests.procs import wait_for

pytestmark = pytest.mark.integration
TANH_RECORD = "[INFO] " + json.dumps({
    "op_name": "tanh", "dtype": "torch.float32", "mode": "kernel", "level": "core",
    "result": [{"legacy_shape": None, "shape_detail": [[64, 64]], "latency_base": 0.01,
                "latency": 0.01, "gbps_base": None, "gbps": None, "speedup": 1.0,
                "accuracy": None, "tflops": 0.1, "utilization": None,
                "compared_speedup": None, "error_msg": None}]}) + "\n"


def test_a_foreign_record_log_written_during_a_run_is_neither_swept_nor_moved(tmp_path):
    # Regression: a user's `pytest benchmark/test_tanh.py --record log` in the same checkout
    # during `harness run --op add` put tanh rows into the add run and lost its log.
    gate, out = tmp_path / "gate", tmp_path / "runs"
    gate.mkdir()
    created = EMBEDDED_SUITE / f"result_benchmark_test_tanh--foreign-{os.getpid()}.log"
    existing = EMBEDDED_SUITE / f"result_benchmark_test_tanh--older-{os.getpid()}.log"
    existing.write_text("[INFO] Benchmark record logger enabled\n")
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), GATE_VAR: str(gate),
           "PYTEST_PLUGINS": "tests.gate_plugin"}
    try:
        run = subprocess.Popen(
            [sys.executable, "-m", "harness.cli", "run", "--backend", "cpu", "--op", "add",
             "--out", str(out)], cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True)
        try:
            wait_for(lambda: (gate / "ready").exists() or run.poll() is not None, 120,
                     "the run's first benchmark")
            created.write_text(TANH_RECORD)  # the foreign pytest starts and records mid-run
            with open(existing, "a") as fh:
                fh.write(TANH_RECORD)
            (gate / "go").touch()
            output, _ = run.communicate(timeout=300)
        finally:
            if run.poll() is None:
                run.kill()
        assert run.returncode == 0, output[-3000:]
        assert created.read_text() == TANH_RECORD
        assert existing.read_text() == "[INFO] Benchmark record logger enabled\n" + TANH_RECORD
    finally:
        created.unlink(missing_ok=True)
        existing.unlink(missing_ok=True)
    (run_dir,) = (out / "add").iterdir()
    with open(run_dir / "results.csv", newline="") as fh:
        ops = {row["op"] for row in csv.DictReader(fh)}
    assert ops == {"add"}
    assert not any("foreign" in p.name or "older" in p.name for p in run_dir.iterdir())
