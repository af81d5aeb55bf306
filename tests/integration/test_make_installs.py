"""make's test targets install a session's venv again only when what it installs from changed."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from harness.settings.spec import REPO_ROOT

pytestmark = pytest.mark.integration
INPUTS = ("Makefile", "requirements/cpu.txt", "pyproject.toml", "noxfile.py")


def planned(checkout: Path, target: str) -> list[str]:
    """The recipe lines `make -n` would run for `target` (nothing is run)."""
    proc = subprocess.run(["make", "--no-print-directory", "-n", target], cwd=checkout,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return [line for line in proc.stdout.splitlines() if "nox -s" in line or "touch" in line]


@pytest.mark.parametrize(("target", "session"), [("test-fast", "fast"), ("test", "tests"),
                                                 ("test-slurm", "slurm")])
def test_a_session_installs_when_its_venv_is_new_or_its_inputs_changed_and_not_otherwise(
        tmp_path, target, session):
    for name in INPUTS:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO_ROOT / name, tmp_path / name)
    install = f"python3 -m nox -s {session} --install-only"
    run = f"python3 -m nox -s {session} --no-install"
    # no venv yet (a fresh clone, as CI has): install, stamp, then run without installing
    assert planned(tmp_path, target) == [install, f"touch .nox/{session}/.installed", run]

    stamp = tmp_path / ".nox" / session / ".installed"
    stamp.parent.mkdir(parents=True)
    stamp.touch()
    old = stamp.stat().st_mtime - 3600
    for name in INPUTS:
        os.utime(tmp_path / name, (old, old))
    assert planned(tmp_path, target) == [run]  # installed since its inputs last changed

    os.utime(tmp_path / "requirements" / "cpu.txt")  # a pin edited after the install
    assert planned(tmp_path, target)[0] == install
