"""Graph-captured timing through the backend's device interface, with a scratch-RNG guard.

Registered by the harness when the timer is `graph`. It provides the graph timer that the timing
plugin installs as `triton.testing.do_bench_cudagraph` while FlagGems' `--mode cudagraph` path
runs: on a backend whose Triton ships one (`Backend.upstream_graph_bench`), upstream's function
verbatim, so the numbers equal FlagGems' own; elsewhere the same algorithm with its stream,
event, synchronize and graph class taken from
`triton.runtime.driver.active.get_device_interface()` and the backend record. GRAPH_TIMER=adaptive
(the default) runs upstream's algorithm at the budget each row needs (`adaptive_graph_bench`);
GRAPH_TIMER=steady times the device's steady state instead (`steady_graph_bench`). Failures
are not handled here: they propagate to the timing plugin, which classifies them.
"""

from __future__ import annotations

import contextlib
import importlib
import math
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest

from harness.backends import Backend
from harness.contract import boundary

GRAPH_BENCH = pytest.StashKey[Callable[..., Any]]()


class PhaseListener:
    """Where the timing plugin hears a graph timer's capture begin ("capture") and end
    ("replays"): `on_phase` is set around each timed call, None elsewhere."""

    def __init__(self) -> None:
        self.on_phase: Callable[[str], None] | None = None

    def __call__(self, phase: str) -> None:
        if self.on_phase is not None:
            self.on_phase(phase)


PHASES = pytest.StashKey[PhaseListener]()


def _import_dotted(path: str) -> Any:
    module, _, attr = path.rpartition(".")
    return getattr(importlib.import_module(module), attr)


def device_interface() -> Any:
    """The active Triton driver's device interface: the torch device module of the vendor."""
    from triton.runtime import driver

    return driver.active.get_device_interface()


def graph_class(backend: Backend, interface: Any) -> type:
    """The backend's graph class, looked up by its leaf name on the device interface first
    (`torch.<device>.<Graph>` is `interface.<Graph>`), then by its dotted path."""
    dotted = backend.graph_class
    if dotted is None:  # pytest_configure refuses such a backend before any capture
        raise ValueError(f"backend {backend.name!r} has no graph class: it cannot capture")
    found = getattr(interface, dotted.rpartition(".")[2], None)
    return found if found is not None else _import_dotted(dotted)


@contextlib.contextmanager
def rng_guard(interface: Any) -> Iterator[None]:
    """Keep every device generator's state across a capture and its replays.

    Captured RNG ops advance the generator on each replay; restoring the state afterwards keeps
    later shapes' inputs identical to an uncaptured run. Skipped where the interface exposes no
    default_generators.
    """
    generators = getattr(interface, "default_generators", None)
    states = [g.get_state() for g in generators] if generators else []
    try:
        yield
    finally:
        for generator, state in zip(generators or (), states, strict=True):
            generator.set_state(state)


def summarize(times: Sequence[float], quantiles: Sequence[float] | None,
              return_mode: str) -> Any:
    """Triton's summary of per-replay times: quantiles when asked, else min/max/mean/median/all."""
    ordered = sorted(times)
    if quantiles is not None:
        def at(q: float) -> float:
            pos = q * (len(ordered) - 1)
            lo, hi = math.floor(pos), math.ceil(pos)
            return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)
        values = [at(q) for q in quantiles]
        return values[0] if len(values) == 1 else values
    if return_mode == "all":
        return list(times)
    if return_mode == "min":
        return ordered[0]
    if return_mode == "max":
        return ordered[-1]
    if return_mode == "mean":
        return sum(times) / len(times)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def _queued(interface: Any, call: Callable[[], Any], count: int) -> tuple[Any, Any]:
    """`count` calls (a graph's replays) queued between two events, read once synchronized."""
    start, end = interface.Event(enable_timing=True), interface.Event(enable_timing=True)
    start.record()
    for _ in range(count):
        call()
    end.record()
    return start, end


def _repeat_count(rep: float, estimate_ms: float) -> int:
    """Upstream's size of a graph: the calls that fill `rep` ms at `estimate_ms` a call."""
    return 1000 if estimate_ms == 0 else max(1, int(rep / estimate_ms))


def _eager_estimate(interface: Any, fn: Callable[[], Any]) -> float:
    """Upstream's estimate of a call: the mean of five eager calls between two events (for a
    microsecond kernel, the host's launch overhead)."""
    start, end = _queued(interface, fn, 5)
    interface.synchronize()
    return float(start.elapsed_time(end)) / 5


def _captured(interface: Any, graph_cls: type, fn: Callable[[], Any], calls: int,
              grad_to_none: Sequence[Any] | None) -> Any:
    graph = graph_cls()
    with interface.graph(graph):
        for _ in range(calls):
            for x in grad_to_none or ():
                x.grad = None
            fn()
    interface.synchronize()
    return graph


def _replayed(interface: Any, graph: Any, calls: int) -> list[float]:
    """Upstream's ten timed replays, each waited for: ms per call."""
    times = []
    for _ in range(10):
        start, end = _queued(interface, graph.replay, 1)
        interface.synchronize()
        times.append(start.elapsed_time(end) / calls)
    return times


def _prepared(fn: Callable[[], Any], grad_to_none: Sequence[Any] | None) -> None:
    fn()  # warm-up, also compiles
    for x in grad_to_none or ():
        x.detach_()
        x.requires_grad_(True)
        x.grad = None


def device_graph_bench(interface: Any, graph_cls: type) -> Callable[..., Any]:
    """do_bench_cudagraph's algorithm on any device interface with streams, events and graphs."""

    def bench(fn: Callable[[], Any], rep: int = 20, grad_to_none: Sequence[Any] | None = None,
              quantiles: Sequence[float] | None = None, return_mode: str = "mean") -> Any:
        with interface.stream(interface.Stream()):
            _prepared(fn, grad_to_none)
            calls = _repeat_count(rep, _eager_estimate(interface, fn))
            graph = _captured(interface, graph_cls, fn, calls, grad_to_none)
            times = _replayed(interface, graph, calls)
        return summarize(times, quantiles, return_mode)

    return bench


# The adaptive timer's first graph holds a tenth of upstream's budget. On an H200 FlagGems'
# own `--iter 10` kept every row of LONG_CALL_MS or more within 1% of `--iter 100`, and moved
# the 1-3 us rows by 3-10%: those get upstream's whole budget.
PROBE_SHARE = 10
LONG_CALL_MS = 0.005


def adaptive_graph_bench(interface: Any, graph_cls: type) -> Callable[..., Any]:
    """Upstream's algorithm at the budget a row's kernel needs, for GRAPH_TIMER=adaptive (the
    default).

    A graph of `rep / PROBE_SHARE` ms of calls is captured and replayed ten times, as upstream
    replays its own. Where the median call takes LONG_CALL_MS or more, that is the reading: a
    tenth of upstream's replays and captured calls. Otherwise upstream's whole-budget graph is
    captured and timed as upstream times it, so microsecond rows keep FlagGems' budget. The
    first graph is skipped where the eager estimate already says the call is short. The
    budget follows the kernel's duration alone, never its replays' noise: a budget chosen by
    one side's noise could differ between the two sides of a row.
    """

    def bench(fn: Callable[[], Any], rep: int = 20, grad_to_none: Sequence[Any] | None = None,
              quantiles: Sequence[float] | None = None, return_mode: str = "mean") -> Any:
        with interface.stream(interface.Stream()):
            _prepared(fn, grad_to_none)
            estimate = _eager_estimate(interface, fn)
            times: list[float] = []
            if estimate >= LONG_CALL_MS:
                calls = _repeat_count(rep / PROBE_SHARE, estimate)
                times = _replayed(interface, _captured(interface, graph_cls, fn, calls,
                                                       grad_to_none), calls)
            if not times or summarize(times, None, "median") < LONG_CALL_MS:
                calls = _repeat_count(rep, estimate)
                graph = _captured(interface, graph_cls, fn, calls, grad_to_none)
                times = _replayed(interface, graph, calls)
        return summarize(times, quantiles, return_mode)

    return bench


@contextlib.contextmanager
def phases_marked(interface: Any, listener: PhaseListener) -> Iterator[None]:
    """While a graph timer runs, its `interface.graph(...)` capture context tells `listener`
    when the capture begins and ends (upstream's and the harness's timer both capture through
    the device module's `graph`); the context itself is the interface's, unchanged."""
    original = getattr(interface, "graph", None)
    if original is None:
        yield
        return

    @contextlib.contextmanager
    def graph(*args: Any, **kwargs: Any) -> Iterator[Any]:
        listener("capture")
        with original(*args, **kwargs) as value:
            yield value
        listener("replays")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(interface, "graph", graph)
        yield


# The steady timer's graph: about this much device time of calls, and never more calls than
# this (each captured call costs the operator's host overhead, milliseconds for some).
GRAPH_TARGET_MS = 0.5
GRAPH_MAX_CALLS = 1000
CAPTURE_BUDGET_MS = 100.0  # of host time for the timed graph's capture
PROBE_CALLS = 10
TIMED_GROUPS = 10
MAX_GROUP_REPLAYS = 10_000
WARM_MS = 50.0  # of replays queued right before the timed ones


def steady_graph_bench(interface: Any, graph_cls: type) -> Callable[..., Any]:
    """Graph timing of the device's steady state, for GRAPH_TIMER=steady.

    Upstream's algorithm sizes its graph by five eager calls, which for a microsecond kernel
    measure the host's launch overhead, so its graph holds a fraction of `rep`; and it waits for
    each timed replay to end, so each starts on a device that has just idled. On an H200 it read
    microsecond rows 4-7% above this timer, and moved four of five of them further from one
    process to the next (scripts/graph_timer_noise.py; the figures in docs/figures.md).
    Here a small graph (about GRAPH_TARGET_MS of calls, sized by a short graph of up to
    PROBE_CALLS, and no more calls than CAPTURE_BUDGET_MS of host time captures) is replayed
    for WARM_MS, then for about `rep` ms in TIMED_GROUPS groups between events, all queued
    without a wait, so that the device never idles while it is timed.
    """

    def bench(fn: Callable[[], Any], rep: int = 20, grad_to_none: Sequence[Any] | None = None,
              quantiles: Sequence[float] | None = None, return_mode: str = "mean") -> Any:
        def capture(calls: int) -> Any:
            return _captured(interface, graph_cls, fn, calls, grad_to_none)

        with interface.stream(interface.Stream()):
            fn()  # warm-up, also compiles
            start, end = _queued(interface, fn, 1)
            interface.synchronize()
            eager_ms = start.elapsed_time(end)  # at least one call's device time
            probe_calls = max(1, min(PROBE_CALLS, int(GRAPH_TARGET_MS / max(eager_ms, 1e-6))))
            began = time.perf_counter()
            probe = capture(probe_calls)
            host_ms = max((time.perf_counter() - began) * 1000 / probe_calls, 1e-6)
            _queued(interface, probe.replay, 1)
            start, end = _queued(interface, probe.replay, 2)
            interface.synchronize()
            per_call = max(start.elapsed_time(end) / (2 * probe_calls), 1e-6)
            calls = max(1, min(GRAPH_MAX_CALLS, int(GRAPH_TARGET_MS / per_call),
                               int(CAPTURE_BUDGET_MS / host_ms)))
            graph = capture(calls)
            per_group = max(1, min(MAX_GROUP_REPLAYS,
                                   round(rep / (calls * per_call) / (TIMED_GROUPS + 1))))
            # a guard for a device that idled (the host building inputs, a worker between
            # sessions): in an A/A on an H200 the first microsecond row of a session read
            # 1.62 us where the other sides and rounds read 1.04-1.10. It did not cure that:
            # with it, round 0's first rows still read high, at full clocks (docs/figures.md)
            _queued(interface, graph.replay, max(per_group, round(WARM_MS / (calls * per_call))))
            groups = [_queued(interface, graph.replay, per_group) for _ in range(TIMED_GROUPS)]
            interface.synchronize()
            times = [s.elapsed_time(e) / (per_group * calls) for s, e in groups]
        return summarize(times, quantiles, return_mode)

    return bench


def grads_reset_here(kwargs: dict[str, Any]) -> dict[str, Any]:
    """Reset the `grad_to_none` tensors' gradients here and pass the timer none to reset.

    Upstream's timer `detach_()`es those tensors before it captures. FlagGems' backward
    benchmarks time `torch.autograd.grad((out,), xs, ...)` on an `out` built before the call,
    and on an H200 the detached leaves no longer belonged to that graph: every call after the
    warm-up raised "One of the differentiated Tensors appears to not have been used in the graph"
    (embedding_backward, in FlagGems' own `--mode cudagraph` too). `autograd.grad` never writes
    `.grad`, and the timer's reset inside its capture runs at capture time only, so dropping it
    changes no kernel that is timed.
    """
    tensors = kwargs.get("grad_to_none")
    if tensors is None:
        return kwargs
    for tensor in tensors:
        tensor.grad = None
    return {**kwargs, "grad_to_none": None}


ALGORITHMS = {"steady": steady_graph_bench, "adaptive": adaptive_graph_bench}


def graph_bench_for(backend: Backend, listener: PhaseListener | None = None,
                    algorithm: str = "upstream") -> Callable[..., Any]:
    """The graph timer `algorithm` (boundary.GRAPH_TIMERS) of `backend`, wrapped in the RNG
    guard; gradients reset outside it; its captures' begin and end told to `listener`.
    `upstream` is the backend's Triton's own function where it ships one."""
    interface = device_interface()
    if algorithm in ALGORITHMS:
        inner = ALGORITHMS[algorithm](interface, graph_class(backend, interface))
    elif backend.upstream_graph_bench:
        inner = _import_dotted(backend.upstream_graph_bench)
    else:
        inner = device_graph_bench(interface, graph_class(backend, interface))

    def guarded(*args: Any, **kwargs: Any) -> Any:
        with rng_guard(interface), phases_marked(interface, listener or PhaseListener()):
            return inner(*args, **grads_reset_here(kwargs))

    guarded.__wrapped__ = inner  # type: ignore[attr-defined]
    return guarded


def pytest_configure(config: pytest.Config) -> None:
    backend = boundary.read(boundary.BACKEND, "the capture plugin", pytest.UsageError)
    if not backend.can_capture:
        raise pytest.UsageError(f"BACKEND={backend.name} cannot capture graphs; "
                                "harness.plugins.capture does not apply")
    algorithm = boundary.read(boundary.GRAPH_TIMER, "the capture plugin", pytest.UsageError)
    listener = config.stash[PHASES] = PhaseListener()
    config.stash[GRAPH_BENCH] = graph_bench_for(backend, listener, algorithm or "upstream")
