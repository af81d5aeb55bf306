"""A run's state from pytest's code, its rows and the outcomes plugin's counts."""

from __future__ import annotations

import pytest

from harness.run.ending import RunEnd, decide


def counts(passed=0, failed=0, skipped=0, reasons=()):
    return {"collected": passed + failed + skipped, "passed": passed, "failed": failed,
            "skipped": skipped, "skip_reasons": list(reasons)}


def test_rows_read_ok():
    assert decide(0, 6, counts(passed=1)) == RunEnd("ok", None, 0)


@pytest.mark.parametrize("rc", [0, 4, 5])
def test_every_test_skipped_reads_skipped_with_pytests_reason_and_exits_0(rc):
    # Regression: FlagGems' test_inplace_fused_experts ("vLLM not installed") read ok, 0 rows;
    # a node of a module skipped as a whole exits 4 ("found no collectors").
    end = decide(rc, 0, counts(skipped=1, reasons=["vLLM not installed"]))
    assert end == RunEnd("skipped", "vLLM not installed", 0)


def test_a_skip_beside_a_passing_test_is_not_a_skipped_run():
    assert decide(0, 3, counts(passed=1, skipped=1, reasons=["x"])).state == "ok"


def test_a_session_cut_short_after_some_rows_is_failed_naming_what_is_missing():
    # Regression: a benchmark that called os._exit(0) after its float32 rows, before
    # bfloat16, read ok with the rows it had and nothing said rows were missing.
    found = {**counts(), "collected": 1, "running": "benchmark/test_cut.py::test_cut",
             "finished": False}
    end = decide(0, 3, found, dtypes=["float32"] * 3)
    assert end == RunEnd("failed", "cut short: pytest exited 0 without finishing its session "
                         "inside benchmark/test_cut.py::test_cut (os._exit or a killed child); "
                         "the rest of its rows are missing, and the 3 it had (float32) are "
                         "kept, never compared", 1, partial=True)
    assert decide(0, 3, None).partial and decide(0, 3, None).state == "failed"
    assert decide(1, 3, found).partial  # os._exit(1): failed as before, its rows partial too
    assert not decide(0, 3, {**counts(passed=1), "finished": True}).partial


def test_no_outcomes_and_no_rows_after_exit_0_is_failed():
    # Regression: a benchmark that called os._exit(0) read ok with 0 rows.
    end = decide(0, 0, None)
    assert (end.state, end.exit_code) == ("failed", 1) and end.reason.startswith("0 rows")


@pytest.mark.parametrize(("found", "why"), [
    (counts(), "0 rows: pytest ran no test"),
    (counts(passed=2), "0 rows: 2 test(s) passed and recorded no result"),
])
def test_exit_0_without_rows_is_failed_with_why(found, why):
    assert decide(0, 0, found) == RunEnd("failed", why, 1)


def test_a_warmup_share_legitimately_has_no_rows():
    assert decide(0, 0, counts(passed=1), times_nothing=True).state == "ok"


@pytest.mark.parametrize(("rc", "state", "why"), [
    (1, "failed", "1 test(s) failed"), (4, "error", "pytest exit code 4"),
    (-9, "crashed", "killed by SIGKILL"), (-11, "crashed", "killed by SIGSEGV")])
def test_other_codes_pass_through(rc, state, why):
    assert decide(rc, 0, counts(failed=1) if rc == 1 else None) == RunEnd(state, why, rc)


def test_a_failure_names_its_first_exception_line():
    found = {**counts(failed=1), "failure_reasons": ["MemoryError: probe oom"]}
    assert decide(1, 0, found).reason == "1 test(s) failed: MemoryError: probe oom"
    missing = {**counts(), "failed": 1, "failure_reasons": ["ModuleNotFoundError: No module x"]}
    assert decide(4, 0, missing).reason == "pytest exit code 4: ModuleNotFoundError: No module x"
