"""outcomes: the run's tests as passed, failed, skipped, with pytest's reason for each skip."""

from __future__ import annotations

import json

import pytest

from harness.contract.boundary import OUTCOMES_FILE


def outcomes(pytester, monkeypatch, tmp_path, *args: str, leaves: bool = False) -> dict:
    """The run's outcomes file; `leaves`: its test ends the process, so pytest runs in one of
    its own (in this one it would end the test session)."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    monkeypatch.setenv("ZL_PLUGIN_RUN_DIR", str(run_dir))
    run = pytester.runpytest_subprocess if leaves else pytester.runpytest
    run("-p", "harness.plugins.outcomes", *args)
    path = run_dir / OUTCOMES_FILE
    return json.loads(path.read_text()) if path.exists() else {}


def test_a_skip_inside_a_test_is_counted_with_its_reason(pytester, monkeypatch, tmp_path):
    pytester.makepyfile(test_x="""
        import pytest
        def test_x():
            pytest.skip("vLLM not installed")
        def test_y():
            pass
    """)
    found = outcomes(pytester, monkeypatch, tmp_path)
    assert found == {"collected": 2, "passed": 1, "failed": 0, "skipped": 1,
                     "skip_reasons": ["vLLM not installed"], "failure_reasons": [],
                     "running": None, "finished": True}


@pytest.mark.parametrize("node", ["test_x.py", "test_x.py::test_x"])
def test_a_module_skipped_at_collection_counts_as_one_skip(pytester, monkeypatch, tmp_path,
                                                          node):
    pytester.makepyfile(test_x="""
        import pytest
        pytest.skip("vLLM not installed", allow_module_level=True)
        def test_x():
            pass
    """)
    found = outcomes(pytester, monkeypatch, tmp_path, node)
    assert (found["skipped"], found["passed"], found["skip_reasons"]) == (
        1, 0, ["vLLM not installed"])


def test_a_failure_is_counted(pytester, monkeypatch, tmp_path):
    pytester.makepyfile(test_x="def test_x():\n    assert False\n")
    assert outcomes(pytester, monkeypatch, tmp_path)["failed"] == 1


def test_a_process_that_leaves_with_os_exit_says_it_did_not_finish_and_where(
        pytester, monkeypatch, tmp_path):
    # Regression: a benchmark that called os._exit(0) after its float32 rows read ok with the
    # rows it had; its file now says the session never finished, and in which test.
    pytester.makepyfile(test_x="import os\ndef test_a():\n    pass\n"
                               "def test_x():\n    os._exit(0)\n")
    found = outcomes(pytester, monkeypatch, tmp_path, leaves=True)
    assert (found["finished"], found["running"], found["passed"], found["collected"]) == (
        False, "test_x.py::test_x", 1, 2)


def test_a_process_that_leaves_before_collection_ends_writes_no_file(pytester, monkeypatch,
                                                                     tmp_path):
    pytester.makepyfile(test_x="import os\nos._exit(0)\n")
    assert outcomes(pytester, monkeypatch, tmp_path, leaves=True) == {}


@pytest.mark.parametrize(("text", "why"), [
    ("def test_x():\n    raise MemoryError('probe oom')\n", "MemoryError: probe oom"),
    ("import no_such_module_here\ndef test_x():\n    pass\n",
     "ModuleNotFoundError: No module named 'no_such_module_here'"),
])
def test_a_failure_or_a_collection_error_keeps_its_exception_line(pytester, monkeypatch,
                                                                   tmp_path, text, why):
    # Regression: a benchmark that raised MemoryError read "1 test(s) failed", one importing a
    # missing module "pytest exit code 4": the cause was only in the log.
    pytester.makepyfile(test_x=text)
    found = outcomes(pytester, monkeypatch, tmp_path)
    assert (found["failed"], found["failure_reasons"]) == (1, [why])
