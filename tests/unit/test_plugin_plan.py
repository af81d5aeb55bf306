"""Plugin planning: compat plugins first, nothing leaks between backends."""

from __future__ import annotations

import dataclasses

import pytest

from harness import backends
from harness.run.plugin_plan import (
    CAPTURE,
    COLLECT,
    DEVICE_SETUP,
    OUTCOMES,
    RECORD_LOG,
    TIMING,
    WARMUP_SHARE,
    YAML_CACHE,
    plan_plugins,
    pytest_plugin_args,
    pytest_plugin_env,
)


@pytest.mark.parametrize("timer", ["graph", "direct"])
@pytest.mark.parametrize("name", backends.registry().names())
def test_compat_plugins_come_first_and_only_on_their_backend(name, timer):
    backend = backends.get(name)
    plan = plan_plugins(backend, timer)
    assert plan[: len(backend.compat_plugins)] == backend.compat_plugins
    others = {p for b in backends.registry().all() if b is not backend for p in b.compat_plugins}
    assert not (set(plan) & (others - set(backend.compat_plugins)))


def test_compat_plugin_precedes_device_setup_even_when_added_later():
    musa = backends.get("musa")
    assert musa.compat_plugins, "musa carries a compat plugin"
    plan = plan_plugins(musa, "graph")
    assert plan.index(musa.compat_plugins[0]) < plan.index(DEVICE_SETUP)


def test_device_setup_only_where_flaggems_dispatches_to_a_vendor():
    assert DEVICE_SETUP in plan_plugins(backends.get("cuda"), "graph")
    assert DEVICE_SETUP not in plan_plugins(backends.get("cpu"), "direct")
    fake = dataclasses.replace(backends.get("cpu"), compat_plugins=("x.compat",))
    assert plan_plugins(fake, "direct") == ("x.compat", TIMING, RECORD_LOG, OUTCOMES,
                                            COLLECT, YAML_CACHE)


def test_capture_only_for_the_graph_timer_on_a_capturing_backend():
    cuda = backends.get("cuda")
    assert plan_plugins(cuda, "graph") == (DEVICE_SETUP, CAPTURE, TIMING, RECORD_LOG, OUTCOMES,
                                           COLLECT, YAML_CACHE)
    assert plan_plugins(cuda, "direct") == (DEVICE_SETUP, TIMING, RECORD_LOG, OUTCOMES, COLLECT,
                                           YAML_CACHE)
    assert CAPTURE not in plan_plugins(backends.get("cpu"), "graph")
    musa = backends.get("musa")
    assert plan_plugins(musa, "graph") == (*musa.compat_plugins, DEVICE_SETUP, CAPTURE, TIMING,
                                           RECORD_LOG, OUTCOMES, COLLECT, YAML_CACHE)


def test_plugins_load_in_order_through_the_environment_after_the_callers_own():
    # Regression: with five -p arguments and an absolute --shape_file, FlagGems' record-log
    # file name (built from every argument) passed 255 bytes and its configure failed.
    assert pytest_plugin_args() == ["-p", "no:cacheprovider"]
    assert pytest_plugin_env(("a.one", "b.two")) == {"PYTEST_PLUGINS": "a.one,b.two"}
    assert pytest_plugin_env(("a.one",), "mine") == {"PYTEST_PLUGINS": "mine,a.one"}
    assert pytest_plugin_env(()) == {}


@pytest.mark.parametrize("name", backends.registry().names())
def test_a_warmup_shard_loads_warmup_share_in_place_of_capture_and_timing(name):
    backend = backends.get(name)
    shard = plan_plugins(backend, "graph", tuning=True, share=True)
    assert WARMUP_SHARE in shard and TIMING not in shard and CAPTURE not in shard
    assert shard[: len(backend.compat_plugins)] == backend.compat_plugins
    for timer in ("graph", "direct"):  # every other run times, and never loads it
        assert WARMUP_SHARE not in plan_plugins(backend, timer, tuning=True, precompile=True)
