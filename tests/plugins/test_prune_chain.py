"""The one owner of prune_configs: filters in ORDER whoever registers first, fully undone."""

from __future__ import annotations

import json

import pytest

from harness.contract import boundary
from harness.contract.records import Records, Winner, to_text
from harness.plugins.prune import ORDER, PIN, PRECOMPILE, SCREEN, SHARE, PruneChain
from harness.run import plugin_plan
from tests.plugins import fakedev


class Tuner:
    """A class with Triton's method, and a log of who pruned in which order."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def prune_configs(self, kwargs):
        self.calls.append("triton")
        return [1, 2, 3, 4]


ORIGINAL = Tuner.__dict__["prune_configs"]


def logging_filter(name, result=None):
    def prune(tuner, kwargs, inner):
        tuner.calls.append(name)
        return result if result is not None else inner(tuner, kwargs)

    return prune


def test_the_order_is_screen_then_precompile_then_the_pin_then_the_share():
    # Regression guard: this order was implied by hook timing (the precompile wrapper went on at
    # session start, the pin in a trylast configure after the share's): keep it. The screen
    # times what precompile compiled together, so it sits outside it.
    assert ORDER == (SCREEN, PRECOMPILE, PIN, SHARE)


def test_filters_run_in_order_whatever_order_they_were_registered_in():
    chain = PruneChain(Tuner)
    try:
        for name in (SHARE, PRECOMPILE, SCREEN, PIN):
            chain.add(name, logging_filter(name))
        tuner = Tuner()
        assert tuner.prune_configs({}) == [1, 2, 3, 4]
        assert tuner.calls == ["screen", "precompile", "pin", "share", "triton"]
        assert chain.active() == ORDER
    finally:
        chain.undo()


def test_a_pin_is_all_the_precompile_filter_sees_and_nothing_inside_it_runs():
    chain = PruneChain(Tuner)
    seen = []

    def precompile(tuner, kwargs, inner):
        seen.append(inner(tuner, kwargs))
        return seen[-1]

    try:
        chain.add(SHARE, logging_filter(SHARE))
        chain.add(PIN, logging_filter(PIN, result=[3]))
        chain.add(PRECOMPILE, precompile)
        tuner = Tuner()
        assert tuner.prune_configs({}) == [3] and seen == [[3]]
        assert tuner.calls == ["pin"]  # neither the share nor Triton's own pruning
    finally:
        chain.undo()


def test_a_removed_filter_is_skipped_and_undo_restores_the_class_method():
    chain = PruneChain(Tuner)
    chain.add(SHARE, lambda tuner, kwargs, inner: inner(tuner, kwargs)[::2])
    chain.add(PRECOMPILE, logging_filter(PRECOMPILE))
    chain.remove(PRECOMPILE)
    tuner = Tuner()
    assert tuner.prune_configs({}) == [1, 3] and tuner.calls == ["triton"]
    chain.undo()
    assert Tuner.__dict__["prune_configs"] is ORIGINAL and chain.active() == ()


def test_an_unknown_or_repeated_filter_is_refused_naming_the_known_ones():
    chain = PruneChain(Tuner)
    try:
        with pytest.raises(ValueError, match=r"'sort'; expected one of \['pin', 'precompile', "
                                             r"'screen', 'share'\]"):
            chain.add("sort", logging_filter("sort"))
        chain.add(PIN, logging_filter(PIN))
        with pytest.raises(ValueError, match="'pin' is registered already"):
            chain.add(PIN, logging_filter(PIN))
    finally:
        chain.undo()


KERNELS = """
from triton.runtime.autotuner import Autotuner, Config, JITFunction

scale = Autotuner(JITFunction(), ["x", "n"], [Config({"BLOCK": b}) for b in (16, 32, 48, 64, 128)],
                  key=["n"])
"""
TEST = """
import json, os

import kernels
from triton.runtime import autotuner

from harness.plugins.prune import prune_chain


def test_kernels(request):
    for n in (8, 16):
        kernels.scale.run("x", n, grid=(1,), warmup=False)
    with open(os.environ["LOG_TO"], "w") as fh:
        json.dump({"log": autotuner.LOG, "active": prune_chain(request.config).active()}, fh)
"""
# Every attribute of the fake Autotuner that differs from its own after the run is cleaned up.
CONFTEST = """
import json, os

import pytest


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    from triton.runtime import autotuner

    own = dict(vars(autotuner.Autotuner))

    def changed():  # cleanups run last in, first out: this one after the chain's undo
        now = vars(autotuner.Autotuner)
        names = sorted(k for k in {*own, *now} if own.get(k) is not now.get(k))
        with open(os.environ["CHANGED_TO"], "w") as fh:
            json.dump(names, fh)

    config.add_cleanup(changed)
"""


def test_a_shard_replaying_with_compile_workers_runs_the_three_filters_in_order_then_undoes(
        pytester, monkeypatch, tmp_path):
    fakedev.install(pytester, autotuner=fakedev.FAKE_COMPILING_AUTOTUNER)
    (pytester.path / "triton" / "runtime" / "_async_compile.py").write_text(
        fakedev.FAKE_ASYNC_COMPILE)
    pytester.makepyfile(kernels=KERNELS, test_kernels=TEST)
    pytester.makeconftest(CONFTEST)
    key = ("triton", "triton.runtime.autotuner:_base", (8,))
    records = tmp_path / "winners.jsonl"  # key 8 pinned with a run-off; key 16 missing
    records.write_text(to_text(Records(winners=[Winner(*key, {"BLOCK": 16})],
                                       candidates=[Winner(*key, {"BLOCK": 128})])))
    for name, value in {boundary.RUN_DIR_VAR: str(tmp_path), boundary.REPLAY_VAR: str(records),
                        boundary.REPLAY_STRICT_VAR: "0", boundary.WARMUP_SHARE_VAR: "1/2",
                        boundary.COMPILE_WORKERS_VAR: "4", "LOG_TO": str(tmp_path / "log"),
                        "CHANGED_TO": str(tmp_path / "changed")}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv(boundary.WARMUP_CLAIMS_VAR, raising=False)
    shard = (plugin_plan.WARMUP_SHARE, plugin_plan.AUTOTUNE, plugin_plan.PRECOMPILE)  # plan order
    plugins = [a for p in shard for a in ("-p", p)]
    result = pytester.runpytest("test_kernels.py", "-s", *plugins)
    result.assert_outcomes(passed=1)
    log = json.loads((tmp_path / "log").read_text())
    assert log["active"] == ["precompile", "pin", "share"]
    compiles = [e for e in log["log"] if e[0] == "compile"]
    # key 8: the pin's winner and run-off, not share 1/2 of them; key 16: share 1/2 of the five;
    # each compiled ahead on the threads, so none when the tuner times it
    assert sorted(e[1] for e in compiles) == [16, 32, 64, 128]
    assert all(e[2].startswith("zl-compile") for e in compiles)
    assert [e[1] for e in log["log"] if e[0] == "time"] == [16, 128, 32, 64]
    result.stdout.fnmatch_lines(["*AUTOTUNE_REPLAY_FALLBACK reason=key_missing *[[]16[]]*"])
    assert json.loads((tmp_path / "changed").read_text()) == []  # prune_configs, run, _bench
