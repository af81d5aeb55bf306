"""The steady graph timer against upstream's algorithm on a simulated device that slows down
for a while after each idle gap, as an H200 did for microsecond kernels."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest

from harness.plugins import capture


class SimDevice:
    """One stream: the host queues work, the device runs it in order and idles when it catches
    up. A graph's replay reaches the device once the host has launched all its nodes; after an
    idle gap of over IDLE_MS the device runs `slow` times slower, easing to full speed over
    `ramp_ms` of work."""

    IDLE_MS = 1.0
    current: SimDevice | None = None  # the one the timers' host clock reads

    def __init__(self, call_ms: float, host_call_ms: float = 0.02, node_ms: float = 0.0001,
                 ramp_ms: float = 10.0, slow: float = 1.3) -> None:
        self.call_ms, self.host_call_ms, self.node_ms = call_ms, host_call_ms, node_ms
        self.ramp_ms, self.slow = ramp_ms, slow
        self.host = self.device = 0.0
        self.cold_left = ramp_ms
        self.capturing: list[int] | None = None
        self.syncs = 0
        self.events: list[int] = []  # the synchronize count at each event's record
        self.captured_calls = 0

    def run(self, work_ms: float) -> None:
        if self.device < self.host:  # the device caught up and waited
            if self.host - self.device > self.IDLE_MS:
                self.cold_left = self.ramp_ms
            self.device = self.host
        while work_ms > 0 and self.cold_left > 0:  # in slices, as the clock eases up
            piece = min(work_ms, self.cold_left, self.ramp_ms / 50)
            self.device += piece * (1 + (self.slow - 1) * self.cold_left / self.ramp_ms)
            self.cold_left -= piece
            work_ms -= piece
        self.device += work_ms

    def call(self) -> None:
        self.host += self.host_call_ms
        if self.capturing is not None:
            self.capturing.append(1)
            self.captured_calls += 1
        else:
            self.run(self.call_ms)

    # the device interface the timers use
    def Stream(self) -> object:  # noqa: N802 - torch's spelling
        return object()

    @contextlib.contextmanager
    def stream(self, _s: object) -> Iterator[None]:
        yield

    def synchronize(self) -> None:
        self.syncs += 1
        self.host = max(self.host, self.device)

    def Event(self, enable_timing: bool = True) -> SimEvent:  # noqa: N802
        return SimEvent(self)

    @contextlib.contextmanager
    def graph(self, graph: SimGraph) -> Iterator[None]:
        self.capturing = []
        try:
            yield
        finally:
            graph.calls, self.capturing = len(self.capturing), None

    def graph_class(self) -> type:
        device = self

        class Graph(SimGraph):
            def replay(self) -> None:
                device.host += 0.005 + self.calls * device.node_ms
                device.run(self.calls * device.call_ms)

        return Graph


class SimGraph:
    calls = 0


class SimEvent:
    def __init__(self, device: SimDevice) -> None:
        self.device, self.at = device, 0.0

    def record(self) -> None:
        self.device.run(0.0)
        self.at = self.device.device
        self.device.events.append(self.device.syncs)

    def elapsed_time(self, other: SimEvent) -> float:
        return other.at - self.at


@pytest.fixture(autouse=True)
def _host_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """The timers' host clock is the simulated host's."""
    monkeypatch.setattr(capture.time, "perf_counter",
                        lambda: SimDevice.current.host / 1000 if SimDevice.current else 0.0)


def bench(which: str, device: SimDevice, rep: int = 100) -> float:
    make = capture.steady_graph_bench if which == "steady" else capture.device_graph_bench
    SimDevice.current = device
    return make(device, device.graph_class())(device.call, rep=rep)


@pytest.mark.parametrize("call_ms", [0.0014, 0.0035])
def test_the_steady_timer_reads_the_steady_time_where_upstreams_reads_the_ramp(call_ms):
    steady = bench("steady", SimDevice(call_ms))
    upstream = bench("upstream", SimDevice(call_ms))
    assert steady == pytest.approx(call_ms, rel=0.01)
    assert upstream > call_ms * 1.03  # each timed replay waits for its own launch


def test_on_a_longer_kernel_both_read_the_steady_time():
    # upstream's graph then holds about `rep` of work, and the ramp is a small part of it
    assert bench("steady", SimDevice(0.023)) == pytest.approx(0.023, rel=0.01)
    assert bench("upstream", SimDevice(0.023)) == pytest.approx(0.023, rel=0.01)


def test_its_graph_is_small_and_its_timed_replays_are_queued_without_a_wait():
    device = SimDevice(0.0014)
    bench("steady", device)
    upstream = SimDevice(0.0014)
    bench("upstream", upstream)
    # upstream sizes by eager calls that cost the host's overhead: thousands captured
    assert device.captured_calls <= capture.PROBE_CALLS + capture.GRAPH_MAX_CALLS
    assert upstream.captured_calls > 3 * device.captured_calls
    timed = device.events[-2 * capture.TIMED_GROUPS:]
    assert len(set(timed)) == 1  # no wait between the first timed event and the last
    assert len(set(upstream.events[-20:])) == capture.TIMED_GROUPS  # one wait per replay


def test_a_long_kernel_is_called_a_few_times_not_probed_ten_times():
    device = SimDevice(50.0)  # 50 ms a call
    assert bench("steady", device, rep=100) == pytest.approx(50.0, rel=0.01)
    assert device.captured_calls == 2  # one probe call, one call in the timed graph
    assert device.device < 50.0 * 20  # upstream's ten replays of two calls alone cost 1 s


def test_an_operator_of_costly_host_calls_captures_a_graph_the_budget_affords():
    device = SimDevice(0.001, host_call_ms=5.0)  # a microsecond kernel behind 5 ms of host
    bench("steady", device)
    budget = capture.CAPTURE_BUDGET_MS / 5.0
    assert device.captured_calls <= 1 + budget  # a one-call probe, then the budget's graph


def test_quantiles_and_return_modes_are_triton_s():
    device = SimDevice(0.01)
    timer = capture.steady_graph_bench(device, device.graph_class())
    low, mid = timer(device.call, rep=50, quantiles=[0.2, 0.5])
    assert low <= mid
    assert len(timer(device.call, rep=50, return_mode="all")) == capture.TIMED_GROUPS


def test_a_device_that_idled_long_is_warmed_until_it_is_steady_before_timing():
    # the capture idles the device; it then eases up over 40 ms of work
    device = SimDevice(0.0012, ramp_ms=40.0, slow=1.5)
    assert bench("steady", device) == pytest.approx(0.0012, rel=0.01)


# -- the adaptive timer: upstream's algorithm at the budget a row needs ------------------------

class JitteryDevice(SimDevice):
    """A device whose graph replays alternate between full speed and `slow` times slower."""

    def __init__(self, call_ms: float, slow: float) -> None:
        super().__init__(call_ms, ramp_ms=0.0)
        self.jitter, self.flip = slow, False

    def graph_class(self) -> type:
        device, base = self, super().graph_class()

        class Graph(base):  # type: ignore[misc,valid-type]
            def replay(self) -> None:
                device.flip = not device.flip
                saved = device.call_ms
                device.call_ms = saved * (device.jitter if device.flip else 1.0)
                try:
                    super().replay()
                finally:
                    device.call_ms = saved

        return Graph


def adaptive(device: SimDevice, rep: int = 100) -> float:
    SimDevice.current = device
    timer = capture.adaptive_graph_bench(device, device.graph_class())
    return timer(device.call, rep=rep, return_mode="median")


def test_a_long_call_is_read_from_a_tenth_of_upstreams_replays():
    long_call = SimDevice(0.5, ramp_ms=0.0)  # 500 us a call
    upstream = SimDevice(0.5, ramp_ms=0.0)
    assert adaptive(long_call) == pytest.approx(0.5, rel=1e-3)  # a replay's launch, over 20
    assert bench("upstream", upstream) == pytest.approx(0.5, rel=1e-3)
    # upstream: a graph of 200 calls replayed ten times; here 20 calls, ten times
    assert upstream.captured_calls == 200
    assert long_call.captured_calls == 20
    assert long_call.device < upstream.device / 5


def test_a_microsecond_call_gets_upstreams_whole_budget_and_reads_as_upstream():
    # on a device without a ramp: the first graph's replays warm a device that has one
    short, upstream = SimDevice(0.0014, ramp_ms=0.0), SimDevice(0.0014, ramp_ms=0.0)
    assert adaptive(short) == pytest.approx(bench("upstream", upstream), rel=1e-6)
    # its eager estimate (the host's launches) is long, so a first graph was tried; the row is
    # then timed with upstream's graph, whose size is the budget over that same estimate
    assert short.captured_calls == pytest.approx(upstream.captured_calls * 1.1, abs=2)


def test_a_call_the_eager_estimate_already_says_is_short_captures_one_graph():
    device = SimDevice(0.001, host_call_ms=0.0001)  # launches cheaper than the kernel
    upstream = SimDevice(0.001, host_call_ms=0.0001)
    adaptive(device)
    bench("upstream", upstream)
    assert device.captured_calls == upstream.captured_calls


def test_a_long_calls_budget_follows_its_duration_not_its_noise():
    # a budget chosen by one side's noise could differ between the two sides of a row
    steady, jittery = SimDevice(0.2, ramp_ms=0.0), JitteryDevice(0.2, slow=1.05)
    adaptive(steady)
    adaptive(jittery)
    assert steady.captured_calls == jittery.captured_calls == 50  # 10 ms of 200 us calls
