"""Settings back into flags: every Settings round-trips through the `harness run` parser."""

from __future__ import annotations

import dataclasses

import pytest

from harness.cli import build_parser
from harness.settings import cmdline, spec
from harness.settings.spec import EMBEDDED_SUITE


def resolve(flags: dict[str, str]) -> spec.Settings:
    return spec.resolve(flags, env={}, which=lambda _: None)


def parse(argv: list[str]) -> dict[str, object]:
    return vars(build_parser().parse_args(["run", *argv]))


VARIED = [
    {"backend": "cpu"},
    {"backend": "cuda", "runner": "host", "devices": "6,7", "mode": "direct", "repeat": "5",
     "level": "comprehensive", "dtypes": "float16,bfloat16", "use_flagtune": "1"},
    {"backend": "musa", "runner": "docker", "devices": "GPU-a1b2,3", "dry_run": "1",
     "flaggems_dir": "/src/Flag Gems; rm -rf x", "out": "runs; echo hi/out dir"},
    {"backend": "cpu", "op": "tanh", "op_file": "benchmark/test unary;ops.py",
     "shape_mode": "file", "shape_file": "shapes/my shapes;v2.yaml", "record": "1"},
    {"backend": "cpu", "test_node": "benchmark/test_mm.py::test_mm[a b; c]",
     "replay_from": "runs/mm/20260101-000000 (old); x", "replay_strict": "1"},
    {"backend": "cpu", "isolate_tuner_cache": "1", "warmup_share": "1/3", "runner": "podman"},
    {"backend": "cuda", "runner": "host", "parallel_warmup_gpus": "4", "mode": "graph",
     "out": "-runs starting with a dash", "flaggems_dir": "--looks like a flag"},
    {"backend": "ascend", "runner": "host", "op": "layer_norm", "out": "ünï cödé/rüns"},
]


@pytest.mark.parametrize("flags", VARIED)
def test_settings_round_trip_through_the_run_parser(flags):
    settings = resolve(flags)
    assert resolve(parse(cmdline.to_argv(settings))) == settings


def test_overrides_apply_and_come_last_in_the_order_given(tmp_path):
    settings = resolve({"backend": "cpu", "out": str(tmp_path / "a b")})
    argv = cmdline.to_argv(settings, devices=("3",), op="mm")
    assert argv[-4:] == ["--devices", "3", "--op", "mm"]
    assert resolve(parse(argv)) == dataclasses.replace(settings, devices=("3",), op="mm")


def test_a_value_starting_with_a_dash_is_not_taken_for_a_flag():
    argv = cmdline.to_argv(resolve({"backend": "cpu", "out": "-o"}))
    assert "--out=-o" in argv and "--out" not in argv
    assert parse(argv)["out"] == "-o"


def test_each_settings_field_is_one_table_row_and_spelt_back_from_it():
    # A run setting is its row in the variables table (field and kind) and its Settings field:
    # resolve and setting_values derive the rest, so a field no row names is never read.
    derived = {"timer", "sources", "planned_for_image"}  # no variable of their own
    fields = [f.name for f in dataclasses.fields(spec.Settings) if f.name not in derived]
    named = [var.field for var in spec.VARS if var.field is not None]
    assert sorted(named) == sorted(fields)  # each field once, from a setting's row
    values = cmdline.setting_values(resolve({"backend": "cpu"}))
    assert list(values) == [var.make for var in spec.VARS if var.field is not None]


def test_unset_settings_have_no_flag():
    argv = cmdline.to_argv(resolve({"backend": "cpu"}))
    for flag in ("--op", "--op-file", "--node", "--shape-file", "--dtypes", "--replay-from",
                 "--parallel-warmup-gpus", "--warmup-share", "--devices"):
        assert flag not in argv
    assert argv[argv.index("--flaggems-dir") + 1] == str(EMBEDDED_SUITE)
