"""An installed harness, away from any checkout: the cpu suite, receipts, no pytest on import."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.settings.spec import REPO_ROOT

pytestmark = pytest.mark.integration


def build_outputs() -> set[str]:
    """What a build backend may leave in the source tree: build/ and *.egg-info."""
    return {p.name for p in REPO_ROOT.iterdir()
            if p.name == "build" or p.name.endswith(".egg-info")}


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The package as `pip install .` lays it out, in a target folder (no deps, no network)."""
    pytest.importorskip("hatchling", reason="the build backend (requirements/cpu.txt)")
    target = tmp_path_factory.mktemp("site")
    before = build_outputs()
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                           "--no-build-isolation", "--no-compile", "--target", str(target),
                           str(REPO_ROOT)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # Regression: setuptools left build/ and flaggems_bench_harness.egg-info in the checkout.
    assert build_outputs() == before
    return target


def installed_harness(site: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    """`harness ARGS` importing only the installed copy, run from a folder outside the checkout."""
    env = {**os.environ, "PYTHONPATH": str(site)}
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def test_installed_run_finds_the_packaged_cpu_suite(installed, tmp_path):
    # Regression: the suite was looked up at <site-packages>/examples/cpu_suite, never shipped.
    out = tmp_path / "runs"
    proc = installed_harness(installed, tmp_path, "run", "--backend", "cpu", "--op", "add",
                             "--out", str(out), "--dry-run")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    suite = installed / "harness" / "cpu_suite"
    assert f"flaggems_dir: {suite}" in proc.stdout
    assert "benchmark/test_add.py::test_add" in proc.stdout
    assert (suite / "pytest.ini").is_file() and (suite / "benchmark" / "base.py").is_file()
    assert not out.exists()


def test_installed_receipt_verify_asks_for_the_checkout(installed, tmp_path):
    # Regression: verify hashed site-packages and called every checkout file missing.
    receipt = tmp_path / "receipt.json"
    receipt.write_text('{"schema": "harness-receipt/1", "files": {}}')
    proc = installed_harness(installed, tmp_path, "receipt", "verify", str(receipt))
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: receipt verify: this harness is installed")
    assert "--root" in proc.stderr and proc.stderr.count("\n") == 1
    proc = installed_harness(installed, tmp_path, "receipt", "verify", str(receipt),
                             "--root", str(tmp_path))
    assert proc.returncode == 0 and "RECEIPT_OK files=0" in proc.stdout


def test_importing_the_cli_does_not_import_pytest(tmp_path):
    # Regression: runner imported harness.plugins.timing (and pytest) for one file name.
    code = "import sys, harness.cli; print(sorted(m for m in sys.modules if 'pytest' in m))"
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_pyproject_declares_what_the_command_imports():
    tomllib = pytest.importorskip("tomllib")  # 3.11+

    meta = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    names = {d.split(">")[0].split("=")[0].strip().lower() for d in meta["dependencies"]}
    assert {"pyyaml", "pytest"} <= names
