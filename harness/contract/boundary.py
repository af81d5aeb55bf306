"""The names that cross from the harness into its pytest plugins, written once and read loudly."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Generic, TypeVar, overload

from harness import backends
from harness.backends import Backend
from harness.contract.warmup_share import parse_share
from harness.errors import EXIT_PREFLIGHT, HarnessError

# The environment the host sets for the benchmark's pytest (plugin_plan.boundary_env writes it).
# Its own prefix: a user setting (ZL_TIMER, where auto is valid) never shares a name with the
# value the host decided from it (ZL_PLUGIN_TIMER, graph or direct).
PREFIX = "ZL_PLUGIN_"
BACKEND_VAR = PREFIX + "BACKEND"
RUN_DIR_VAR = PREFIX + "RUN_DIR"
TIMER_VAR = PREFIX + "TIMER"
REPEAT_VAR = PREFIX + "REPEAT"
GRAPH_TIMER_VAR = PREFIX + "GRAPH_TIMER"  # GRAPH_TIMERS: the capture plugin's algorithm
COMPILE_WORKERS_VAR = PREFIX + "COMPILE_WORKERS"  # set only where the precompile plugin runs
WARMUP_SHARE_VAR = PREFIX + "WARMUP_SHARE"  # I/N: a parallel warmup's shard, which times nothing
WARMUP_CLAIMS_VAR = PREFIX + "WARMUP_CLAIMS"  # where a parallel warmup's shards claim configs
REPLAY_VAR = PREFIX + "AUTOTUNE_REPLAY"  # the winners file the autotune plugin pins
REPLAY_STRICT_VAR = PREFIX + "REPLAY_STRICT"  # 1: a key missing from the replay fails the op

BASE_MODULE = "benchmark.base"  # FlagGems' module of Benchmark, Config and BenchmarkResult

# Side files the plugins write in ZL_PLUGIN_RUN_DIR, and what the host reads or writes beside them.
TIMING_FILE = "timing.jsonl"  # every measured row's timer, markers and samples
RUNTIME_FILE = "runtime.json"  # the device and versions pytest actually saw
USED_FILE = "autotune_used.jsonl"  # the tuner keys looked up, winners and replay fallbacks
PRECOMPILE_FILE = "precompile.json"  # what the precompile plugin compiled ahead of timing
SCREEN_FILE = "screen.json"  # what the screen plugin timed briefly and handed to the tuners
RECORD_LOGS_FILE = "record_logs.json"  # the record logs this pytest wrote (a JSON list)
RECORD_LOG_GLOB = "result_*.log"  # FlagGems' --record log files
REPLAYED_FILE = "replayed_winners.jsonl"  # the records a replaying run pins
OUTCOMES_FILE = "outcomes.json"  # how many tests pytest ran, passed, failed, skipped, and why
PHASES_FILE = "time_phases.jsonl"  # one line a pytest session: where its seconds went
CLAIMS_DIR = "claims"  # under a parallel warmup's directory: one per dtype group

# Marker lines the plugins print into run.log, read back by summary and report.
DIRECT_MARKER = "BENCHMARK_DIRECT_NO_CUDAGRAPH"
POISONED_MARKER = "BENCHMARK_CAPTURE_POISONED"
DENIED_MARKER = "BENCHMARK_CAPTURE_DENIED"
REPLAY_FALLBACK_MARKER = "AUTOTUNE_REPLAY_FALLBACK"
REPLAY_EVICTED_MARKER = "AUTOTUNE_REPLAY_EVICTED"
COMPILE_WORKERS_OFF_MARKER = "COMPILE_WORKERS_OFF"
COMPILE_WORKERS_DONE_MARKER = "COMPILE_WORKERS_DONE"
TUNE_SCREEN_DONE_MARKER = "TUNE_SCREEN_DONE"
RESCUED_MARKER = "BENCHMARK_CAPTURE_RESCUED"  # a row of an operator rerun without capture
CLOCKS_THROTTLED_MARKER = "GPU_CLOCKS_THROTTLED"  # a row timed while the device throttled
CLOCKS_UNREAD_MARKER = "GPU_CLOCKS_UNREAD"  # run.log: why no clocks are read beside the rows
CLOCKS_DIFFER = "GPU_CLOCKS_DIFFER"  # an A/B row whose sides' SM clocks differ by > CLOCK_CHANGE
CLOCK_CHANGE = 0.05  # a fraction of the SM clock: more across a row or between sides flags it
NO_DEVICE_WORK = "NO_DEVICE_WORK"  # an A/B row whose calls took under DEVICE_WORK_MS on both sides
# No kernel launch completes in 100 ns (the shortest kernels of a graph replay take about 1 us on
# an H100); a view operator's graph is empty and replays in about 5 ns a call (FlagGems' unbind).
DEVICE_WORK_MS = 1e-4
# rows never called faster or slower
FLAG_MARKERS = (DIRECT_MARKER, REPLAY_FALLBACK_MARKER, RESCUED_MARKER, CLOCKS_THROTTLED_MARKER)

# A run's header in run.log: its first line, then `# <field>: <value>` with run_dir first.
RUN_HEADER = "# harness run header"
RUN_DIR_LINE = "# run_dir: "

TIMERS = ("graph", "direct")
GRAPH_TIMERS = ("adaptive", "upstream", "steady")  # the capture plugin's algorithms
T = TypeVar("T")


class BoundaryError(HarnessError):
    """A variable the harness passes to its plugins is missing or malformed: the process was
    not started by the harness, or not as it starts one."""

    exit_code = EXIT_PREFLIGHT


@dataclass(frozen=True)
class ChildVar(Generic[T]):
    """One variable of the child's environment: its name, what it accepts, how it is read.

    `parse` raises ValueError or a HarnessError on a malformed value. Whether the variable must
    be set is its class's to say (RequiredVar, OptionalVar), so `read`'s type says it too.
    """

    name: str
    accepted: str | Callable[[], str]  # a callable where the list is only known at run time
    parse: Callable[[str], T]
    required: ClassVar[bool]

    def accepted_text(self) -> str:
        return self.accepted if isinstance(self.accepted, str) else self.accepted()


@dataclass(frozen=True)
class RequiredVar(ChildVar[T]):
    """A variable the host always sets for the plugins that read it: unset is an error."""

    required: ClassVar[bool] = True


@dataclass(frozen=True)
class OptionalVar(ChildVar[T]):
    """A variable the host sets only where a feature is on: unset or empty reads as None."""

    required: ClassVar[bool] = False

    def as_required(self) -> RequiredVar[T]:
        """The same variable, for a reader that only runs where the feature is on."""
        return RequiredVar(self.name, self.accepted, self.parse)


def _backend(text: str) -> Backend:
    return backends.get(text)


def _backends() -> str:
    return "one of: " + ", ".join(backends.registry().accepted())


def _run_dir(text: str) -> Path:
    path = Path(text)
    if not text or not path.is_dir():  # Path("") is the working directory
        raise ValueError("not a directory")
    return path


def _timer(text: str) -> str:
    if text not in TIMERS:
        raise ValueError("unknown timer")
    return text


def _graph_timer(text: str) -> str:
    if text not in GRAPH_TIMERS:
        raise ValueError("unknown graph timer")
    return text


def _positive_int(text: str) -> int:
    if not (text.isascii() and text.isdigit()) or int(text) < 1:
        raise ValueError("not a whole number of at least 1")
    return int(text)


def _share(text: str) -> tuple[int, int]:
    share = parse_share(text)
    if share is None:
        raise ValueError("empty")
    return share


def _file(text: str) -> Path:
    path = Path(text)
    if not text or not path.is_file():
        raise ValueError("not a file")
    return path


def _flag(text: str) -> bool:
    if text not in ("0", "1"):
        raise ValueError("not 0 or 1")
    return text == "1"


BACKEND = RequiredVar(BACKEND_VAR, _backends, _backend)
RUN_DIR = RequiredVar(RUN_DIR_VAR, "the run directory, an existing directory", _run_dir)
TIMER = RequiredVar(TIMER_VAR, "one of: " + ", ".join(TIMERS), _timer)
GRAPH_TIMER = OptionalVar(GRAPH_TIMER_VAR, "one of: " + ", ".join(GRAPH_TIMERS), _graph_timer)
REPEAT = RequiredVar(REPEAT_VAR, "a whole number of at least 1", _positive_int)
COMPILE_WORKERS = RequiredVar(COMPILE_WORKERS_VAR, "a whole number of threads of at least 1",
                              _positive_int)
WARMUP_SHARE = OptionalVar(WARMUP_SHARE_VAR, "I/N with 0 <= I < N", _share)
SHARD_SHARE = WARMUP_SHARE.as_required()  # where only a shard reads it
WARMUP_CLAIMS = OptionalVar(WARMUP_CLAIMS_VAR, "a directory path", Path)
REPLAY = OptionalVar(REPLAY_VAR, "an existing winners file", _file)
REPLAY_STRICT = OptionalVar(REPLAY_STRICT_VAR, "0 or 1", _flag)
# The boundary's only variable a caller hands down to a run's pytest (a parallel warmup to its
# shards); plugin_plan.boundary_env writes every other one from Settings.
INHERITED = frozenset({WARMUP_CLAIMS_VAR})


@overload
def read(var: RequiredVar[T], reader: str, error: Callable[[str], Exception] = ...,
         environ: Mapping[str, str] | None = ...) -> T: ...


@overload
def read(var: OptionalVar[T], reader: str, error: Callable[[str], Exception] = ...,
         environ: Mapping[str, str] | None = ...) -> T | None: ...


def read(var: ChildVar[T], reader: str, error: Callable[[str], Exception] = BoundaryError,
         environ: Mapping[str, str] | None = None) -> T | None:
    """Read `var` from `environ` (default os.environ) as the host wrote it.

    A required variable that is unset, or any variable whose value `parse` rejects, raises
    `error` (a plugin passes pytest.UsageError, which pytest prints as one line) naming the
    variable, the value, `reader` (who needs it) and what is accepted. An optional variable
    that is unset or empty reads as None: its feature is off. Nothing is ever defaulted.
    """
    environ = os.environ if environ is None else environ
    value = environ.get(var.name)
    if value is None or (value == "" and not var.required):
        if not var.required:
            return None
        raise error(f"{var.name} is not set: {reader} needs {var.accepted_text()}; the "
                    "harness sets it (start the benchmark with `harness run`)")
    try:
        return var.parse(value)
    except (ValueError, HarnessError):
        raise error(f"{var.name}={value!r}: {reader} needs {var.accepted_text()}") from None


# pytest's own: options it adds to every session's command line. The benchmark's session is the
# command the harness prints and the receipt pins; PYTEST_ADDOPTS=--junitxml=F exported for an
# outer test run reached every benchmark session, each rewriting F, and -x or -k there would
# change what is timed unseen.
NOT_INHERITED = frozenset({"PYTEST_ADDOPTS"})


def inherited(environ: Mapping[str, str]) -> dict[str, str]:
    """The caller's environment for a run's pytest: its own variables (a vendor toolchain's
    must reach the benchmark), less NOT_INHERITED, and of the boundary's (PREFIX) only those
    INHERITED allows.

    A stale ZL_PLUGIN_AUTOTUNE_REPLAY exported in a shell would otherwise pin another run's
    winners in a run that replays nothing; by the allow-list, a variable a plugin reads in
    future is dropped until the host sets it or INHERITED names it.
    """
    return {k: v for k, v in environ.items() if k not in NOT_INHERITED
            and (not k.startswith(PREFIX) or k in INHERITED)}
