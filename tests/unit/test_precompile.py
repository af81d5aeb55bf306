"""COMPILE_WORKERS on the host: the setting, the plan, the header marker and the identity."""

from __future__ import annotations

import json
import sys

import pytest

from harness import backends
from harness.contract import boundary
from harness.errors import UsageError
from harness.providers.flaggems import Node
from harness.run import runner
from harness.run.plugin_plan import PRECOMPILE, SCREEN, plan_plugins
from harness.run.preflight import Plan
from harness.run.probe import probe_python
from harness.settings import kinds, spec
from harness.tuning import precompile

FOUND = {precompile.ASYNC_MODULE: True}


def resolve(tmp_path, env=None, **flags):
    base = {"backend": "cuda", "flaggems_dir": str(tmp_path / "fg"), "runner": "host",
            "out": str(tmp_path / "runs")}
    return spec.resolve({**base, **flags}, env or {}, which=lambda _: None)


def plan(features=None):
    return Plan(node=Node("benchmark/test_mm.py", "test_mm", ("mm",)), op="mm",
                python="/usr/bin/python3", python_version="3.12.3",
                features=dict(FOUND if features is None else features))


def test_default_is_the_cores_capped_at_sixteen():
    assert kinds.default_workers(64) == 16
    assert kinds.default_workers(4) == 4
    assert kinds.default_workers(0) == 1
    assert 1 <= kinds.default_workers() <= 16


def test_flag_beats_environment_and_zero_is_off(tmp_path):
    assert resolve(tmp_path, {"ZL_COMPILE_WORKERS": "3"}).compile_workers == 3
    assert resolve(tmp_path, {"ZL_COMPILE_WORKERS": "3"}, compile_workers="0").compile_workers == 0
    assert resolve(tmp_path).compile_workers == kinds.default_workers()
    assert resolve(tmp_path, compile_workers=" 8 ").compile_workers == 8


@pytest.mark.parametrize("value", ["-1", "four", "4;rm -rf /", "1e3", "2.5", "1025", "٣"])
def test_a_bad_value_names_variable_value_and_range(tmp_path, value):
    with pytest.raises(UsageError) as info:
        resolve(tmp_path, compile_workers=value)
    message = str(info.value)
    assert f"COMPILE_WORKERS (--compile-workers)={value!r}" in message
    assert "0 (off) to 1024" in message
    with pytest.raises(UsageError, match="ZL_COMPILE_WORKERS="):
        resolve(tmp_path, {"ZL_COMPILE_WORKERS": value})


def test_compile_workers_is_part_of_the_caliber(tmp_path):
    assert resolve(tmp_path, compile_workers="5").caliber()["compile_workers"] == 5


def _config(num_stages=3, num_warps=4, **meta):
    import types

    return types.SimpleNamespace(kwargs=meta, num_stages=num_stages, num_warps=num_warps)


def test_compile_cost_grows_with_tile_and_stages_and_falls_with_warps():
    small, big = _config(BM=64, BN=64, BK=32), _config(BM=256, BN=128, BK=64)
    assert precompile.compile_cost(big) > precompile.compile_cost(small)
    assert (precompile.compile_cost(_config(BM=128, num_stages=4))
            == 2 * precompile.compile_cost(_config(BM=128, num_stages=2)))
    assert (precompile.compile_cost(_config(BM=128, num_warps=8))
            == precompile.compile_cost(_config(BM=128, num_warps=4)) / 2)


def test_compile_cost_reads_only_positive_integer_meta_parameters():
    plain = precompile.compile_cost(_config(BM=64))
    assert precompile.compile_cost(_config(BM=64, EVEN_K=True, scale=0.5, name="x",
                                           OFFSET=0, SIGN=-1)) == plain
    # a config without stages or warps (another tuner's) still gets a cost
    import types

    assert precompile.compile_cost(types.SimpleNamespace(
        kwargs={"BLOCK": 32}, num_stages=None, num_warps=None)) == 32


def test_off_reasons():
    assert precompile.off_reason(0, True, FOUND) == "compile_workers_0"
    assert precompile.off_reason(4, False, FOUND) == "no_triton"
    assert precompile.off_reason(4, True, {}) == "triton_lacks_async_compile"
    assert precompile.off_reason(4, True, FOUND) is None


def test_plugin_planned_only_where_asked_and_triton_tunes():
    cuda, cpu = backends.get("cuda"), backends.get("cpu")
    assert plan_plugins(cuda, "graph", precompile=True)[-1] == PRECOMPILE
    assert PRECOMPILE not in plan_plugins(cuda, "graph")
    assert PRECOMPILE not in plan_plugins(cpu, "direct", precompile=True)


def test_invocation_loads_the_plugin_with_its_thread_count(tmp_path):
    (tmp_path / "fg").mkdir()
    inv = runner.build_invocation(resolve(tmp_path, compile_workers="6"), plan(), tmp_path / "r")
    assert PRECOMPILE in inv.plugins and inv.env[boundary.COMPILE_WORKERS_VAR] == "6"


@pytest.mark.parametrize(("workers", "features"), [("0", FOUND), ("6", {})])
def test_off_or_unsupported_runs_exactly_as_before(tmp_path, workers, features):
    (tmp_path / "fg").mkdir()
    inv = runner.build_invocation(resolve(tmp_path, compile_workers=workers), plan(features),
                                  tmp_path / "r")
    before = runner.build_invocation(resolve(tmp_path, compile_workers="0"), plan({}),
                                     tmp_path / "r")
    assert inv.plugins == before.plugins and PRECOMPILE not in inv.plugins
    assert boundary.COMPILE_WORKERS_VAR not in inv.env and inv.argv == before.argv


def test_header_says_once_when_triton_cannot_compile_concurrently(tmp_path):
    (tmp_path / "fg").mkdir()
    settings = resolve(tmp_path, compile_workers="6")
    lines = runner.header_lines(settings, plan({}), tmp_path / "r",
                                runner.build_invocation(settings, plan({}), tmp_path / "r"))
    assert "# compile_workers: 6" in lines
    assert [ln for ln in lines if ln.startswith("COMPILE_WORKERS_OFF")] == [
        "COMPILE_WORKERS_OFF reason=triton_lacks_async_compile compile_workers=6"]
    ok = runner.header_lines(settings, plan(), tmp_path / "r",
                             runner.build_invocation(settings, plan(), tmp_path / "r"))
    assert not any(ln.startswith("COMPILE_WORKERS_OFF") for ln in ok)


def test_side_file_is_read_once_and_removed(tmp_path):
    facts = {"workers": 4, "keys": 2, "candidates": 9, "compiled": 9, "failed": 0,
             "seconds": 1.5, "skipped": {}}
    (tmp_path / boundary.PRECOMPILE_FILE).write_text(json.dumps(facts))
    assert precompile.read_side_file(tmp_path) == facts
    assert precompile.read_side_file(tmp_path) is None


def test_probe_finds_the_async_module_as_a_file_without_importing_it(tmp_path):
    runtime = tmp_path / "triton" / "runtime"
    runtime.mkdir(parents=True)
    # an import of either file would fail the probe: it only looks for them
    (tmp_path / "triton" / "__init__.py").write_text("raise SystemExit('imported')\n")
    (runtime / "__init__.py").write_text("raise SystemExit('imported')\n")
    assert probe_python(sys.executable, ("triton",), extra_paths=(tmp_path,))["features"] == {
        precompile.ASYNC_MODULE: False}
    (runtime / "_async_compile.py").write_text("raise SystemExit('imported')\n")
    assert probe_python(sys.executable, ("triton",), extra_paths=(tmp_path,))["features"] == {
        precompile.ASYNC_MODULE: True}


def test_probe_without_triton_reports_the_feature_missing():
    facts = probe_python(sys.executable, ("torch",))
    assert facts["features"] == {precompile.ASYNC_MODULE: False}


@pytest.mark.parametrize(("flags", "screened"), [
    ({"tune_screen": "1"}, True),
    ({}, False),  # off by default: the tuner times every candidate, as FlagGems' own runs do
    ({"tune_screen": "1", "replay_from": "REPLAY"}, False),  # a replay tunes nothing itself
    ({"tune_screen": "1", "warmup_share": "1/2"}, False),  # a shard's share is its own sweep
])
def test_the_screen_is_loaded_only_in_a_run_that_tunes_for_itself(tmp_path, flags, screened):
    (tmp_path / "fg").mkdir()
    if flags.get("replay_from"):
        (tmp_path / "rec").mkdir()
        flags = {**flags, "replay_from": str(tmp_path / "rec")}
    settings = resolve(tmp_path, **flags)
    inv = runner.build_invocation(settings, plan(), tmp_path / "r")
    assert (SCREEN in inv.plugins) is screened
    assert settings.caliber()["tune_screen"] is (flags.get("tune_screen") == "1")
