"""AXIS=image: an A/B campaign whose sides are two images pinned by digest, each side's pytest
in its image (through a fake engine that runs the command here), the driver on the host."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from harness.settings.spec import REPO_ROOT

from .test_ab_cli import harness
from .test_ab_suite_cli import SHAPES

pytestmark = pytest.mark.integration
A_IMAGE = "registry.example/flaggems-cuda@sha256:" + "a" * 64
B_IMAGE = "registry.example/flaggems-cuda-next@sha256:" + "b" * 64


def campaign(tmp_path: Path, *flags: str):
    shapes = tmp_path / "shapes.yaml"
    shapes.write_text(SHAPES)
    engine_log = tmp_path / "engine.log"
    env = {"PATH": f"{REPO_ROOT / 'tests' / 'fake_engine'}{os.pathsep}{os.environ['PATH']}",
           "FAKE_ENGINE_LOG": str(engine_log), "FAKE_ENGINE_PYTHON": sys.executable}
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
