"""The one place that decides which harness pytest plugins load, and in which order."""

from __future__ import annotations

from harness.backends import Backend

DEVICE_SETUP = "harness.plugins.device_setup"
CAPTURE = "harness.plugins.capture"
TIMING = "harness.plugins.timing"
AUTOTUNE = "harness.plugins.autotune"
RECORD_LOG = "harness.plugins.record_log"


def plan_plugins(backend: Backend, timer: str, tuning: bool = False) -> tuple[str, ...]:
    """The ordered `-p` modules for a run on `backend` with `timer` ("graph" or "direct").

    Compat plugins come first: they rewrite collection-time skip markers, and no other plugin
    may read the item list before they have. device_setup follows wherever FlagGems dispatches
    to a vendor, so that every later plugin runs on the pinned device. capture applies only
    where the backend can capture and the timer is graph; timing always runs, since it records
    the timer of every row and applies REPEAT. autotune applies when the run records or replays
    winners (`tuning`) on a backend whose kernels are tuned by Triton. record_log always runs:
    it keeps FlagGems' record log in the run directory.
    """
    plugins: list[str] = list(backend.compat_plugins)
    if backend.vendor is not None:
        plugins.append(DEVICE_SETUP)
    if timer == "graph" and backend.can_capture:
        plugins.append(CAPTURE)
    plugins += [TIMING, RECORD_LOG]
    if tuning and "triton" in backend.python_modules:
        plugins.append(AUTOTUNE)
    return tuple(plugins)


def pytest_plugin_args(plugins: tuple[str, ...]) -> list[str]:
    """`-p` arguments for pytest: the harness plugins, and no cache written into the checkout."""
    args = ["-p", "no:cacheprovider"]
    for plugin in plugins:
        args += ["-p", plugin]
    return args
