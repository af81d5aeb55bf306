"""The batch: operator lists, status mapping, ops_status.csv, and the per-device scheduler."""

from __future__ import annotations

import csv
import dataclasses
import json
import os
import signal
import sys
from pathlib import Path

import pytest

from harness.campaign import batch, ops
from harness.contract.ops_status import OpStatus
from harness.errors import PreflightError, UsageError
from harness.executors import local, procs
from harness.executors.base import Ended, last_line, state_for
from harness.executors.local import LocalExecutor
from harness.settings import spec
from harness.settings.spec import EMBEDDED_SUITE


def _settings(tmp_path: Path, **flags) -> spec.Settings:
    base = {"backend": "cpu", "out": str(tmp_path / "runs")}
    return spec.resolve({**base, **flags}, {}, which=lambda _: None)


def _accelerator(tmp_path: Path, devices: str) -> spec.Settings:
    return spec.resolve({"backend": "cuda", "devices": devices, "runner": "host",
                         "out": str(tmp_path / "runs")}, {}, which=lambda _: None)


# --------------------------------------------------------------------------- operator lists


def test_ops_are_comma_separated_and_blanks_are_ignored():
    assert ops.parse_ops(" tanh, add ,mm,") == ["tanh", "add", "mm"]


def test_ops_file_takes_one_op_per_line_with_comments_and_blank_lines():
    text = "# pointwise\ntanh\n\n  add   # binary\n#mm\nlayer_norm\n"
    assert ops.parse_ops_file(text) == ["tanh", "add", "layer_norm"]


@pytest.mark.parametrize(("value", "needle"), [
    ("tanh,tanh", "'tanh' is listed twice"),
    ("../etc", "'../etc' is not an operator name"),
    ("tanh add", "'tanh add' is not an operator name"),
    (",", "names no operator"),
    # Regression: the empty item was dropped, and two operators ran where three were meant
    ("add,,tanh", "OPS='add,,tanh': item 2 is empty; expected names separated by single "
                  "commas"),
    (",add", "item 1 is empty"),
])
def test_bad_ops_name_the_value(value, needle):
    with pytest.raises(UsageError, match=needle.replace(".", r"\.")):
        ops.parse_ops(value)


def test_ops_file_with_two_ops_on_a_line_is_refused():
    with pytest.raises(UsageError, match="'tanh add' is not an operator name"):
        ops.parse_ops_file("tanh add\n")


def test_ops_from_flags_beat_the_environment(tmp_path):
    env = {"OPS": "mm", "OPS_FILE": str(tmp_path / "nope")}
    assert ops.ops_from({"ops": "tanh"}, env) == ["tanh"]
    assert ops.ops_from({}, {"OPS": "mm"}) == ["mm"]


def test_ops_from_reads_the_ops_file(tmp_path):
    path = tmp_path / "ops.txt"
    path.write_text("tanh\nadd\n")
    assert ops.ops_from({"ops_file": str(path)}, {}) == ["tanh", "add"]


@pytest.mark.parametrize(("flags", "needle"), [
    ({}, "nothing to run"),
    ({"ops": "tanh", "ops_file": "x"}, "not both"),
    ({"ops_file": "/does/not/exist"}, "OPS_FILE='/does/not/exist' does not exist"),
])
def test_ops_from_refuses(flags, needle):
    with pytest.raises(UsageError, match=needle):
        ops.ops_from(flags, {})


# --------------------------------------------------------------------------- status and csv


@pytest.mark.parametrize(("rc", "interrupted", "status"), [
    (0, False, "ok"), (1, False, "failed"), (2, False, "error"), (3, False, "error"),
    (4, False, "error"), (5, False, "error"), (-9, False, "crashed"), (-11, False, "crashed"),
    (137, False, "error"), (None, False, "not_run"), (-15, True, "interrupted"),
    (0, True, "interrupted"),
])
def test_status_mapping(rc, interrupted, status):
    assert state_for(rc, interrupted=interrupted) == status


def _fake_run(tmp_path: Path, identity: dict | None) -> Path:
    run_dir = tmp_path / "runs" / "tanh" / "20261129-120000"
    run_dir.mkdir(parents=True)
    if identity is not None:
        (run_dir / "run_identity.json").write_text(json.dumps(identity))
    log = tmp_path / "tanh.log"
    log.write_text(f"preflight test_node: ok\n# harness run header\n# run_dir: {run_dir}\n"
                   "# op: tanh\n...\nRUN_DONE op=tanh rc=0\n")
    return log


def test_finished_status_reads_the_childs_identity(tmp_path):
    ident = {"node": "benchmark/test_tanh.py::test_tanh", "rows": 15, "backend": "cpu",
             "timer": "direct"}
    status = batch.finished_status(Ended("tanh", "ok", 0, 41.23, "3"), _fake_run(tmp_path, ident))
    assert status == OpStatus("tanh", "ok", ident["node"], 0, 15, "cpu", "3", "direct",
                              41.23, str(tmp_path / "runs" / "tanh" / "20261129-120000"))


def test_a_child_whose_tests_pytest_skipped_reads_skipped_with_pytests_reason(tmp_path):
    # Regression: a benchmark pytest skipped ("vLLM not installed") read ok with 0 rows.
    ident = {"node": "n", "rows": 0, "state": "skipped", "reason": "vLLM not installed"}
    status = batch.finished_status(Ended("tanh", "ok", 0, 1.0, "0"), _fake_run(tmp_path, ident))
    assert (status.status, status.reason) == ("skipped", "vLLM not installed")
    assert status.row()["reason"] == "vLLM not installed"


def test_a_failed_childs_reason_is_its_runs_not_the_run_done_line(tmp_path):
    # Regression: the reason was the log's last line, the whole RUN_DONE summary, and after an
    # os._exit(0) it began with pytest's unfinished progress line ("benchmark/test_x.py ...").
    why = "0 rows: pytest exited 0 without finishing its session (os._exit or a killed child)"
    ident = {"node": "n", "rows": 0, "state": "failed", "reason": why}
    log = _fake_run(tmp_path, ident)
    log.write_text(log.read_text().replace(
        "RUN_DONE op=tanh rc=0", f"benchmark/test_tanh.py RUN_DONE op=tanh rc=1 reason={why}"))
    status = batch.finished_status(
        Ended("tanh", "failed", 1, 1.0, "0", reason=last_line(log)), log)
    assert (status.status, status.reason) == ("failed", why)


def test_a_crashed_child_keeps_the_signal_that_killed_it(tmp_path):
    log = _fake_run(tmp_path, {"node": "n", "rows": 0, "state": "crashed",
                               "reason": "pytest exit code -11"})
    status = batch.finished_status(
        Ended("tanh", "crashed", 245, 1.0, "0", reason="killed by SIGSEGV (rc 245)"), log)
    assert status.reason == "killed by SIGSEGV (rc 245)"


def test_a_child_that_left_no_reason_keeps_its_logs_last_line(tmp_path):
    log = _fake_run(tmp_path, {"node": "n", "rows": 0, "state": "failed"})
    status = batch.finished_status(Ended("tanh", "failed", 1, 1.0, "0", reason="last"), log)
    assert status.reason == "last"


def test_finished_status_of_a_child_that_never_claimed_a_run(tmp_path):
    log = tmp_path / "x.log"
    log.write_text("PREFLIGHT_FAILED check=test_node detail=no benchmark node\n")
    status = batch.finished_status(Ended("x", state_for(3), 3, 0.5), log)
    assert (status.status, status.rc, status.run, status.node, status.rows) == (
        "error", 3, "", "", None)
    from harness.executors.base import last_line

    assert last_line(log).startswith("PREFLIGHT_FAILED check=test_node")


def test_interrupted_child_keeps_its_partial_run_directory(tmp_path):
    status = batch.finished_status(Ended("tanh", state_for(-15, interrupted=True), -15, 2.0),
                                   _fake_run(tmp_path, None))
    assert status.status == "interrupted" and status.run.endswith("20261129-120000")
    assert status.rows is None


# --------------------------------------------------------------------------- devices, children


def test_cpu_has_one_unpinned_worker_whatever_devices_says(tmp_path):
    assert local.worker_devices(_settings(tmp_path, devices="0,1")) == [None]


def test_accelerator_gets_one_worker_per_distinct_device(tmp_path):
    assert local.worker_devices(_accelerator(tmp_path, "2,0,2")) == ["2", "0"]


def test_accelerator_without_a_device_tool_falls_back_to_one_unpinned_worker(tmp_path):
    settings = dataclasses.replace(_accelerator(tmp_path, "0"), devices=())
    backend = dataclasses.replace(settings.backend, smi_command=("no-such-smi-tool",))
    assert local.worker_devices(dataclasses.replace(settings, backend=backend)) == [None]


def test_a_visibility_selection_pins_workers_where_the_device_tool_is_missing(tmp_path,
                                                                            monkeypatch):
    # Regression: CUDA_VISIBLE_DEVICES=6,7 without nvidia-smi on PATH silently gave one
    # unpinned worker; the caller's selection is used as given, as the parallel warmup does.
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "6,7")
    settings = dataclasses.replace(_accelerator(tmp_path, "0"), devices=())
    backend = dataclasses.replace(settings.backend, smi_command=("no-such-smi-tool",))
    assert local.worker_devices(dataclasses.replace(settings, backend=backend)) == ["6", "7"]


def test_children_get_the_resolved_backend_and_the_given_flags_but_not_devices(tmp_path):
    flags = {"backend": "nvidia", "level": "core", "devices": "0,1", "dry_run": None,
             "out": "x", "mode": ""}
    forwarded = batch.forwarded_flags(_accelerator(tmp_path, "0,1"), flags)
    assert forwarded == ["--backend", "cuda", "--level", "core", "--out", "x"]
    argv = batch.child_argv(forwarded, "tanh")
    assert argv[:6] == [sys.executable, "-m", "harness.cli", "run", "--op", "tanh"]
    assert "--devices" not in argv
    local = LocalExecutor(["1"])
    task = batch.Task("tanh", tuple(argv), tmp_path / "l")
    assert local.argv(task, "1")[-2:] == ["--devices", "1"]
    assert "--devices" not in local.argv(task, None)


def test_child_environment_cannot_redirect_the_child_to_another_node():
    env = procs.child_env({"OP": "mm", "OP_FILE": "f", "TEST_NODE": "n", "ZL_DRY_RUN": "1",
                           "ZL_LEVEL": "core", "PYTHONPATH": "/elsewhere"},
                          procs.RUN_CHILD_ENV_DROP)
    assert not {"OP", "OP_FILE", "TEST_NODE", "ZL_DRY_RUN"} & set(env)
    assert env["ZL_LEVEL"] == "core"
    assert env["PYTHONPATH"].split(os.pathsep) == [str(spec.REPO_ROOT), "/elsewhere"]


# --------------------------------------------------------------------------- the batch itself

_CHILD = r"""
import json, os, sys
op, rc, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
run = os.path.join(out, op, "20261129-120000")
os.makedirs(run)
print("# run_dir:", run)
json.dump({"node": "benchmark/test_%s.py::test_%s" % (op, op), "rows": 4, "backend": "cpu",
           "timer": "direct"},
          open(os.path.join(run, "run_identity.json"), "w"))
print("the last words of", op)
sys.exit(rc)
"""


def test_run_batch_writes_status_logs_and_progress(tmp_path):
    settings = _settings(tmp_path)
    rcs = {"tanh": 0, "mm": 1, "add": 0}
    lines: list[str] = []

    def command(op):
        return [sys.executable, "-c", _CHILD, op, str(rcs[op]), str(settings.out)]

    rc = batch.run_batch(batch.BatchRecord(settings.out, list(rcs)), list(rcs), [],
                         LocalExecutor([None], poll_s=0.01), command=command, out=lines.append)
    assert rc == 1
    (batch_dir,) = (settings.out / "batch").iterdir()
    with open(batch_dir / "ops_status.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [(r["op"], r["status"], r["rc"], r["rows"]) for r in rows] == [
        ("tanh", "ok", "0", "4"), ("mm", "failed", "1", "4"), ("add", "ok", "0", "4")]
    assert rows[1]["node"] == "benchmark/test_mm.py::test_mm"
    assert "the last words of mm" in (batch_dir / "logs" / "mm.log").read_text()
    assert sum(line.startswith("[start] ") for line in lines) == 3
    assert any(line.startswith("[2/3] mm failed rc=1 rows=4") for line in lines)
    assert "    the last words of mm" in lines  # why it failed, under its progress line
    assert lines[-1].startswith("BATCH_DONE ok=2 failed=1 error=0 not_run=0 interrupted=0")
    assert not list(batch_dir.glob(".*.tmp"))


def test_run_batch_all_ok_exits_zero(tmp_path):
    settings = _settings(tmp_path)
    rc = batch.run_batch(batch.BatchRecord(settings.out, ["tanh"]), ["tanh"], [],
                         LocalExecutor([None], poll_s=0.01), out=lambda _: None,
                         command=lambda op: [sys.executable, "-c", _CHILD, op, "0",
                                             str(settings.out)])
    assert rc == 0


def test_dry_run_resolves_every_node_and_prints_each_child_command(tmp_path):
    settings = _settings(tmp_path, flaggems_dir=str(EMBEDDED_SUITE))
    forwarded = batch.forwarded_flags(settings, {"level": "core"})
    lines, rc = batch.describe_dry_run(settings, ["tanh", "add"], forwarded,
                                       LocalExecutor([None]))
    assert rc == 0
    text = "\n".join(lines)
    assert "[1/2] tanh node=benchmark/test_tanh.py::test_tanh" in text
    assert "device -: tanh, add" in lines
    assert "-m harness.cli run --op add --backend cpu --level core" in text
    assert not (tmp_path / "runs").exists()


def test_dry_run_with_an_unknown_op_exits_3_naming_it(tmp_path):
    settings = _settings(tmp_path, flaggems_dir=str(EMBEDDED_SUITE))
    lines, rc = batch.describe_dry_run(settings, ["tanh", "nope"], [], LocalExecutor([None]))
    assert rc == 3
    assert any("nope" in line and "PREFLIGHT_FAILED check=test_node" in line for line in lines)


def test_batch_subcommand_takes_gpus_as_an_alias_of_devices():
    from harness.cli import build_parser

    args = build_parser().parse_args(["batch", "--ops", "tanh", "--gpus", "0,1"])
    assert (args.ops, args.devices, args.func.__name__) == ("tanh", "0,1", "_cmd_batch")


def test_ops_file_that_is_a_directory_is_not_reported_missing(tmp_path):
    with pytest.raises(UsageError, match=r"OPS_FILE='.*' is not a file; expected a file with "
                                         "one operator per line"):
        ops.ops_from({"ops_file": str(tmp_path)}, {})


def test_binary_ops_file_is_refused_without_a_traceback(tmp_path):
    path = tmp_path / "ops.txt"
    path.write_bytes(b"tanh\n\xff\xfe\x00\x01")
    with pytest.raises(UsageError, match="cannot be read as UTF-8 text"):
        ops.ops_from({}, {"OPS_FILE": str(path)})


def test_batch_dry_run_prints_the_plan_then_the_checks_that_fail(tmp_path, capsys):
    settings = _settings(tmp_path, flaggems_dir=str(tmp_path / "nope"), dry_run="1")
    lines: list[str] = []
    assert batch.main(settings, {"ops": "tanh,add"}, {}, out=lines.append) == 3
    plan_at = next(i for i, line in enumerate(lines) if line.startswith("batch directory:"))
    assert "[1/2] tanh node=<unresolved: check flaggems_dir failed>" in lines
    failed = [i for i, line in enumerate(lines) if line.startswith("PREFLIGHT_FAILED")]
    assert failed and min(failed) > plan_at
    assert lines[failed[0]].startswith("PREFLIGHT_FAILED check=flaggems_dir")
    assert not (tmp_path / "runs").exists()


def test_batch_with_an_out_where_nothing_can_be_made_claims_nothing(tmp_path):
    settings = _settings(tmp_path, out="/proc/harness-batch")
    with pytest.raises(PreflightError) as info:
        batch.main(settings, {"ops": "tanh"}, {}, out=lambda _: None)
    assert info.value.check == "out"


class _StoppedBy:
    """An executor whose run a signal stopped before any task began."""

    name = "local"

    def __init__(self, signum):
        self.signum = signum

    def run(self, tasks, events):
        from harness.executors.base import Outcome

        return Outcome(signal=self.signum)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_batch_stopped_by_a_signal_exits_128_plus_that_signal(tmp_path, signum):
    # Regression: every signal was a bare KeyboardInterrupt, so SIGTERM exited 130, not 143.
    from harness.errors import Interrupted

    settings = _settings(tmp_path)
    lines: list[str] = []
    with pytest.raises(Interrupted) as info:
        batch.run_batch(batch.BatchRecord(settings.out, ["tanh"]), ["tanh"], [],
                        _StoppedBy(signum), out=lines.append)
    assert info.value.exit_code == 128 + signum
    assert f"interrupted by {signal.Signals(signum).name} during batch" in str(info.value)
    assert lines[-1].startswith(f"BATCH_INTERRUPTED signal={signal.Signals(signum).name} ")


def test_an_operator_that_began_reads_running_until_it_ends(tmp_path):
    # Regression: a batch whose driver was killed outright left every operator not_run,
    # the one it was running included.
    from harness.contract.ops_status import read_ops_status
    from harness.executors.base import Task

    settings = _settings(tmp_path)
    record = batch.BatchRecord(settings.out, ["tanh", "add"])
    events = batch._Events(record, lambda _: None)
    events.started(Task("tanh", ("x",), record.log("tanh")), "0", pid=1)
    found = {s.op: (s.status, s.device) for s in read_ops_status(record.csv)}
    assert found == {"tanh": ("running", "0"), "add": ("not_run", "")}
    assert record.counts().startswith("ok=0 failed=0 error=0 not_run=1 ")
