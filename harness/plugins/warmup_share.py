"""A parallel warmup's shard: tune only this shard's share of each sweep's configs, time nothing.

The plan loads it only in a shard (ZL_WARMUP_SHARE=I/N; ZL_WARMUP_CLAIMS names the directory
where the N shards claim configs, laid out as docs/formats.md says), in place of the timing
plugin.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from harness import boundary
from harness.plugins.autotune import AUTOTUNE, _jsonable

AUTOTUNE_PLUGIN = "harness.plugins.autotune"
READER = "the warmup_share plugin"
BASE_MODULE = "benchmark.base"


def share_of(configs: list[Any], share: tuple[int, int] | None) -> list[Any]:
    """Share I of N of a tuner's pruned configs: I, I+N, ...; a share left empty (fewer
    configs than shares) takes config I mod len, so every share still tunes the key."""
    if share is None or not configs:
        return configs
    index, count = share
    return list(configs[index::count]) or [configs[index % len(configs)]]


class Claims:
    """The configs this shard tunes, claimed first come, first served among the shards that
    share `directory`: one empty file per (kernel, key dtypes, config), created exclusively."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.mine: set[str] = set()
        self.theirs: set[str] = set()

    def take(self, kernel: str, key: tuple[Any, ...], config: Any) -> bool:
        dtypes = [k for k in _jsonable(key) if isinstance(k, str) and k.startswith("torch.")]
        ident = json.dumps([kernel, dtypes, sorted(config.all_kwargs().items())], default=str)
        name = hashlib.sha256(ident.encode()).hexdigest()[:32]
        if name in self.mine or name in self.theirs:
            return name in self.mine
        try:
            os.close(os.open(self.directory / name, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            self.theirs.add(name)
            return False
        self.mine.add(name)
        return True


@contextlib.contextmanager
def brief_kernel_mode(base: Any) -> Iterator[None]:
    """FlagGems' kernel-mode path with the shortest warmup and repetition FlagGems itself uses
    on slow vendors (1 ms each): it calls the op, and so its tuners, and little else."""
    config = base.Config
    saved = config.mode, config.warm_up, config.repetition
    config.mode = base.consts.BenchMode["KERNEL"]
    config.warm_up = config.repetition = 1
    try:
        yield
    finally:
        config.mode, config.warm_up, config.repetition = saved


class Shard:
    """The share or claims this shard tunes, and the patches that keep it to them."""

    def __init__(self, config: pytest.Config, share: tuple[int, int] | None,
                 claims: Claims | None) -> None:
        self.config = config
        self.share = share
        self.claims = claims
        self.base: Any = None
        self._undo: list[Callable[[], None]] = []

    def install_tuners(self) -> None:
        """Inside the autotune plugin's pin (which returns before it), keep the share of each
        pruned list; with claims, time only the configs this shard claims."""
        from triton.runtime.autotuner import Autotuner

        prune = Autotuner.prune_configs
        state = self

        def prune_configs(tuner: Any, kwargs: dict[str, Any]) -> list[Any]:
            configs = prune(tuner, kwargs)
            return configs if state.claims else share_of(configs, state.share)

        Autotuner.prune_configs = prune_configs
        self._undo.append(lambda: setattr(Autotuner, "prune_configs", prune))
        if self.claims is not None:
            self._claim_in_bench(Autotuner)

    def _claim_in_bench(self, cls: type) -> None:
        """Time only the configs this shard claims; the rest as configs that cannot run."""
        bench = cls._bench
        state = self

        def claimed_bench(tuner: Any, *args: Any, config: Any, **meta: Any) -> Any:
            swept = state.sweep_of(tuner)
            if swept is not None and not state.claims.take(swept[1], swept[2], config):
                return [math.inf, math.inf, math.inf]
            return bench(tuner, *args, config=config, **meta)

        cls._bench = claimed_bench
        self._undo.append(lambda: setattr(cls, "_bench", bench))

    def sweep_of(self, tuner: Any) -> tuple[str, str, tuple[Any, ...]] | None:
        """(source, kernel, key) of the sweep `tuner` runs, as the autotune plugin tracks it."""
        tuning = self.config.stash.get(AUTOTUNE, None)
        return tuning.sweeping.get(id(tuner)) if tuning is not None else None

    def install_latency(self) -> None:
        """Each get_latency calls the op briefly in kernel mode; its latency is nobody's row."""
        base = sys.modules.get(BASE_MODULE)
        if base is None or not hasattr(base, "Benchmark") or self.base is not None:
            return
        self.base = base
        original = base.Benchmark.get_latency

        def get_latency(bench: Any, op: Any, *args: Any, **kwargs: Any) -> float:
            with brief_kernel_mode(base):
                return original(bench, op, *args, **kwargs)

        base.Benchmark.get_latency = get_latency
        self._undo.append(lambda: setattr(base.Benchmark, "get_latency", original))

    def uninstall(self) -> None:
        while self._undo:
            self._undo.pop()()


SHARD = pytest.StashKey[Shard]()


def pytest_configure(config: pytest.Config) -> None:
    # Not trylast: the autotune plugin's configure (trylast) wraps prune_configs after this
    # one, so its pin returns before the share is taken. The share only splits sweeps that
    # plugin watches (the plan loads it wherever Triton tunes the kernels).
    # the plan loads this plugin only in a shard, whose share the harness always sets
    share = boundary.read(boundary.SHARD_SHARE, READER, pytest.UsageError)
    claims = boundary.read(boundary.WARMUP_CLAIMS, READER, pytest.UsageError)
    state = Shard(config, share, Claims(claims) if claims else None)
    if config.pluginmanager.has_plugin(AUTOTUNE_PLUGIN):
        state.install_tuners()
    config.stash[SHARD] = state


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    # trylast: FlagGems' test modules (which import benchmark.base) are all imported by now.
    session.config.stash[SHARD].install_latency()


def pytest_unconfigure(config: pytest.Config) -> None:
    state = config.stash.get(SHARD, None)
    if state is not None:
        state.uninstall()
