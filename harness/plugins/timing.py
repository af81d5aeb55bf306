"""Pick the timer, wrap FlagGems' Benchmark.get_latency from outside, record every measurement.

The harness passes ZL_PLUGIN_BACKEND, ZL_PLUGIN_TIMER (graph or direct), ZL_PLUGIN_REPEAT and
ZL_PLUGIN_RUN_DIR.
FlagGems runs with `--mode kernel`; for each latency this plugin either calls FlagGems' own
`get_latency` under `--mode cudagraph` with the capture plugin's graph timer installed as
`triton.testing.do_bench_cudagraph`, or under `--mode kernel` (the direct timer). A capture
failure is classified by the backend: recoverable -> that shape is timed directly and flagged;
fatal -> re-raised; poisoned -> the operator stops, its measured rows are kept, later tests are
skipped. Every row's timer, markers, samples, seconds by phase and the device's clocks read
before and after each call go to ZL_PLUGIN_RUN_DIR/timing.jsonl, which the harness merges into
results; a row timed while the device throttled carries CLOCKS_THROTTLED_MARKER. The session's
seconds by phase go to time_phases.jsonl (harness.plugins.phases). A parallel warmup's shard
times nothing: the plan loads the warmup_share plugin there instead.
"""

from __future__ import annotations

import contextlib
import json
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pytest

from harness.backends import Backend, CaptureVerdict
from harness.contract import boundary
from harness.contract.boundary import (
    CLOCKS_THROTTLED_MARKER,
    CLOCKS_UNREAD_MARKER,
    DENIED_MARKER,
    DIRECT_MARKER,
    POISONED_MARKER,
)
from harness.contract.boundary import TIMING_FILE as SIDECAR
from harness.contract.shape_text import canonical_shape
from harness.plugins import phases
from harness.plugins.capture import GRAPH_BENCH, PHASES, PhaseListener
from harness.plugins.markers import write_marker

READER = "the timing plugin"


class CapturePoisoned(BaseException):
    """Raised past FlagGems' `except Exception`: the device context is unusable."""


@dataclass
class Call:
    """One get_latency call as measured."""

    op: str
    shape: str
    latency: float | None
    timer: str
    samples: list[float]
    arg_dtype: str | None
    markers: list[str] = field(default_factory=list)
    reason: str | None = None
    gap_s: float = 0.0  # since the previous call or the test's start: building its inputs
    seconds: dict[str, float] = field(default_factory=dict)  # by phase (phases.Split)
    clocks: list[dict[str, Any] | None] = field(default_factory=list)  # before, after


def op_key(function_name: str) -> str:
    """The deny-list key of a test: its function name minus `test_` (unique2, perf_sort)."""
    return function_name.removeprefix("test_")


def _first_line(message: str) -> str:
    lines = message.strip().splitlines()
    return (lines[0] if lines else "unknown capture failure")[:200]


def _arg_dtype(args: tuple[Any, ...]) -> str | None:
    for arg in args:
        dtype = getattr(arg, "dtype", None)
        if dtype is not None:
            return str(dtype)
    return None


class Timing:
    """Per-session timing state: the patched methods, pending calls, the poisoned flag."""

    def __init__(self, config: pytest.Config, backend: Backend, timer: str, repeat: int,
                 run_dir: Path | None) -> None:
        self.config = config
        self.backend = backend
        self.timer = timer
        self.repeat = repeat
        self.sidecar = run_dir / SIDECAR if run_dir else None
        self.pending: list[Call] = []
        self.denied: set[str] = set()
        self.poisoned: str | None = None
        self.base: Any = None
        self.current_op = ""  # the deny-list key of the test running now (op_key)
        self._patch = pytest.MonkeyPatch()
        self.session = phases.Session(run_dir)
        self.idle_since = time.perf_counter()  # the last call's end, or the test's start
        self.split = phases.Split()
        self.clocks: Any = None  # the backend's clock reader, opened at the first call
        self.clocks_opened = False
        self.clocks_expected = False  # the backend reads clocks, whether or not its reader opened

    @property
    def graph_bench(self) -> Callable[..., Any]:
        bench = self.config.stash.get(GRAPH_BENCH, None)
        if bench is None:
            raise pytest.UsageError(f"{boundary.TIMER_VAR}=graph needs -p harness.plugins.capture")
        return bench

    # -- output -----------------------------------------------------------------------------
    def marker(self, line: str) -> None:
        write_marker(self.config, line)

    def write_rows(self, rows: list[dict[str, Any]]) -> None:
        if self.sidecar is None or not rows:
            return
        with open(self.sidecar, "a", encoding="utf-8") as fh:
            for row in rows:
                fh.write(json.dumps(row, default=str) + "\n")

    # -- patching FlagGems ------------------------------------------------------------------
    def install(self) -> None:
        """Wrap benchmark.base's Benchmark.get_latency and BenchmarkResult, once collected."""
        base = sys.modules.get(boundary.BASE_MODULE)
        if base is None or not hasattr(base, "Benchmark") or self.base is not None:
            return
        self.base = base
        if self.timer == "graph":
            self.graph_bench  # noqa: B018 -- fail at collection, not in the first test
        original = base.Benchmark.get_latency
        result_cls = base.BenchmarkResult
        timing = self

        def get_latency(bench: Any, op: Any, *args: Any, **kwargs: Any) -> float:
            return timing.measure(original, bench, op, args, kwargs)

        def benchmark_result(*args: Any, **kwargs: Any) -> Any:
            result = result_cls(*args, **kwargs)
            timing.on_result(result)
            return result

        self._patch.setattr(base.Benchmark, "get_latency", get_latency)
        self._patch.setattr(base, "BenchmarkResult", benchmark_result)

    def uninstall(self) -> None:
        self._patch.undo()

    @contextlib.contextmanager
    def _mode(self, name: str) -> Iterator[None]:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(self.base.Config, "mode", self.base.consts.BenchMode[name])
            yield

    @contextlib.contextmanager
    def _graph_timer(self) -> Iterator[None]:
        import triton.testing

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(triton.testing, "do_bench_cudagraph", self.graph_bench)
            with self._mode("CUDAGRAPH"):
                yield

    # -- measuring --------------------------------------------------------------------------
    def _times(self, timer: str, call: Callable[[], float]) -> list[float]:
        samples = []
        for _ in range(self.repeat):
            self.split.enter("warmup" if timer == "graph" else "direct")
            with self._graph_timer() if timer == "graph" else self._mode("KERNEL"):
                samples.append(float(call()))
        return samples

    def _read_clocks(self) -> dict[str, Any] | None:
        if not self.clocks_opened:
            self.clocks_opened = True
            self.clocks, why = phases.open_reader(self.backend, self._ordinal())
            self.clocks_expected = self.clocks is not None or bool(why)
            if why:
                self.marker(f"{CLOCKS_UNREAD_MARKER} reason={json.dumps(why)}")
        return phases.read(self.clocks)

    def _ordinal(self) -> int:
        device: Any = getattr(sys.modules.get("torch"), self.backend.torch_device, None)
        try:
            return int(device.current_device())
        except Exception:
            return 0

    @contextlib.contextmanager
    def _phased(self, record: Call) -> Iterator[None]:
        """Around one call: the device drained first (its inputs' work is theirs), clocks read
        before and after, its seconds split by phase, its end drained too."""
        self._synchronize()
        record.gap_s = time.perf_counter() - self.idle_since
        record.clocks.append(self._read_clocks())
        listener = self.config.stash.get(PHASES, None) or PhaseListener()
        self.split = phases.Split()
        listener.on_phase = self.split.enter
        try:
            yield
        finally:
            listener.on_phase = None
            self._synchronize()
            self.split.enter(None)
            record.seconds = self.split.seconds
            record.clocks.append(self._read_clocks())
            self.idle_since = time.perf_counter()

    def measure(self, original: Callable[..., float], bench: Any, op: Any,
                args: tuple[Any, ...], kwargs: dict[str, Any]) -> float:
        name = str(getattr(bench, "op_name", "?"))
        shape = canonical_shape(bench.record_shapes(*args, **kwargs))
        record = Call(name, shape, None, self.timer, [], _arg_dtype(args))
        current = self.current_op

        def call() -> float:
            return original(bench, op, *args, **kwargs)

        if self.timer == "graph" and current in self.backend.capture_deny_ops:
            record.timer = "direct"
            record.markers.append(DENIED_MARKER)
            if current not in self.denied:
                self.denied.add(current)
                self.marker(f"{DENIED_MARKER} op={current}")
        with self._phased(record):
            self._timed(record, call)
        record.latency = statistics.median(record.samples)
        self.pending.append(record)
        return record.latency

    def _timed(self, record: Call, call: Callable[[], float]) -> None:
        if record.timer == "graph":
            try:
                record.samples = self._times("graph", call)
            except Exception as exc:
                self._capture_failed(record, exc)
        if record.timer == "direct":
            record.samples = self._times("direct", call)

    def _capture_failed(self, record: Call, exc: Exception) -> None:
        verdict, message = self.backend.explain_capture_exception(exc)
        reason = _first_line(message)
        if verdict is CaptureVerdict.FATAL:
            raise exc
        if verdict is CaptureVerdict.POISONED:
            self.marker(f"{POISONED_MARKER} op={record.op} reason={json.dumps(reason)}")
            record.markers.append(POISONED_MARKER)
            record.reason = reason
            self.pending.append(record)
            self.poisoned = record.op
            self.flush_partial()
            raise CapturePoisoned(f"{POISONED_MARKER} op={record.op}: {reason}") from exc
        record.timer, record.reason = "direct", reason
        record.markers.append(DIRECT_MARKER)
        self.marker(f"{DIRECT_MARKER} op={record.op} dtype={record.arg_dtype} "
                    f"shape={json.dumps(record.shape)} reason={json.dumps(reason)}")
        self._synchronize()

    def _synchronize(self) -> None:
        device: Any = getattr(sys.modules.get("torch"), self.backend.torch_device, None)
        with contextlib.suppress(Exception):
            device.synchronize()

    # -- rows -------------------------------------------------------------------------------
    def on_result(self, result: Any) -> None:
        """FlagGems built the result of one dtype: pair its metrics with the pending calls."""
        rows, calls = [], self.pending
        for metric in result.result:
            used = []
            for value in (metric.latency_base, metric.latency):
                if value is not None and calls:
                    used.append(calls.pop(0))
            rows.append(self._row(result.op_name, str(result.dtype),
                                  canonical_shape(metric.shape_detail), used))
        self.pending = []
        self.write_rows(rows)

    def _row(self, op: str, dtype: str, shape: str, used: list[Call],
             **extra: Any) -> dict[str, Any]:
        reads = [r for c in used for r in c.clocks]
        marked = {m for c in used for m in c.markers}
        if phases.throttled(reads):
            marked.add(CLOCKS_THROTTLED_MARKER)
        known = [r for r in reads if r]
        if self.clocks_expected and used and not any(r.get("sm_mhz") for r in known):
            marked.add(CLOCKS_UNREAD_MARKER)  # no reader, or every reading of it failed
        markers = sorted(marked)
        timer = "graph" if used and all(c.timer == "graph" for c in used) else "direct"
        seconds = phases.row_phases([c.gap_s for c in used], [c.seconds for c in used])
        self.session.rows.append({"op": op, "dtype": dtype, "shape": shape, "time": seconds})
        clocks = {"before": known[0], "after": known[-1]} if known else None
        return {"op": op, "dtype": dtype, "shape": shape, "timer": timer, "markers": markers,
                "time": seconds, "clocks": clocks,
                "reason": next((c.reason for c in used if c.reason), None),
                "samples": used[-1].samples if used else [],
                "samples_base": used[0].samples if len(used) > 1 else [],
                "calls": [asdict(c) for c in used], **extra}

    def flush_partial(self) -> None:
        """Poisoned before FlagGems printed this dtype: keep the rows measured so far."""
        groups: list[list[Call]] = []
        for record in self.pending:
            if groups and groups[-1][-1].shape == record.shape and len(groups[-1]) < 2:
                groups[-1].append(record)
            else:
                groups.append([record])
        rows = []
        for group in groups:
            failed = any(POISONED_MARKER in c.markers for c in group)
            complete = len(group) == 2 and not failed
            rows.append(self._row(
                group[0].op, group[0].arg_dtype or "?", group[0].shape, group, partial=True,
                status="FAILED" if failed or not complete else "SUCCESS",
                latency_base_ms=group[0].latency if complete else None,
                latency_ms=group[1].latency if complete else None))
        self.pending = []
        self.write_rows(rows)


TIMING = pytest.StashKey[Timing]()


def pytest_configure(config: pytest.Config) -> None:
    error = pytest.UsageError
    config.stash[TIMING] = Timing(config, boundary.read(boundary.BACKEND, READER, error),
                                  boundary.read(boundary.TIMER, READER, error),
                                  boundary.read(boundary.REPEAT, READER, error),
                                  boundary.read(boundary.RUN_DIR, READER, error))


@pytest.hookimpl(tryfirst=True)
def pytest_collection(session: pytest.Session) -> None:
    session.config.stash[TIMING].session.collect_start = time.monotonic()


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    # trylast: FlagGems' test modules (which import benchmark.base) are all imported by now.
    timing = session.config.stash[TIMING]
    timing.install()
    start = timing.session.collect_start
    if start is not None:
        timing.session.add("collection", time.monotonic() - start)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    timing = item.config.stash[TIMING]
    started = timing.idle_since = time.perf_counter()
    yield
    timing.session.add("tests", time.perf_counter() - started)


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    session.config.stash[TIMING].session.finish_start = time.monotonic()


def pytest_runtest_setup(item: pytest.Item) -> None:
    timing = item.config.stash[TIMING]
    if timing.poisoned:
        pytest.skip(f"{POISONED_MARKER}: {timing.poisoned} left the device context unusable")
    timing.current_op = op_key(getattr(item, "originalname", item.name))


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    timing = config.stash.get(TIMING, None)
    if timing is not None:
        timing.uninstall()
        timing.session.write()
