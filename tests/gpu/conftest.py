"""The accelerator session (`nox -s gpu`): the harness against a real FlagGems on a real device.

It needs FLAGGEMS_DIR (a FlagGems checkout whose `src` is importable, or installed) and the
backend in GPU_BACKEND (default cuda). A session asked for (`-m gpu`) without them fails at once:
a GPU session that skips everything would read as passed.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.settings.spec import REPO_ROOT


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if Path(__file__).parent in Path(item.path).parents:
            item.add_marker(pytest.mark.gpu)


@pytest.fixture(scope="session")
def flaggems_dir() -> Path:
    value = os.environ.get("FLAGGEMS_DIR")
    if not value or not (Path(value) / "benchmark").is_dir():
        pytest.fail(f"FLAGGEMS_DIR={value!r}: the gpu tests need a FlagGems checkout with its "
                    "benchmark/ (and flag_gems importable)")
    return Path(value)


@pytest.fixture(scope="session")
def backend() -> str:
    return os.environ.get("GPU_BACKEND", "cuda")


class Harness:
    """`python -m harness.cli` against the session's FlagGems, on the host runner."""

    def __init__(self, flaggems_dir: Path, backend: str, out: Path) -> None:
        self.flaggems_dir, self.backend, self.out = flaggems_dir, backend, out

    def __call__(self, command: str, *args: str, timeout: float = 900
                 ) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "harness.cli", command, "--backend", self.backend,
                "--runner", "host", "--flaggems-dir", str(self.flaggems_dir),
                "--out", str(self.out), *args]
        proc = subprocess.run(argv, cwd=REPO_ROOT, capture_output=True, text=True,
                              timeout=timeout)
        print(proc.stdout[-4000:], proc.stderr[-2000:])
        return proc

    def runs(self, op: str) -> list[Path]:
        return sorted(p.parent for p in (self.out / op).glob("*/run_identity.json"))

    def campaign(self, axis: str) -> Path:
        (directory,) = [p.parent for p in (self.out / "ab").glob(f"{axis}-*/*/ab.json")]
        return directory

    def batch_status(self) -> list[dict[str, str]]:
        (path,) = self.out.glob("batch/*/ops_status.csv")
        return list(csv.DictReader(path.open()))


@pytest.fixture
def harness(flaggems_dir: Path, backend: str, tmp_path: Path) -> Harness:
    return Harness(flaggems_dir, backend, tmp_path / "runs")


def rows_of(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
