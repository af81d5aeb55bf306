"""Time each candidate of a tuner's sweep briefly, and hand the tuner only the close ones.

The harness loads it (TUNE_SCREEN=1) in a run that tunes for itself: never in one that replays
recorded winners or in a parallel warmup's shard. `Screen` says where it steps in; the
ratio and the brief budget are `harness.tuning.screen`'s.
"""

from __future__ import annotations

import inspect
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from harness.contract import boundary
from harness.contract.boundary import TUNE_SCREEN_DONE_MARKER as DONE_MARKER
from harness.plugins.markers import write_facts
from harness.plugins.precompile import candidates
from harness.plugins.prune import SCREEN, Prune, PruneChain, prune_chain
from harness.tuning.screen import (
    LONG_MS,
    PROBE_REP_MS,
    PROBE_REPLAY_MS,
    PROBE_WARMUP_MS,
    brief_kind,
    median_of,
    survivors,
)

READER = "the screen plugin"
_MISSING = object()


@dataclass
class Screened:
    """What the plugin did in this run: the side file's contents."""

    sweeps: int = 0  # sweeps whose candidates were timed briefly
    candidates: int = 0  # candidates timed briefly
    kept: int = 0  # of them, handed to the tuner
    seconds: float = 0.0  # spent timing briefly
    skipped: dict[str, int] = field(default_factory=dict)  # sweeps left alone, by reason


class Screen:
    """The screen filter of `Autotuner.prune_configs`, outermost in
    `harness.plugins.prune.ORDER`.

    It takes the candidates the rest of the chain returns (compiled ahead by the precompile
    filter where that runs), times each through the tuner's own `_bench` (its pre- and
    post-hooks, its handling of a config that fails to compile) with the tuner's `do_bench`
    swapped for a brief one of the same kind (`brief_kind`: a graph replayed, or Triton's
    do_bench), and returns, in their order, those within the ratio of the fastest. A
    candidate whose brief time raised is kept: the tuner meets its error as it always did.
    Left alone: a tuner that times with a benchmark of its own, a sweep whose first candidate
    is long (LONG_MS), and, from then on, the class of a tuner whose `do_bench` cannot be
    swapped and put back or whose `_bench` does not time through it. A tuner's memo of the
    metas it timed (FlagTree's `seen_tuned_metas`) is put back after each brief time, so that
    the tuner times its candidates itself. Where one candidate is left, the tuner's
    reset-only pre-hook runs after the brief times, as after a sweep, since a tuner may launch
    a lone candidate untimed.
    """

    def __init__(self, config: pytest.Config, run_dir: Path) -> None:
        self.config = config
        self.run_dir = run_dir
        self.facts = Screened()
        # the brief timers by brief_kind: Triton's do_bench and do_bench_cudagraph
        self.timers: dict[str, Callable[..., Any]] = {}
        self.chain: PruneChain | None = None
        self.unswappable: set[type] = set()

    def install(self) -> None:
        from triton.testing import do_bench, do_bench_cudagraph

        self.timers = {
            "event": lambda fn, quantiles: do_bench(
                fn, warmup=PROBE_WARMUP_MS, rep=PROBE_REP_MS, quantiles=quantiles),
            "replay": lambda fn, quantiles: do_bench_cudagraph(
                fn, rep=PROBE_REPLAY_MS, quantiles=quantiles)}
        self.chain = prune_chain(self.config)
        self.chain.add(SCREEN, self.screen)

    def screen(self, tuner: Any, kwargs: dict[str, Any], inner: Prune) -> list[Any]:
        """The screen filter: time briefly what the rest of the chain returns, return the
        close ones."""
        configs = inner(tuner, kwargs)
        todo, reason = candidates(tuner, kwargs, configs)
        kind = brief_kind(tuner) if reason is None else None
        if reason is None and kind is None:
            reason = "own_benchmark"
        if reason is None and type(tuner) in self.unswappable:
            reason = "bench_not_swappable"
        if reason is not None:
            self._skip(reason)
            return configs
        started = time.perf_counter()
        args = tuple(tuner.nargs.values())  # run() built nargs from its positional args
        times: list[float] = []
        for config in todo:
            brief = self._brief(tuner, args, kwargs, config, self.timers[str(kind)])
            if brief is None:  # this tuner cannot be timed briefly: time everything fully
                self.unswappable.add(type(tuner))
                self._skip("bench_not_swappable")
                return configs
            if not times and brief >= LONG_MS:
                self._skip("long_kernel")
                return configs
            times.append(brief)
        timed_ok = [i for i, t in enumerate(times) if t != -math.inf]
        kept = {id(todo[timed_ok[k]]) for k in survivors([times[i] for i in timed_ok])}
        kept |= {id(c) for c, t in zip(todo, times, strict=True) if t == -math.inf}
        self.facts.sweeps += 1
        self.facts.candidates += len(todo)
        self.facts.kept += len(kept)
        self.facts.seconds += time.perf_counter() - started
        timed = {id(c) for c in todo}
        left = [c for c in configs if id(c) not in timed or id(c) in kept]
        if len(left) == 1 and callable(getattr(tuner, "pre_hook", None)):
            tuner.pre_hook({**tuner.nargs, **kwargs, **left[0].all_kwargs()}, reset_only=True)
        return left

    def _brief(self, tuner: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
               config: Any, timer: Callable[..., Any]) -> float | None:
        """`config`'s brief time in ms (-inf where it raised: kept whatever the others
        took), or None where the tuner's `do_bench` cannot be swapped and put back or its
        `_bench` never called it."""
        called = []

        def brief(fn: Callable[[], Any], quantiles: Any = None, **_: Any) -> Any:
            called.append(1)
            return timer(fn, quantiles)

        own = vars(tuner)
        previous = own.get("do_bench", _MISSING)
        if previous is _MISSING and hasattr(
                type(inspect.getattr_static(tuner, "do_bench", None)), "__set__"):
            return None  # a property: setting it would not be undone by deleting it
        memo = own.get("seen_tuned_metas")
        saved = dict(memo) if isinstance(memo, dict) else None
        try:
            tuner.do_bench = brief
        except AttributeError:
            return None
        try:
            timing = median_of(tuner._bench(*args, config=config, **kwargs))
        except Exception:  # noqa: BLE001 the tuner raises it again when it times this config
            timing = -math.inf
        finally:
            if previous is _MISSING:
                del tuner.do_bench
            else:
                tuner.do_bench = previous
            if saved is not None:
                memo.clear()
                memo.update(saved)
        if not called and math.isfinite(timing):
            return None
        return timing

    def _skip(self, reason: str) -> None:
        self.facts.skipped[reason] = self.facts.skipped.get(reason, 0) + 1

    def finish(self) -> None:
        write_facts(self.config, DONE_MARKER, self.run_dir / boundary.SCREEN_FILE, self.facts)

    def uninstall(self) -> None:
        if self.chain is not None:
            self.chain.remove(SCREEN)


SCREEN_STATE = pytest.StashKey[Screen]()


def pytest_configure(config: pytest.Config) -> None:
    run_dir = boundary.read(boundary.RUN_DIR, READER, pytest.UsageError)
    config.stash[SCREEN_STATE] = Screen(config, run_dir)


def pytest_sessionstart(session: pytest.Session) -> None:
    state = session.config.stash.get(SCREEN_STATE, None)
    if state is not None:
        state.install()


def pytest_sessionfinish(session: pytest.Session) -> None:
    state = session.config.stash.get(SCREEN_STATE, None)
    if state is not None:
        state.uninstall()
        state.finish()
