"""The array task's side: its index in the plan, and a later round held back by round 0."""

from __future__ import annotations

import json

import pytest

from harness.axes import Axis
from harness.campaign import driver
from harness.campaign import plan as campaign
from harness.errors import UsageError
from harness.executors.slurm import files, task


@pytest.mark.parametrize("value", ["", "x", "2", "-1"])
def test_a_task_index_outside_the_plan_is_refused(tmp_path, value):
    plan = tmp_path / "p.json"
    plan.write_text(json.dumps({"tasks": [["a"], ["b"]]}))
    with pytest.raises(UsageError, match=f"SLURM_ARRAY_TASK_ID={value!r}"):
        task.load_plan(plan, {"SLURM_ARRAY_TASK_ID": value})


@pytest.mark.parametrize("content", [b"\x00\xff\xfe", b"{not json"])
def test_a_plan_that_is_not_json_is_refused(tmp_path, content):
    plan = tmp_path / "p.json"
    plan.write_bytes(content)
    with pytest.raises(UsageError, match="is not a plan"):
        task.load_plan(plan, {"SLURM_ARRAY_TASK_ID": "0"})


def test_a_plan_that_is_a_directory_is_refused(tmp_path):
    with pytest.raises(UsageError, match="is not a plan"):
        task.load_plan(tmp_path, {"SLURM_ARRAY_TASK_ID": "0"})


def test_a_later_round_waits_for_round_zero_from_its_done_file(tmp_path):
    doc = campaign.new_campaign(directory=tmp_path, axis=Axis("none", None),
                                caliber={}, argv=[], ops={"tanh": {"node": "n"}}, rounds=2,
                                walls={}, walls_from=None)
    first, later = driver.unit_tasks(tmp_path, doc)
    assert task.blocked(tmp_path, later) == "tanh/r0 did not finish"
    assert task.blocked(tmp_path, first) is None
    done = files.done_path(tmp_path, "tanh/r0")
    done.parent.mkdir(parents=True)
    done.write_text(json.dumps({"item": "tanh/r0", "status": "failed"}))
    assert task.blocked(tmp_path, later) is None  # failed rows still replay
    done.write_text(json.dumps({"item": "tanh/r0", "status": "interrupted"}))
    assert task.blocked(tmp_path, later) is not None
    doc.unit("tanh/r0").status = "ok"  # finished in an earlier submission
    (later,) = driver.unit_tasks(tmp_path, doc)
    assert task.blocked(tmp_path, later) is None


def test_read_done_skips_a_file_being_written_and_one_of_garbage(tmp_path):
    base = tmp_path / "slurm" / "done"
    base.mkdir(parents=True)
    (base / "a-r0.json").write_text(json.dumps({"item": "a/r0", "status": "ok"}))
    (base / "b-r0.json").write_bytes(b"\x00\x01")
    (base / "c-r0.json").write_text("[1, 2]")
    assert list(files.read_done(tmp_path)) == ["a/r0"]


def test_a_plan_whose_task_lacks_its_argv_is_one_line_naming_the_plan(tmp_path):
    plan = tmp_path / "p.json"
    plan.write_text(json.dumps({"dir": str(tmp_path), "tasks": [[{"id": "a", "log": "l"}]]}))
    with pytest.raises(UsageError, match=r"slurm-task: '.*p.json': a task of the plan has no "
                                         "valid argv"):
        task.run_task(plan, {"SLURM_ARRAY_TASK_ID": "0"})
