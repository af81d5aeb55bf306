"""Plugin planning: compat plugins first, nothing leaks between backends."""

from __future__ import annotations

import dataclasses

import pytest

from harness import backends
from harness.plugin_plan import DEVICE_SETUP, plan_plugins, pytest_plugin_args


@pytest.mark.parametrize("name", backends.registry().names())
def test_compat_plugins_come_first_and_only_on_their_backend(name):
    backend = backends.get(name)
    plan = plan_plugins(backend)
    assert plan[: len(backend.compat_plugins)] == backend.compat_plugins
    others = {p for b in backends.registry().all() if b is not backend for p in b.compat_plugins}
    assert not (set(plan) & (others - set(backend.compat_plugins)))


def test_compat_plugin_precedes_device_setup_even_when_added_later():
    musa = backends.get("musa")
    assert musa.compat_plugins, "musa carries a compat plugin"
    plan = plan_plugins(musa)
    assert plan.index(musa.compat_plugins[0]) < plan.index(DEVICE_SETUP)


def test_device_setup_only_where_flaggems_dispatches_to_a_vendor():
    assert DEVICE_SETUP in plan_plugins(backends.get("cuda"))
    assert DEVICE_SETUP not in plan_plugins(backends.get("cpu"))
    fake = dataclasses.replace(backends.get("cpu"), compat_plugins=("x.compat",))
    assert plan_plugins(fake) == ("x.compat",)


def test_pytest_args_disable_the_cache_and_keep_order():
    args = pytest_plugin_args(("a.one", "b.two"))
    assert args == ["-p", "no:cacheprovider", "-p", "a.one", "-p", "b.two"]
