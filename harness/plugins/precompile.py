"""Compile an untuned key's autotune candidates together, then let the tuner time them as before.

The harness loads it (with ZL_PLUGIN_COMPILE_WORKERS=N) only where the installed Triton has
`triton.runtime._async_compile`; `Precompiler` says where it steps in.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from harness.contract import boundary
from harness.contract.boundary import COMPILE_WORKERS_DONE_MARKER as DONE_MARKER
from harness.contract.boundary import COMPILE_WORKERS_OFF_MARKER as OFF_MARKER
from harness.plugins.markers import write_facts, write_marker
from harness.plugins.prune import PRECOMPILE, Prune, PruneChain, prune_chain
from harness.plugins.warmup_share import SHARD
from harness.tuning.precompile import compile_cost

READER = "the precompile plugin"


@dataclass
class Precompiled:
    """What the plugin did in this run: the side file's contents."""

    workers: int
    keys: int = 0  # sweeps whose candidates were compiled ahead
    candidates: int = 0  # candidates handed to the compile threads
    compiled: int = 0  # compiles that ran (the rest were in Triton's kernel cache already)
    failed: int = 0  # compiles that raised; the tuner meets the same failure when it times
    seconds: float = 0.0
    skipped: dict[str, int] = field(default_factory=dict)  # sweeps left alone, by reason


def policy_skip(tuner: Any) -> str | None:
    """None where the tuner times every pruned config, else why nothing is compiled ahead.

    Triton's autotuner and LibTuner's default policy time them all, and so does its FlagTune
    policy wherever it falls back to the default (outside the cost-model mode); the cost
    model's proposer times configs of its own choosing, and another policy may time a few.
    """
    policy = getattr(type(tuner), "policy", None)
    if policy is None:
        return None
    try:
        # by its full name: `flag_gems.utils` exports a function called libentry
        from flag_gems import runtime
        from flag_gems.utils.libentry import LibTuner, _supports_flagtune_cost_model

        if policy is LibTuner.get("default").policy:
            return None
        if policy is not LibTuner.get("flagtune").policy:
            return "policy_other"
        # the test flagtune_policy makes first, with the names it uses
        name = (getattr(tuner, "_flagtune_op_name", None)
                or getattr(tuner, "_flagtune_expand_op_name", None)
                or getattr(tuner, "__name__", "unknown"))
        mode = runtime.resolve_tuning_mode(
            name, supports_cost_model=_supports_flagtune_cost_model(tuner))
    except Exception as exc:  # noqa: BLE001 a libtuner of another shape: leave it alone
        return f"policy_unknown_{type(exc).__name__}"
    return "policy_cost_model" if mode is runtime.TuningMode.COST_MODEL else None


def candidates(tuner: Any, kwargs: dict[str, Any], configs: list[Any]
               ) -> tuple[list[Any], str | None]:
    """The configs to compile ahead for this prune_configs call, or none and why: only when
    the tuner is about to time two or more of them in `run` (`warmup` compiles them itself)."""
    if tuner.nargs is None or kwargs.get("warmup") is not False:
        return [], "not_a_sweep"
    if len(configs) < 2:
        return [], "one_candidate"  # a replayed winner, or Triton's single-config shortcut
    if getattr(tuner, "cache_results", False):
        return [], "disk_cache"  # a hit in Triton's autotune disk cache times nothing
    reason = policy_skip(tuner)
    if reason is not None:
        return [], reason
    # a config that redefines a given meta-parameter fails in _bench before any compile
    return [c for c in configs if not (kwargs.keys() & c.kwargs.keys())], None


class _Pool:
    """The executor AsyncCompileMode submits to: N threads, and a free thread per submit."""

    def __init__(self, workers: int) -> None:
        self.executor = ThreadPoolExecutor(workers, thread_name_prefix="zl-compile")
        self.free = threading.Semaphore(workers)
        self.futures: list[Future] = []

    def submit(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Future:
        def compile_then_free() -> Any:
            try:
                return fn(*args, **kwargs)
            finally:
                self.free.release()

        future = self.executor.submit(compile_then_free)
        self.futures.append(future)
        return future


class Precompiler:
    """The precompile filter of `Autotuner.prune_configs`: compile each sweep's candidates
    ahead of timing.

    A tuner prunes its configs only when its cache lacks the key, for FlagGems' LibTuner and
    plain Triton autotuners alike. The filter, outermost in `harness.plugins.prune.ORDER`,
    takes the candidates that pruning (and the autotune plugin's replay pin or run-off, or the
    warmup_share plugin's share) left, runs each config's pre_hook as the tuner will before
    timing it, launches it with `warmup=True` under Triton's `AsyncCompileMode` over N
    threads, the costliest (`compile_cost`) first, and waits for every compile before
    returning the same list, in the same order; the tuner then times them one by one, each
    launch finding its kernel compiled. A candidate that fails to compile fails again, as it
    always did, when the tuner times it. Under a parallel warmup's claims, a candidate is
    claimed just before a thread is free to compile it, so shards still split the configs by
    how fast they compile.
    """

    def __init__(self, config: pytest.Config, workers: int, run_dir: Path) -> None:
        self.config = config
        self.run_dir = run_dir
        self.facts = Precompiled(workers)
        self.pool = _Pool(workers)
        self.async_compile: Any = None  # triton.runtime._async_compile, imported by install
        self.chain: PruneChain | None = None

    def install(self) -> None:
        from triton.runtime import _async_compile

        self.async_compile = _async_compile
        self.chain = prune_chain(self.config)
        self.chain.add(PRECOMPILE, self.compile_candidates)

    def compile_candidates(self, tuner: Any, kwargs: dict[str, Any], inner: Prune
                           ) -> list[Any]:
        """The precompile filter: compile what the rest of the chain returns, return it."""
        configs = inner(tuner, kwargs)
        todo, reason = candidates(tuner, kwargs, configs)
        if reason is None and self.async_compile.active_mode.get() is not None:
            reason = "async_mode_active"  # never inside someone else's mode
        if reason is None:
            self.compile_ahead(tuner, kwargs, todo, self.async_compile.AsyncCompileMode)
        else:
            skipped = self.facts.skipped
            skipped[reason] = skipped.get(reason, 0) + 1
        return configs

    def compile_ahead(self, tuner: Any, kwargs: dict[str, Any], todo: list[Any],
                      mode_cls: type) -> None:
        """Compile `todo` over the threads; return once every compile has finished."""
        args = tuple(tuner.nargs.values())  # run() built nargs from its positional args
        claim = self._claimer(tuner)
        started, before = time.perf_counter(), len(self.pool.futures)
        with mode_cls(self.pool, ignore_errors=True):
            for config in sorted(todo, key=compile_cost, reverse=True):
                self.pool.free.acquire()  # claim no config before a thread can compile it
                submitted = len(self.pool.futures)
                try:
                    if claim is None or claim(config):
                        current = {**kwargs, **config.all_kwargs()}
                        if getattr(config, "pre_hook", None) is not None:
                            # as the tuner's _bench does before it launches: the hook may
                            # set what the kernel specializes on (a TMA descriptor's block)
                            config.pre_hook({**tuner.nargs, **current})
                        tuner.fn.run(*args, **{**current, "warmup": True})
                except Exception:  # noqa: BLE001 the tuner meets it again when it times
                    self.facts.failed += 1
                if len(self.pool.futures) == submitted:  # no compile started
                    self.pool.free.release()
        done = self.pool.futures[before:]
        self.facts.keys += 1
        self.facts.candidates += len(todo)
        self.facts.compiled += len(done)
        self.facts.failed += sum(1 for f in done if f.exception() is not None)
        self.facts.seconds += time.perf_counter() - started

    def _claimer(self, tuner: Any) -> Callable[[Any], bool] | None:
        """A parallel warmup's claim on a config of this sweep, or None outside claims."""
        shard = self.config.stash.get(SHARD, None)
        claims = shard.claims if shard is not None else None
        if shard is None or claims is None:
            return None
        swept = shard.sweep_of(tuner)
        if swept is None:
            return None
        return lambda config: claims.take(swept[1], swept[2], config)

    def finish(self) -> None:
        write_facts(self.config, DONE_MARKER, self.run_dir / boundary.PRECOMPILE_FILE, self.facts)

    def uninstall(self) -> None:
        if self.chain is not None:
            self.chain.remove(PRECOMPILE)
        self.pool.executor.shutdown(wait=True)


PRECOMPILER = pytest.StashKey[Precompiler]()


def unusable(module: Any) -> str | None:
    """Why the imported async-compile module cannot serve, or None."""
    import inspect

    mode = getattr(module, "AsyncCompileMode", None)
    if mode is None or not hasattr(module, "active_mode"):
        return "triton_lacks_async_compile"
    if "ignore_errors" not in inspect.signature(mode).parameters:
        return "async_compile_without_ignore_errors"  # one failed compile would end the sweep
    return None


def pytest_configure(config: pytest.Config) -> None:
    # the harness sets both wherever it plans the plugin
    workers = boundary.read(boundary.COMPILE_WORKERS, READER, pytest.UsageError)
    run_dir = boundary.read(boundary.RUN_DIR, READER, pytest.UsageError)
    reason: str | None
    try:
        from triton.runtime import _async_compile
    except ImportError:
        reason = "triton_lacks_async_compile"
    else:
        reason = unusable(_async_compile)
    if reason is not None:
        write_marker(config, f"{OFF_MARKER} reason={reason} compile_workers={workers}")
        return
    config.stash[PRECOMPILER] = Precompiler(config, workers, run_dir)


def pytest_sessionstart(session: pytest.Session) -> None:
    # The filter compiles from session start to session finish, the span its facts report;
    # its place around the pin and the share is prune.ORDER's.
    state = session.config.stash.get(PRECOMPILER, None)
    if state is not None:
        state.install()


def pytest_sessionfinish(session: pytest.Session) -> None:
    state = session.config.stash.get(PRECOMPILER, None)
    if state is not None:
        state.uninstall()
        state.finish()
