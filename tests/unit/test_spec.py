"""Settings: flag beats environment, every bad value is one line naming variable and choices."""

from __future__ import annotations

import argparse

import pytest

from harness import spec
from harness.errors import UsageError


def which_none(_: str) -> None:
    return None


def resolve(flags=None, env=None, which=which_none):
    return spec.resolve(flags or {}, env or {}, which=which)


def test_defaults_on_a_host_without_accelerator():
    s = resolve({"op": "tanh"})
    assert s.backend.name == "cpu"
    assert (s.level, s.shape_mode, s.mode, s.repeat) == ("core", "upstream", "auto", 1)
    assert s.timer == "direct"  # cpu cannot capture, so auto means direct
    assert s.runner == "host"
    assert s.flaggems_dir == spec.EMBEDDED_SUITE
    assert not s.isolate_tuner_cache and not s.dry_run
    assert s.sources["LEVEL"] == "default"


def test_flag_beats_environment():
    s = resolve({"level": "comprehensive"}, {"BENCH_LEVEL": "core"})
    assert s.level == "comprehensive" and s.sources["LEVEL"] == "flag"
    s = resolve({}, {"BENCH_LEVEL": "comprehensive"})
    assert s.level == "comprehensive" and s.sources["LEVEL"] == "env"


def test_empty_value_counts_as_unset():
    assert resolve({"level": ""}, {"BENCH_LEVEL": ""}).level == "core"


@pytest.mark.parametrize(
    ("flags", "env", "needles"),
    [
        ({}, {"BENCH_LEVEL": "full"}, ["BENCH_LEVEL='full'", "core", "comprehensive"]),
        ({"level": "full"}, {}, ["LEVEL (--level)='full'", "core, comprehensive"]),
        ({}, {"ZL_TIMER": "fast"}, ["ZL_TIMER='fast'", "auto, graph, direct"]),
        ({}, {"ZL_DIRECT_REPEAT": "0"}, ["ZL_DIRECT_REPEAT='0'", "at least 1"]),
        ({"repeat": "two"}, {}, ["REPEAT (--repeat)='two'"]),
        ({}, {"ZL_RUNNER": "lxc"}, ["ZL_RUNNER='lxc'", "docker, podman"]),
        ({}, {"ZL_DEVICES": "0;1"}, ["ZL_DEVICES='0;1'", "comma-separated"]),
        ({"dtypes": "torch.float16"}, {}, ["DTYPES (--dtypes)='torch.float16'", "float16,"]),
        ({}, {"ZL_ISOLATE_TUNER_CACHE": "yes"}, ["ZL_ISOLATE_TUNER_CACHE='yes'", "0, 1"]),
        ({"backend": "foo"}, {}, ["BACKEND='foo'", "cpu", "cuda", "musa", "mthreads", "npu"]),
        ({}, {"SHAPE_MODE": "file"}, ["SHAPE_MODE='file' needs SHAPE_FILE"]),
        ({}, {"SHAPE_FILE": "x.yaml"}, ["only read with SHAPE_MODE=file"]),
        ({"backend": "cpu", "mode": "graph"}, {}, ["MODE='graph'", "cpu"]),
    ],
)
def test_bad_values_name_variable_value_and_choices(flags, env, needles):
    with pytest.raises(UsageError) as info:
        resolve(flags, env)
    message = str(info.value)
    assert "\n" not in message
    for needle in needles:
        assert needle in message


def test_disabling_cudagraph_means_direct_unless_mode_is_given():
    cuda = {"backend": "cuda", "runner": "host"}
    assert resolve(cuda).timer == "graph"
    assert resolve(cuda, {"ZL_ENABLE_CUDAGRAPH": "0"}).timer == "direct"
    assert resolve({**cuda, "mode": "graph"}, {"ZL_ENABLE_CUDAGRAPH": "0"}).timer == "graph"


def test_alias_resolves_to_backend():
    assert resolve({"backend": "mthreads", "runner": "host"}).backend.name == "musa"


def test_runner_defaults():
    cuda = {"backend": "cuda"}
    assert resolve(cuda, which=lambda n: "/usr/bin/podman" if n == "podman" else None
                   ).runner == "podman"
    assert resolve(cuda, {spec.IN_IMAGE_VAR: "1"}).runner == "host"
    with pytest.raises(UsageError, match="RUNNER=host"):
        resolve(cuda)


def test_devices_and_parallel_warmup():
    s = resolve({"devices": "6, 7", "parallel_warmup_gpus": "2"})
    assert s.devices == ("6", "7") and s.parallel_warmup_gpus == 2 and s.warmup_share is None


def test_a_warmup_share_is_read_and_cannot_shard_again():
    assert resolve({}, {"ZL_WARMUP_SHARE": "1/2"}).warmup_share == (1, 2)
    with pytest.raises(UsageError, match="WARMUP_SHARE='0/2' marks a parallel warmup's shard"):
        resolve({"warmup_share": "0/2", "parallel_warmup_gpus": "2"})


def test_gpus_is_an_alias_of_devices_and_dry_run_takes_no_value():
    parser = argparse.ArgumentParser()
    spec.add_arguments(parser)
    args = vars(parser.parse_args(["--gpus", "1,2", "--dry-run"]))
    s = resolve(args)
    assert s.devices == ("1", "2") and s.dry_run


def test_caliber_names_the_comparability_settings():
    caliber = resolve({"isolate_tuner_cache": "1", "use_flagtune": "1"}).caliber()
    assert caliber["tuner_cache"] == "isolated"
    assert caliber["autotune_mode"] == "flagtune"
    assert {"backend", "level", "timer", "shape_mode"} <= caliber.keys()


def test_replay_implies_a_private_recording_cache(tmp_path):
    s = resolve({"replay_from": str(tmp_path)})
    assert s.isolate_tuner_cache and s.record and not s.replay_strict
    assert s.caliber()["replay_from"] == str(tmp_path)
    with pytest.raises(UsageError, match="REPLAY_FROM needs a private tuner cache"):
        resolve({"replay_from": str(tmp_path), "isolate_tuner_cache": "0"})
    assert resolve({"record": "1"}).record and not resolve({}).record
