"""A full device (ENOSPC, EDQUOT) met by an atomic write, a command, a campaign's driver, a
unit or the report: one line, exit 3, the campaign interrupted and resumable."""

from __future__ import annotations

import errno
import json
import os
import sys

import pytest

from harness import cli, fsutil
from harness.axes import Axis
from harness.campaign import document, driver, nospace, plan
from harness.campaign import unit as ab_unit
from harness.errors import EXIT_PREFLIGHT, NoSpace, no_space
from harness.executors.local import LocalExecutor
from harness.settings import spec
from tests.campaigns import one_op_campaign


def settings(**flags):
    return spec.resolve({"backend": "cpu", **flags}, {}, which=lambda _: None)


def _full(code=errno.ENOSPC):
    return OSError(code, os.strerror(code))


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT])
def test_a_failed_atomic_write_names_its_file_and_leaves_no_temporary_file(tmp_path, monkeypatch,
                                                                           code):
    target = tmp_path / "campaign.json"
    target.write_text("old\n")

    def fchmod(fd, mode):
        raise _full(code)

    monkeypatch.setattr(os, "fchmod", fchmod)
    with pytest.raises(NoSpace) as info:
        fsutil.atomic_write_text(target, "new\n")
    assert info.value.exit_code == EXIT_PREFLIGHT and info.value.path == target
    assert str(info.value) == (f"no space left on device writing {str(target)!r}: free space, "
                               "then run it again")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["campaign.json"]
    assert target.read_text() == "old\n"  # the previous file stays whole


def test_a_device_that_refuses_even_the_temporary_file_is_no_space(tmp_path, monkeypatch):
    def mkstemp(**kwargs):
        raise _full()

    monkeypatch.setattr(fsutil.tempfile, "mkstemp", mkstemp)
    with pytest.raises(NoSpace, match="campaign.json"):
        fsutil.atomic_write_text(tmp_path / "campaign.json", "x")


def test_other_write_errors_stay_what_they_are(tmp_path, monkeypatch):
    def fchmod(fd, mode):
        raise PermissionError(errno.EACCES, "denied")

    monkeypatch.setattr(os, "fchmod", fchmod)
    with pytest.raises(PermissionError):
        fsutil.atomic_write_text(tmp_path / "f", "x")
    assert list(tmp_path.iterdir()) == []
    assert no_space(PermissionError(errno.EACCES, "denied")) is None
    assert no_space(OSError(errno.EDQUOT, "quota", "/x")).path == "/x"


@pytest.mark.parametrize("command", ["run", "batch"])
def test_run_and_batch_on_a_full_device_print_one_line_and_exit_3(monkeypatch, capsys, command):
    # Regression: a full filesystem read as a traceback and exit 1.
    def full(args):
        raise OSError(errno.ENOSPC, "No space left on device", "/runs/add/x/results.csv")

    monkeypatch.setattr(cli, f"_cmd_{command}", full)
    assert cli.main([command, "--backend", "cpu"]) == EXIT_PREFLIGHT
    err = capsys.readouterr().err
    assert err == ("error: no space left on device writing '/runs/add/x/results.csv': free "
                   "space, then run it again\n")


def test_a_unit_on_a_full_device_stops_at_once_and_names_the_resume(tmp_path, monkeypatch):
    doc = _campaign(tmp_path)
    calls = []

    def run_unit(*args, **kwargs):
        calls.append(args)
        raise _full()

    monkeypatch.setattr(ab_unit, "run_preflight", lambda *a, **k: None)
    monkeypatch.setattr(ab_unit, "run_unit", run_unit)
    with pytest.raises(NoSpace) as info:
        ab_unit.run_unit_command(tmp_path, doc.units[0].id, settings(), out=lambda _: None)
    assert str(info.value).endswith(f"free space, then harness ab --resume {tmp_path}")


def test_a_side_that_fills_the_device_does_not_run_the_other(tmp_path, monkeypatch):
    sides = []

    def execute(run_settings, run_plan, **kwargs):
        sides.append(kwargs["step"])
        raise NoSpace(tmp_path / "results.csv")

    monkeypatch.setattr(ab_unit.runner, "execute", execute)
    with pytest.raises(NoSpace):
        ab_unit.run_unit(settings(), {"A": None, "B": None}, tmp_path, plan.Unit("add", 0),
                         Axis("none", None), out=lambda _: None)
    assert sides == ["add/A/r0"]


# --------------------------------------------------------------------------- the driver


def _campaign(tmp_path):
    return one_op_campaign(tmp_path)


def _units(monkeypatch, code: str) -> None:
    def unit_argv(directory, argv, node, unit):
        return [sys.executable, "-c", code]

    monkeypatch.setattr(driver, "unit_argv", unit_argv)


def _fill_at(monkeypatch, first: int, last: float = float("inf")) -> list[int]:
    """The device refuses atomic writes number `first` to `last` (from 1) of this process."""
    real, calls = os.fchmod, []

    def fchmod(fd, mode):
        calls.append(fd)
        if first <= len(calls) <= last:
            raise _full()
        return real(fd, mode)

    monkeypatch.setattr(os, "fchmod", fchmod)
    return calls


def _saved(tmp_path):
    return json.loads((tmp_path / "campaign.json").read_text())


def _drive(tmp_path, doc, lines):
    return driver.drive(tmp_path, doc, settings(), LocalExecutor([None], grace_s=1.0,
                                                                  poll_s=0.01),
                        out=lines.append)


def test_a_unit_that_filled_the_device_interrupts_the_campaign(tmp_path, monkeypatch):
    # Regression: a full filesystem read as a traceback, exit 1, no interrupted marker, and
    # the side caches left behind.
    doc, lines = _campaign(tmp_path), []
    message = ("error: no space left on device writing '/c/add/A/r0/results.csv': free space, "
               "then harness ab --resume /c")
    _units(monkeypatch, f"import sys; print({message!r}, file=sys.stderr); sys.exit(3)")
    with pytest.raises(NoSpace) as info:
        _drive(tmp_path, doc, lines)
    assert str(info.value) == ("no space left on device writing '/c/add/A/r0/results.csv': "
                               f"free space, then harness ab --resume {tmp_path}")
    saved = _saved(tmp_path)
    assert saved["state"] == "interrupted" and saved["interrupted"]["reason"] == "no_space"
    assert [u["status"] for u in saved["units"]] == ["interrupted", "not_run"]
    assert not (tmp_path / "cache").exists()
    assert any(line.startswith("AB_INTERRUPTED reason=no_space path=/c/add/A/r0/results.csv "
                               "step=add/r0 finished_units=- units_left=2 ") for line in lines)
    assert [u.id for u in plan.units_to_run(document.load(tmp_path))] == ["add/r0", "add/r1"]


def test_a_campaign_json_the_driver_cannot_write_interrupts_the_campaign(tmp_path, monkeypatch):
    doc, lines = _campaign(tmp_path), []
    _units(monkeypatch, "pass")
    # 1: state running, 2: add/r0 started, 3: add/r0 ended (refused), 4: the interrupted state
    _fill_at(monkeypatch, 3, 3)
    with pytest.raises(NoSpace, match="campaign.json': free space, then harness ab --resume"):
        _drive(tmp_path, doc, lines)
    saved = _saved(tmp_path)
    assert saved["state"] == "interrupted"
    assert [u["status"] for u in saved["units"]] == ["ok", "not_run"]  # r1 never started
    assert not (tmp_path / "cache").exists()
    assert [p.name for p in tmp_path.glob(".*.tmp")] == []


def test_a_device_that_stays_full_leaves_the_unit_to_rerun(tmp_path, monkeypatch):
    doc, lines = _campaign(tmp_path), []
    _units(monkeypatch, "pass")
    _fill_at(monkeypatch, 3)  # nothing more can be written
    with pytest.raises(NoSpace):
        _drive(tmp_path, doc, lines)
    saved = _saved(tmp_path)
    assert [u["status"] for u in saved["units"]] == ["running", "not_run"]  # not finished
    assert any("campaign.json not updated" in line for line in lines)
    assert [u.id for u in plan.units_to_run(document.load(tmp_path))] == ["add/r0", "add/r1"]
    assert not (tmp_path / "cache").exists()


def test_a_report_the_device_refuses_is_written_by_the_resume(tmp_path, monkeypatch):
    doc, lines = _campaign(tmp_path), []
    _units(monkeypatch, "pass")
    real = driver.finish.finish
    calls = []

    def finish(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise NoSpace(tmp_path / "ab.json")
        return real(*args, **kwargs)

    monkeypatch.setattr(driver.finish, "finish", finish)
    with pytest.raises(NoSpace, match="ab.json"):
        _drive(tmp_path, doc, lines)
    saved = _saved(tmp_path)
    assert saved["state"] == "interrupted"
    assert [u["status"] for u in saved["units"]] == ["ok", "ok"]
    again = document.load(tmp_path)
    _drive(tmp_path, again, lines)  # the resume: nothing to run, the report written
    assert _saved(tmp_path)["state"] == "done" and (tmp_path / "ab.json").is_file()
    assert "interrupted" not in _saved(tmp_path)  # the stop is history


def test_a_run_whose_run_log_cannot_be_written_names_run_log(tmp_path, monkeypatch, capsys):
    # Regression: a write to the open run.log named no file: "writing '-'".
    real = os.write

    def write(fd, data):
        if os.path.basename(os.readlink(f"/proc/self/fd/{fd}")) == "run.log":
            raise _full()
        return real(fd, data)

    monkeypatch.setattr(os, "write", write)
    assert cli.main(["run", "--backend", "cpu", "--op", "tanh", "--out", str(tmp_path)]) == 3
    err = capsys.readouterr().err
    assert err.startswith(f"error: no space left on device writing '{tmp_path}/tanh/")
    assert err.endswith("/run.log': free space, then run it again\n"), err


def test_a_file_past_the_size_limit_is_one_line_naming_the_limit(tmp_path, monkeypatch, capsys):
    # Regression: under `ulimit -f` (Python ignores SIGXFSZ) a write failed with EFBIG, a
    # traceback and exit 1.
    def fchmod(fd, mode):
        raise _full(errno.EFBIG)

    monkeypatch.setattr(os, "fchmod", fchmod)
    with pytest.raises(NoSpace) as info:
        fsutil.atomic_write_text(tmp_path / "campaign.json", "x\n")
    assert str(info.value) == (f"no space left on device writing '{tmp_path}/campaign.json' (a "
                               "file past this process's size limit, ulimit -f): raise the "
                               "limit or free space, then run it again")
    assert info.value.exit_code == EXIT_PREFLIGHT


def test_a_child_stopped_by_the_size_limit_names_its_file_to_the_driver():
    from harness.executors.base import Ended

    said = str(NoSpace("/c/add/A/r0/run_identity.json", limit=True))
    end = Ended("add/r0", "error", rc=EXIT_PREFLIGHT, wall_s=1.0, where="-", reason=said)
    full = nospace.child_full(end)
    assert full is not None and full.path == "/c/add/A/r0/run_identity.json" and full.limit
