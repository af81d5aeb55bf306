"""device_setup: refuses a flag_gems that dispatches to another vendor; records runtime facts."""

from __future__ import annotations

import json

import pytest

from harness.plugins.device_setup import vendor_mismatch


def fake_flag_gems(pytester, vendor):
    pytester.makepyfile(flag_gems=f"vendor_name = {vendor!r}\n__version__ = '9.9'\n")
    pytester.syspathinsert()
    pytester.makepyfile(test_x="def test_x():\n    pass\n")


def test_mismatch_is_a_usage_error_naming_both_vendors(pytester, monkeypatch):
    fake_flag_gems(pytester, "mthreads")
    monkeypatch.setenv("ZL_PLUGIN_BACKEND", "cuda")
    result = pytester.runpytest("-p", "harness.plugins.device_setup")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*vendor_name is 'mthreads' but BACKEND=cuda expects 'nvidia'*"])


def test_matching_vendor_runs_and_writes_runtime_facts(pytester, monkeypatch, tmp_path):
    fake_flag_gems(pytester, "cpu-vendor")
    monkeypatch.setenv("ZL_PLUGIN_BACKEND", "cpu")  # no expected vendor: any flag_gems passes
    monkeypatch.setenv("ZL_PLUGIN_RUN_DIR", str(tmp_path))
    result = pytester.runpytest("-p", "harness.plugins.device_setup")
    result.assert_outcomes(passed=1)
    facts = json.loads((tmp_path / "runtime.json").read_text())
    assert facts["vendor_name"] == "cpu-vendor" and facts["flag_gems"] == "9.9"
    assert facts["torch"]


def test_vendor_mismatch_is_silent_when_it_matches_or_nothing_is_expected():
    assert vendor_mismatch("nvidia", "nvidia", "cuda") is None
    assert vendor_mismatch(None, "anything", "cpu") is None
    assert "expects 'mthreads'" in vendor_mismatch("mthreads", "nvidia", "musa")
