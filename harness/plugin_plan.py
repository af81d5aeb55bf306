"""The one place that decides which harness pytest plugins load, and in which order."""

from __future__ import annotations

from harness.backends import Backend
from harness.precompile import PRECOMPILE_PLUGIN
from harness.warmup_share import WARMUP_SHARE_PLUGIN

DEVICE_SETUP = "harness.plugins.device_setup"
CAPTURE = "harness.plugins.capture"
TIMING = "harness.plugins.timing"
AUTOTUNE = "harness.plugins.autotune"
RECORD_LOG = "harness.plugins.record_log"
PRECOMPILE = PRECOMPILE_PLUGIN
WARMUP_SHARE = WARMUP_SHARE_PLUGIN


def plan_plugins(backend: Backend, timer: str, tuning: bool = False,
                 precompile: bool = False, share: bool = False) -> tuple[str, ...]:
    """The ordered `-p` modules for a run on `backend` with `timer` ("graph" or "direct").

    Compat plugins come first: they rewrite collection-time skip markers, and no other plugin
    may read the item list before they have. device_setup follows wherever FlagGems dispatches
    to a vendor, so that every later plugin runs on the pinned device. A parallel warmup's
    shard (`share`) times nothing: warmup_share takes the place of capture and timing there (it
    keeps the shard to its share of the configs and calls each op briefly). Elsewhere, capture
    applies only where the backend can capture and the timer is graph, and timing always runs,
    since it records the timer of every row and applies REPEAT. autotune applies when the run
    records or replays winners (`tuning`) on a backend whose kernels are tuned by Triton.
    record_log always runs: it keeps FlagGems' record log in the run directory. precompile
    applies where `precompile` (COMPILE_WORKERS is on and the installed Triton compiles
    concurrently: see `harness.precompile.off_reason`) on a backend whose kernels are tuned by
    Triton. Where autotune, warmup_share and precompile hook into Triton's
    `Autotuner.prune_configs`, the order of their filters is `harness.plugins.prune.ORDER`'s,
    whatever their order here or their hooks' timing.
    """
    plugins: list[str] = list(backend.compat_plugins)
    if backend.vendor is not None:
        plugins.append(DEVICE_SETUP)
    if timer == "graph" and backend.can_capture and not share:
        plugins.append(CAPTURE)
    plugins += [WARMUP_SHARE if share else TIMING, RECORD_LOG]
    if tuning and "triton" in backend.python_modules:
        plugins.append(AUTOTUNE)
    if precompile and "triton" in backend.python_modules:
        plugins.append(PRECOMPILE)
    return tuple(plugins)


# FlagGems names its record log after every pytest argument; a GPU run with five `-p`
# plugins and an absolute --shape_file passed 255 bytes and FlagGems' configure failed. pytest
# reads the same plugins, in the same order, from PYTEST_PLUGINS.
PLUGINS_VAR = "PYTEST_PLUGINS"


def pytest_plugin_args() -> list[str]:
    """pytest arguments of every run: no cache written into the checkout."""
    return ["-p", "no:cacheprovider"]


def pytest_plugin_env(plugins: tuple[str, ...], caller: str = "") -> dict[str, str]:
    """The PYTEST_PLUGINS value that loads `plugins` in order, after the caller's own."""
    names = [p for p in caller.split(",") if p.strip()] + list(plugins)
    return {PLUGINS_VAR: ",".join(names)} if names else {}
