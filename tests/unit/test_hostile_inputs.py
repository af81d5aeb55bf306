"""Inputs a hostile pass found: each one a line naming the value, never a traceback."""

from __future__ import annotations

import pytest

from harness import cli
from harness.errors import EXIT_USAGE, UsageError
from harness.settings import abspec, spec, variables

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


# A side variable the axis does not read was silently ignored: A_PYTHON beside a switch, A_IMAGE
# with AXIS=flaggems, A with an A/A.
@pytest.mark.parametrize(("axis", "given", "reads"), [
    ("OMP_NUM_THREADS", {"a_python": "/usr/bin/python3"}, "which reads A, B; unset it"),
    ("OMP_NUM_THREADS", {"bench_ref": "HEAD"}, "which reads A, B; unset it"),
    ("flaggems", {"a_ref": "x", "b_ref": "y", "a_image": "i@sha256:" + "0" * 64},
     "which reads A_REF, B_REF, BENCH_REF; unset it"),
    ("none", {"a": "3"}, "which runs one setting on both sides; unset it"),
    ("python", {"a_python": "/bin/sh", "b_python": "/bin/ls", "b": "2"},
     "which reads A_PYTHON, B_PYTHON; unset it"),
])
def test_a_side_variable_the_axis_does_not_read_is_refused_naming_what_it_reads(axis, given,
                                                                                 reads):
    with pytest.raises(UsageError, match=f"is not read with AXIS={axis}, {reads}"):
        abspec.resolve_ab({"axis": axis, **given}, {})


def test_a_side_variable_from_the_environment_is_named_by_its_environment_name():
    with pytest.raises(UsageError, match="ZL_A_IMAGE='i' is not read with AXIS=none"):
        abspec.resolve_ab({"axis": "none"}, {"ZL_A_IMAGE": "i"})
    assert abspec.resolve_ab({"axis": "X_Y"}, {"ZL_A": "2", "ZL_B": "3"}).b == "3"


@pytest.mark.parametrize(("content", "line", "why"), [
    (b"\x89PNG\xff\xfe\n", 1, "'utf-8' codec can't decode"),
    (b'{"op": "tanh"}\n{"op": "ta', 2, "Unterminated string"),
    (b'\n\n\x00\x00\n', 3, "Expecting value"),
])
def test_summary_of_a_run_whose_results_jsonl_is_corrupt_names_the_file_and_line(
        tmp_path, capsys, content, line, why):
    # Regression: a binary results.jsonl was a UnicodeDecodeError traceback.
    (tmp_path / "results.jsonl").write_bytes(content)
    assert cli.main(["summary", str(tmp_path)]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert f"{str(tmp_path / 'results.jsonl')!r} line {line} is not a result row: {why}" in err


def test_a_repeat_past_the_cap_is_refused():
    # Regression: REPEAT=99999999999999999999 was accepted and timed one shape until killed.
    with pytest.raises(UsageError, match=r"REPEAT \(--repeat\)='99999999999999999999' is not "
                                         "accepted; expected a whole number from 1 to 1000"):
        spec.resolve({"backend": "cpu", "repeat": "99999999999999999999"}, {},
                     which=lambda _: None)
    assert spec.resolve({"backend": "cpu", "repeat": "1000"}, {},
                        which=lambda _: None).repeat == 1000


def test_summary_of_an_interrupted_run_says_so(tmp_path, capsys):
    # Regression: a run stopped by SIGTERM before any row read as an empty table, no word.
    (tmp_path / "results.jsonl").write_text("")
    (tmp_path / "run_identity.json").write_text(
        '{"schema": 1, "status": "interrupted", '
        '"reason": "killed by SIGTERM"}\n')
    assert cli.main(["summary", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"- note: {tmp_path}: the run is interrupted (killed by SIGTERM)" in out, out


@pytest.mark.parametrize(("path", "value", "needle"), [
    (("rounds",), -3, "rounds is -3; expected a number from 1 to 100"),
    (("ops", "tanh", "rounds"), 1000, "ops.tanh.rounds is 1000; expected a number from 0 to 100"),
    (("noise_floor_pct",), 500.0, "noise_floor_pct is 500.0; expected a number from 0 to 25.0"),
    (("noise_floor_pct",), float("nan"), "noise_floor_pct is nan; expected a number from 0"),
])
def test_a_campaign_json_with_a_number_out_of_range_is_refused_naming_the_field(
        tmp_path, path, value, needle):
    # Regression: rounds=-3 resumed as if nothing were wrong, and a noise floor of 500% in a
    # hand-edited campaign.json would read every slowdown "same".
    import json

    from harness.axes import Axis
    from harness.campaign import document, plan

    earlier = plan.new_campaign(directory=tmp_path, axis=Axis("none", None), caliber={},
                                argv=[], ops={"tanh": {"node": "n"}}, rounds=2, walls={},
                                walls_from=None)
    earlier.save(tmp_path)
    doc = json.loads((tmp_path / "campaign.json").read_text())
    here = doc
    for key in path[:-1]:
        here = here[key]
    here[path[-1]] = value
    (tmp_path / "campaign.json").write_text(json.dumps(doc))
    with pytest.raises(UsageError, match="campaign.json: " + needle.replace("(", r"\(")):
        document.load(tmp_path)


def test_a_permission_refused_anywhere_is_one_line_naming_the_path(tmp_path, capsys,
                                                                   monkeypatch):
    # As root no mode bit refuses a read; the error is raised where a user's read would be.
    import errno
    import os

    from harness.report import summary

    def refused(*args, **kwargs):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(tmp_path / "ab.json"))

    monkeypatch.setattr(summary, "load_source", refused)
    (tmp_path / "results.jsonl").write_text("")
    assert cli.main(["summary", str(tmp_path)]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err == (f"error: {str(tmp_path / 'ab.json')!r} is not accepted: Permission denied; "
                   "expected a path this user may read (and write, for an output)\n")


@pytest.mark.parametrize("argv", [["report"], ["receipt", "verify"]])
def test_report_and_receipt_of_a_campaign_without_ab_json_say_why(tmp_path, capsys, argv):
    # Regression: report said "no ab.json ...: give a campaign directory" and receipt verify
    # "no receipt" of a campaign still running or stopped before its report.
    from harness.axes import Axis
    from harness.campaign import plan

    plan.new_campaign(directory=tmp_path, axis=Axis("none", None), caliber={}, argv=[],
                      ops={"tanh": {"node": "n"}}, rounds=2, walls={},
                      walls_from=None).save(tmp_path)
    assert cli.main([*argv, str(tmp_path)]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err == (f"error: campaign {str(tmp_path)!r} stopped before its report: no ab.json "
                   f"(2 not_run); harness ab --resume {tmp_path} completes it\n")


def test_an_unknown_subcommand_lists_only_the_users_commands(capsys):
    # Regression: the choices named the internal ab-unit and slurm-task.
    with pytest.raises(SystemExit) as info:
        cli.main(["nosuchcommand"])
    err = capsys.readouterr().err
    assert info.value.code == EXIT_USAGE and err.count("\n") == 1
    assert "'nosuchcommand' (choose from 'backends'," in err
    assert "ab-unit" not in err and "slurm-task" not in err
    assert "'history'" in err and "'status'" in err and "'publish')" in err
