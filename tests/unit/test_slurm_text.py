"""Slurm output parsers on text as Slurm 22.05 prints it; SLURM_* checks; the makespan."""

from __future__ import annotations

import pytest

from harness.errors import UsageError
from harness.executors.slurm import text as slurm_text
from harness.executors.slurm.text import TaskState

# `scontrol -o show job 12` of an array whose task 3 was cancelled while running, task 4 ended
# with exit code 1, and tasks 5-7 were never split off (still pending as one record).
SCONTROL_ONE_LINE = (
    "JobId=15 ArrayJobId=12 ArrayTaskId=3 ArrayTaskThrottle=2 JobName=zl-none-suite "
    "UserId=root(0) GroupId=root(0) MCS_label=N/A Priority=4294901757 Nice=0 Account=(null) "
    "QOS=normal JobState=CANCELLED Reason=None Dependency=(null) Requeue=1 Restarts=0 "
    "BatchFlag=1 Reboot=0 ExitCode=0:15 RunTime=00:00:04 TimeLimit=UNLIMITED TimeMin=N/A "
    "SubmitTime=2026-11-30T10:00:00 EligibleTime=2026-11-30T10:00:00 Partition=debug "
    "NodeList=n1 BatchHost=n1 NumNodes=1 NumCPUs=1 Command=/runs/a b/s1.sbatch "
    "WorkDir=/work StdOut=/runs/slurm/logs/12_3.out Power=\n"
    "JobId=16 ArrayJobId=12 ArrayTaskId=4 JobName=zl-none-suite UserId=root(0) "
    "JobState=FAILED Reason=NonZeroExitCode Dependency=(null) ExitCode=1:0 NodeList=n1\n"
    "JobId=12 ArrayJobId=12 ArrayTaskId=5-7 ArrayTaskThrottle=2 JobName=zl-none-suite "
    "JobState=PENDING Reason=JobArrayTaskLimit Dependency=(null) ExitCode=0:0 NodeList=\n")
# The same job as plain `scontrol show job 12_3` prints it: indented lines, one record.
SCONTROL_LINES = """JobId=15 ArrayJobId=12 ArrayTaskId=3 JobName=x
   UserId=root(0) GroupId=root(0) MCS_label=N/A
   Priority=4294901757 Nice=0 Account=(null) QOS=normal
   JobState=CANCELLED Reason=None Dependency=(null)
   Requeue=1 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=0:15
   RunTime=00:00:04 TimeLimit=UNLIMITED TimeMin=N/A
"""
JOBCOMP = (
    "JobId=15 UserId=root(0) GroupId=root(0) Name=x JobState=COMPLETED Partition=p "
    "TimeLimit=UNLIMITED StartTime=2026-11-30T10:00:00 EndTime=2026-11-30T10:00:09 "
    "NodeList=n1 NodeCnt=1 ProcCnt=1 WorkDir=/ ReservationName= Tres=cpu=1,node=1,billing=1 "
    "Account= QOS= WcKey= Cluster=c SubmitTime=2026-11-30T10:00:00 "
    "EligibleTime=2026-11-30T10:00:00 DerivedExitCode=0:0 ExitCode=0:0\n"
    "JobId=21 UserId=root(0) GroupId=root(0) Name=x JobState=NODE_FAIL Partition=p "
    "TimeLimit=UNLIMITED StartTime=2026-11-30T10:00:00 EndTime=2026-11-30T10:00:09 "
    "NodeList=n2 NodeCnt=1 ProcCnt=1 WorkDir=/ ReservationName= Tres=cpu=1,node=1 "
    "Account= QOS= WcKey= Cluster=c SubmitTime=2026-11-30T10:00:00 "
    "EligibleTime=2026-11-30T10:00:00 ArrayJobId=20 ArrayTaskId=0 DerivedExitCode=0:0 "
    "ExitCode=0:0\n")


def test_sbatch_parsable_gives_the_job_id_with_or_without_a_cluster():
    assert slurm_text.parse_sbatch("12\n") == "12"
    assert slurm_text.parse_sbatch("12;cluster1\n") == "12"
    with pytest.raises(UsageError, match="expected a job id"):
        slurm_text.parse_sbatch("sbatch: error: Batch job submission failed\n")


def test_squeue_lines_of_array_tasks():
    found = slurm_text.parse_squeue("12_0|RUNNING|None\n12_1|PENDING|Priority\n\n")
    assert found == {"12_0": TaskState("12_0", "RUNNING", "None"),
                     "12_1": TaskState("12_1", "PENDING", "Priority")}


def test_squeue_without_array_splitting_is_refused_not_misread():
    with pytest.raises(ValueError, match="12_\\[3-5\\]"):
        slurm_text.parse_squeue("12_[3-5]|PENDING|Priority\n")


def test_scontrol_one_line_records_by_array_task_with_state_and_exit_code():
    found = slurm_text.parse_scontrol_jobs(SCONTROL_ONE_LINE)
    assert found["12_3"] == TaskState("12_3", "CANCELLED", "None", "0:15")
    assert found["12_4"].state == "FAILED" and found["12_4"].exit_code == "1:0"
    assert [found[f"12_{i}"].reason for i in (5, 6, 7)] == ["JobArrayTaskLimit"] * 3
    assert found["12_3"].describe() == "slurm task 12_3 CANCELLED exit=0:15"


def test_scontrol_value_with_a_space_stays_with_its_key():
    values = slurm_text.parse_key_values(SCONTROL_ONE_LINE.splitlines()[0])
    assert values["Command"] == "/runs/a b/s1.sbatch"
    assert values["JobState"] == "CANCELLED"


def test_scontrol_indented_lines_are_one_record():
    assert slurm_text.parse_scontrol_jobs(SCONTROL_LINES) == {
        "12_3": TaskState("12_3", "CANCELLED", "None", "0:15")}


def test_scontrol_job_not_in_an_array_is_left_out():
    assert slurm_text.parse_scontrol_jobs("JobId=9 JobName=x JobState=COMPLETED "
                                          "ExitCode=0:0\n") == {}


def test_task_indices_of_unsplit_ranges():
    assert slurm_text.task_indices("3") == [3]
    assert slurm_text.task_indices("4-7,9") == [4, 5, 6, 7, 9]
    assert slurm_text.task_indices("0-6:3%2") == [0, 3, 6]
    assert slurm_text.task_indices("x") == []


def test_jobcomp_lines_by_job_id_and_by_array_task():
    found = slurm_text.parse_jobcomp(JOBCOMP)
    assert found["15"].state == "COMPLETED" and found["15"].exit_code == "0:0"
    assert found["20_0"].state == "NODE_FAIL" and found["21"].state == "NODE_FAIL"


def test_jobcomp_last_line_of_a_requeued_job_wins():
    text = JOBCOMP.splitlines()[0].replace("COMPLETED", "NODE_FAIL") + "\n" + JOBCOMP
    assert slurm_text.parse_jobcomp(text)["15"].state == "COMPLETED"


def test_jobcomp_log_only_where_filetxt_is_configured():
    config = slurm_text.parse_config("Configuration data as of 2026-11-30T10:00:00\n"
                                     "JobCompLoc              = /var/log/slurm/jobcomp.log\n"
                                     "JobCompType             = jobcomp/filetxt\n")
    assert slurm_text.jobcomp_log(config) == "/var/log/slurm/jobcomp.log"
    assert slurm_text.jobcomp_log({"JobCompType": "jobcomp/none", "JobCompLoc": "/x"}) is None


@pytest.mark.parametrize("value", ["--qos=high --constraint=h200", "--exclusive",
                                   "--comment='two words'"])
def test_slurm_args_accepted(value):
    assert all(item.startswith("--") for item in slurm_text.check_args(value))


@pytest.mark.parametrize("value, why", [
    ("-p debug", "not a long sbatch option"), ("--qos=high; rm -rf /", "not a long"),
    ("--array=0-9", "set by the harness"), ("--wrap=id", "set by the harness"),
    ("--output=/x", "set by the harness"), ("--comment='open", "No closing quotation"),
    ("script.sh", "not a long"), ("--Qos=x", "not a long")])
def test_slurm_args_refused_name_the_variable_and_the_value(value, why):
    with pytest.raises(UsageError, match=why) as exc:
        slurm_text.check_args(value)
    assert str(exc.value).startswith(f"SLURM_ARGS={value!r}")


@pytest.mark.parametrize("value, named", [
    ("--ar=0-5", "--ar"), ("--outp=/tmp/x", "--outp"), ("--hol", "--hol"),
    ("--qos=high --wra=id", "--wra"), ("--partition=x", "--partition"),
    ("--account=x", "--account"), ("--time=5", "--time"), ("--get-user-env", "--get-user-env")])
def test_slurm_args_only_take_full_names_of_the_allowed_options(value, named):
    # sbatch reads an abbreviation (--ar, --outp, --hol) as the option it begins: a deny list
    # of full names let them through. The harness's own settings have their own variables.
    with pytest.raises(UsageError) as exc:
        slurm_text.check_args(value)
    message = str(exc.value)
    assert message.startswith(f"SLURM_ARGS={value!r}") and f"{named} " in message
    assert "\n" not in message and "--qos" in message


@pytest.mark.parametrize("option", sorted(slurm_text.USER_OPTIONS))
def test_every_allowed_option_is_a_full_name_the_harness_does_not_set(option):
    assert option not in slurm_text.RESERVED_OPTIONS
    assert slurm_text.check_args(f"--{option}=1") == (f"--{option}=1",)


def test_slurm_args_keep_a_semicolon_inside_one_value_as_data():
    assert slurm_text.check_args("--comment='a;b c'") == ("--comment=a;b c",)


@pytest.mark.parametrize("value", ["30", "1:30", "01:00:00", "2-00", "2-12:00",
                                   "2-12:00:00", "UNLIMITED"])
def test_slurm_time_forms(value):
    assert slurm_text.check_time(value) == value


@pytest.mark.parametrize("value", ["1h", "-1", "1:2:3:4", "1-", "30 min"])
def test_slurm_time_refused(value):
    with pytest.raises(UsageError, match="SLURM_TIME="):
        slurm_text.check_time(value)


@pytest.mark.parametrize("value", ["0", "-2", "two", "1.5"])
def test_slurm_parallel_refused(value):
    with pytest.raises(UsageError, match="SLURM_PARALLEL="):
        slurm_text.check_parallel(value)


def test_slurm_unit_default_and_refusal():
    assert slurm_text.check_unit(None, "node") == "node"
    with pytest.raises(UsageError, match="SLURM_UNIT='socket'.*gpu, node"):
        slurm_text.check_unit("socket", "gpu")


@pytest.mark.parametrize("name", ["SLURM_PARTITION", "SLURM_ACCOUNT"])
def test_partition_and_account_names(name):
    assert slurm_text.check_name(name, "gpu,debug") == "gpu,debug"
    with pytest.raises(UsageError, match=f"{name}='a b'"):
        slurm_text.check_name(name, "a b")


def test_shares_cover_every_item_once_with_no_overlap():
    assert slurm_text.shares(7, 3) == [[0, 3, 6], [1, 4], [2, 5]]
    assert slurm_text.shares(2, 5) == [[0], [1]]  # never an empty task


def test_array_spec_with_and_without_a_throttle():
    assert slurm_text.array_spec(1, None) == "0"
    assert slurm_text.array_spec(10, 4) == "0-9%4"


def test_makespan_longest_first():
    # 7 and 5 on two slots, then 4 goes to the 5 (9), 3 to the 7 (10): 10
    assert slurm_text.makespan([3, 5, 4, 7], 2) == 10
    assert slurm_text.makespan([3, 5, 4, 7], 10) == 7
    assert slurm_text.makespan([3, 5, 4, 7], 1) == 19
    assert slurm_text.makespan([], 3) == 0


def test_makespan_needs_a_slot():
    with pytest.raises(ValueError):
        slurm_text.makespan([1.0], 0)
