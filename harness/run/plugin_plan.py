"""The one place that decides which harness pytest plugins load, in what order, with what env."""

from __future__ import annotations

from pathlib import Path

from harness.backends import Backend
from harness.contract import boundary
from harness.contract.warmup_share import WARMUP_SHARE_PLUGIN, share_text
from harness.settings.spec import Settings
from harness.tuning.precompile import PRECOMPILE_PLUGIN
from harness.tuning.screen import SCREEN_PLUGIN

DEVICE_SETUP = "harness.plugins.device_setup"
CAPTURE = "harness.plugins.capture"
TIMING = "harness.plugins.timing"
AUTOTUNE = "harness.plugins.autotune"
RECORD_LOG = "harness.plugins.record_log"
OUTCOMES = "harness.plugins.outcomes"
COLLECT = "harness.plugins.collect"
YAML_CACHE = "harness.plugins.yaml_cache"
PRECOMPILE = PRECOMPILE_PLUGIN
SCREEN = SCREEN_PLUGIN
WARMUP_SHARE = WARMUP_SHARE_PLUGIN
SMOKE = "harness.plugins.smoke"


def plan_plugins(backend: Backend, timer: str, tuning: bool = False,
                 precompile: bool = False, share: bool = False, smoke: bool = False,
                 screen: bool = False) -> tuple[str, ...]:
    """The ordered `-p` modules for a run on `backend` with `timer` ("graph" or "direct").

    Compat plugins come first: they rewrite collection-time skip markers, and no other plugin
    may read the item list before they have. device_setup follows wherever FlagGems dispatches
    to a vendor, so that every later plugin runs on the pinned device. A parallel warmup's
    shard (`share`) times nothing: warmup_share takes the place of capture and timing there (it
    keeps the shard to its share of the configs and calls each op briefly). Elsewhere, capture
    applies only where the backend can capture and the timer is graph, and timing always runs,
    since it records the timer of every row and applies REPEAT. autotune applies when the run
    records or replays winners (`tuning`) on a backend whose kernels are tuned by Triton.
    record_log always runs: it keeps FlagGems' record log in the run directory; so does
    outcomes, which tells a skipped run from one that measured nothing; collect, which
    keeps a node's session from visiting every file of its package; and yaml_cache, which
    parses a shapes file once a worker rather than once a benchmark. precompile
    applies where `precompile` (COMPILE_WORKERS is on and the installed Triton compiles
    concurrently: see `harness.precompile.off_reason`) on a backend whose kernels are tuned by
    Triton. screen applies where `screen` (TUNE_SCREEN is on, and the run tunes for itself:
    it replays no winners and is no parallel warmup's shard) on such a backend. smoke
    (SHAPE_MODE=smoke) cuts each benchmark to one input of one dtype. Where screen,
    autotune, warmup_share and precompile hook into Triton's `Autotuner.prune_configs`, the
    order of their filters is `harness.plugins.prune.ORDER`'s, whatever their order here or
    their hooks' timing.
    """
    plugins: list[str] = list(backend.compat_plugins)
    if backend.vendor is not None:
        plugins.append(DEVICE_SETUP)
    if timer == "graph" and backend.can_capture and not share:
        plugins.append(CAPTURE)
    plugins += [WARMUP_SHARE if share else TIMING, RECORD_LOG, OUTCOMES, COLLECT, YAML_CACHE]
    if tuning and "triton" in backend.python_modules:
        plugins.append(AUTOTUNE)
    if precompile and "triton" in backend.python_modules:
        plugins.append(PRECOMPILE)
    if screen and not share and "triton" in backend.python_modules:
        plugins.append(SCREEN)
    if smoke:
        plugins.append(SMOKE)
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


def boundary_env(settings: Settings, run_dir: Path, precompile: bool) -> dict[str, str]:
    """The boundary's variables of a run's pytest: every one its plugins read with
    `boundary.read`, decided from `settings`.

    `precompile`: the precompile plugin is planned, so it gets its thread count.
    """
    env = {
        boundary.BACKEND_VAR: settings.backend.name,
        boundary.RUN_DIR_VAR: str(run_dir.resolve()),
        boundary.TIMER_VAR: settings.timer,
        boundary.REPEAT_VAR: str(settings.repeat),
    }
    if settings.timer == "graph" and settings.graph_timer != "upstream":
        env[boundary.GRAPH_TIMER_VAR] = settings.graph_timer
    if precompile:
        env[boundary.COMPILE_WORKERS_VAR] = str(settings.compile_workers)
    if settings.warmup_share:
        env[boundary.WARMUP_SHARE_VAR] = share_text(settings.warmup_share)
    if settings.replay_from:
        env[boundary.REPLAY_VAR] = str((run_dir / boundary.REPLAYED_FILE).resolve())
        env[boundary.REPLAY_STRICT_VAR] = "1" if settings.replay_strict else "0"
    return env
