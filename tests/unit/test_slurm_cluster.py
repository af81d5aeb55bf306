"""The test cluster's pure parts: its configuration, the skip decision, the record parser."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.slurm import cluster, jobs

SPEC = cluster.Spec(root=Path("/tmp/zl-slurm-x"), host="node1", ctld_port=6817, slurmd_port=6818)


def conf_items(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if not line.startswith("Node")
                and not line.startswith("Partition"))


def test_slurm_conf_schedules_cores_side_by_side_and_keeps_every_file_under_root():
    items = conf_items(cluster.slurm_conf(SPEC))
    assert items["SelectType"] == "select/cons_tres"
    assert items["SelectTypeParameters"] == "CR_Core"
    assert items["SlurmdParameters"] == "config_overrides"
    assert items["ProctrackType"] == "proctrack/linuxproc"
    assert items["JobCompType"] == "jobcomp/filetxt"
    assert items["AuthInfo"] == "socket=/tmp/zl-slurm-x/munge/munge.socket"
    assert (items["SlurmctldPort"], items["SlurmdPort"]) == ("6817", "6818")
    paths = [v for k, v in items.items() if k.endswith(("Location", "Dir", "File", "Loc"))]
    assert len(paths) >= 7 and all(p.startswith("/tmp/zl-slurm-x/") for p in paths)


def test_the_node_declares_the_cpus_and_gpus_asked_for():
    spec = cluster.Spec(root=SPEC.root, host="n", ctld_port=1, slurmd_port=2, cpus=16, gpus=2)
    node = [line for line in cluster.slurm_conf(spec).splitlines()
            if line.startswith("NodeName=")]
    assert node == ["NodeName=n NodeAddr=127.0.0.1 CPUs=16 Gres=gpu:2 State=UNKNOWN"]


@pytest.mark.parametrize("gpus,files", [(1, "/tmp/zl-slurm-x/dev/nvidia0"),
                                        (4, "/tmp/zl-slurm-x/dev/nvidia[0-3]"),
                                        (12, "/tmp/zl-slurm-x/dev/nvidia[0-11]")])
def test_gres_conf_names_every_device_file_and_turns_autodetection_off(gpus, files):
    spec = cluster.Spec(root=SPEC.root, host="node1", ctld_port=1, slurmd_port=2, gpus=gpus)
    assert cluster.gres_conf(spec) == f"AutoDetect=off\nNodeName=node1 Name=gpu File={files}\n"
    assert len(spec.gpu_devices()) == gpus


def test_munged_and_the_slurm_daemons_start_in_order_on_this_clusters_files():
    argv = cluster.daemon_argv(SPEC)
    assert [a[0] for a in argv] == ["munged", "slurmctld", "slurmd"]
    assert "--socket=/tmp/zl-slurm-x/munge/munge.socket" in argv[0]
    assert argv[2][-2:] == ["-N", "node1"] and "/tmp/zl-slurm-x/etc/slurm.conf" in argv[1]


@pytest.mark.parametrize("euid,missing,error,expected", [
    (1000, [], None, "the Slurm tests need root"),
    (1000, ["sbatch"], "apt-get failed", "the Slurm tests need root"),
    (0, ["munged", "sbatch"], "apt-get is not available to install them",
     "Slurm is not installed (munged, sbatch missing) and apt-get is not available"),
    (0, ["slurmd"], None, "Slurm is not installed: slurmd missing"),
])
def test_skip_reason_says_why_the_cluster_cannot_come_up(euid, missing, error, expected):
    assert cluster.skip_reason(euid, missing, error).startswith(expected)


def test_no_skip_reason_for_root_with_every_program():
    assert cluster.skip_reason(0, [], None) is None


def test_missing_programs_names_the_daemons_and_clients_not_found():
    found = {"slurmctld", "slurmd", "sinfo", "squeue", "scontrol", "scancel"}
    assert cluster.missing_programs(lambda name: name if name in found else None) == [
        "munged", "sbatch"]


def test_a_failed_apt_get_is_reported_with_its_command_exit_and_last_line(monkeypatch):
    monkeypatch.setattr(cluster.shutil, "which", lambda name, path=None: "/usr/bin/" + name)
    calls = []

    def run(argv, **kwargs):
        calls.append(argv)
        rc = 100 if argv[1] == "install" else 0
        return subprocess.CompletedProcess(argv, rc, "", "E: Unable to locate package slurmd\n")

    error = cluster.install_packages(run)
    assert calls[0] == ["apt-get", "update"]
    assert calls[1][:3] == ["apt-get", "install", "-y"] and calls[1][-4:] == list(cluster.PACKAGES)
    assert error.startswith("`apt-get install -y") and "(exit 100)" in error
    assert error.endswith("E: Unable to locate package slurmd")


def test_without_root_nothing_is_installed(monkeypatch):
    monkeypatch.setattr(cluster.os, "geteuid", lambda: 1000)
    installed = []
    reason = cluster.unavailable(install=lambda: installed.append(1))
    assert reason.startswith("the Slurm tests need root") and installed == []


SCONTROL = ("JobId=12 ArrayJobId=11 ArrayTaskId=1 JobName=task.sh UserId=root(0) "
            "JobState=CANCELLED Reason=None ExitCode=0:15 AllocNode:Sid=localhost:6353 "
            "CPUs/Task=1 ReqB:S:C:T=0:0:*:* WorkDir=/tmp/a dir with spaces StdIn=/dev/null \n")


def test_a_record_keeps_keys_with_colons_and_slashes_and_values_with_spaces():
    record = jobs.parse_record(SCONTROL)
    assert record["WorkDir"] == "/tmp/a dir with spaces"
    assert record["AllocNode:Sid"] == "localhost:6353" and record["CPUs/Task"] == "1"
    assert record["ReqB:S:C:T"] == "0:0:*:*" and record["StdIn"] == "/dev/null"
    assert jobs.task_key(record) == "11_1" and jobs.exit_code(record) == (0, 15)


def test_an_empty_value_stays_empty_and_a_plain_job_is_keyed_by_its_id():
    record = jobs.parse_record("JobId=3 Name=wrap ReservationName= JobState=FAILED ExitCode=1:0")
    assert record["ReservationName"] == "" and record["JobState"] == "FAILED"
    assert jobs.task_key(record) == "3" and jobs.exit_code(record) == (1, 0)


def test_parse_records_skips_blank_lines_and_reads_one_record_per_line():
    assert [r["JobId"] for r in jobs.parse_records("JobId=1 A=b\n\nJobId=2 A=c\n")] == ["1", "2"]


@pytest.mark.parametrize("value,expected", [("", False), ("0", False), ("1", True)])
def test_required_reads_zero_one_or_unset(value, expected):
    assert cluster.required({cluster.REQUIRED_ENV: value} if value else {}) is expected


@pytest.mark.parametrize("value", ["yes", "true", " 1", "1;rm"])
def test_a_bad_required_value_is_an_error_naming_the_variable_and_the_choices(value):
    with pytest.raises(ValueError) as caught:
        cluster.required({cluster.REQUIRED_ENV: value})
    assert str(caught.value) == f"error: ZL_SLURM_REQUIRED={value!r} is not one of '0', '1'"


@pytest.mark.parametrize("declared", [{"gpus": 0}, {"cpus": 0}, {"gpus": -1}])
def test_a_node_without_a_cpu_or_a_gpu_is_refused_before_anything_is_written(declared):
    with pytest.raises(ValueError, match="a node needs a CPU and a GPU"):
        cluster.Spec(root=SPEC.root, host="n", ctld_port=1, slurmd_port=2, **declared)


JOBCOMP = """JobId=7 Name=wrap JobState=COMPLETED ExitCode=0:0
JobId=9 Name=a JobState=CANCELLED ArrayJobId=8 ArrayTaskId=1 ExitCode=0:15
JobId=8 Name=a JobState=COMPLETED ArrayJobId=8 ArrayTaskId=0 ExitCode=0:0
JobId=10 Name=b JobState=FAILED ArrayJobId=10 ArrayTaskId=0 ExitCode=2:0
"""


@pytest.mark.parametrize("job,expected", [
    ("8", {"8_0": "COMPLETED", "8_1": "CANCELLED"}),
    ("7", {"7": "COMPLETED"}),
    ("10", {"10_0": "FAILED"}),
    ("9", {}),  # a task's own JobId is not the array's
])
def test_ended_picks_a_jobs_lines_by_array_id_whatever_each_tasks_own_id(tmp_path, job, expected):
    spec = cluster.Spec(root=tmp_path, host="n", ctld_port=1, slurmd_port=2)
    spec.jobcomp.parent.mkdir()
    spec.jobcomp.write_text(JOBCOMP)
    found = jobs.ended(cluster.Cluster(spec), job)
    assert {key: r["JobState"] for key, r in found.items()} == expected
