"""make targets with RUNNER=docker DRY_RUN=1 and no container engine: the full command lines."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli import build_parser
from harness.run import images
from harness.settings.spec import REPO_ROOT

pytestmark = pytest.mark.integration
MAKE = shutil.which("make")
PINS = images.load_pins()
SUBCOMMANDS = set(build_parser()._subparsers._group_actions[0].choices)
# Per target: the extra variables it needs; ab and batch join once their subcommands exist.
TARGETS = {"preflight": ["OP=mm"], "run": ["OP=mm"], "batch": ["OPS=mm,tanh"],
           "ab": ["AXIS=RLC_ENHANCE", "OP=mm"]}
DEVICE_FLAGS = {"cuda": ["--gpus", "all"], "musa": ["--runtime=mthreads",
                                                    "-e", "MTHREADS_VISIBLE_DEVICES=all"]}


def make(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([MAKE, "--no-print-directory", *args, f"PYTHON={sys.executable}"],
                          cwd=REPO_ROOT, env={**os.environ, **(env or {})},
                          capture_output=True, text=True, timeout=120)


def fake_engine_path(tmp_path: Path, script: str | None) -> str:
    """A PATH whose only docker is `script` (None: no docker and no podman at all)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    if script is not None:
        docker = bin_dir / "docker"
        docker.write_text("#!/bin/sh\n" + script)
        docker.chmod(0o755)
    return str(bin_dir)


def container_line(proc: subprocess.CompletedProcess) -> list[str]:
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (line,) = [ln for ln in proc.stdout.splitlines() if ln.startswith("docker ")]
    return shlex.split(line)


@pytest.mark.parametrize("target", sorted(TARGETS))
@pytest.mark.parametrize("backend", sorted(b for b, p in PINS.items() if p is not None))
def test_each_target_prints_the_full_container_command(backend, target):
    if target not in SUBCOMMANDS:
        pytest.skip(f"harness {target} does not exist yet")
    pins = PINS[backend]
    argv = container_line(make(target, f"BACKEND={backend}", *TARGETS[target],
                               "RUNNER=docker", "DRY_RUN=1"))
    line = shlex.join(argv)
    assert argv[:3] == ["docker", "run", "--rm"]
    assert shlex.join(DEVICE_FLAGS[backend]) in line
    runs = REPO_ROOT / "runs"
    assert f"-v {runs}:{runs} " in line and f"-v {REPO_ROOT}:{REPO_ROOT}:ro" in line
    assert "-e ZL_IN_IMAGE=1" in line and f"-e ZL_IMAGE={pins.local_tag()}" in line
    if pins.digest:
        assert f"-e ZL_IMAGE_DIGEST={pins.image}:{pins.tag}@{pins.digest}" in line
    else:
        assert "ZL_IMAGE_DIGEST" not in line
    inner = argv[argv.index(pins.local_tag()) + 1:]
    assert inner[:2] == ["harness", target] and inner[-1] == "--runner=host"
    assert f"--backend={backend}" in inner
    assert not any(a.startswith(("--dry-run", "--devices")) for a in inner)


def test_the_design_cards_dry_run_shows_the_plan_that_runs_in_the_image(tmp_path):
    # Regression: `make ab BACKEND=musa AXIS=RLC_ENHANCE OP=mm RUNNER=docker DRY_RUN=1` printed
    # only the docker line: not what the axis resolves to, the units or the plugins.
    proc = make("ab", "BACKEND=musa", "AXIS=RLC_ENHANCE", "OP=mm", "RUNNER=docker", "DRY_RUN=1",
                f"OUT={tmp_path / 'runs'}", "DEVICES=1")
    argv = container_line(proc)
    inner = argv[argv.index("harness"):]
    assert inner[:2] == ["harness", "ab"] and inner[-1] == "--runner=host"
    assert {"--axis=RLC_ENHANCE", "--op=mm", f"--out={tmp_path / 'runs'}"} <= set(inner)
    out = proc.stdout
    assert out.index("docker run ") < out.index("in the image, the plan")
    for needle in ("axis: RLC_ENHANCE -> FLAGTREE_MUSA_RLC_ENHANCE; A=0 B=1",
                   "side A: FLAGTREE_MUSA_RLC_ENHANCE=0 ", "side B: FLAGTREE_MUSA_RLC_ENHANCE=1 ",
                   "3 units, round-major", "plugins: harness.plugins.compat_musa",
                   "preflight python_modules: skipped (made in the image"):
        assert needle in out, needle
    first = next(ln for ln in out.splitlines() if ln.startswith("first unit: "))
    assert "--runner host" in first and "--devices" not in first  # as the image runs it
    assert "PREFLIGHT_FAILED" not in out and not (tmp_path / "runs").exists()


def test_musa_run_shows_the_mthreads_image_and_says_when_its_base_has_no_digest():
    proc = make("run", "BACKEND=musa", "OP=mm", "RUNNER=docker", "DRY_RUN=1", "DEVICES=0,1")
    line = shlex.join(container_line(proc))
    assert "-e MTHREADS_VISIBLE_DEVICES=0,1" in line
    notes = [ln for ln in proc.stdout.splitlines() if ln.startswith("# ")]
    assert any(PINS["musa"].image in ln for ln in notes)
    if not PINS["musa"].digest:
        assert any("no digest" in ln and "make pin" in ln for ln in notes)


def test_cuda_devices_become_the_gpus_the_container_sees():
    proc = make("run", "BACKEND=cuda", "OP=mm", "RUNNER=docker", "DRY_RUN=1", "DEVICES=1,3")
    argv = container_line(proc)
    assert argv[argv.index("--gpus") + 1] == '"device=1,3"'


def test_make_image_with_a_client_but_no_daemon_is_the_clear_message(tmp_path):
    path = fake_engine_path(tmp_path, 'echo "Cannot connect to the Docker daemon" >&2; exit 1\n')
    proc = make("image", "BACKEND=cuda", env={"PATH": f"{path}:{os.environ['PATH']}"})
    assert proc.returncode == 2
    (error,) = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert "Cannot connect to the Docker daemon" in error and "RUNNER=host" in error
    assert "docker build" not in proc.stdout


def test_make_image_with_no_engine_installed_names_runner_host(tmp_path):
    proc = make("image", "BACKEND=cuda", env={"PATH": fake_engine_path(tmp_path, None)})
    assert proc.returncode == 2
    assert "neither docker nor podman" in proc.stderr and "RUNNER=host" in proc.stderr


def test_make_image_dry_run_prints_the_build_with_every_pin():
    proc = make("image", "BACKEND=cuda", "RUNNER=docker", "DRY_RUN=1")
    argv = container_line(proc)
    assert argv[:2] == ["docker", "build"]
    assert f"BASE_DIGEST={PINS['cuda'].digest}" in argv
    assert f"FLAGGEMS_COMMIT={PINS['cuda'].build_args['FLAGGEMS_COMMIT']}" in argv


@pytest.mark.skipif(bool(PINS["musa"].digest), reason="musa's base is pinned")
def test_make_image_refuses_an_unpinned_base_unless_allowed():
    proc = make("image", "BACKEND=musa", "RUNNER=docker", "DRY_RUN=1")
    assert proc.returncode == 2 and "ALLOW_UNPINNED=1" in proc.stderr
    allowed = make("image", "BACKEND=musa", "RUNNER=docker", "DRY_RUN=1", "ALLOW_UNPINNED=1")
    assert container_line(allowed)[:2] == ["docker", "build"]


def test_make_pin_dry_run_prints_one_resolver_command_per_pinned_backend():
    proc = make("pin", "DRY_RUN=1")
    assert proc.returncode == 0, proc.stderr
    commands = [ln for ln in proc.stdout.splitlines() if not ln.startswith(("#", "PYTHONPATH"))]
    pinned = [p for p in PINS.values() if p is not None]
    assert len(commands) == len(pinned)
    assert all(f"{p.image}:{p.tag}" in " ".join(commands) for p in pinned)


def test_make_shell_dry_run_is_interactive_bash_in_the_image():
    argv = container_line(make("shell", "BACKEND=cuda", "RUNNER=docker", "DRY_RUN=1"))
    assert "-it" in argv and argv[-2:] == [PINS["cuda"].local_tag(), "bash"]


@pytest.mark.parametrize("target", ["ab", "batch"])
def test_ops_all_in_the_image_is_planned_as_the_images_own_nodes(target, tmp_path):
    # The host has no FlagGems of the image's: OPS=all is listed there, not refused here.
    extra = ["AXIS=none"] if target == "ab" else []
    proc = make(target, "BACKEND=cuda", "OPS=all", *extra, "RUNNER=docker", "DRY_RUN=1",
                f"OUT={tmp_path / 'runs'}")
    container_line(proc)  # exit 0, one container line
    assert "<every node of the image's FlagGems>" in proc.stdout
    assert "PREFLIGHT_FAILED" not in proc.stdout and not (tmp_path / "runs").exists()
