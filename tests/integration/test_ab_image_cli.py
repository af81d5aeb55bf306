"""AXIS=image: an A/B campaign whose sides are two images pinned by digest, each side's pytest
in its image (through a fake engine that runs the command here), the driver on the host."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from harness.settings.spec import REPO_ROOT

from .test_ab_cli import harness
from .test_ab_suite_cli import SHAPES

pytestmark = pytest.mark.integration
A_IMAGE = "registry.example/flaggems-cuda@sha256:" + "a" * 64
B_IMAGE = "registry.example/flaggems-cuda-next@sha256:" + "b" * 64


def campaign(tmp_path: Path, *flags: str, extra: dict[str, str] | None = None):
    shapes = tmp_path / "shapes.yaml"
    shapes.write_text(SHAPES)
    engine_log = tmp_path / "engine.log"
    env = {"PATH": f"{REPO_ROOT / 'tests' / 'fake_engine'}{os.pathsep}{os.environ['PATH']}",
           "FAKE_ENGINE_LOG": str(engine_log), "FAKE_ENGINE_PYTHON": sys.executable,
           **(extra or {})}
    proc = harness("ab", "--backend", "cpu", "--op", "tanh", "--axis", "image", "--rounds",
                   "2", "--shape-mode", "file", "--shape-file", str(shapes), "--out",
                   str(tmp_path / "runs"), *flags, env=env)
    return proc, engine_log


def test_each_sides_pytest_runs_in_its_image_and_the_receipt_pins_both_digests(tmp_path):
    proc, engine_log = campaign(tmp_path, "--runner", "docker", "--a-image", A_IMAGE,
                                "--b-image", B_IMAGE)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    started = engine_log.read_text().splitlines()
    assert started == [f"{A_IMAGE} python3 -m pytest", f"{B_IMAGE} python3 -m pytest",
                       f"{B_IMAGE} python3 -m pytest", f"{A_IMAGE} python3 -m pytest"]
    (directory,) = (tmp_path / "runs" / "ab" / "image-tanh").iterdir()
    for side, image in (("A", A_IMAGE), ("B", B_IMAGE)):
        ident = json.loads((directory / "tanh" / side / "r0" / "run_identity.json").read_text())
        assert ident["image_digest"] == image
        assert ident["command"][:2] == ["docker", "run"] and image in ident["command"]
        assert ident["launch"] == [{"kind": "process"}]  # an image's pytest is no worker
    receipt = json.loads((directory / "receipt.json").read_text())
    assert receipt["sides"]["A"]["image_digests"] == [A_IMAGE]
    assert receipt["sides"]["B"]["image_digests"] == [B_IMAGE]
    report = (directory / "ab.md").read_text()
    assert f"- image digest: A {A_IMAGE}; B {B_IMAGE}" in report


def test_the_plan_shows_both_digests_and_the_engine_line_of_the_first_run(tmp_path):
    proc, engine_log = campaign(tmp_path, "--runner", "docker", "--a-image", A_IMAGE,
                                "--b-image", B_IMAGE, "--dry-run", "1")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    lines = proc.stdout.splitlines()
    assert any(line.startswith("axis: image -> two images (digests: A sha256:aaaa") and
               "B sha256:bbbb" in line for line in lines)
    assert any(line.startswith("side B: ") and f"runs {B_IMAGE};" in line for line in lines)
    run_line = next(line for line in lines if line.startswith("pytest: docker run --rm "))
    assert f" {A_IMAGE} python3 -m pytest benchmark/test_tanh.py::test_tanh " in run_line
    assert "pytest: a fresh process per run (WORKERS=0)" in lines  # no worker in an image
    assert not (tmp_path / "runs").exists() and not engine_log.exists()


@pytest.mark.parametrize(("flags", "message"), [
    (("--runner", "docker", "--a-image", "flaggems:latest", "--b-image", B_IMAGE),
     "A_IMAGE (--a-image)='flaggems:latest' is not accepted; expected an image pinned by its "
     "digest, name@sha256:<64 hex digits> (a tag alone can move)"),
    (("--runner", "docker", "--a-image", A_IMAGE, "--b-image",
      "other@sha256:" + "a" * 64), "A_IMAGE and B_IMAGE have the same digest "
     "(sha256:aaaaaaaaaaaa): the campaign would compare an image with itself; AXIS=none is "
     "the A/A"),
    (("--runner", "docker", "--a-image", A_IMAGE),
     "AXIS=image needs B_IMAGE: side B's image, name@sha256:<digest>"),
    (("--runner", "host", "--a-image", A_IMAGE, "--b-image", B_IMAGE),
     "AXIS=image runs each side's pytest in its image: it needs RUNNER docker, podman (or, "
     "with EXECUTOR=slurm, pyxis or apptainer), not 'host'"),
], ids=["no_digest", "same_digest", "missing", "not_an_engine"])
def test_images_that_cannot_be_two_sides_are_refused_in_one_line(tmp_path, flags, message):
    proc, _ = campaign(tmp_path, *flags)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == f"error: {message}"
    assert not (tmp_path / "runs").exists()


HANGS = '''"""tanh that never ends and ignores SIGTERM: its container outlives a stopped client."""

import os
import signal
import time

import pytest


@pytest.mark.tanh
def test_tanh():
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    with open(os.path.join(os.environ["FLAGGEMS_TEST_PIDS"], str(os.getpid())), "w"):
        pass
    while True:
        time.sleep(1)
'''


def alive(pid: int) -> bool:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return fields[0] != "Z"


def test_a_unit_past_its_limit_stops_its_container_not_only_the_engines_client(tmp_path):
    # Regression: `docker run --rm --init` had no name; a unit stopped at its limit killed the
    # client, and the container (here: a pytest that ignores SIGTERM) ran on beside the resume.
    suite = shutil.copytree(REPO_ROOT / "examples" / "cpu_suite", tmp_path / "suite",
                            ignore=shutil.ignore_patterns("__pycache__", "result_*.log"))
    (suite / "benchmark" / "test_tanh.py").write_text(HANGS)
    pids = tmp_path / "pids"
    pids.mkdir()
    # a FLAGGEMS_ variable: the host's reach the container
    proc, _ = campaign(tmp_path, "--runner", "docker", "--a-image", A_IMAGE, "--b-image",
                       B_IMAGE, "--flaggems-dir", str(suite), "--unit-timeout", "20",
                       extra={"FLAGGEMS_TEST_PIDS": str(pids)})
    assert "timeout" in proc.stdout, proc.stdout[-3000:] + proc.stderr[-2000:]
    started = [int(p.name) for p in pids.iterdir()]
    assert started, "the hanging benchmark never started in its container"
    # the unit's own `rm -f` stopped it before the unit ended (its keeper, were it killed)
    assert [pid for pid in started if alive(pid)] == []
    ops = (tmp_path / "containers" / "ops.log").read_text().split()
    assert ops[0] == "rm" and ops[1].startswith("zl-"), ops
    assert [p.name for p in (tmp_path / "containers").iterdir()] == ["ops.log"]
