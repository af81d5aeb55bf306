"""ROUNDS=auto on the cpu suite: rounds added while rows are undecided, bounded, explained."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from .test_ab_cli import harness
from .test_ab_suite_cli import SHAPES, suite_args, the_campaign, units

pytestmark = pytest.mark.integration


def test_an_adaptive_campaign_adds_rounds_only_where_undecided_and_says_why_each_stopped(
        tmp_path: Path):
    shapes = tmp_path / "shapes.yaml"
    shapes.write_text(SHAPES)
    # OMP_NUM_THREADS 1 against 2 on 8x8 inputs: rows the first look cannot all decide
    proc = harness("ab", "--backend", "cpu", "--ops", "tanh", "--axis", "OMP_NUM_THREADS",
                   "--a", "1", "--b", "2", "--rounds", "auto", "--max-rounds", "3",
                   "--shape-mode", "file", "--shape-file", str(shapes),
                   "--out", str(tmp_path / "runs"))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    (directory,) = (tmp_path / "runs" / "ab" / "OMP_NUM_THREADS-tanh").iterdir()
    state = json.loads((directory / "campaign.json").read_text())
    assert state["auto"] == {"min": 2, "max": 3}
    doc = json.loads((directory / "ab.json").read_text())
    for op, info in state["ops"].items():
        ran = sorted(u["round"] for u in state["units"] if u["op"] == op)
        assert ran == list(range(len(ran))) and 2 <= len(ran) <= 3
        assert info["looks"][0] == 2 and info["looks"][-1] == len(ran)
        undecided = [r for r in doc["rows"] if r["op"] == op and r["verdict"] == "inconclusive"]
        # an operator stopped at 2 rounds had every row decided there, or none that a third
        # round could decide (each named); one at 3 says why
        expected = (f"decided after {len(ran)} rounds" if not undecided
                    else "MAX_ROUNDS (3) reached with rows undecided" if len(ran) == 3
                    else "stopped after 2 rounds: MAX_ROUNDS (3) cannot decide ")
        assert info["stopped"].startswith(expected), info["stopped"]
        assert doc["operators"][op]["reason"] == info["stopped"]
        if len(ran) == 2 and undecided:
            assert all(f"{r['dtype']} {r['shape']}" in info["stopped"] for r in undecided[:3])
        assert doc["operators"][op]["rounds"] == len(ran)
        if len(ran) == 3:
            assert "ROUNDS=auto: " in proc.stdout and op in proc.stdout
            # the added round runs in workers of its own, as every round does, so that what
            # a worker process keeps of itself varies between rounds
            for side in "AB":
                pids = [json.loads((directory / op / side / f"r{r}" / "run_identity.json")
                                   .read_text())["launch"][-1]["pid"] for r in (1, 2)]
                assert pids[0] != pids[1], (side, pids)
    elapsed = [int(x) for x in re.findall(r" elapsed=(\d+)s", proc.stdout)]
    assert elapsed == sorted(elapsed)  # counted from the campaign's start, not each round's
    assert doc["caliber"]["auto"] == {"min": 2, "max": 3}
    assert "ROUNDS=auto (MIN_ROUNDS 2, MAX_ROUNDS 3)" in (directory / "ab.md").read_text()
    assert "failed" not in {o["verdict"] for o in doc["operators"].values()}
    refused = harness("ab", "--resume", str(directory), "--rounds", "auto")
    assert refused.returncode == 2 and "ROUNDS=auto is not accepted on resume" in refused.stderr
    resumed = harness("ab", "--resume", str(directory))  # nothing is left to run or add
    assert resumed.returncode == 0 and "0 units to run" in resumed.stdout
    assert json.loads((directory / "campaign.json").read_text())["units"] == state["units"]


def test_the_plan_of_an_adaptive_campaign_says_how_far_it_may_grow(tmp_path: Path):
    planned = harness("ab", "--backend", "cpu", "--ops", "tanh,add", "--axis", "none",
                      "--rounds", "auto", "--max-rounds", "5", "--dry-run", "1",
                      "--out", str(tmp_path / "runs"))
    assert planned.returncode == 0, planned.stdout[-2000:] + planned.stderr
    assert ("ROUNDS=auto: these are MIN_ROUNDS (2) an operator; after each round, one more for "
            "each operator with a row undecided that MAX_ROUNDS (5) may still decide: 10 units "
            "at most in all") in planned.stdout
    assert not (tmp_path / "runs").exists()


FLAKY_ONCE = '''"""A benchmark whose process dies the first time it runs: a unit crashed once."""

import os
import signal

import pytest
import torch

from . import base, cpu_ops


@pytest.mark.flaky
def test_flaky():
    flag = os.environ["ZL_TEST_FLAKY_FLAG"]
    if os.path.exists(flag):
        os.remove(flag)
        os.kill(os.getpid(), signal.SIGKILL)
    base.UnaryPointwiseBenchmark(op_name="flaky", torch_op=torch.tanh,
                                 gems_op=cpu_ops.tanh_via_exp, dtypes=[torch.float32]).run()
'''


def test_a_unit_that_crashed_runs_again_before_its_operator_is_looked_at(tmp_path: Path):
    # The look after the first rounds stopped an operator whose unit had crashed with "a unit
    # did not end ok", though the driver runs a crashed unit again: it ended ok on its second
    # attempt, and the operator read that reason, and got no more rounds, all the same.
    args = suite_args(tmp_path, "flaky,tanh", 2)
    args[args.index("--rounds") + 1] = "auto"
    suite = Path(args[args.index("--flaggems-dir") + 1])
    (suite / "benchmark" / "test_flaky.py").write_text(FLAKY_ONCE)
    flag = tmp_path / "crash"
    flag.write_text("")
    proc = harness(*args, "--max-rounds", "3", env={"ZL_TEST_FLAKY_FLAG": str(flag)})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "ROUNDS=auto: 1 operators wait for units that run again before they are looked at: " \
           "flaky" in proc.stdout
    directory = the_campaign(tmp_path)
    found = units(directory)
    assert found["flaky/r0"]["status"] == "ok" and found["flaky/r0"]["attempts"] == 2
    state = json.loads((directory / "campaign.json").read_text())
    stopped = state["ops"]["flaky"]["stopped"]
    assert not stopped.startswith("a unit did not end ok"), stopped
    assert len(state["ops"]["flaky"]["looks"]) >= 1 and state["ops"]["flaky"]["looks"][0] >= 2
