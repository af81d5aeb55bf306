"""screen plugin: each candidate timed briefly, the tuner times only those near the fastest."""

from __future__ import annotations

import json
import math

import pytest

from harness.contract import boundary
from harness.plugins.screen import Screen
from harness.run import plugin_plan
from harness.tuning import screen
from tests.plugins import fakedev

KERNELS = """
from triton.runtime.autotuner import Autotuner, Config, JITFunction

BLOCKS = (16, 32, 48, 64, 128)
scale = Autotuner(JITFunction(), ["x", "n"], [Config({"BLOCK": b}) for b in BLOCKS], key=["n"])
"""
# The fake tuner's full times are |BLOCK - 32| / 100 ms (32 wins), 48 fails to compile; a
# brief time is FAKE_BRIEF_<BLOCK> where set, else the full time plus 0.05 ms.
TEST = """
import json, os
import kernels
from triton import testing
from triton.runtime import autotuner


def test_kernels():
    for n in (8, 9):
        kernels.scale.run("x", n, grid=(1,), warmup=False)
    with open(os.environ["LOG_TO"], "w") as fh:
        json.dump({"log": autotuner.LOG, "brief": testing.BRIEF,
                   "winners": {str(k): c.kwargs["BLOCK"] for k, c in kernels.scale.cache.items()}},
                  fh)
"""


@pytest.fixture
def suite(pytester, monkeypatch):
    fakedev.install(pytester, autotuner=fakedev.FAKE_COMPILING_AUTOTUNER)
    for name in ("ZL_PLUGIN_AUTOTUNE_REPLAY", "ZL_PLUGIN_WARMUP_SHARE", "ZL_PLUGIN_WARMUP_CLAIMS",
                 boundary.COMPILE_WORKERS_VAR):
        monkeypatch.delenv(name, raising=False)
    pytester.makepyfile(kernels=KERNELS, test_kernels=TEST)
    return pytester


def run(pytester, monkeypatch, tmp_path, plugins=(screen.SCREEN_PLUGIN,), workers=0):
    run_dir = tmp_path / f"run{len(list(tmp_path.iterdir()))}"
    run_dir.mkdir()
    monkeypatch.setenv("ZL_PLUGIN_RUN_DIR", str(run_dir))
    monkeypatch.setenv("LOG_TO", str(run_dir / "log.json"))
    args = ["test_kernels.py", "-s"]
    if workers:
        (pytester.path / "triton" / "runtime" / "_async_compile.py").write_text(
            fakedev.FAKE_ASYNC_COMPILE)
        monkeypatch.setenv(boundary.COMPILE_WORKERS_VAR, str(workers))
        plugins = (*plugins, "harness.plugins.precompile")
    for plugin in plugins:
        args += ["-p", plugin]
    result = pytester.runpytest(*args)
    log = json.loads((run_dir / "log.json").read_text())
    return result, log, run_dir


def timed(log):
    return [e[1] for e in log["log"] if e[0] == "time"]


def test_the_tuner_times_only_the_candidates_near_the_fastest_brief_time_and_wins_the_same(
        suite, monkeypatch, tmp_path):
    result, plain, _ = run(suite, monkeypatch, tmp_path, plugins=())
    result.assert_outcomes(passed=1)
    assert timed(plain) == [16, 32, 48, 64, 128] * 2 and plain["brief"] == []

    result, log, run_dir = run(suite, monkeypatch, tmp_path)
    result.assert_outcomes(passed=1)
    # every candidate timed briefly at the brief budget, once per key; 48 failed to compile
    assert log["brief"] == [[b, screen.PROBE_WARMUP_MS, screen.PROBE_REP_MS]
                            for b in (16, 32, 48, 64, 128)] * 2
    # 16 (0.21 ms) and 64 (0.37 ms) are past 1.3 x 0.05 ms: 32 alone is left, which the
    # tuner takes untimed (its single-candidate shortcut)
    assert timed(log) == []
    assert log["winners"] == plain["winners"] == {"(8,)": 32, "(9,)": 32}
    facts = screen.read_side_file(run_dir)
    assert facts == {"sweeps": 2, "candidates": 10, "kept": 2, "seconds": facts["seconds"],
                     "skipped": {}}
    assert not (run_dir / boundary.SCREEN_FILE).exists()  # read once, then gone
    result.stdout.fnmatch_lines(["TUNE_SCREEN_DONE sweeps=2 candidates=10 kept=2 seconds=*"])


def test_a_candidate_within_the_ratio_goes_on_and_the_tuner_decides_between_them(
        suite, monkeypatch, tmp_path):
    monkeypatch.setenv("FAKE_BRIEF_16", "0.04")  # briefly the fastest, fully slower than 32
    monkeypatch.setenv("FAKE_BRIEF_64", "0.052")  # 1.3 x 0.04: kept, as 32 (0.05 ms) is
    result, log, _ = run(suite, monkeypatch, tmp_path)
    result.assert_outcomes(passed=1)
    assert timed(log) == [16, 32, 64] * 2  # in the tuner's own order
    assert log["winners"] == {"(8,)": 32, "(9,)": 32}  # the full times decide


def test_a_candidate_whose_brief_time_raised_is_timed_by_the_tuner_as_before(
        suite, monkeypatch, tmp_path):
    monkeypatch.setenv("FAKE_BRIEF_128", "not a number")  # the brief timer raises
    result, log, _ = run(suite, monkeypatch, tmp_path)
    result.assert_outcomes(passed=1)
    assert timed(log) == [32, 128] * 2


def test_candidates_compiled_together_first_are_then_timed_briefly(suite, monkeypatch,
                                                                    tmp_path):
    result, log, run_dir = run(suite, monkeypatch, tmp_path, workers=2)
    result.assert_outcomes(passed=1)
    compiles = [e for e in log["log"] if e[0] == "compile"]
    # five on the threads, then 48 once more in its brief time, which fails as it would fully
    assert [e[2].startswith("zl-compile") for e in compiles[:6]] == [True] * 5 + [False]
    assert timed(log) == [] and log["winners"] == {"(8,)": 32, "(9,)": 32}


class _Tuner:
    """A tuner whose _bench times without do_bench (as a Triton older than do_bench)."""

    nargs = {"x": 1}
    cache_results = False

    def __init__(self, configs):
        self.configs = configs
        self.benched = []

    def _bench(self, *args, config, **kwargs):
        self.benched.append(config)
        return [1.0, 1.0, 1.0]


class _Config:
    def __init__(self, block):
        self.kwargs = {"BLOCK": block}


def test_a_tuner_that_never_calls_do_bench_is_left_to_time_everything(tmp_path):
    plugin = Screen(pytest.Config.__new__(pytest.Config), tmp_path)
    plugin.timers = {"event": lambda fn, q: pytest.fail("the brief timer must not run")}
    configs = [_Config(b) for b in (16, 32, 64)]
    tuner = _Tuner(configs)
    kwargs = {"warmup": False}
    assert plugin.screen(tuner, kwargs, lambda t, k: list(configs)) == configs
    assert plugin.screen(tuner, kwargs, lambda t, k: list(configs)) == configs
    # one _bench call told; from then on the class is not timed briefly at all
    assert tuner.benched == configs[:1]
    assert plugin.facts.skipped == {"bench_not_swappable": 2} and plugin.facts.sweeps == 0
    assert "do_bench" not in vars(tuner)  # put back as it was


@pytest.mark.parametrize(("times", "kept"), [
    ([0.2, 0.1, 0.13, 0.131], [1, 2]),
    ([math.inf, 0.5, math.inf], [1]),
    ([math.inf, math.inf], [0, 1]),  # nothing finite: the tuner meets every failure itself
    ([0.0, 0.5, 0.6, 0.7], [0, 1, 2]),  # a zero time says nothing: kept; real ones decide
    ([], []),
])
def test_survivors_are_within_the_ratio_of_the_fastest_finite_time(times, kept):
    assert screen.survivors(times) == kept


@pytest.mark.parametrize(("timing", "ms"), [
    ([0.5, 0.4, 0.6], 0.5), ((0.25,), 0.25), (0.125, 0.125), ([], math.inf), ("x", math.inf),
    (None, math.inf)])
def test_a_tuners_time_is_read_as_its_median(timing, ms):
    assert screen.median_of(timing) == ms


def test_the_screen_is_planned_only_for_a_run_that_tunes_for_itself_with_triton():
    from harness import backends

    cuda, cpu = backends.get("cuda"), backends.get("cpu")
    assert plugin_plan.SCREEN in plugin_plan.plan_plugins(cuda, "graph", screen=True)
    assert plugin_plan.SCREEN not in plugin_plan.plan_plugins(cuda, "graph", screen=False)
    assert plugin_plan.SCREEN not in plugin_plan.plan_plugins(cuda, "graph", screen=True,
                                                              share=True)
    assert plugin_plan.SCREEN not in plugin_plan.plan_plugins(cpu, "direct", screen=True)


class _Fixed(_Tuner):
    """A tuner whose do_bench is a property without a setter."""

    @property
    def do_bench(self):
        return lambda fn, quantiles=None: [1.0, 1.0, 1.0]


def test_a_tuner_whose_do_bench_cannot_be_set_is_left_to_time_everything(tmp_path):
    plugin = Screen(pytest.Config.__new__(pytest.Config), tmp_path)
    plugin.timers = {"event": lambda fn, q: pytest.fail("the brief timer must not run")}
    configs = [_Config(b) for b in (16, 32)]
    tuner = _Fixed(configs)
    assert plugin.screen(tuner, {"warmup": False}, lambda t, k: list(configs)) == configs
    assert tuner.benched == [] and plugin.facts.skipped == {"bench_not_swappable": 1}


def test_a_sweep_whose_first_candidate_is_long_is_left_to_the_tuner(suite, monkeypatch,
                                                                     tmp_path):
    monkeypatch.setenv("FAKE_BRIEF_16", "2.5")  # a brief time costs what the tuner's does
    result, log, run_dir = run(suite, monkeypatch, tmp_path)
    result.assert_outcomes(passed=1)
    assert timed(log) == [16, 32, 48, 64, 128] * 2
    assert [b[0] for b in log["brief"]] == [16, 16]  # one brief time a sweep, then no more
    assert screen.read_side_file(run_dir)["skipped"] == {"long_kernel": 2}


class _Memo(_Tuner):
    """FlagTree's tuner: a meta it timed before returns its memo, untimed."""

    def __init__(self, configs):
        super().__init__(configs)
        self.seen_tuned_metas = {}
        self.resets = []

    def _bench(self, *args, config, **kwargs):
        meta = config.kwargs["BLOCK"] // 100  # 16 and 32 share a meta
        if meta in self.seen_tuned_metas:
            return self.seen_tuned_metas[meta]
        result = self.seen_tuned_metas[meta] = self.do_bench(lambda: None, quantiles=(0.5,))
        return result

    def pre_hook(self, nargs, reset_only=False):
        self.resets.append((nargs["BLOCK"], reset_only))


class _MemoConfig(_Config):
    def all_kwargs(self):
        return dict(self.kwargs)


def test_a_tuners_memo_of_timed_metas_is_put_back_and_a_lone_survivor_reset(tmp_path):
    plugin = Screen(pytest.Config.__new__(pytest.Config), tmp_path)
    briefs = iter([[0.1], [0.5], [0.9]])
    plugin.timers = {"event": lambda fn, q: next(briefs)}
    configs = [_MemoConfig(b) for b in (16, 32, 200)]
    tuner = _Memo(configs)
    tuner.seen_tuned_metas["kept"] = [9.0]
    left = plugin.screen(tuner, {"warmup": False}, lambda t, k: list(configs))
    # each candidate was timed briefly, none answered from a memo the brief times filled
    assert left == configs[:1] and plugin.facts.candidates == 3
    assert tuner.seen_tuned_metas == {"kept": [9.0]}  # as it was: the tuner times itself
    assert tuner.resets == [(16, True)]  # the lone survivor's outputs zeroed, as after a sweep


class _Protocol:
    def __init__(self, mode):
        self.resolved_mode = type("Mode", (), {"value": mode})()


@pytest.mark.parametrize(("attributes", "kind"), [
    ({"benchmark_protocol": _Protocol("replay")}, "replay"),
    ({"benchmark_protocol": _Protocol("event")}, "event"),
    ({"benchmark_protocol": None, "_benchmark_protocol": ("triton_do_bench", 25, 100)}, "event"),
    ({"benchmark_protocol": None,
      "_benchmark_protocol": ("triton_do_bench_cudagraph_legacy", 25, 100, 10, 10.0)}, "replay"),
    ({"benchmark_protocol": None, "_benchmark_protocol": ("custom_do_bench", -1, -1)}, None),
    ({"_do_bench": None}, "event"),  # Triton's own autotuner
    ({"_do_bench": lambda fn, quantiles: [1.0]}, None),  # given a benchmark of its own
])
def test_the_brief_time_is_taken_the_way_the_tuner_times(attributes, kind):
    tuner = type("Tuner", (), {})()
    vars(tuner).update(attributes)
    assert screen.brief_kind(tuner) == kind


def test_a_tuner_with_a_benchmark_of_its_own_is_not_screened(tmp_path):
    plugin = Screen(pytest.Config.__new__(pytest.Config), tmp_path)
    configs = [_Config(b) for b in (16, 32)]
    tuner = _Tuner(configs)
    tuner._do_bench = lambda fn, quantiles: [1.0]
    assert plugin.screen(tuner, {"warmup": False}, lambda t, k: list(configs)) == configs
    assert tuner.benched == [] and plugin.facts.skipped == {"own_benchmark": 1}
