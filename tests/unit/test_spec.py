"""Settings: flag beats environment, every bad value is one line naming variable and choices."""

from __future__ import annotations

import argparse

import pytest

from harness.errors import UsageError
from harness.settings import abspec, spec


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
        ({}, {"ZL_DIRECT_REPEAT": "0"}, ["ZL_DIRECT_REPEAT='0'", "from 1 to 1000"]),
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


# --------------------------------------------------------------------------- bad inputs


def test_dtypes_float99_is_refused_at_validation_naming_torch_dtypes():
    with pytest.raises(UsageError) as info:
        resolve({"dtypes": "float16,float99"})
    message = str(info.value)
    assert "DTYPES (--dtypes)='float16,float99'" in message and "'float99'" in message
    assert "torch dtype names" in message
    assert resolve({"dtypes": "float16, bfloat16"}).dtypes == ("float16", "bfloat16")


@pytest.mark.parametrize("value", ["gpu0", "cuda:0", "abc", "0;1", "1.5", "-1", "0,,1", "GPU-"])
def test_devices_that_are_not_numbers_or_uuids_are_refused(value):
    with pytest.raises(UsageError, match=r"ZL_DEVICES=.*whole numbers"):
        resolve({}, {"ZL_DEVICES": value})


def test_device_uuids_are_still_accepted():
    s = resolve({"devices": "GPU-3d80fb82-b713-6e21-9257-45d989cbd289,0x6F1F0A2B3C4D5E6F,3"})
    assert s.devices == ("GPU-3d80fb82-b713-6e21-9257-45d989cbd289", "0x6F1F0A2B3C4D5E6F", "3")


def test_out_that_is_a_file_or_under_a_file_is_refused(tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("x")
    with pytest.raises(UsageError, match=r"OUT \(--out\)='.*afile' is not accepted: it is not "
                                         "a directory"):
        resolve({"out": str(afile)})
    with pytest.raises(UsageError, match=r"ZL_OUT='.*afile/a/b' is not accepted: it is under "
                                         r"'.*afile', which is not a directory"):
        resolve({}, {"ZL_OUT": str(afile / "a" / "b")})
    assert not (tmp_path / "a").exists()
    assert resolve({"out": str(tmp_path / "new" / "runs")}).out == tmp_path / "new" / "runs"


def test_rounds_beyond_the_cap_are_refused_naming_the_cap():
    with pytest.raises(UsageError, match=f"ZL_ROUNDS='101'.*from 1 to {abspec.MAX_ROUNDS}"):
        abspec.resolve_ab({"axis": "none"}, {"ZL_ROUNDS": "101"})
    with pytest.raises(UsageError, match=r"ROUNDS \(--rounds\)='1e3'.*from 1 to 100"):
        abspec.resolve_ab({"axis": "none", "rounds": "1e3"}, {})
    assert abspec.resolve_ab({"axis": "none", "rounds": str(abspec.MAX_ROUNDS)}, {}).rounds == 100


def test_one_round_is_refused_for_an_ab_and_taken_for_an_aa():
    # Regression: ROUNDS=1 ran a whole campaign whose ab.md said at its end that one round
    # calls nothing; an A/A of one round still measures a noise floor.
    with pytest.raises(UsageError, match=r"^ZL_ROUNDS='1' is not accepted for AXIS=RLC_ENHANCE: "
                       "one round gives no interval, so no row could be called faster, slower "
                       "or same; expected a whole number from 2 to 100, or auto"):
        abspec.resolve_ab({"axis": "RLC_ENHANCE"}, {"ZL_ROUNDS": "1"})
    with pytest.raises(UsageError, match=r"'0' is not accepted; expected a whole number from 2"):
        abspec.resolve_ab({"axis": "RLC_ENHANCE", "rounds": "0"}, {})
    assert abspec.resolve_ab({"axis": "RLC_ENHANCE", "rounds": "2"}, {}).rounds == 2
    assert abspec.resolve_ab({"axis": "none", "rounds": "1"}, {}).rounds == 1
    with pytest.raises(UsageError, match=r"'²' is not accepted"):  # a digit int() refuses
        abspec.resolve_ab({"axis": "none", "rounds": "²"}, {})


def test_a_equal_to_b_is_refused_unless_the_campaign_is_aa():
    with pytest.raises(UsageError, match=r"A \(--a\)='1' and B='1' are equal.*AXIS=none"):
        abspec.resolve_ab({"axis": "RLC_ENHANCE", "a": "1"}, {})
    with pytest.raises(UsageError, match="ZL_A='x' and ZL_B='x' are equal"):
        abspec.resolve_ab({"axis": "RLC_ENHANCE"}, {"ZL_A": "x", "ZL_B": "x"})
    assert abspec.resolve_ab({"axis": "none"}, {}).a == "0"  # an A/A's sides are one setting


# --------------------------------------------------------------------------- help


def _help(command: str) -> str:
    from harness import cli

    parser = cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return " ".join(sub.choices[command].format_help().split())  # argparse wraps lines


@pytest.mark.parametrize("command", ["run", "ab", "batch"])
def test_help_names_every_variables_environment_name_choices_and_default(command):
    text = _help(command)
    names = {v.make for v in spec.VARS if "run" in v.commands} | ({"AXIS", "A", "B", "ROUNDS",
                                                                  "NOISE_FROM"}
                                 if command == "ab" else set())
    if command == "batch":
        names -= {"OP", "OP_FILE", "TEST_NODE"}
    for var in (v for v in spec.VARS if v.make in names):
        assert f"env: {var.env})" in text, var.make
        default = var.default_doc or var.default
        if default is not None:
            assert f"default: {default}" in text, var.make
        if var.choices:
            assert f"one of: {', '.join(var.choices)}" in text, var.make
    assert "default: detected; cpu when no accelerator" in text  # the README's BACKEND default
