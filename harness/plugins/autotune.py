"""Autotune record and replay inside FlagGems' run: pin recorded winners, show every miss.

A tuner prunes its configs only when its cache lacks the key, so `Autotuner.prune_configs` is
where a miss shows, for FlagGems' LibTuner and plain Triton autotuners alike. There this
plugin's filter (`pin`, in the chain of `harness.plugins.prune`) returns a recorded winner
(with the run-off candidates a merge gave its key) and nothing else; a key the records lack
prints AUTOTUNE_REPLAY_FALLBACK and, strict, fails. Its variables and autotune_used.jsonl are
in docs/formats.md.
"""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest

from harness.contract import boundary
from harness.contract.boundary import REPLAY_EVICTED_MARKER, USED_FILE
from harness.contract.boundary import REPLAY_FALLBACK_MARKER as FALLBACK_MARKER
from harness.contract.records import Records, Winner, from_text
from harness.contract.tuner_db import config_cache_table
from harness.plugins.held import every_object
from harness.plugins.markers import write_marker
from harness.plugins.prune import PIN, Prune, prune_chain
from harness.plugins.tuner_keys import json_key, tuner_key, tuner_source

READER = "the autotune plugin"
_SPECIAL = ("num_warps", "num_stages", "num_ctas", "maxnreg", "ir_override")
# Triton's compile failures by exception class, named by the stage that raised them.
COMPILE_STAGES = MappingProxyType({
    "CompilationError": "frontend", "CompileTimeAssertionFailure": "frontend",
    "PTXASError": "assembler", "OutOfResources": "resources"})


def winner_ms(tuner: Any) -> float | None:
    """The median time, in the sweep it just ran, of the config a tuner chose (Triton's and
    libtuner's `configs_timings`, each a float or [p50, p20, p80]); None when unknown."""
    best, timings = getattr(tuner, "best_config", None), getattr(tuner, "configs_timings", None)
    if best is None or not isinstance(timings, dict):
        return None
    for config, timing in timings.items():
        if config.all_kwargs() == best.all_kwargs():
            value = float(timing[0] if isinstance(timing, (list, tuple)) else timing)
            return value if math.isfinite(value) else None  # no config of its own ran
    return None


def matching_config(tuner: Any, recorded: dict[str, Any], config_cls: type) -> Any:
    """The tuner's own config equal to `recorded` (keeps its pre_hook), else a new one."""
    for config in tuner.configs:
        if {k: v for k, v in config.all_kwargs().items() if k in recorded} == recorded:
            return config
    meta = {k: v for k, v in recorded.items() if k not in _SPECIAL}
    special = {k: v for k, v in recorded.items() if k in _SPECIAL and v is not None}
    return config_cls(meta, **special)


class Autotune:
    """Replay lookups, fallbacks and the record of what the run used."""

    def __init__(self, config: pytest.Config, replay: Records | None, strict: bool,
                 run_dir: Path | None) -> None:
        self.config = config
        self.sweeping: dict[int, tuple[str, str, tuple[Any, ...]]] = {}  # id(tuner) -> key
        self.times: list[dict[str, Any]] = []
        self.replay = replay.index() if replay else None
        self.run_off = replay.candidates_of() if replay else {}
        self.strict = strict
        self.run_dir = run_dir
        self.fallbacks: list[dict[str, Any]] = []
        self.used: set[tuple[str, str]] = set()
        self.evicted: set[tuple[str, str]] = set()
        self.config_cls: Any = None  # Triton's Config, imported by install
        self._patch = pytest.MonkeyPatch()

    def marker(self, line: str) -> None:
        write_marker(self.config, line)

    def install(self) -> None:
        from triton.runtime.autotuner import Autotuner, Config

        self.config_cls = Config
        prune_chain(self.config).add(PIN, self.pin)
        self._guard_run(Autotuner)
        self._track_libtuner_lookups()

    def pin(self, tuner: Any, kwargs: dict[str, Any], inner: Prune) -> list[Any]:
        """The pin filter of prune_configs: note the sweep that follows a miss inside run(),
        and return a replayed key's configs instead of pruning."""
        pinned = self.on_miss(tuner, kwargs, self.config_cls)
        if tuner.nargs is not None:  # inside run(): the sweep of this key follows
            kernel, key = tuner_key(tuner, kwargs)
            self.sweeping[id(tuner)] = (tuner_source(tuner), kernel, key)
        if pinned is not None:
            return pinned
        return inner(tuner, kwargs)

    def _guard_run(self, cls: Any) -> None:
        """Route `cls.run`'s failures through on_failure (libtuner overrides Triton's run)."""
        run = cls.run
        state = self

        def guarded_run(tuner: Any, *args: Any, **kwargs: Any) -> Any:
            state.sweeping.pop(id(tuner), None)
            try:
                result = run(tuner, *args, **kwargs)
            except Exception as exc:
                state.on_failure(tuner, kwargs, exc)
                raise
            state.on_swept(tuner)
            return result

        self._patch.setattr(cls, "run", guarded_run)

    def _track_libtuner_lookups(self) -> None:
        try:
            from flag_gems.utils.libentry import ConfigCache, LibTuner
        except ImportError:  # the embedded cpu suite has no libtuner
            return
        if "run" in vars(LibTuner):
            self._guard_run(LibTuner)
        get = ConfigCache.get
        used = self.used

        def tracked_get(cache: Any, key: Any) -> Any:
            found = get(cache, key)
            if found is not None:
                used.add((cache.table_name, json.dumps(json_key(tuple(key)))))
            return found

        self._patch.setattr(ConfigCache, "get", tracked_get)

    def on_failure(self, tuner: Any, kwargs: dict[str, Any], exc: Exception) -> None:
        """A replayed config failed to compile: evict it where the cache allows, else say so.

        A Triton autotuner's dict cache drops the entry and the key is not pinned again, so a
        retry self-tunes (and reports its fallback then); libtuner's cache cannot delete, so
        `compile_<stage>_no_evict` is printed and no fallback is claimed.
        """
        stage = COMPILE_STAGES.get(type(exc).__name__)
        if self.replay is None or stage is None or tuner.nargs is None:
            return
        kernel, key = tuner_key(tuner, kwargs)
        key_text = json.dumps(json_key(key))
        cache = getattr(tuner, "cache", None)
        if isinstance(cache, dict) and tuple(key) in cache:
            del cache[tuple(key)]
            self.evicted.add((kernel, key_text))
            self.marker(f"{REPLAY_EVICTED_MARKER} stage={stage} kernel={kernel} key={key_text}")
        else:
            self.marker(f"compile_{stage}_no_evict kernel={kernel} key={key_text}")

    def on_swept(self, tuner: Any) -> None:
        """The run that just returned swept a key: note its winner's time."""
        swept = self.sweeping.pop(id(tuner), None)
        ms = winner_ms(tuner) if swept is not None else None
        if swept is not None and ms is not None:
            source, kernel, key = swept
            self.times.append({"kind": "time", "source": source, "kernel": kernel,
                               "key": json_key(key), "ms": ms})

    def on_miss(self, tuner: Any, kwargs: dict[str, Any], config_cls: type) -> list[Any] | None:
        """A tuner lacks a key: return the recorded winner (and its run-off candidates) to
        pin, or report the fallback."""
        if self.replay is None:
            return None
        kernel, key = tuner_key(tuner, kwargs)
        if (kernel, json.dumps(json_key(key))) in self.evicted:
            self._fallback(kernel, key, "evicted")
            return None
        source = tuner_source(tuner)
        for (src, name, text), winner in self.replay.items():
            if src == source and text == json.dumps(json_key(key)) and (
                    name == kernel or config_cache_table(name) == kernel):
                configs = [winner.config, *self.run_off.get((src, name, text), [])]
                return [matching_config(tuner, c, config_cls) for c in configs]
        self._fallback(kernel, key, "key_missing")
        return None

    def _fallback(self, kernel: str, key: tuple[Any, ...], reason: str) -> None:
        key_text = json.dumps(json_key(key))
        self.fallbacks.append({"kind": "fallback", "kernel": kernel, "key": json_key(key),
                               "reason": reason})
        line = f"{FALLBACK_MARKER} reason={reason} kernel={kernel} key={key_text}"
        self.marker(line)
        if self.strict:
            raise RuntimeError(f"{line}: REPLAY_STRICT=1 forbids self-tuning a key the "
                               "replay does not pin")

    def tuners(self) -> list[Any]:
        """Every autotuner of the process, Triton's and its subclasses' (FlagGems' LibTuner)."""
        from triton.runtime.autotuner import Autotuner

        with warnings.catch_warnings():  # isinstance() on some lazy modules warns
            warnings.simplefilter("ignore")
            # every_object: a worker's tuners were made before its session, and it froze them
            return [o for o in every_object() if isinstance(o, Autotuner)]

    def triton_winners(self, tuners: list[Any]) -> list[Winner]:
        winners = []
        for obj in tuners:
            if isinstance(getattr(obj, "cache", None), dict):
                fn = obj.base_fn
                for key, config in obj.cache.items():
                    winners.append(Winner("triton", f"{fn.__module__}:{fn.__qualname__}",
                                          tuple(json_key(tuple(key))),
                                          dict(config.all_kwargs())))
        return winners

    def write(self, tuners: list[Any]) -> None:
        if self.run_dir is None:
            return
        lines = [json.dumps({"kind": "used", "table": t, "key": json.loads(k)})
                 for t, k in sorted(self.used)]
        lines += [json.dumps({"kind": "winner", "source": w.source, "kernel": w.kernel,
                              "key": list(w.key), "config": w.config}, default=str)
                  for w in self.triton_winners(tuners)]
        lines += [json.dumps(f) for f in self.fallbacks]
        lines += [json.dumps(t, default=str) for t in self.times]
        (self.run_dir / USED_FILE).write_text("".join(x + "\n" for x in lines), "utf-8")

    def uninstall(self) -> None:
        self._patch.undo()


AUTOTUNE = pytest.StashKey[Autotune]()


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    # trylast: device_setup (tryfirst) has imported flag_gems, so its tuners exist. Where the
    # pin runs among prune_configs' filters is prune.ORDER's to say, not this hook's timing.
    replay_path = boundary.read(boundary.REPLAY, READER, pytest.UsageError)
    replay = from_text(replay_path.read_text("utf-8"), str(replay_path)) if replay_path else None
    strict = boundary.read(boundary.REPLAY_STRICT, READER, pytest.UsageError) is True
    run_dir = boundary.read(boundary.RUN_DIR, READER, pytest.UsageError)
    state = Autotune(config, replay, strict, run_dir)
    state.install()
    config.stash[AUTOTUNE] = state


def pytest_sessionfinish(session: pytest.Session) -> None:
    state = session.config.stash.get(AUTOTUNE, None)
    if state is not None:
        tuners = state.tuners()
        state.write(tuners)
        forget_last_calls(tuners)


# What a tuner keeps of its last call once the call is over: FlagGems' LibTuner.run keeps its
# positional arguments and meta (utils/libentry.py, for benchmark_config() without arguments).
# After a session they are that session's tensors (2 GiB after max_dim's [1024, 1024, 1024]
# row): a worker whose next session would start with them still allocated retires instead.
LAST_CALL_ATTRIBUTES = ("_last_benchmark_args", "_last_benchmark_meta")


def forget_last_calls(tuners: list[Any]) -> None:
    """Let go of what each tuner kept of its last call, as a fresh process has none of it."""
    for tuner in tuners:
        for name in LAST_CALL_ATTRIBUTES:
            if getattr(tuner, name, None) is not None:
                setattr(tuner, name, None)


def pytest_unconfigure(config: pytest.Config) -> None:
    state = config.stash.get(AUTOTUNE, None)
    if state is not None:
        state.uninstall()
