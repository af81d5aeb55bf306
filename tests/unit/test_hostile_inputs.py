"""Inputs a hostile pass found: each one a line naming the value, never a traceback."""

from __future__ import annotations

import pytest

from harness import cli
from harness.errors import EXIT_USAGE, UsageError
from harness.settings import spec, variables

LONG = "n" * 300  # one component past NAME_MAX (255 bytes): no file system opens it


@pytest.mark.parametrize("flag", ["--out", "--noise-from", "--walls-from", "--replay-from",
                                  "--flaggems-dir", "--shape-file", "--ops-file", "--resume"])
def test_a_path_variable_with_a_component_past_name_max_is_refused_as_it_is_read(flag, tmp_path):
    var = next(v for v in variables.TABLE if v.flag == flag)
    with pytest.raises(UsageError, match="is 300 bytes; expected a path whose every component"):
        var.lookup({var.dest: f"{tmp_path}/{LONG}"}, {})


def test_an_out_past_path_max_with_what_a_run_adds_is_refused(tmp_path):
    var = spec.VARS_BY_MAKE["OUT"]
    deep = "/".join(["d" * 250] * 14)  # every component fits; the whole (3.5 kB + 600) does not
    with pytest.raises(UsageError, match="with the 600 a run adds under it"):
        var.lookup({}, {"ZL_OUT": f"{tmp_path}/{deep}"})
    assert var.lookup({}, {"ZL_OUT": str(tmp_path)}) == (str(tmp_path), "env")


@pytest.mark.parametrize("argv", [["summary"], ["report"], ["receipt", "verify"],
                                  ["history", "import"]])
def test_a_command_given_a_name_too_long_prints_one_line(argv, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # history's default store is runs/ here
    assert cli.main([*argv, str(tmp_path / LONG)]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "File name too long; expected a path whose every" in err
    assert "Traceback" not in err and str(tmp_path)[:40] in err


def test_a_symbolic_link_loop_read_as_a_run_prints_one_line(tmp_path, capsys):
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    assert cli.main(["receipt", "verify", str(tmp_path / "a")]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(tmp_path / "a") in err, err
