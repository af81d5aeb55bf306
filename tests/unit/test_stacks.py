"""Two FlagGems commits (AXIS=flaggems): the campaign's first preflight runs in side A's tree."""

from __future__ import annotations

import dataclasses
import subprocess
from pathlib import Path

from harness.backends import get
from harness.campaign import refs, stacks
from harness.run.preflight import run_preflight
from harness.settings import spec

TEST_TANH = "import pytest\n\n\n@pytest.mark.tanh\ndef test_tanh():\n    pass\n"


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t",
                           *args], check=True, capture_output=True, text=True).stdout.strip()


def checkout(tmp_path: Path) -> Path:
    """A plain FlagGems-shaped checkout, never pip-installed: flag_gems is importable only
    through pytest.ini's `pythonpath = src`, VERSION "A" then "B"."""
    repo = tmp_path / "FlagGems"
    (repo / "benchmark").mkdir(parents=True)
    (repo / "benchmark" / "base.py").write_text("")
    (repo / "benchmark" / "test_tanh.py").write_text(TEST_TANH)
    (repo / "pytest.ini").write_text("[pytest]\npythonpath = src\n")
    (repo / "src" / "flag_gems").mkdir(parents=True)
    git(repo, "init", "-q")
    for version in ("A", "B"):
        (repo / "src" / "flag_gems" / "__init__.py").write_text(f'VERSION = "{version}"\n')
        git(repo, "add", "-A")
        git(repo, "commit", "-qm", version)
    return repo


def test_the_first_preflight_imports_side_as_own_flag_gems_where_none_is_installed(tmp_path):
    # Regression: AXIS=flaggems refused in preflight ("cannot import flag_gems") unless
    # flag_gems was importable outside the two side trees: the operators' scan tree held the
    # benchmark files alone, so its import check found no flag_gems at all.
    repo = checkout(tmp_path)
    backend = dataclasses.replace(get("cpu"), python_modules=("torch", "flag_gems"))
    settings = dataclasses.replace(
        spec.resolve({"backend": "cpu", "op": "tanh", "flaggems_dir": str(repo)}, {},
                     which=lambda _: None), backend=backend)
    found = refs.resolve(repo, "HEAD~1", "HEAD", None)
    scan = stacks.scan_settings(settings, found, tmp_path / "scratch")
    plan = run_preflight(scan, with_accelerator=False)  # PreflightError before the fix
    assert plan.node.nodeid == "benchmark/test_tanh.py::test_tanh"
    assert "python_modules" in plan.passed
    assert scan.flaggems_dir is not None  # side A's own, not B's
    assert 'VERSION = "A"' in (scan.flaggems_dir / "src" / "flag_gems" / "__init__.py").read_text()
