"""Each plugin stops with one line naming a missing or malformed harness variable: no default."""

from __future__ import annotations

import pytest

from harness.contract import boundary

BACKEND_READERS = ("device_setup", "timing", "capture")


@pytest.fixture
def valid(pytester, monkeypatch, tmp_path):
    """A throwaway suite, the harness's variables cleared; returns values a run would get."""
    for key, name in vars(boundary).items():
        if key.endswith("_VAR"):
            monkeypatch.delenv(name, raising=False)
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    return {boundary.TIMER_VAR: "direct", boundary.REPEAT_VAR: "1",
            boundary.RUN_DIR_VAR: str(run_dir), boundary.COMPILE_WORKERS_VAR: "2"}


def run(pytester, monkeypatch, plugin, env):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return pytester.runpytest("-p", f"harness.plugins.{plugin}")


def assert_one_line(result, pattern):
    output = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, output
    assert "Traceback" not in output and "INTERNALERROR" not in output
    lines = [line for line in result.stderr.lines if line.strip()]
    assert len(lines) == 1, lines
    result.stderr.fnmatch_lines([pattern])


@pytest.mark.parametrize("plugin", BACKEND_READERS)
def test_regression_a_plugin_without_zl_backend_no_longer_measures_as_cpu(
        pytester, monkeypatch, valid, plugin):
    result = run(pytester, monkeypatch, plugin, valid)
    assert_one_line(result, f"ERROR: ZL_PLUGIN_BACKEND is not set: the {plugin} plugin needs "
                            "one of: *cpu*; the harness sets it (start the benchmark with "
                            "`harness run`)")


@pytest.mark.parametrize("plugin", BACKEND_READERS)
@pytest.mark.parametrize("value", ["nvidiaa", "", "cpu;cuda"])
def test_a_plugin_given_a_bad_backend_names_it_and_the_value(
        pytester, monkeypatch, valid, plugin, value):
    result = run(pytester, monkeypatch, plugin, {**valid, boundary.BACKEND_VAR: value})
    assert_one_line(result,
                    f"ERROR: ZL_PLUGIN_BACKEND={value!r}: the {plugin} plugin needs one of: *")


@pytest.mark.parametrize(("name", "value"), [
    (boundary.TIMER_VAR, None), (boundary.TIMER_VAR, "auto"), (boundary.REPEAT_VAR, None),
    (boundary.REPEAT_VAR, "0"), (boundary.RUN_DIR_VAR, None),
])
def test_the_timing_plugin_refuses_each_missing_or_bad_variable(
        pytester, monkeypatch, valid, name, value):
    env = {**valid, boundary.BACKEND_VAR: "cpu", name: value}
    if value is None:
        del env[name]
    result = run(pytester, monkeypatch, "timing", env)
    said = f"{name} is not set" if value is None else f"{name}={value!r}"
    assert_one_line(result, f"ERROR: {said}: the timing plugin needs *")


def test_a_run_dir_that_is_a_file_is_refused(pytester, monkeypatch, valid, tmp_path):
    (tmp_path / "file").write_text("x")
    env = {**valid, boundary.BACKEND_VAR: "cpu", boundary.RUN_DIR_VAR: str(tmp_path / "file")}
    result = run(pytester, monkeypatch, "timing", env)
    assert_one_line(result, "ERROR: ZL_PLUGIN_RUN_DIR=*file': the timing plugin needs the run "
                            "directory, an existing directory")


@pytest.mark.parametrize("plugin", ["record_log", "outcomes", "autotune", "precompile"])
def test_a_plugin_that_writes_a_side_file_needs_the_run_dir(pytester, monkeypatch, valid, plugin):
    env = {k: v for k, v in valid.items() if k != boundary.RUN_DIR_VAR}
    result = run(pytester, monkeypatch, plugin, env)
    assert_one_line(result, f"ERROR: ZL_PLUGIN_RUN_DIR is not set: the {plugin} plugin needs *")


@pytest.mark.parametrize(("name", "value", "accepted"), [
    (boundary.REPLAY_STRICT_VAR, "yes", "0 or 1"),
    (boundary.REPLAY_VAR, ".", "an existing winners file"),
])
def test_the_autotune_plugin_refuses_a_malformed_optional_variable(
        pytester, monkeypatch, valid, name, value, accepted):
    result = run(pytester, monkeypatch, "autotune", {**valid, name: value})
    assert_one_line(result, f"ERROR: {name}={value!r}: the autotune plugin needs {accepted}")


@pytest.mark.parametrize("value", [None, "", "3/2", "1/2; rm -rf ~"])
def test_a_shard_without_a_valid_share_is_refused(pytester, monkeypatch, valid, value):
    # The plan loads warmup_share only in a shard: without its share it would tune everything.
    env = {**valid, **({} if value is None else {boundary.WARMUP_SHARE_VAR: value})}
    result = run(pytester, monkeypatch, "warmup_share", env)
    said = ("ZL_PLUGIN_WARMUP_SHARE is not set" if value is None
            else f"ZL_PLUGIN_WARMUP_SHARE={value!r}")
    assert_one_line(result, f"ERROR: {said}: the warmup_share plugin needs I/N with 0 <= I < N*")
