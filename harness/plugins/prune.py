"""The one owner of the `Autotuner.prune_configs` patch: named filters called in a fixed order."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

# What `Autotuner.prune_configs` does, given the tuner and the kwargs of the launch.
Prune = Callable[[Any, dict[str, Any]], list[Any]]
# A filter gets the tuner, the kwargs and the rest of the chain, which it may call or not.
Filter = Callable[[Any, dict[str, Any], Prune], list[Any]]

SCREEN = "screen"  # the screen plugin
PRECOMPILE = "precompile"  # the precompile plugin
PIN = "pin"  # the autotune plugin
SHARE = "share"  # the warmup_share plugin

# Outermost first; Triton's own prune_configs is called last, by the innermost filter.
# - screen times briefly what the rest returns (compiled ahead by precompile) and hands the
#   tuner only the candidates within its ratio of the fastest.
# - precompile compiles, ahead of timing, exactly the list the tuner will time (the pin's winner
#   and run-off, or the shard's share) and claims configs under the sweep that pin noted.
# - pin notes the sweep in progress, then returns a replayed key's winner (with its run-off)
#   without calling the rest: a pinned key is pinned whatever the share, and Triton's own
#   pruning never runs for it. A key the records lack falls through.
# - share keeps this shard's share of what Triton's own pruning returns.
ORDER: tuple[str, ...] = (SCREEN, PRECOMPILE, PIN, SHARE)


def _bind(fn: Filter, inner: Prune) -> Prune:
    def prune(tuner: Any, kwargs: dict[str, Any]) -> list[Any]:
        return fn(tuner, kwargs, inner)

    return prune


class PruneChain:
    """One wrapper around `autotuner.prune_configs` that calls the registered filters in ORDER.

    A filter is registered under its name in ORDER, once, and may be removed; the wrapper
    calls whatever is registered at the time of each call. `undo` drops every filter and puts
    the class's own method back.
    """

    def __init__(self, autotuner: Any) -> None:
        self.filters: dict[str, Filter] = {}
        self._patch = pytest.MonkeyPatch()
        original: Prune = autotuner.prune_configs
        chain = self

        def prune_configs(tuner: Any, kwargs: dict[str, Any]) -> list[Any]:
            return chain.prune(tuner, kwargs, original)

        self._patch.setattr(autotuner, "prune_configs", prune_configs)

    def add(self, name: str, fn: Filter) -> None:
        """Register `fn` as the filter `name`; its place in the chain is ORDER's."""
        if name not in ORDER:
            raise ValueError(f"no prune_configs filter is called {name!r}; expected one of "
                             f"{sorted(ORDER)}")
        if name in self.filters:
            raise ValueError(f"the prune_configs filter {name!r} is registered already")
        self.filters[name] = fn

    def remove(self, name: str) -> None:
        """Stop calling the filter `name` (nothing happens where it is not registered)."""
        self.filters.pop(name, None)

    def active(self) -> tuple[str, ...]:
        """The registered filters' names, outermost first."""
        return tuple(name for name in ORDER if name in self.filters)

    def prune(self, tuner: Any, kwargs: dict[str, Any], original: Prune) -> list[Any]:
        """Call the registered filters, outermost first, around `original`."""
        call = original
        for name in reversed(self.active()):
            call = _bind(self.filters[name], call)
        return call(tuner, kwargs)

    def undo(self) -> None:
        """Drop every filter and restore the class's own prune_configs."""
        self.filters.clear()
        self._patch.undo()


PRUNE_CHAIN = pytest.StashKey[PruneChain]()


def prune_chain(config: pytest.Config) -> PruneChain:
    """This run's owner of Triton's `Autotuner.prune_configs`.

    The first call patches the class; the patch is undone when `config` is cleaned up, right
    after every plugin's pytest_unconfigure.
    """
    chain = config.stash.get(PRUNE_CHAIN, None)
    if chain is None:
        # imported here: only a run with a tuner plugin needs Triton
        from triton.runtime.autotuner import Autotuner

        chain = config.stash[PRUNE_CHAIN] = PruneChain(Autotuner)
        config.add_cleanup(chain.undo)
    return chain
