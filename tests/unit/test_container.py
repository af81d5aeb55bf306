"""The container command lines of harness/container.py: a subcommand run inside the image."""

from __future__ import annotations

import shlex

import pytest

from harness import backends
from harness.errors import UsageError
from harness.run import container, images
from harness.run.images import ImagePins
from harness.settings import spec
from harness.settings.spec import REPO_ROOT
from tests.engines import FakeEngine, proc

PINS = images.load_pins()


def settings(backend: str = "cuda", **flags: str) -> spec.Settings:
    base = {"backend": backend, "runner": "docker", "dry_run": "1"}
    return spec.resolve({**base, **flags}, env={}, which=lambda name: None)


# --- the command line around a subcommand --------------------------------------------------------

@pytest.mark.parametrize("argv,inner", [
    (["run", "--op=mm", "--runner=docker", "--dry-run=1"], ["run", "--op=mm"]),
    (["run", "--runner", "docker", "--op", "mm", "--dry-run"], ["run", "--op", "mm"]),
    (["run", "--dry-run", "1", "--gpus", "0,1", "--level=core"], ["run", "--level=core"]),
    (["batch", "--devices=2", "--ops=mm,tanh"], ["batch", "--ops=mm,tanh"]),
])
def test_inner_argv_drops_what_the_container_stands_for(argv, inner):
    assert container.inner_argv(argv) == inner


@pytest.mark.parametrize("argv,inner", [
    (["run", "--dev", "2", "--op=mm"], ["run", "--op=mm"]),
    (["run", "--gp=0,1", "--ru", "docker", "--dry", "--level", "core"], ["run", "--level", "core"]),
    (["ab", "--a", "0", "--b=1", "--rounds", "3"], ["ab", "--a", "0", "--b=1", "--rounds", "3"]),
])
def test_inner_argv_drops_the_abbreviations_argparse_took_for_those_flags(argv, inner):
    assert container.inner_argv(argv) == inner


def test_an_abbreviated_devices_flag_never_reaches_the_container_where_ids_start_at_0(capsys):
    # Regression: `--dev 2` exposed device 2 (numbered 0 inside) and also reached the inner
    # command, whose DEVICES=2 named a device the container does not have.
    from harness.cli import main

    assert main(["run", "--backend", "cuda", "--op", "mm", "--dev", "2", "--runner", "docker",
                 "--dry-run"]) == 0
    (line,) = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("docker ")]
    assert "--gpus '\"device=2\"'" in line
    assert line.endswith("harness run --backend cuda --op mm --runner=host")


def test_passthrough_carries_harness_variables_but_not_host_paths_or_devices():
    env = {"ZL_TIMER": "direct", "BENCH_LEVEL": "core", "FLAGTREE_MUSA_RLC_ENHANCE": "1",
           "TRITON_PRINT_AUTOTUNING": "1", "ZL_RUNNER": "docker", "ZL_DEVICES": "3",
           "FLAGGEMS_DIR": "/home/me/FlagGems", "CUDA_VISIBLE_DEVICES": "3", "HOME": "/root",
           "OP": "tanh", "ZL_IMAGE_DIGEST": "forged"}
    assert container.passthrough_env(env, given=["run", "--op=mm"]) == {
        "BENCH_LEVEL": "core", "FLAGTREE_MUSA_RLC_ENHANCE": "1",
        "TRITON_PRINT_AUTOTUNING": "1", "ZL_TIMER": "direct"}


def command(backend: str, devices: str = "", env: dict | None = None, **flags: str) -> list[str]:
    s = settings(backend, **({"devices": devices} if devices else {}), **flags)
    inner = ["harness", "run", "--op=mm", "--runner=host"]
    return container.container_command("docker", s, PINS[backend], inner, env=env or {},
                                       cwd=REPO_ROOT)


def test_cuda_command_exposes_the_chosen_gpus_mounts_runs_and_passes_the_digest():
    argv = command("cuda", devices="1,3")
    line = shlex.join(argv)
    assert argv[:2] == ["docker", "run"]
    assert "--gpus '\"device=1,3\"'" in line
    runs = REPO_ROOT / "runs"
    assert f"-v {REPO_ROOT}:{REPO_ROOT}:ro" in line and f"-v {runs}:{runs} " in line
    assert f"-w {REPO_ROOT}" in line
    assert f"-e ZL_IMAGE_DIGEST={PINS['cuda'].base}" in line and "@sha256:" in PINS["cuda"].base
    assert "-e ZL_IN_IMAGE=1" in line and f"-e PYTHONPATH={REPO_ROOT}" in line
    assert argv[-5:] == [PINS["cuda"].local_tag(), "harness", "run", "--op=mm", "--runner=host"]


def test_cuda_without_devices_gets_all_gpus_and_podman_names_them_through_cdi():
    assert "--gpus all" in shlex.join(command("cuda"))
    gpu_args = backends.get("cuda").container_device_args
    assert gpu_args("podman", ("0", "2")) == ("--device=nvidia.com/gpu=0",
                                             "--device=nvidia.com/gpu=2")


@pytest.mark.parametrize("devices,visible", [("", "all"), ("0,1", "0,1")])
def test_musa_command_uses_the_mthreads_runtime_and_its_visibility_variable(devices, visible):
    line = shlex.join(command("musa", devices=devices))
    assert "--runtime=mthreads" in line and f"-e MTHREADS_VISIBLE_DEVICES={visible}" in line


def test_an_unpinned_base_passes_no_digest_rather_than_a_moving_tag():
    unpinned = ImagePins("cuda", "nvidia/cuda", "12.8.1-cudnn-devel-ubuntu24.04", None,
                         {"BASE_IMAGE": "nvidia/cuda:12.8.1-cudnn-devel-ubuntu24.04"},
                         PINS["cuda"].dockerfile)
    argv = container.container_command("docker", settings("cuda"), unpinned, ["bash"], env={},
                                       cwd=REPO_ROOT)
    assert not any(a.startswith("ZL_IMAGE_DIGEST=") for a in argv)
    assert any("no digest" in line for line in images.notes(unpinned))


def test_out_and_inputs_outside_the_checkout_are_mounted_at_the_same_path(tmp_path):
    shapes = tmp_path / "shapes" / "llama.yaml"
    s = settings("cuda", out=str(tmp_path / "out"), shape_mode="file", shape_file=str(shapes))
    found = container.mounts(s, REPO_ROOT)
    assert (tmp_path / "out", True) in found and (shapes.parent, False) in found
    assert (REPO_ROOT, False) in found


def test_the_shared_tuner_caches_live_under_out_per_image_and_a_user_value_wins():
    line = shlex.join(command("cuda"))
    cache = REPO_ROOT / "runs" / ".cache" / PINS["cuda"].local_tag().replace(":", "-")
    assert f"-e TRITON_CACHE_DIR={cache}/triton" in line
    mine = command("cuda", env={"TRITON_CACHE_DIR": "/scratch/triton"})
    assert mine.count("TRITON_CACHE_DIR=/scratch/triton") == 1
    assert not any(a.startswith("TRITON_CACHE_DIR=/work") for a in mine)


def test_a_backend_without_device_flags_refuses_the_container():
    s = settings("cuda")
    bare = spec.Settings(**{**s.__dict__, "backend": backends.get("ascend")})
    with pytest.raises(UsageError, match="no container device flags.*RUNNER=host"):
        container.container_command("docker", bare, PINS["cuda"], ["bash"], env={}, cwd=REPO_ROOT)


# --- run_in_image ------------------------------------------------------------------------------

def test_dry_run_prints_the_notes_then_the_command_and_touches_no_engine():
    lines: list[str] = []
    fake = FakeEngine({})
    rc = container.run_in_image(settings("musa"), ["run", "--op=mm", "--runner=docker"],
                                env={}, cwd=REPO_ROOT, write_line=lines.append, run=fake)
    assert rc == 0 and fake.calls == []
    assert lines[-1].startswith("docker run ") and lines[-1].endswith(
        "harness run --op=mm --runner=host")
    assert all(line.startswith("# ") for line in lines[:-1])


def test_a_real_run_checks_the_engine_and_the_image_then_passes_its_exit_code(tmp_path):
    s = settings("cuda", dry_run="0", out=str(tmp_path / "out"))
    fake = FakeEngine({("docker", "image", "inspect"): proc(0, "sha256:" + "a" * 64 + "\n"),
                       ("docker", "run"): proc(5)})
    rc = container.run_in_image(s, ["run", "--op=mm"], env={}, cwd=REPO_ROOT,
                                which=lambda name: "/usr/bin/docker", run=fake)
    assert rc == 5 and (tmp_path / "out").is_dir()
    assert [c[:2] for c in fake.calls] == [["docker", "info"], ["docker", "image"],
                                           ["docker", "run"], ["docker", "stop"],
                                           ["docker", "rm"]]
    assert f"ZL_IMAGE={PINS['cuda'].local_tag()}@sha256:{'a' * 64}" in fake.calls[2]
    # the container is the run's: named, and stopped and removed by that name when it ends
    name = fake.calls[2][fake.calls[2].index("--name") + 1]
    assert fake.calls[3][-1] == fake.calls[4][-1] == name and name.startswith("zl-")


def test_a_dry_run_shell_with_runner_host_is_refused_not_printed_as_host_run():
    # Regression: `harness shell --runner host --dry-run` printed "host run ..." and exited 0.
    lines: list[str] = []
    with pytest.raises(UsageError, match=r"^RUNNER='host' is not accepted"):
        container.run_in_image(settings("cuda", runner="host"), [], shell=True, env={},
                               cwd=REPO_ROOT, write_line=lines.append)
    assert lines == []


def test_an_image_that_is_not_built_says_how_to_build_it():
    s = settings("cuda", dry_run="0")
    fake = FakeEngine({("docker", "image", "inspect"): proc(1, err="No such image")})
    with pytest.raises(UsageError, match="not built.*make image BACKEND=cuda"):
        container.run_in_image(s, ["run"], env={}, cwd=REPO_ROOT,
                               which=lambda name: "/usr/bin/docker", run=fake)


def test_an_image_sides_pytest_under_apptainer_binds_an_empty_folder_over_the_checkouts_src(
        tmp_path):
    fg = tmp_path / "FlagGems"
    (fg / "src").mkdir(parents=True)
    image = "reg/x@sha256:" + "c" * 64
    planned = settings("cuda", runner="apptainer", flaggems_dir=str(fg), out=str(tmp_path / "o"))
    container.pytest_in_image("apptainer", image, planned, ["python", "-m", "pytest"], fg, {})
    assert not (tmp_path / "o").exists()  # a dry run's line creates nothing
    given = settings("cuda", runner="apptainer", flaggems_dir=str(fg), out=str(tmp_path / "o"),
                     dry_run="0")
    line = container.pytest_in_image("apptainer", image, given,
                                     ["python", "-m", "pytest", "benchmark/test_x.py"], fg,
                                     {"ZL_PLUGIN_TIMER": "graph", "CUDA_VISIBLE_DEVICES": "3"})
    assert line[:3] == ["apptainer", "exec", "--nv"]
    binds = [line[i + 1] for i, a in enumerate(line) if a == "--bind"]
    assert binds[-1] == f"{tmp_path / 'o' / '.empty'}:{fg / 'src'}:ro"
    assert f"{fg}:{fg}:ro" in binds and (tmp_path / "o" / ".empty").is_dir()
    tail = line[line.index(f"docker://{image}") + 1:]
    # the run's own variables inside; the device is the task's, never renumbered here
    assert tail == ["env", "ZL_PLUGIN_TIMER=graph", "python3", "-m", "pytest",
                    "benchmark/test_x.py"]
    odd = settings("cuda", runner="pyxis", flaggems_dir=str(tmp_path / "a,b"))
    with pytest.raises(UsageError, match="cannot mount"):
        container.pytest_in_image("pyxis", image, odd, ["python", "-m", "pytest"], fg, {})
    colon = settings("cuda", flaggems_dir=str(tmp_path / "a:b"))
    with pytest.raises(UsageError, match="RUNNER='docker' cannot mount .*a:b"):
        container.pytest_in_image("docker", image, colon, ["python", "-m", "pytest"], fg, {})


def test_a_cluster_mount_list_names_parents_before_the_folders_inside_them(tmp_path):
    listed = container.cluster_mounts("pyxis", [(tmp_path / "out", True), (tmp_path, False)])
    assert listed == [f"{tmp_path}:{tmp_path}:ro", f"{tmp_path / 'out'}:{tmp_path / 'out'}"]
