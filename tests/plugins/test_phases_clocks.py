"""The timing plugin's breakdown and clocks end to end on a simulated device: each row's
seconds by phase, the session's line, the clocks read beside each row and the throttle flag."""

from __future__ import annotations

import json
import textwrap

import pytest

from harness.contract.boundary import CLOCKS_THROTTLED_MARKER, CLOCKS_UNREAD_MARKER, PHASES_FILE
from tests.plugins.test_timing_capture import TANH, device, records, run

__all__ = ["device"]  # the simulated host's fixture, shared with the timing tests

# Gives the musa record a clock reader for this pytest only: FAKE_THROTTLE is its reason mask.
FAKE_CLOCKS = """
    import dataclasses, os

    from harness import backends
    from harness.backends import Clocks

    readings = []

    def opener(visible, ordinal):
        def read():
            readings.append(1)
            if os.environ.get("FAKE_FIRST_FAILS") and len(readings) == 1:
                raise OSError("the process's first reading fails")
            return Clocks(sm_mhz=None if os.environ.get("FAKE_NO_SM") else 1980, mem_mhz=2619,
                          temp_c=40, pstate=0, throttle=int(os.environ.get("FAKE_THROTTLE", "0")))
        return read

    registry = backends.registry()
    registry._by_name["musa"] = dataclasses.replace(registry.get("musa"), open_clocks=opener)
"""


# the timing tests' budgets of a few milliseconds: what is checked here is clocks and
# markers, and the suite's default budgets made each run take half a minute
BRIEF = ("--warmup", "1", "--iter", "2")


def session_lines(run_dir):
    return [json.loads(line) for line in (run_dir / PHASES_FILE).read_text().splitlines()]


def test_graph_rows_split_their_seconds_and_the_session_writes_one_line(pytester, device):
    result = run(pytester, TANH)
    result.assert_outcomes(passed=1)
    rows = records(device)
    assert len(rows) == 8
    for row in rows:
        assert {"inputs", "reference", "warmup", "capture", "replays"} <= set(row["time"])
        assert row["time"]["capture"] > 0 and row["time"]["replays"] > 0
        assert "direct" not in row["time"] and row["clocks"] is None
    (line,) = session_lines(device)
    assert [r["time"] for r in line["rows"]] == [r["time"] for r in rows]
    assert line["phases"]["collection"] > 0 and line["phases"]["teardown"] > 0
    assert line["phases"]["replays"] == pytest.approx(sum(r["time"]["replays"] for r in rows),
                                                      abs=1e-6)
    span = line["ended"] - line["collect_start"]
    assert abs(sum(line["phases"].values()) - span) < 1e-3
    result.stdout.no_fnmatch_line(f"*{CLOCKS_UNREAD_MARKER}*")  # musa reads none, silently


def test_a_failed_capture_charges_the_direct_timer_and_keeps_the_phases(
        pytester, device, monkeypatch):
    monkeypatch.setenv("FAKE_CAPTURE_ERROR", "current_seed is not callable during capture")
    monkeypatch.setenv("FAKE_CAPTURE_FAIL_AT", "4")
    run(pytester, TANH).assert_outcomes(passed=1)
    (fallback,) = [r for r in records(device) if r["markers"]]
    assert fallback["time"]["direct"] > 0 and "replays" not in fallback["time"]


@pytest.mark.slow  # two pytest processes: fake_clocks changes the registry of its process
def test_clocks_are_read_beside_each_row_and_a_throttled_row_is_flagged(
        pytester, device, monkeypatch):
    pytester.makepyfile(fake_clocks=textwrap.dedent(FAKE_CLOCKS))
    result = pytester.runpytest_subprocess(
        TANH, "--level", "core", "--mode", "kernel", *BRIEF, "-s", "-p", "fake_clocks",
        "-p", "harness.plugins.capture", "-p", "harness.plugins.timing")
    result.assert_outcomes(passed=1)
    rows = records(device)
    assert all(r["clocks"]["before"]["sm_mhz"] == 1980 and r["clocks"]["after"]["temp_c"] == 40
               for r in rows)
    assert all(r["markers"] == [] for r in rows)
    (device / "timing.jsonl").unlink()
    monkeypatch.setenv("FAKE_THROTTLE", "4")  # a software power cap
    pytester.runpytest_subprocess(
        TANH, "--level", "core", "--mode", "kernel", *BRIEF, "-s", "-p", "fake_clocks",
        "-p", "harness.plugins.capture", "-p", "harness.plugins.timing").assert_outcomes(passed=1)
    assert all(r["markers"] == [CLOCKS_THROTTLED_MARKER] for r in records(device))


@pytest.mark.slow  # two pytest processes, as above
def test_a_failed_reading_loses_no_other_and_a_reader_that_reads_no_sm_clock_says_so(
        pytester, device, monkeypatch):
    pytester.makepyfile(fake_clocks=textwrap.dedent(FAKE_CLOCKS))
    args = (TANH, "--level", "core", "--mode", "kernel", *BRIEF, "-s", "-p", "fake_clocks",
            "-p", "harness.plugins.capture", "-p", "harness.plugins.timing")
    monkeypatch.setenv("FAKE_FIRST_FAILS", "1")
    pytester.runpytest_subprocess(*args).assert_outcomes(passed=1)
    rows = records(device)  # the first row's first reading failed: its later one stands
    assert all(r["clocks"]["before"]["sm_mhz"] == 1980 and r["markers"] == [] for r in rows)
    (device / "timing.jsonl").unlink()
    monkeypatch.delenv("FAKE_FIRST_FAILS")
    monkeypatch.setenv("FAKE_NO_SM", "1")  # the library answers, but not for the SM clock
    pytester.runpytest_subprocess(*args).assert_outcomes(passed=1)
    assert all(r["markers"] == [CLOCKS_UNREAD_MARKER] for r in records(device))


@pytest.mark.slow  # a pytest process
def test_without_the_management_library_cuda_says_so_once_and_times_as_before(
        pytester, device, monkeypatch):
    monkeypatch.setenv("ZL_PLUGIN_BACKEND", "cuda")
    result = pytester.runpytest_subprocess(TANH, "--level", "core", "--mode", "kernel", *BRIEF,
                                           "-s", "-p", "harness.plugins.capture",
                                           "-p", "harness.plugins.timing")
    result.assert_outcomes(passed=1)
    lines = [x for x in result.stdout.lines if x.startswith(CLOCKS_UNREAD_MARKER)]
    assert len(lines) == 1 and "libnvidia-ml.so.1" in lines[0]
    # every row says its clocks went unread, so that its A/B says which side was not checked
    assert all(r["clocks"] is None and r["markers"] == [CLOCKS_UNREAD_MARKER]
               for r in records(device))
