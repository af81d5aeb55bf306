"""Clocks beside each row: the NVML reader through ctypes (a fake library), the throttle rule,
the rows' clocks in results, and the A/B flag where the sides' clocks differ."""

from __future__ import annotations

import ctypes
import json

import pytest

from harness import backends
from harness.backends import Clocks, nvml
from harness.contract.boundary import (
    CLOCKS_DIFFER,
    CLOCKS_THROTTLED_MARKER,
    CLOCKS_UNREAD_MARKER,
    FLAG_MARKERS,
    NO_DEVICE_WORK,
)
from harness.contract.results import Row, flat_clocks, merge_timing, read_results
from harness.errors import UsageError
from harness.plugins import phases
from harness.report import comparison
from harness.report.sources import Source


class FakeNvml:
    """libnvidia-ml.so.1 as ctypes sees it: functions writing through their last pointer."""

    def __init__(self, sm=1980, mem=2619, temp=41, pstate=0, throttle=0x1, init_rc=0,
                 event_reasons_only=False):
        self.values = {nvml.NVML_CLOCK_SM: sm, nvml.NVML_CLOCK_MEM: mem}
        self.temp, self.pstate, self.reasons, self.init_rc = temp, pstate, throttle, init_rc
        self.handles: list[object] = []
        name = nvml.THROTTLE_FUNCTIONS[1 if event_reasons_only else 0]
        setattr(self, name, self._throttle)

    @staticmethod
    def _put(pointer, value) -> int:
        pointer._obj.value = value
        return nvml.NVML_SUCCESS

    def nvmlInit_v2(self):
        return self.init_rc

    def nvmlDeviceGetHandleByIndex_v2(self, index, pointer):
        self.handles.append(index.value)
        return self._put(pointer, 100 + index.value)

    def nvmlDeviceGetHandleByUUID(self, uuid, pointer):
        self.handles.append(uuid)
        return self._put(pointer, 7)

    def nvmlDeviceGetClockInfo(self, handle, kind, pointer):
        return self._put(pointer, self.values[kind])

    def nvmlDeviceGetTemperature(self, handle, sensor, pointer):
        assert sensor == nvml.NVML_TEMPERATURE_GPU
        return self._put(pointer, self.temp)

    def nvmlDeviceGetPerformanceState(self, handle, pointer):
        return self._put(pointer, self.pstate)

    def _throttle(self, handle, pointer):
        assert isinstance(pointer._obj, ctypes.c_ulonglong)
        return self._put(pointer, self.reasons)


def test_reader_reads_every_field_and_keeps_only_the_slowdown_bits():
    lib = FakeNvml(throttle=0x1 | 0x4 | 0x40)  # idle, software power cap, hardware thermal
    reader = nvml.open_clocks(None, 0, load=lambda name: lib)
    assert callable(reader)
    assert reader() == Clocks(sm_mhz=1980, mem_mhz=2619, temp_c=41, pstate=0, throttle=0x40)
    # an H200 under a long kernel reports its power cap: its steady state, not a throttle
    for steady in (0x1, 0x4, 0x1 | 0x4 | 0x2):
        assert nvml.open_clocks(None, 0, load=lambda n, m=steady: FakeNvml(throttle=m))(
            ).throttle == 0


def test_the_renamed_throttle_function_is_used_where_the_old_name_is_missing():
    lib = FakeNvml(throttle=0x20, event_reasons_only=True)
    assert not hasattr(lib, nvml.THROTTLE_FUNCTIONS[0])
    assert nvml.open_clocks(None, 0, load=lambda n: lib)().throttle == 0x20


@pytest.mark.parametrize("visible, ordinal, handle", [
    (None, 1, 1), ("3,5", 1, 5), (" 2 ", 0, 2), ("GPU-1234-abcd,4", 0, b"GPU-1234-abcd")])
def test_the_device_is_found_by_its_visible_entry_not_the_process_ordinal(visible, ordinal,
                                                                         handle):
    lib = FakeNvml()
    assert callable(nvml.open_clocks(visible, ordinal, load=lambda n: lib))
    assert lib.handles == [handle]


def test_without_the_library_or_the_device_the_opener_says_why():
    def missing(name):
        raise OSError(f"{name}: cannot open shared object file")

    assert "libnvidia-ml.so.1 not loaded" in nvml.open_clocks(None, 0, load=missing)
    assert "nvmlInit_v2 failed" in nvml.open_clocks(None, 0, load=lambda n: FakeNvml(init_rc=9))
    assert "'0,1'" in nvml.open_clocks("0,1", 2, load=lambda n: FakeNvml())


def test_cpu_reads_no_clocks_and_says_nothing_while_cuda_tries_nvml():
    assert backends.get("cpu").open_clocks(None, 0) == ""
    assert phases.open_reader(backends.get("cpu"), 0) == (None, "")
    assert backends.get("cuda").open_clocks is nvml.open_clocks


def test_a_reader_that_raises_costs_the_reading_only():
    def broken():
        raise RuntimeError("driver went away")

    assert phases.read(broken) is None and phases.read(None) is None


def read(sm=1980, throttle=0):
    return {"sm_mhz": sm, "mem_mhz": 2619, "temp_c": 40, "pstate": 0, "throttle": throttle}


@pytest.mark.parametrize("reads, expected", [
    ([read(), read()], False),
    ([read(), read(throttle=0x4)], True),  # a software power cap at the end
    ([read(1980), read(1881)], False),  # 5.0%: not more than the limit
    ([read(1980), read(1870)], True),  # 5.9%
    ([None, None], False),  # nothing read: nothing to say
    ([read(sm=None), read(sm=None)], False),
])
def test_a_row_is_throttled_by_a_reason_or_a_clock_that_moved_more_than_5_percent(reads,
                                                                                  expected):
    assert phases.throttled(reads) is expected
    assert CLOCKS_THROTTLED_MARKER in FLAG_MARKERS


def test_rows_keep_their_clocks_through_results_jsonl():
    record = {"op": "tanh", "dtype": "torch.float16", "shape": "[[64, 64]]", "timer": "graph",
              "markers": [], "samples": [0.01], "samples_base": [0.02],
              "clocks": {"before": read(1980), "after": read(1965)}}
    row = Row("tanh", "torch.float16", "[[64, 64]]", "SUCCESS", 0.02, 0.01, 2.0)
    (merged,) = merge_timing([row], [record], "graph")
    assert merged.clock("sm_mhz_before") == 1980 and merged.clock("sm_mhz_after") == 1965
    again = Row.from_dict(merged.to_dict())
    assert again == merged and again.to_dict()["clocks"]["temp_c_after"] == 40
    assert hash(again) == hash(merged)
    assert flat_clocks(None) == () and Row.from_dict(row.to_dict()).clocks == ()


def source(label: str, sm: int | None) -> Source:
    clocks = {} if sm is None else {"sm_mhz_before": sm, "sm_mhz_after": sm}
    rows = [Row("tanh", "torch.float16", "[[64, 64]]", "SUCCESS", 0.02, 0.010, 2.0,
                timer="graph", clocks=clocks),
            Row("tanh", "torch.float16", "[[4096]]", "SUCCESS", 0.02, 0.010, 2.0,
                timer="graph")]
    return Source(label=label, kind="run", rows=tuple(rows))


def test_ab_flags_a_row_whose_sides_clocks_differ_by_more_than_5_percent():
    report = comparison.compare([source("a", 1980)], [source("b", 1800)])
    flags = {r.shape: r.flags for r in report.rows}
    assert flags == {"[[64, 64]]": (CLOCKS_DIFFER,), "[[4096]]": ()}
    assert {r.shape: r.stats.verdict.value for r in report.rows}["[[64, 64]]"] == "flagged"
    same = comparison.compare([source("a", 1980)], [source("b", 1900)])
    assert all(r.flags == () for r in same.rows)
    unread = comparison.compare([source("a", 1980)], [source("b", None)])
    assert all(r.flags == () for r in unread.rows)


def view_source(label: str, ms: float) -> Source:
    rows = [Row("unbind", "torch.float16", "[[2, 3], 0]", "SUCCESS", None, ms, None,
                timer="graph"),
            Row("unbind", "torch.float16", "[[4096, 4096], 0]", "SUCCESS", None, 0.02, None,
                timer="graph")]
    return Source(label=label, kind="run", rows=tuple(rows))


def test_a_row_whose_calls_ran_no_kernel_on_either_side_is_flagged_not_judged():
    # FlagGems' unbind is a view: its captured graph is empty and replays in about 5 ns a
    # call, so an A/A read it -46% to +43% a round on an H100.
    rounds = ([view_source("a", 5.2e-6), view_source("a", 5.3e-6)],
              [view_source("b", 9.6e-6), view_source("b", 3.1e-6)])
    report = comparison.compare(*rounds)
    flags = {r.shape: r.flags for r in report.rows}
    assert flags == {"[[2, 3], 0]": (NO_DEVICE_WORK,), "[[4096, 4096], 0]": ()}
    assert {r.shape: r.stats.verdict.value for r in report.rows}["[[2, 3], 0]"] == "flagged"
    # its ratio is jitter: the geometric means are the timed row's alone (0%, not -29%)
    assert report.geomean_speedup_pct == pytest.approx(0.0, abs=1e-9)
    assert dict(report.op_geomeans)["unbind"].speedup_pct == pytest.approx(0.0, abs=1e-9)
    # and so in every other geometric mean: the campaign's over all its operators, a report
    # read back from ab.json, and each operator's summary, whose worst row is a timed one
    from harness.campaign.compare import campaign_wide
    from harness.report import abjson, suite_report

    wide = campaign_wide(list(report.rows), [], [], 1.0, list(report.op_geomeans))
    assert wide.geomean_speedup_pct == pytest.approx(0.0, abs=1e-9)
    rows = [abjson.row_json(r) for r in report.rows]
    back = abjson.as_report(rows)
    assert back.geomean_speedup_pct == pytest.approx(0.0, abs=1e-9)
    assert dict(back.op_geomeans)["unbind"].speedup_pct == pytest.approx(0.0, abs=1e-9)
    summary = suite_report.operator_summaries(rows, {"unbind": {"rounds": 2}})["unbind"]
    assert summary.geomean_speedup_pct == pytest.approx(0.0, abs=1e-9)
    assert summary.worst is not None and summary.worst.shape == "[[4096, 4096], 0]"
    assert summary.rows == 2  # the row without work is still listed, flagged
    from harness.report import plot, render

    (line,) = plot.operator_lines(report)
    assert (line.rows, line.worst, line.best) == (2, pytest.approx(0.0, abs=1e-9),
                                                  pytest.approx(0.0, abs=1e-9))
    assert render.geomean_line(report).startswith(
        "geometric mean speedup: +0.0% over 1 paired rows (0 flagged; 1 without device work "
        "left out)")
    # work on one side only is a difference, not a row without work
    one = comparison.compare([view_source("a", 5.2e-6)] * 2,
                             [view_source("b", 0.0012), view_source("b", 0.0013)])
    assert all(r.flags == () for r in one.rows)


def rounds_of(label: str, clocks: list[int | None], ms: list[float],
              markers: tuple[str, ...] = ()) -> list[Source]:
    """One Source a round: one row timed at `clocks[i]` MHz (None: unread) in `ms[i]`."""
    return [Source(label=label, kind="run", rows=(Row(
        "tanh", "torch.float16", "[[64, 64]]", "SUCCESS", None, t, None, timer="graph",
        markers=markers, clocks={} if c is None else {"sm_mhz_before": c, "sm_mhz_after": c}),))
        for c, t in zip(clocks, ms, strict=True)]


def test_a_side_at_another_clock_in_a_minority_of_rounds_is_flagged_not_called():
    # B equals A, but ran at 1500 MHz in 4 of 9 rounds and read 32% slower there: compared by
    # each side's median clock this read slower (-11.6%), a false verdict
    low = [1500 if i in (1, 3, 5, 7) else 1980 for i in range(9)]
    a = rounds_of("a", [1980] * 9, [0.010] * 9)
    b = rounds_of("b", low, [0.0132 if c == 1500 else 0.010 for c in low])
    (row,) = comparison.compare(a, b).rows
    assert row.flags == (CLOCKS_DIFFER,) and row.stats.verdict.value == "flagged"
    # each side low in rounds of its own: apart in four of five rounds
    a = rounds_of("a", [1500, 1500, 1980, 1980, 1980], [0.012, 0.012, 0.01, 0.01, 0.01])
    b = rounds_of("b", [1980, 1980, 1500, 1500, 1980], [0.01, 0.01, 0.012, 0.012, 0.01])
    assert comparison.compare(a, b).rows[0].flags == (CLOCKS_DIFFER,)
    # both sides low in the same round: that round's ratio compares one speed
    both = [1500, 1980, 1980]
    assert comparison.compare(rounds_of("a", both, [0.012, 0.01, 0.01]),
                              rounds_of("b", both, [0.012, 0.01, 0.01])).rows[0].flags == ()


def test_clocks_left_unchecked_are_said_and_a_backend_without_clocks_says_nothing():
    read, unread = [1980] * 3, [None] * 3
    ms = [0.01] * 3
    one_sided = comparison.compare(rounds_of("a", read, ms), rounds_of("b", unread, ms))
    assert one_sided.rows[0].flags == ()
    (note,) = [n for n in one_sided.notes if "SM clocks" in n]
    assert "side A alone" in note and CLOCKS_DIFFER in note
    failed = comparison.compare(rounds_of("a", read, ms),
                                rounds_of("b", unread, ms, (CLOCKS_UNREAD_MARKER,)))
    assert any(n.startswith("side B's clock reader read no SM clock") for n in failed.notes)
    assert not any(n.startswith("side A's") for n in failed.notes)
    # the cpu backend reads no clocks and marks no row: nothing to say
    quiet = comparison.compare(rounds_of("a", unread, ms), rounds_of("b", unread, ms)).notes
    assert not [n for n in quiet if "clock" in n]


@pytest.mark.parametrize("value", [float("inf"), 10 ** 400, "1500", 1500.9, True, -1, 1 << 64])
def test_a_clock_no_reader_writes_is_refused_in_one_line(tmp_path, value):
    with pytest.raises(ValueError, match="expected a whole number from 0 to 2\\*\\*64 - 1"):
        Row("tanh", "torch.float16", "[[64]]", "SUCCESS", None, 0.01, None,
            clocks={"sm_mhz_before": value})
    row = Row("tanh", "torch.float16", "[[64]]", "SUCCESS", None, 0.01, None,
              clocks={"sm_mhz_before": 1980, "throttle_after": (1 << 64) - 1})
    line = json.dumps({**row.to_dict(), "clocks": {"sm_mhz_before": value}})
    (tmp_path / "results.jsonl").write_text(line + "\n")
    with pytest.raises(UsageError, match="line 1 is not a result row: clock sm_mhz_before="):
        read_results(tmp_path)
