"""The one place that decides which harness pytest plugins load, and in which order."""

from __future__ import annotations

from harness.backends import Backend

DEVICE_SETUP = "harness.plugins.device_setup"


def plan_plugins(backend: Backend) -> tuple[str, ...]:
    """The ordered `-p` modules for a run on `backend`.

    Compat plugins come first: they rewrite collection-time skip markers, and no other plugin
    may read the item list before they have. device_setup follows wherever FlagGems dispatches
    to a vendor, so that every later plugin runs on the pinned device.
    """
    plugins: list[str] = list(backend.compat_plugins)
    if backend.vendor is not None:
        plugins.append(DEVICE_SETUP)
    return tuple(plugins)


def pytest_plugin_args(plugins: tuple[str, ...]) -> list[str]:
    """`-p` arguments for pytest: the harness plugins, and no cache written into the checkout."""
    args = ["-p", "no:cacheprovider"]
    for plugin in plugins:
        args += ["-p", plugin]
    return args
