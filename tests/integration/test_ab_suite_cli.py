"""Suite campaigns as subprocesses: interrupt and resume, extension, a failing operator."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from harness.axes import Axis
from harness.campaign import plan
from harness.settings.spec import REPO_ROOT
from tests.procs import wait_for

from .test_ab_cli import harness
from .test_batch_cli import private_suite

pytestmark = pytest.mark.integration
SHAPES = "tanh:\n  shapes:\n    - [8, 8]\nadd:\n  shapes:\n    - [8, 8]\n"
BOOM = '''"""A benchmark that always fails: the campaign must record it and go on."""

import pytest


@pytest.mark.boom
def test_boom():
    raise RuntimeError("boom")
'''


def suite_args(tmp_path: Path, ops: str, rounds: int) -> list[str]:
    shapes = tmp_path / "shapes.yaml"
    shapes.write_text(SHAPES)
    suite = private_suite(tmp_path)
    (suite / "benchmark" / "test_boom.py").write_text(BOOM)
    return ["ab", "--backend", "cpu", "--ops", ops, "--axis", "none", "--rounds", str(rounds),
            "--shape-mode", "file", "--shape-file", str(shapes), "--flaggems-dir", str(suite),
            "--out", str(tmp_path / "runs")]


def the_campaign(tmp_path: Path) -> Path:
    (directory,) = (tmp_path / "runs" / "ab" / "none-suite").iterdir()
    return directory


def units(directory: Path) -> dict[str, dict]:
    doc = json.loads((directory / "campaign.json").read_text())
    return {u["id"]: u for u in doc["units"]}


def run_dirs(directory: Path) -> list[str]:
    return sorted(str(p.relative_to(directory)) for p in directory.glob("*/[AB]/r*"))


def interrupt_after_first_unit(args: list[str], signum: int) -> tuple[int, str]:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "harness.cli", *args], cwd=REPO_ROOT,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out = Path(args[args.index("--out") + 1])
    try:
        def one_done() -> bool:
            found = list(out.glob("ab/*/*/campaign.json"))
            return bool(found) and any(u["status"] == "ok" for u in json.loads(
                found[0].read_text())["units"])
        wait_for(one_done, 600, "the first unit to finish", poll=0.2)
        proc.send_signal(signum)
        output, _ = proc.communicate(timeout=300)  # seconds, or never
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, output


# One signal here: test_signals_cli sends each of SIGINT, SIGTERM and SIGHUP to a campaign.
@pytest.mark.parametrize("signum", [signal.SIGTERM])
def test_an_interrupted_campaign_resumes_without_running_a_finished_unit_twice(tmp_path,
                                                                              signum):
    args = suite_args(tmp_path, "tanh,add", 1)
    rc, output = interrupt_after_first_unit(args, signum)
    assert rc == 128 + signum, output[-3000:]
    directory = the_campaign(tmp_path)
    assert "AB_INTERRUPTED" in output and f"--resume {directory}" in output
    doc = json.loads((directory / "campaign.json").read_text())
    assert doc["state"] == "interrupted" and not (directory / "cache").exists()
    before = units(directory)
    finished = [uid for uid, u in before.items() if u["status"] == "ok"]
    assert len(finished) == 1 and before[finished[0]]["attempts"] == 1
    assert doc["interrupted"]["finished_units"] == finished
    kept = {p: (directory / p / "run_identity.json").read_bytes() for p in run_dirs(directory)
            if p.startswith(finished[0].split("/")[0] + "/")}
    assert len(kept) == 2  # both sides of the finished unit

    resumed = harness("ab", "--resume", str(directory))
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-2000:]
    after = units(directory)
    assert set(after) == {"tanh/r0", "add/r0"} and all(u["status"] == "ok"
                                                        for u in after.values())
    assert after[finished[0]]["attempts"] == 1  # not run again
    for path, data in kept.items():
        assert (directory / path / "run_identity.json").read_bytes() == data
    assert [p for p in run_dirs(directory) if ".attempt" not in p] == [
        "add/A/r0", "add/B/r0", "tanh/A/r0", "tanh/B/r0"]
    doc = json.loads((directory / "ab.json").read_text())
    assert doc["status"] == "complete" and "interrupted" not in units(directory)
    assert {r["op"] for r in doc["rows"]} == {"tanh", "add"}
    assert set(doc["operators"]) == {"tanh", "add"}
    assert "## Suite" in (directory / "ab.md").read_text()
    if signum == signal.SIGINT:
        extended = harness("ab", "--resume", str(directory), "--rounds", "2")
        assert extended.returncode == 0, extended.stdout[-3000:] + extended.stderr[-2000:]
        grown = units(directory)
        assert sorted(grown) == ["add/r0", "add/r1", "tanh/r0", "tanh/r1"]
        assert all(grown[u]["attempts"] == after[u]["attempts"] for u in after)
        extended = json.loads((directory / "ab.json").read_text())
        assert extended["caliber"]["rounds"] == 2
        # Judged at 1 round, then again at 2: each finish is a look, and the verdicts of a
        # campaign looked at twice spend alpha over its looks.
        ops = json.loads((directory / "campaign.json").read_text())["ops"]
        assert {op: info["looks"] for op, info in ops.items()} == {"tanh": [1, 2], "add": [1, 2]}
        assert extended["caliber"]["looks"] == {"tanh": [1, 2], "add": [1, 2]}
        assert "alpha spent over looks" in extended["method"]["text"]


def test_a_failing_operator_is_recorded_and_the_others_complete(tmp_path):
    proc = harness(*suite_args(tmp_path, "boom,tanh,nosuch", 1))
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-2000:]
    directory = the_campaign(tmp_path)
    found = units(directory)
    assert found["tanh/r0"]["status"] == "ok"
    assert found["boom/r0"]["status"] == "failed" and found["boom/r0"]["reason"]
    assert found["nosuch/r0"]["status"] == "failed"  # never run: it has no benchmark node
    assert "PREFLIGHT_FAILED check=test_node" in found["nosuch/r0"]["reason"]
    doc = json.loads((directory / "ab.json").read_text())
    assert doc["operators"]["tanh"]["rows"] == 2  # float32 and bfloat16
    assert doc["operators"]["boom"]["verdict"] == "failed"
    assert doc["operators"]["nosuch"]["verdict"] == "failed"
    assert "suite: " in proc.stdout and "1 failed" not in proc.stdout  # two failed
    # One round: no interval, so tanh's rows and verdict are inconclusive.
    assert "2 failed, 1 inconclusive of 3 operators" in (directory / "ab.md").read_text()


def test_resume_refuses_another_level_and_what_is_not_a_campaign(tmp_path):
    directory = tmp_path / "c"
    directory.mkdir()
    plan.new_campaign(directory=directory, axis=Axis("none", None),
                      caliber={"level": "core", "backend": "cpu"}, argv=[],
                      ops={"tanh": {"node": "n"}}, rounds=1, walls={}, walls_from=None
                      ).save(directory)
    proc = harness("ab", "--resume", str(directory), "--level", "comprehensive")
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "error: LEVEL='comprehensive' differs from the campaign's 'core'; resume with the "
        "campaign's settings"]
    proc = harness("ab", "--resume", str(tmp_path))
    assert proc.returncode == 2 and "is not a campaign directory" in proc.stderr


def test_make_ab_forwards_ops_and_walls_and_plans_longest_first(tmp_path):
    from .test_run_cli import make

    batch = tmp_path / "batch"
    batch.mkdir()
    (batch / "ops_status.csv").write_text("op,wall_s\ntanh,1.0\nmm,9.0\nadd,3.0\n")
    proc = make("ab", "BACKEND=cpu", "OPS=tanh,add,mm", "AXIS=none", "ROUNDS=2", "DRY_RUN=1",
                f"WALLS_FROM={batch}", f"OUT={tmp_path / 'runs'}")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert ("device -: mm/r0[AB], add/r0[AB], tanh/r0[AB], mm/r1[BA], add/r1[BA], "
            "tanh/r1[BA]") in proc.stdout
    assert not (tmp_path / "runs").exists()


FLAKY = '''"""A benchmark whose process dies while a flag file exists: a crashed unit."""

import os
import signal

import pytest
import torch

from . import base, cpu_ops


@pytest.mark.flaky
def test_flaky():
    if os.path.exists(os.environ["ZL_TEST_FLAKY_FLAG"]):
        os.kill(os.getpid(), signal.SIGKILL)
    base.UnaryPointwiseBenchmark(op_name="flaky", torch_op=torch.tanh,
                                 gems_op=cpu_ops.tanh_via_exp, dtypes=[torch.float32]).run()
'''


def test_a_crashed_round_zero_holds_back_its_later_rounds_until_resume_reruns_it(tmp_path):
    args = suite_args(tmp_path, "flaky,tanh", 2)
    suite = Path(args[args.index("--flaggems-dir") + 1])
    (suite / "benchmark" / "test_flaky.py").write_text(FLAKY)
    flag = tmp_path / "crash"
    flag.write_text("")
    proc = harness(*args, env={"ZL_TEST_FLAKY_FLAG": str(flag)})
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-2000:]
    directory = the_campaign(tmp_path)
    found = units(directory)
    # Its pytest was killed by SIGKILL: the unit crashed, and says by what (it read "error"
    # with the log's last line, "# started_utc: ...", as its reason).
    assert found["flaky/r0"]["status"] == "crashed" and found["flaky/r1"]["status"] == "not_run"
    assert "SIGKILL" in found["flaky/r0"]["reason"]
    assert found["tanh/r0"]["status"] == found["tanh/r1"]["status"] == "ok"
    assert "round 0 of flaky did not finish" in proc.stdout
    flag.unlink()
    resumed = harness("ab", "--resume", str(directory), env={"ZL_TEST_FLAKY_FLAG": str(flag)})
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-2000:]
    after = units(directory)
    assert {u: after[u]["attempts"] for u in after} == {
        "flaky/r0": 2, "flaky/r1": 1, "tanh/r0": 1, "tanh/r1": 1}
    assert (directory / "flaky" / "A" / "r0.attempt1").is_dir()  # the crashed attempt, kept


def test_the_receipt_fails_when_a_result_file_changes_after_the_campaign(tmp_path):
    proc = harness(*suite_args(tmp_path, "tanh", 1))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "AB_DONE" in proc.stdout
    (directory,) = (tmp_path / "runs" / "ab" / "none-tanh").iterdir()
    verify = harness("receipt", "verify", str(directory))
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert verify.stdout.splitlines()[-1].startswith("RECEIPT_OK files=")
    csv = directory / "tanh" / "B" / "r0" / "results.csv"
    data = bytearray(csv.read_bytes())
    data[-2] = ord("0") if data[-2] != ord("0") else ord("1")  # one byte of the last row
    csv.write_bytes(bytes(data))
    verify = harness("receipt", "verify", str(directory))
    assert verify.returncode == 1
    assert verify.stdout.splitlines() == [f"changed {csv}",
                                          "RECEIPT_MISMATCH changed=1 missing=0 added=0"]
