"""COMPILE_WORKERS through make and the CLI on the cpu suite: validated, recorded, inert."""

from __future__ import annotations

import json

import pytest

from tests.integration.test_run_cli import harness, make, only_run_dir

pytestmark = pytest.mark.integration


def test_a_run_records_compile_workers_in_header_and_identity(tmp_path):
    proc = harness("run", "--backend", "cpu", "--op", "add", "--out", str(tmp_path),
                   "--compile-workers", "3")
    assert proc.returncode == 0, proc.stderr
    run_dir = only_run_dir(tmp_path, "add")
    ident = json.loads((run_dir / "run_identity.json").read_text())
    assert ident["compile_workers"] == 3
    assert ident["precompile"] == {"off": "no_triton"}  # the cpu suite compiles nothing
    log = (run_dir / "run.log").read_text()
    assert "# compile_workers: 3" in log and "COMPILE_WORKERS_OFF" not in log
    assert "harness.plugins.precompile" not in log


def test_make_passes_compile_workers_and_rejects_a_bad_value(tmp_path):
    proc = make("run", "OP=add", "BACKEND=cpu", "COMPILE_WORKERS=-2", f"OUT={tmp_path}")
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "Error 2" in output
    assert "error: COMPILE_WORKERS (--compile-workers)='-2' is not accepted" in output
    assert not any(tmp_path.iterdir())
    proc = make("run", "OP=add", "BACKEND=cpu", "COMPILE_WORKERS=0", f"OUT={tmp_path}",
                "DRY_RUN=1")
    assert proc.returncode == 0, proc.stderr
    assert "compile_workers: 0" in proc.stdout
