"""A parallel warmup's shard: tune only this shard's share of each sweep's configs, time nothing.

The plan loads it only in a shard (ZL_PLUGIN_WARMUP_SHARE=I/N; ZL_PLUGIN_WARMUP_CLAIMS names the
directory where the N shards claim configs, laid out as docs/formats.md says), in place of the
timing plugin.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.contract import boundary
from harness.plugins.autotune import AUTOTUNE
from harness.plugins.prune import SHARE, Prune, prune_chain
from harness.plugins.tuner_keys import json_key

AUTOTUNE_PLUGIN = "harness.plugins.autotune"
READER = "the warmup_share plugin"


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
        dtypes = [k for k in json_key(key) if isinstance(k, str) and k.startswith("torch.")]
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
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(base.Config, "mode", base.consts.BenchMode["KERNEL"])
        patch.setattr(base.Config, "warm_up", 1)
        patch.setattr(base.Config, "repetition", 1)
        yield


class ShareGuard:
    """The share or claims this shard tunes, and the patches that keep it to them."""

    def __init__(self, config: pytest.Config, share: tuple[int, int] | None,
                 claims: Claims | None) -> None:
        self.config = config
        self.share = share
        self.claims = claims
        self.base: Any = None
        self._patch = pytest.MonkeyPatch()

    def install_tuners(self) -> None:
        """Keep the share of each pruned list (the share filter of prune_configs); with
        claims, time only the configs this shard claims."""
        from triton.runtime.autotuner import Autotuner

        prune_chain(self.config).add(SHARE, self.keep_share)
        if self.claims is not None:
            self._claim_in_bench(Autotuner, self.claims)

    def keep_share(self, tuner: Any, kwargs: dict[str, Any], inner: Prune) -> list[Any]:
        """The share filter: this shard's share of what pruning returns (all of it under
        claims, which split the configs as they are timed)."""
        configs = inner(tuner, kwargs)
        return configs if self.claims else share_of(configs, self.share)

    def _claim_in_bench(self, cls: Any, claims: Claims) -> None:
        """Time only the configs this shard claims; the rest as configs that cannot run."""
        bench = cls._bench
        state = self

        def claimed_bench(tuner: Any, *args: Any, config: Any, **meta: Any) -> Any:
            swept = state.sweep_of(tuner)
            if swept is not None and not claims.take(swept[1], swept[2], config):
                return [math.inf, math.inf, math.inf]
            return bench(tuner, *args, config=config, **meta)

        self._patch.setattr(cls, "_bench", claimed_bench)

    def sweep_of(self, tuner: Any) -> tuple[str, str, tuple[Any, ...]] | None:
        """(source, kernel, key) of the sweep `tuner` runs, as the autotune plugin tracks it."""
        tuning = self.config.stash.get(AUTOTUNE, None)
        return tuning.sweeping.get(id(tuner)) if tuning is not None else None

    def install_latency(self) -> None:
        """Each get_latency calls the op briefly in kernel mode; its latency is nobody's row."""
        base = sys.modules.get(boundary.BASE_MODULE)
        if base is None or not hasattr(base, "Benchmark") or self.base is not None:
            return
        self.base = base
        original = base.Benchmark.get_latency

        def get_latency(bench: Any, op: Any, *args: Any, **kwargs: Any) -> float:
            with brief_kernel_mode(base):
                return original(bench, op, *args, **kwargs)

        self._patch.setattr(base.Benchmark, "get_latency", get_latency)

    def uninstall(self) -> None:
        self._patch.undo()


SHARD = pytest.StashKey[ShareGuard]()


def pytest_configure(config: pytest.Config) -> None:
    # The share only splits sweeps the autotune plugin watches (the plan loads it wherever
    # Triton tunes the kernels); its place after that plugin's pin is prune.ORDER's.
    # The plan loads this plugin only in a shard, whose share the harness always sets.
    share = boundary.read(boundary.SHARD_SHARE, READER, pytest.UsageError)
    claims = boundary.read(boundary.WARMUP_CLAIMS, READER, pytest.UsageError)
    state = ShareGuard(config, share, Claims(claims) if claims else None)
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
