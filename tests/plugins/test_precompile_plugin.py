"""precompile plugin: every candidate compiled once ahead, then timed serially in the same order."""

from __future__ import annotations

import json

import pytest

from harness.contract import boundary
from harness.contract.records import records_path
from harness.plugins.precompile import candidates, unusable
from harness.tuning import precompile
from harness.tuning.autotune import finish_run
from tests.plugins import fakedev

KERNELS = """
from triton.runtime.autotuner import Autotuner, Config, JITFunction

BLOCKS = (16, 32, 48, 64, 128)
HOOKED = []
scale = Autotuner(JITFunction(), ["x", "n"], [Config({"BLOCK": b}) for b in BLOCKS],
                  key=["n"], pre_hook=lambda kwargs, reset_only=False: HOOKED.append(1))
"""
TEST = """
import json, os
import kernels
from triton.runtime import autotuner


def test_kernels():
    for n in {sizes}:
        kernels.scale.run("x", n, grid=(1,), warmup=False)
    with open(os.environ["LOG_TO"], "w") as fh:
        json.dump({{"log": autotuner.LOG, "hooked": len(kernels.HOOKED),
                   "winners": {{str(k): c.kwargs["BLOCK"]
                               for k, c in kernels.scale.cache.items()}}}}, fh)
"""


@pytest.fixture
def suite(pytester, monkeypatch):
    fakedev.install(pytester, autotuner=fakedev.FAKE_COMPILING_AUTOTUNER)
    for name in ("ZL_PLUGIN_AUTOTUNE_REPLAY", "ZL_PLUGIN_REPLAY_STRICT",
                 "ZL_PLUGIN_WARMUP_SHARE", "ZL_PLUGIN_WARMUP_CLAIMS", boundary.COMPILE_WORKERS_VAR):
        monkeypatch.delenv(name, raising=False)
    pytester.makepyfile(kernels=KERNELS)
    return pytester


def run(pytester, monkeypatch, tmp_path, workers, sizes=(8,), async_mode=True, plugins=(),
        test=TEST):
    """Run the suite with the precompile plugin (workers > 0) and `plugins`; return the
    pytest result and the log the test wrote."""
    mod = pytester.path / "triton" / "runtime" / "_async_compile.py"
    if async_mode:
        mod.write_text(fakedev.FAKE_ASYNC_COMPILE)
    elif mod.exists():
        mod.unlink()
    run_dir = tmp_path / f"run{workers}-{len(list(tmp_path.iterdir()))}"
    run_dir.mkdir()
    monkeypatch.setenv("ZL_PLUGIN_RUN_DIR", str(run_dir))
    monkeypatch.setenv("LOG_TO", str(run_dir / "log.json"))
    args = ["test_kernels.py", "-s"]
    for plugin in plugins:
        args += ["-p", plugin]
    if workers:
        monkeypatch.setenv(boundary.COMPILE_WORKERS_VAR, str(workers))
        args += ["-p", "harness.plugins.precompile"]
    pytester.makepyfile(test_kernels=test.format(sizes=sizes))
    result = pytester.runpytest(*args)
    log_file = run_dir / "log.json"
    return result, json.loads(log_file.read_text()) if log_file.exists() else None, run_dir


def events(log, kind):
    return [e[1] for e in log["log"] if e[0] == kind]


def test_every_candidate_is_compiled_once_on_the_threads_then_timed_in_order(
        suite, monkeypatch, tmp_path):
    result, log, run_dir = run(suite, monkeypatch, tmp_path, workers=4)
    result.assert_outcomes(passed=1)
    compiles = [e for e in log["log"] if e[0] == "compile"]
    # 48 fails on the threads, then once more when the tuner times it, as it always did
    assert sorted(e[1] for e in compiles) == [16, 32, 48, 48, 64, 128]
    assert all(e[2].startswith("zl-compile") for e in compiles[:5])
    assert compiles[5][2] == "MainThread"
    first_time = log["log"].index(["time", 16])
    assert all(e[0] == "compile" for e in log["log"][:5]) and first_time == 5
    assert events(log, "time") == [16, 32, 48, 64, 128]
    assert log["winners"] == {"(8,)": 32} and log["hooked"] == 5  # pre-hooks still run
    facts = precompile.read_side_file(run_dir)
    assert facts == {"workers": 4, "keys": 1, "candidates": 5, "compiled": 5, "failed": 1,
                     "seconds": facts["seconds"], "skipped": {}}
    result.stdout.fnmatch_lines(["COMPILE_WORKERS_DONE workers=4 keys=1 candidates=5 "
                                 "compiled=5 failed=1 seconds=*"])


def test_the_costliest_compiles_start_first_and_the_tuner_times_in_its_own_order(
        suite, monkeypatch, tmp_path):
    # one thread: the compiles run in the order they were handed out
    result, log, _ = run(suite, monkeypatch, tmp_path, workers=1)
    result.assert_outcomes(passed=1)
    assert events(log, "compile")[:5] == [128, 64, 48, 32, 16]
    assert events(log, "time") == [16, 32, 48, 64, 128]
    assert log["winners"] == {"(8,)": 32}


DESC_KERNELS = """
from triton.runtime.autotuner import Autotuner, Config, JITFunction


HOOKED = []


class Desc:  # a host TMA descriptor: made with a dummy block, set per config by a pre_hook
    block = None


def set_block(nargs):
    nargs["x"].block = nargs["BLOCK"]


scale = Autotuner(JITFunction(), ["x", "n"],
                  [Config({"BLOCK": b}, pre_hook=set_block) for b in (16, 32, 64)], key=["n"])
"""
DESC_TEST = TEST.replace('kernels.scale.run("x", n', 'kernels.scale.run(kernels.Desc(), n')


def test_a_config_pre_hook_runs_before_its_compile_so_the_tuner_finds_it_compiled(
        suite, monkeypatch, tmp_path):
    suite.makepyfile(kernels=DESC_KERNELS)
    result, log, _ = run(suite, monkeypatch, tmp_path, workers=2, test=DESC_TEST)
    result.assert_outcomes(passed=1)
    compiles = [e for e in log["log"] if e[0] == "compile"]
    # each compiled for the block its hook sets, on the threads; none again when timed
    assert sorted((e[1], e[3]) for e in compiles) == [(16, 16), (32, 32), (64, 64)]
    assert all(e[2].startswith("zl-compile") for e in compiles)
    assert events(log, "time") == [16, 32, 64] and log["winners"] == {"(8,)": 32}


def test_off_is_identical_to_no_plugin(suite, monkeypatch, tmp_path):
    _, on, _ = run(suite, monkeypatch, tmp_path, workers=3, sizes=(8, 16))
    result, off, run_dir = run(suite, monkeypatch, tmp_path, workers=0, sizes=(8, 16))
    result.assert_outcomes(passed=1)
    assert events(on, "time") == events(off, "time") == [16, 32, 48, 64, 128] * 2
    assert on["winners"] == off["winners"] == {"(8,)": 32, "(16,)": 32}
    assert [e[2] for e in off["log"] if e[0] == "compile"] == ["MainThread"] * 6
    assert not (run_dir / boundary.PRECOMPILE_FILE).exists()
    result.stdout.no_fnmatch_line("COMPILE_WORKERS*")


def test_without_async_mode_the_plugin_says_so_once_and_changes_nothing(
        suite, monkeypatch, tmp_path):
    result, log, run_dir = run(suite, monkeypatch, tmp_path, workers=4, async_mode=False)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["COMPILE_WORKERS_OFF reason=triton_lacks_async_compile "
                                 "compile_workers=4"])
    assert len([ln for ln in result.outlines if ln.startswith("COMPILE_WORKERS")]) == 1
    assert {e[2] for e in log["log"] if e[0] == "compile"} == {"MainThread"}
    assert not (run_dir / boundary.PRECOMPILE_FILE).exists()


def test_a_replayed_key_compiles_only_its_winner(suite, monkeypatch, tmp_path):
    plugins = ("harness.plugins.autotune",)
    run(suite, monkeypatch, tmp_path, workers=0, plugins=plugins)
    recorded = sorted(tmp_path.iterdir())[0]
    finish_run(recorded, recorded / "no-libtuner", record=True)
    monkeypatch.setenv("ZL_PLUGIN_AUTOTUNE_REPLAY", str(records_path(recorded)))
    result, log, run_dir = run(suite, monkeypatch, tmp_path, workers=4, plugins=plugins)
    result.assert_outcomes(passed=1)
    assert events(log, "compile") == [32] and events(log, "time") == []
    assert precompile.read_side_file(run_dir)["skipped"] == {"one_candidate": 1}


# a parallel warmup's shard, as the plan loads it
SHARD_PLUGINS = ("harness.plugins.autotune", "harness.plugins.warmup_share")


def test_a_warmup_share_compiles_its_share_only(suite, monkeypatch, tmp_path):
    monkeypatch.setenv("ZL_PLUGIN_WARMUP_SHARE", "1/2")
    result, log, _ = run(suite, monkeypatch, tmp_path, workers=4, plugins=SHARD_PLUGINS)
    result.assert_outcomes(passed=1)
    assert sorted(events(log, "compile")) == [32, 64]  # configs 1 and 3 of the five
    assert events(log, "time") == [32, 64]


def test_claimed_shards_compile_only_the_configs_they_claim(suite, monkeypatch, tmp_path):
    claims = tmp_path / "claims"
    claims.mkdir()
    monkeypatch.setenv("ZL_PLUGIN_WARMUP_SHARE", "0/2")
    monkeypatch.setenv("ZL_PLUGIN_WARMUP_CLAIMS", str(claims))
    plugins = SHARD_PLUGINS
    _, first, _ = run(suite, monkeypatch, tmp_path, workers=2, plugins=plugins)
    monkeypatch.setenv("ZL_PLUGIN_WARMUP_SHARE", "1/2")
    _, second, _ = run(suite, monkeypatch, tmp_path, workers=2, plugins=plugins)
    # the first shard claimed every config; the second compiles none of them ahead (only its
    # run's launch of the config it settled on, as without the plugin)
    assert sorted(events(first, "compile")) == [16, 32, 48, 48, 64, 128]
    assert [e for e in second["log"] if e[0] == "compile"] == [["compile", 16, "MainThread", None]]
    assert events(second, "time") == []  # another shard's configs time as inf, unrun


class _Tuner:
    def __init__(self, nargs):
        self.nargs = nargs


class _Config:
    def __init__(self, **kwargs):
        self.kwargs = kwargs


def test_candidates_only_for_a_sweep_of_two_or_more():
    configs = [_Config(BLOCK=16), _Config(BLOCK=32)]
    sweep = {"grid": (1,), "warmup": False}
    assert candidates(_Tuner({"x": 1}), sweep, configs) == (configs, None)
    assert candidates(_Tuner(None), sweep, configs) == ([], "not_a_sweep")
    assert candidates(_Tuner({"x": 1}), {"grid": (1,)}, configs) == ([], "not_a_sweep")
    assert candidates(_Tuner({"x": 1}), sweep, configs[:1]) == ([], "one_candidate")


def test_a_config_that_redefines_a_given_meta_parameter_is_not_compiled_ahead():
    configs = [_Config(BLOCK=16), _Config(BLOCK=32, SPLIT=2)]
    todo, reason = candidates(_Tuner({"x": 1}), {"warmup": False, "SPLIT": 4}, configs)
    assert todo == configs[:1] and reason is None


def test_a_tuner_that_caches_results_on_disk_is_left_alone():
    tuner = _Tuner({"x": 1})
    tuner.cache_results = True
    assert candidates(tuner, {"warmup": False}, [_Config(), _Config()]) == ([], "disk_cache")


def test_an_async_mode_without_ignore_errors_is_unusable():
    class Old:
        class AsyncCompileMode:
            def __init__(self, executor):
                pass

        active_mode = None

    class New:
        class AsyncCompileMode:
            def __init__(self, executor, *, ignore_errors=False):
                pass

        active_mode = None

    assert unusable(Old) == "async_compile_without_ignore_errors"
    assert unusable(New) is None
    assert unusable(object()) == "triton_lacks_async_compile"


FLAG_GEMS = {
    "flag_gems/__init__.py": "",
    "flag_gems/runtime.py": '''
import enum, os


class TuningMode(enum.Enum):
    DEFAULT = "default"
    COST_MODEL = "cost_model"


def resolve_tuning_mode(op_name, *, supports_cost_model=False):
    cost = os.environ.get("FAKE_COST_MODEL") == "1" and supports_cost_model
    return TuningMode.COST_MODEL if cost else TuningMode.DEFAULT
''',
    # as FlagGems: the package re-exports the decorator under its module's name
    "flag_gems/utils/__init__.py": "from flag_gems.utils.libentry import libentry\n",
    "flag_gems/utils/libentry.py": '''
def _supports_flagtune_cost_model(tuner):
    return getattr(tuner, "_flagtune_op_id", None) is not None


class LibTuner:
    _dispatch_table = {}

    @classmethod
    def get(cls, name):
        return cls._dispatch_table[name]


def _register(name):
    class Impl(LibTuner):
        def policy(self, fn, configs, args, kwargs):
            return None
    LibTuner._dispatch_table[name] = Impl
    return Impl


Default, FlagTune, Other = _register("default"), _register("flagtune"), _register("other")


def libentry():
    return None
''',
}


@pytest.fixture
def flag_gems(tmp_path, monkeypatch):
    for name, text in FLAG_GEMS.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv("FAKE_COST_MODEL", raising=False)
    import importlib
    import sys

    for name in [m for m in sys.modules if m.split(".")[0] == "flag_gems"]:
        monkeypatch.delitem(sys.modules, name)
    yield importlib.import_module("flag_gems.utils.libentry")
    for name in [m for m in sys.modules if m.split(".")[0] == "flag_gems"]:
        del sys.modules[name]


def test_libtuner_policies_are_recognised_though_utils_shadows_the_module_name(
        flag_gems, monkeypatch):
    from harness.plugins.precompile import policy_skip

    assert policy_skip(object.__new__(flag_gems.Default)) is None
    tuner = object.__new__(flag_gems.FlagTune)
    tuner._flagtune_op_id = "flaggems/mm"
    assert policy_skip(tuner) is None  # falls back to the default policy: times them all
    monkeypatch.setenv("FAKE_COST_MODEL", "1")
    assert policy_skip(tuner) == "policy_cost_model"
    assert policy_skip(object.__new__(flag_gems.Other)) == "policy_other"


@pytest.mark.parametrize("value", ["", "0", "abc", "²"])
def test_the_plugin_without_a_thread_count_is_a_usage_error(suite, monkeypatch, value):
    (suite.path / "triton" / "runtime" / "_async_compile.py").write_text(fakedev.FAKE_ASYNC_COMPILE)
    monkeypatch.setenv(boundary.COMPILE_WORKERS_VAR, value)
    suite.makepyfile(test_kernels="def test_nothing():\n    pass\n")
    result = suite.runpytest("test_kernels.py", "-p", "harness.plugins.precompile")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{boundary.COMPILE_WORKERS_VAR}={value!r}: the precompile "
                                 "plugin needs a whole number of threads of at least 1"])
