"""A campaign's start and driver: which operators OPS=all names, what a unit's child gets,
a signal mid-campaign, the dry run's first unit, what a resume refuses."""

from __future__ import annotations

import json
import os
import signal
import sys

import pytest

from harness.axes import Axis
from harness.campaign import compare, document, driver, dryrun, ops, plan, result, resume, start
from harness.errors import Interrupted
from harness.executors import procs
from harness.executors.local import LocalExecutor
from harness.report import abjson
from harness.settings import spec
from harness.settings.spec import EMBEDDED_SUITE
from tests.campaigns import one_op_campaign


def settings(**flags):
    return spec.resolve({"backend": "cpu", **flags}, {}, which=lambda _: None)


def test_ops_all_names_every_node_of_the_tree_once():
    found = ops.all_ops(settings())
    assert found == {op: f"benchmark/test_{op}.py::test_{op}"
                     for op in ("add", "mm", "softmax", "sum", "tanh")}
    assert ops.resolve_ops(settings(), {"ops": "all"}, {}) == list(found)


def test_ops_all_gives_a_second_node_of_one_name_its_own_name(tmp_path):
    import shutil

    suite = shutil.copytree(EMBEDDED_SUITE, tmp_path / "s",
                            ignore=shutil.ignore_patterns("__pycache__", "result_*.log"))
    (suite / "benchmark" / "test_add_more.py").write_text(
        "import pytest\n\n\n@pytest.mark.add\ndef test_add_more():\n    pass\n")
    # Regression: the later node was named add-2 (order of enumeration), which OP, OPS and
    # OPS_FILE did not accept; a name now comes from the node's test function.
    found = ops.all_ops(settings(flaggems_dir=str(suite)))
    assert found["add"] == "benchmark/test_add.py::test_add"
    assert found["add_more"] == "benchmark/test_add_more.py::test_add_more"
    assert ops.resolve_nodes(settings(flaggems_dir=str(suite)), list(found)) == found


def test_ops_all_lists_a_file_that_does_not_parse_as_an_operator_that_fails_with_its_error(
        tmp_path):
    import shutil

    suite = shutil.copytree(EMBEDDED_SUITE, tmp_path / "s",
                            ignore=shutil.ignore_patterns("__pycache__", "result_*.log"))
    (suite / "benchmark" / "test_broken.py").write_text("def test_broken(:\n    pass\n")
    # Regression: the file was logged and left out, so a suite run of OPS=all never said so.
    found = ops.all_ops(settings(flaggems_dir=str(suite)))
    assert found["broken"].startswith("PREFLIGHT_FAILED check=test_node detail=benchmark/"
                                      "test_broken.py does not parse as Python (line 1: ")
    assert found["add"] == "benchmark/test_add.py::test_add"
    # The name it printed is taken back by OPS, with the same reason.
    assert ops.resolve_nodes(settings(flaggems_dir=str(suite)), ["broken", "add"]) == {
        "broken": found["broken"], "add": found["add"]}


def test_an_operator_whose_benchmark_does_not_run_dtypes_has_that_reason_before_anything_runs():
    # Regression: the suite's dry run exited 0, and the operator's units then ended error in
    # every run and every resume.
    found = ops.operators(settings(dtypes="bfloat16"), ["tanh", "mm"])
    assert found["tanh"] == "benchmark/test_tanh.py::test_tanh"
    assert found["mm"].startswith("PREFLIGHT_FAILED check=dtypes detail=DTYPES")
    assert "test_mm.py::test_mm declares (of those FlagGems' --dtypes accepts): float32" in (
        found["mm"])
    assert ops.operators(settings(), ["mm"]) == {"mm": "benchmark/test_mm.py::test_mm"}


def test_a_campaign_stores_every_setting_as_flags_so_a_resume_repeats_them(monkeypatch):
    env = {"SHAPE_MODE": "file", "SHAPE_FILE": "/s.yaml", "ZL_DEVICES": "3", "OP": "mm"}
    base = spec.resolve({"backend": "cpu", "level": "core"}, env, which=lambda _: None)
    argv = start.settings_argv(base)
    assert argv[:2] == ["--backend", "cpu"]
    assert argv[argv.index("--shape-file") + 1] == "/s.yaml"
    for flag in ("--op", "--node", "--devices"):  # what to run and where come per unit
        assert flag not in argv
    monkeypatch.setenv("SHAPE_MODE", "upstream")  # a resume in another environment
    again, _ = start.settings_from_argv(argv)
    assert again.caliber() == base.caliber() and again.shape_mode == "file"
    campaign = plan.new_campaign(directory=EMBEDDED_SUITE, axis=Axis("none", None), caliber={},
                                 argv=argv, ops={"mm": {"node": "benchmark/test_mm.py::test_mm"}},
                                 rounds=2, walls={}, walls_from=None)
    campaign.units[0].status = "ok"
    task = driver.unit_tasks(EMBEDDED_SUITE, campaign)[0]
    child = LocalExecutor(["3"]).argv(task, "3")
    assert child[3:6] == ["ab-unit", str(EMBEDDED_SUITE), "mm/r1"]
    assert child[-4:] == ["--node", "benchmark/test_mm.py::test_mm", "--devices", "3"]


@pytest.fixture
def no_lock_wait(monkeypatch):
    """A refused driver refuses at once: this test holds the lock throughout, so waiting
    LOOK_WAIT_S for it would change nothing but the time the test takes."""
    monkeypatch.setattr(driver, "LOOK_WAIT_S", 0.0)


def test_a_second_driver_of_one_campaign_is_refused(tmp_path, no_lock_wait):
    from harness.errors import UsageError

    with driver.sole_driver(tmp_path):
        with pytest.raises(UsageError, match="is being run by another harness process"):
            with driver.sole_driver(tmp_path):
                pass
    with driver.sole_driver(tmp_path):  # released when the first driver ends
        pass


# --------------------------------------------------------------------------- a signal


def _campaign(tmp_path):
    return one_op_campaign(tmp_path)


@pytest.mark.slow  # a unit and its sleeper, stopped by a signal
def test_a_signal_stops_the_running_unit_starts_no_other_and_writes_a_partial_campaign(
        tmp_path, monkeypatch):
    # Regression: the driver raised a bare KeyboardInterrupt (exit 130 for every signal) and
    # left no ab.json, so `harness report` could not render what had finished.
    doc, started, children = _campaign(tmp_path), [], []
    real_start = procs.start_child

    def unit_argv(directory, argv, node, unit):
        return [unit, sys.executable, "-c", "import time; time.sleep(60)"]

    def start_child(argv, *args, **kwargs):
        started.append(argv[0])
        children.append(real_start(argv[1:], *args, **kwargs))
        os.kill(os.getpid(), signal.SIGHUP)  # lands while the unit runs
        return children[-1]

    monkeypatch.setattr(driver, "unit_argv", unit_argv)
    monkeypatch.setattr(procs, "start_child", start_child)
    lines = []
    with pytest.raises(Interrupted) as info:
        driver.drive(tmp_path, doc, settings(), LocalExecutor([None], grace_s=2.0, poll_s=0.01),
                     out=lines.append)
    assert info.value.exit_code == 128 + signal.SIGHUP and info.value.step == "add/r0"
    assert started == ["add/r0"] and children[0].poll() == -signal.SIGHUP  # forwarded
    saved = json.loads((tmp_path / "campaign.json").read_text())
    assert saved["state"] == "interrupted"
    assert saved["interrupted"] == {"signal": "SIGHUP", "step": "add/r0", "finished_units": []}
    assert [u["status"] for u in saved["units"]] == ["interrupted", "not_run"]
    ab_json = json.loads((tmp_path / "ab.json").read_text())
    assert ab_json["status"] == "interrupted" and ab_json["rows"] == []
    assert ab_json["operators"]["add"]["verdict"] == "pending"  # a resume runs it
    assert "INCOMPLETE: interrupted by SIGHUP during add/r0" in (tmp_path / "ab.md").read_text()
    assert not (tmp_path / "cache").exists()
    assert any(line.startswith("AB_INTERRUPTED signal=SIGHUP step=add/r0 finished_units=- ")
               and f" dir={tmp_path} " in line for line in lines)


def test_a_finished_unit_is_never_reported_as_interrupted(tmp_path):
    doc = _campaign(tmp_path)
    doc.units[0].status = "ok"
    assert compare.finished_units(doc) == ["add/r0"]
    status = result.campaign_status(doc, {"signal": "SIGTERM", "step": "add/r1"})
    assert status == abjson.CampaignStatus("interrupted", abjson.Interruption("SIGTERM", "add/r1"),
                                           ("add/r0",))
    assert result.campaign_status(doc, None).state == "complete"


def test_the_dry_run_shows_the_first_unit_on_its_own_device(tmp_path):
    # Regression: the first unit's child got `--devices 0`, but the plan printed for its side A
    # showed the campaign's DEVICES=0,1 as its CUDA_VISIBLE_DEVICES.
    from harness.providers.flaggems import Node
    from harness.run.preflight import Plan

    doc = _campaign(tmp_path)
    plan = Plan(node=Node("benchmark/test_add.py", "test_add", ("add",)), op="add",
                python=sys.executable)
    lines = dryrun.first_unit(doc, settings(devices="1,0"), plan, LocalExecutor(["1", "0"]),
                              tmp_path)
    assert lines[0].endswith("--devices 1")
    assert "  devices: 1" in lines and "  devices: 1,0" not in lines


def test_a_resume_refuses_settings_it_would_silently_drop():
    # Regression: `make ab RESUME=<dir> OP=mm DTYPES=float32` resumed the campaign as it was
    # and said nothing of OP or DTYPES.
    from harness.errors import UsageError

    with pytest.raises(UsageError) as info:
        resume.refuse_unused({"resume": "d", "op": "mm", "dtypes": "float32", "ops": "a,b",
                                "rounds": "3"})
    assert "; OP, DTYPES, OPS cannot be given with it" in str(info.value)
    resume.refuse_unused({"resume": "d", "rounds": "5", "devices": "0,1", "dry_run": "1",
                            "backend": "cpu", "level": "core", "mode": "auto", "only": "same",
                            "executor": "slurm", "slurm_partition": "gpu", "op": None,
                            "dtypes": ""})


# --------------------------------------------------------------------------- a unit's limit


@pytest.mark.slow  # a sleeper stopped at its limit
def test_a_unit_past_its_limit_is_recorded_timeout_and_a_resume_reruns_it(tmp_path,
                                                                           monkeypatch):
    # Regression: a hanging operator blocked its device forever: no unit had a time limit.
    doc = _campaign(tmp_path)

    def unit_argv(directory, argv, node, unit):
        return [sys.executable, "-c", "import time; time.sleep(60)"]

    monkeypatch.setattr(driver, "unit_argv", unit_argv)
    lines: list[str] = []
    driver.drive(tmp_path, doc, settings(), LocalExecutor([None], grace_s=1.0, poll_s=0.01),
                 out=lines.append, timeout_s=1)
    saved = json.loads((tmp_path / "campaign.json").read_text())
    first = saved["units"][0]
    assert (first["id"], first["status"], first["reason"]) == ("add/r0", "timeout",
                                                               "timeout after 1 s")
    assert saved["units"][1]["status"] == "not_run"  # it waits for round 0
    assert any(" add/r0 timeout " in line for line in lines)
    again = plan.units_to_run(document.load(tmp_path))
    assert [u.id for u in again] == ["add/r0", "add/r1"]
    tasks = driver.unit_tasks(tmp_path, document.load(tmp_path), timeout_s=7)
    assert [t.timeout_s for t in tasks] == [7, 7]


def test_a_units_limit_grows_with_its_operators_known_wall():
    assert plan.unit_limit(3600, None) == 3600 and plan.unit_limit(3600, 100.0) == 3600
    assert plan.unit_limit(3600, 1000.0) == 5000 and plan.unit_limit(None, 1000.0) is None


def _stored(tmp_path, axis=None):
    """A campaign on disk with the cpu backend's settings, and its campaign.json's bytes."""
    doc = plan.new_campaign(
        directory=tmp_path, axis=axis or Axis("none", None), caliber=settings().caliber(),
        argv=start.settings_argv(settings()), rounds=1, walls={}, walls_from=None,
        ops={"add": {"node": "benchmark/test_add.py::test_add"}})
    doc.python = sys.executable
    doc.save(tmp_path)
    return (tmp_path / plan.CAMPAIGN_JSON).read_bytes()


@pytest.mark.parametrize("flags, env", [({"dry_run": "true"}, {}),
                                        ({}, {"ZL_DRY_RUN": "yes"})])
def test_a_resume_checks_dry_run_as_a_new_campaign_does(tmp_path, flags, env):
    # Regression: `RESUME=<dir> ROUNDS=3 DRY_RUN=true` ran units: the resume read DRY_RUN by
    # hand and took anything but 1 for a real run, where a new campaign refuses it.
    from harness.errors import UsageError

    before = _stored(tmp_path)
    with pytest.raises(UsageError, match="DRY_RUN.*expected one of: 0, 1"):
        resume.resume({"resume": str(tmp_path), "rounds": "3", **flags}, env, out=lambda _: None)
    assert (tmp_path / plan.CAMPAIGN_JSON).read_bytes() == before


def test_a_refused_concurrent_resume_leaves_campaign_json_as_it_was(tmp_path, no_lock_wait):
    # Regression: a second `RESUME=<dir> ROUNDS=3` while a driver held the campaign was
    # refused, but had already written its added rounds into campaign.json.
    from harness.errors import UsageError

    before = _stored(tmp_path)
    said: list[str] = []
    with driver.sole_driver(tmp_path):
        with pytest.raises(UsageError, match="is being run by another harness process"):
            resume.resume({"resume": str(tmp_path), "rounds": "3"}, {}, out=said.append)
    assert (tmp_path / plan.CAMPAIGN_JSON).read_bytes() == before
    assert said == []  # not "resuming ...: 7 units to run" before the refusal


def test_ctrl_c_before_the_executor_takes_the_signals_is_an_interrupted_campaign(
        tmp_path, monkeypatch):
    # Regression: a SIGINT between the campaign's "running" and its first unit left
    # campaign.json running, printed a bare "interrupted" and no resume hint.
    doc = _campaign(tmp_path)

    def run(self, tasks, events):
        raise KeyboardInterrupt

    monkeypatch.setattr(LocalExecutor, "run", run)
    lines = []
    with pytest.raises(Interrupted) as info:
        driver.drive(tmp_path, doc, settings(), LocalExecutor([None]), out=lines.append)
    assert info.value.exit_code == 128 + signal.SIGINT
    assert json.loads((tmp_path / "campaign.json").read_text())["state"] == "interrupted"
    assert any(line.startswith("AB_INTERRUPTED signal=SIGINT") and
               f"resume: harness ab --resume {tmp_path}" in line for line in lines)
    assert not (tmp_path / "cache").exists()


def test_a_resume_to_one_round_is_refused_where_the_axis_is_a_switch(tmp_path):
    # A campaign of one round calls nothing: a resume to ROUNDS=1 of an A/B (one an older
    # harness started at one round) is refused as a new one is; an A/A's is taken.
    from harness.errors import UsageError

    before = _stored(tmp_path, Axis("OMP_NUM_THREADS", "OMP_NUM_THREADS"))
    with pytest.raises(UsageError, match="^ROUNDS='1' is not accepted for AXIS=OMP_NUM_THREADS: "
                       "one round gives no interval.*expected a whole number from 2 to 100"):
        resume.resume({"resume": str(tmp_path), "rounds": "1"}, {}, out=lambda _: None)
    assert (tmp_path / plan.CAMPAIGN_JSON).read_bytes() == before
    aa = tmp_path / "aa"
    aa.mkdir()
    _stored(aa)
    said: list[str] = []
    assert resume.resume({"resume": str(aa), "rounds": "1", "dry_run": "1"}, {},
                        out=said.append) == 0
    assert said[0].startswith(f"resuming {aa}: ")


def test_a_resume_of_a_campaign_that_holds_a_floor_above_25_percent_is_refused(tmp_path):
    # A campaign started before such floors were refused would still be judged by one.
    from harness.errors import UsageError
    from harness.stats.noisefloor import Band, NoiseModel

    _stored(tmp_path, Axis("OMP_NUM_THREADS", "OMP_NUM_THREADS"))
    doc = document.load(tmp_path)
    doc.noise_from = "runs/ab/none-mm/1"
    doc.noise_floor_bands = NoiseModel((Band(0.004, 0.006, 0.005, 6792.0, 20),
                                        Band(4.0, 6.0, 5.0, 2.0, 20))).to_json()
    doc.save(tmp_path)
    before = (tmp_path / plan.CAMPAIGN_JSON).read_bytes()
    with pytest.raises(UsageError) as info:
        resume.resume({"resume": str(tmp_path), "rounds": "3"}, {}, out=lambda _: None)
    assert str(info.value) == (
        f"RESUME={str(tmp_path)!r} (NOISE_FROM='runs/ab/none-mm/1') holds a noise floor of "
        "6792.0% (rows near 0.005 ms A latency): a floor above 25% cannot mean \"the same\"; "
        "start the campaign again with NOISE_FROM an A/A whose floors are all at most that")
    assert (tmp_path / plan.CAMPAIGN_JSON).read_bytes() == before


def test_a_corrupt_ab_json_with_only_is_refused_naming_the_file(tmp_path):
    # Regression: `RESUME=<dir> ONLY=inconclusive` over a truncated ab.json read "theirs: none
    # (no ab.json yet)", as if the campaign had never finished a look.
    from harness.errors import UsageError

    before = _stored(tmp_path)
    (tmp_path / "ab.json").write_text('{"schema": "harness-ab/')
    with pytest.raises(UsageError) as info:
        resume.resume({"resume": str(tmp_path), "only": "inconclusive"}, {}, out=lambda _: None)
    message = str(info.value)
    assert message.startswith("ONLY='inconclusive' picks operators by their verdict in the "
                              "campaign's ab.json, which is corrupt: ")
    assert repr(str(tmp_path / "ab.json")) in message and "no ab.json yet" not in message
    assert "\n" not in message and (tmp_path / plan.CAMPAIGN_JSON).read_bytes() == before
    (tmp_path / "ab.json").unlink()  # none at all: no verdict yet, said as before
    with pytest.raises(UsageError, match=r"theirs: none \(no ab.json yet\)"):
        resume.resume({"resume": str(tmp_path), "only": "inconclusive"}, {}, out=lambda _: None)


def test_a_resume_refuses_a_setting_exported_in_its_environment():
    # Regression: an exported OP, ZL_AXIS, ZL_A, ZL_DTYPES, OPS or ZL_NOISE_FROM beside
    # RESUME was silently dropped (the flags alone were checked).
    from harness.errors import UsageError

    env = {"OP": "tanh", "ZL_AXIS": "OMP_NUM_THREADS", "ZL_A": "1", "ZL_DTYPES": "float32",
           "OPS": "tanh", "ZL_NOISE_FROM": "/x", "ZL_ROUNDS": "4", "ZL_BACKEND": "cpu"}
    with pytest.raises(UsageError) as info:
        resume.refuse_unused({"resume": "d"}, env)
    for name in ("OP", "ZL_AXIS", "ZL_A", "ZL_DTYPES", "OPS", "ZL_NOISE_FROM"):
        assert f" {name}," in str(info.value) or f" {name} cannot" in str(info.value), name
    assert "ZL_ROUNDS" not in str(info.value) and "ZL_BACKEND" not in str(info.value)
    resume.refuse_unused({"resume": "d"}, {"ZL_ROUNDS": "4", "ZL_BACKEND": "cpu"})


@pytest.mark.parametrize("where", ["teardown", "report"])
def test_a_signal_after_the_last_unit_waits_for_the_campaigns_files(where, tmp_path,
                                                                    monkeypatch):
    # Regression: SIGTERM or SIGINT as the workers were let go or while the report was written
    # left campaign.json `running` or `measured`, ab.json `complete` and no receipt, junit.xml
    # or ci-summary.md; one right after AB_DONE exited 130 with the store's record `running`.
    import contextlib

    from harness.campaign import finish
    from harness.executors.base import Outcome

    doc = _campaign(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(LocalExecutor, "run", lambda self, tasks, events: Outcome())

    @contextlib.contextmanager
    def session(self):
        yield None
        if where == "teardown":
            os.kill(os.getpid(), signal.SIGTERM)  # lands as the workers are let go

    real = finish.write_campaign

    def write_campaign(*args, **kwargs):
        if where == "report":
            os.kill(os.getpid(), signal.SIGTERM)  # lands as the report starts
        return real(*args, **kwargs)

    monkeypatch.setattr(LocalExecutor, "session", session)
    monkeypatch.setattr(finish, "write_campaign", write_campaign)
    reached: list[int] = []  # what the handler before the campaign's saw
    previous = signal.signal(signal.SIGTERM, lambda signum, _frame: reached.append(signum))
    try:
        lines: list[str] = []
        with pytest.raises(Interrupted) as info:  # it stands once the files are written:
            start.drive_recorded(tmp_path, doc, settings(), LocalExecutor([None]),  # a bisection
                                 {"history": "off"}, {}, lines.append, "1", None)  # stops too
        assert reached == []  # the campaign held it
        os.kill(os.getpid(), signal.SIGTERM)  # the previous handler is back
        assert reached == [signal.SIGTERM]
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert info.value.exit_code == 128 + signal.SIGTERM
    assert str(info.value) == ("interrupted by SIGTERM during its report (every unit had ended); "
                               f"what finished is kept in {tmp_path}")
    assert json.loads((tmp_path / "campaign.json").read_text())["state"] == "done"
    for name in ("ab.json", "ab.md", "receipt.json", "junit.xml", "ci-summary.md"):
        assert (tmp_path / name).is_file(), name
    assert lines[-1] == ("SIGTERM came after the last unit had ended: the campaign's files were "
                         "written first")


def test_a_second_held_signal_interrupts_at_once():
    held = procs.HeldSignal()
    before = signal.getsignal(signal.SIGHUP)
    held.hold()
    try:
        os.kill(os.getpid(), signal.SIGHUP)
        assert held.signum == signal.SIGHUP
        with pytest.raises(KeyboardInterrupt, match="a second SIGHUP") as info:
            os.kill(os.getpid(), signal.SIGHUP)
        assert info.value.exit_code == 128 + signal.SIGHUP  # 129, not a bare Ctrl-C's 130
        assert signal.getsignal(signal.SIGHUP) is before  # released by the second
    finally:
        held.release()


@pytest.mark.parametrize("command", [
    ["ab", "--backend", "cpu"], ["bisect", "--backend", "cpu", "--op", "add"],
    ["bisect", "--backend", "cpu", "--op", "add", "--runner", "docker"]])  # before its image
def test_an_empty_resume_is_refused_naming_resume(command, capsys):
    # Regression: `--resume ''` read as no resume, and a new campaign refused its missing AXIS
    from harness import cli

    assert cli.main([*command, "--resume", ""]) == 2
    assert capsys.readouterr().err.strip() == (
        "error: RESUME='' names no directory; expected the folder of the campaign or "
        "bisection to go on with, e.g. runs/ab/<axis>-<op>/<ts>")


def test_a_resume_with_nothing_left_to_run_waits_for_no_device(tmp_path, monkeypatch):
    # Regression: it waited on the device lock (DEVICE_BUSY ... waiting) to rewrite its report
    doc = _campaign(tmp_path)
    for unit in doc.units:
        unit.status = "ok"

    def session(self):
        raise AssertionError("held a device with no unit to run")

    monkeypatch.setattr(LocalExecutor, "session", session)
    lines: list[str] = []
    assert driver.drive(tmp_path, doc, settings(), LocalExecutor([None]), out=lines.append) == 0
    assert json.loads((tmp_path / "campaign.json").read_text())["state"] == "done"
    assert (tmp_path / "ab.json").is_file()
    assert lines[0] == f"campaign directory: {tmp_path} (0 units to run of 2; executor local)"


def test_a_signal_while_rounds_auto_plans_another_round_stops_the_campaign_there(
        tmp_path, monkeypatch):
    # Regression: between the executor giving its handlers back and the next round, SIGTERM
    # killed the driver outright and left campaign.json running
    from harness.campaign import adaptive
    from harness.executors.base import Outcome

    doc = _campaign(tmp_path)
    doc.auto = {"min": 2, "max": 6}
    monkeypatch.setattr(LocalExecutor, "run", lambda self, tasks, events: Outcome())

    def add_round(directory, campaign, out):
        os.kill(os.getpid(), signal.SIGTERM)  # lands while the looks are read
        return True

    monkeypatch.setattr(adaptive, "add_round", add_round)
    reached: list[int] = []
    previous = signal.signal(signal.SIGTERM, lambda signum, _frame: reached.append(signum))
    try:
        held = procs.HeldSignal()
        with pytest.raises(Interrupted) as info:
            driver.drive(tmp_path, doc, settings(), LocalExecutor([None]), out=lambda _: None,
                         held=held)
        held.release()
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert reached == [] and held.signum is None  # acted on here, not held for the files
    assert info.value.exit_code == 128 + signal.SIGTERM
    assert json.loads((tmp_path / "campaign.json").read_text())["state"] == "interrupted"


def test_a_look_that_owes_a_round_it_cannot_plan_ends_the_rounds_rather_than_spinning(
        tmp_path, monkeypatch):
    # A look that said a round was added while none was (a round that gave no row asked for
    # again) had the driver run an empty batch, look, and run another, without end.
    from harness.campaign import adaptive
    from harness.executors.base import Outcome

    doc = _campaign(tmp_path)
    doc.auto = {"min": 2, "max": 6}
    batches: list[list[str]] = []

    def run(self, tasks, events):
        batches.append([t.id for t in tasks])
        assert len(batches) < 5, batches
        for task in tasks:  # every unit ran to its end
            doc.unit(task.id).status, doc.unit(task.id).attempts = "ok", 1
        return Outcome()

    monkeypatch.setattr(LocalExecutor, "run", run)
    monkeypatch.setattr(adaptive, "add_round", lambda directory, campaign, out: True)
    assert driver.drive(tmp_path, doc, settings(), LocalExecutor([None]), out=lambda _: None) \
        in (0, 1)
    assert len(batches) == 1  # the first batch, then nothing owed: the rounds end
