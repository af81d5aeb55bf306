"""ops_status.csv: the columns it is written with, and its one reader."""

from __future__ import annotations

import pytest

from harness import executors
from harness.contract.ops_status import OpStatus, read_ops_status, render_csv
from harness.errors import UsageError


def test_csv_has_exactly_the_design_columns_in_order():
    # the executors' facts between run and reason: DESIGN.md's slurm_task, slurm_state
    text = render_csv([OpStatus("tanh", "ok", "n", 0, 8, "cpu", "", "direct", 1.5,
                                "runs/tanh/x"), OpStatus("mm")], executors.fact_names())
    lines = text.splitlines()
    assert lines[0] == ("op,node,status,rc,rows,backend,device,timer,wall_s,run,slurm_task,"
                        "slurm_state,reason")
    assert lines[1] == "tanh,n,ok,0,8,cpu,,direct,1.5,runs/tanh/x,,,"
    assert lines[2] == "mm,,not_run,,,,,,,,,,"


def test_what_is_written_reads_back_as_it_was(tmp_path):
    written = [OpStatus("tanh", "ok", "n", 0, 8, "cpu", "3", "direct", 41.23, "runs/tanh/x",
                        reason="a, b", facts={"slurm_task": "7_0"}),
               OpStatus("mm", "crashed", rc=-9), OpStatus("add")]
    (tmp_path / "ops_status.csv").write_text(render_csv(written, ("slurm_task", "slurm_state")))
    assert read_ops_status(tmp_path / "ops_status.csv") == written


def test_a_fact_of_a_column_the_file_does_not_have_is_left_out():
    text = render_csv([OpStatus("tanh", facts={"k8s_pod": "p-1"})])
    assert "k8s_pod" not in text and "p-1" not in text


def test_an_older_batchs_file_with_fewer_columns_reads_them_as_empty(tmp_path):
    (tmp_path / "ops_status.csv").write_text("op,wall_s\ntanh,30\nadd, \n")
    assert read_ops_status(tmp_path / "ops_status.csv") == [
        OpStatus("tanh", status="", wall_s=30.0), OpStatus("add", status="")]
    with pytest.raises(UsageError) as exc:
        read_ops_status(tmp_path / "ops_status.csv", required=("op", "run"))
    assert str(exc.value) == f"{str(tmp_path / 'ops_status.csv')!r} has no 'run' column"


@pytest.mark.parametrize(("line", "bad"), [
    ("mm,ok,abc,", "rc='abc'"), ("mm,ok,0,-3", "wall_s='-3'"), ("mm,ok,0,nan", "wall_s='nan'")])
def test_a_bad_number_is_one_line_naming_the_file_the_operator_and_the_value(tmp_path, line, bad):
    path = tmp_path / "ops_status.csv"
    path.write_text(f"op,status,rc,wall_s\n{line}\n")
    with pytest.raises(UsageError) as exc:
        read_ops_status(path)
    message = str(exc.value)
    assert message.startswith(f"{str(path)!r} gives 'mm' {bad}; expected ")
    assert "\n" not in message


def test_a_file_that_is_not_text_is_one_line_naming_it(tmp_path):
    path = tmp_path / "ops_status.csv"
    path.write_bytes(b"op,status\n\xff,ok\n")
    with pytest.raises(UsageError, match="cannot be read as CSV text"):
        read_ops_status(path)
