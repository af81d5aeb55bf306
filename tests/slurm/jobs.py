"""Submit jobs to a test cluster and read how they ended, from scontrol and the jobcomp log."""

from __future__ import annotations

import re
import time

from tests.slurm.cluster import Cluster

# States a job (or an array task) never leaves; everything else may still change.
ENDED = frozenset({"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY",
                   "BOOT_FAIL", "DEADLINE", "PREEMPTED"})
# A field starts where a space is followed by a key (`CPUs/Task=`, `AllocNode:Sid=` included).
_FIELD = re.compile(r" (?=[A-Za-z][A-Za-z0-9_:/]*=)")


def parse_record(line: str) -> dict[str, str]:
    """One `Key=value ...` line of `scontrol -o show job` or of the jobcomp log, as a dict.

    A value may hold spaces (a WorkDir); it ends only where ` Key=` begins.
    """
    record = {}
    for item in _FIELD.split(line.strip()):
        key, sep, value = item.partition("=")
        if sep:
            record[key] = value.strip()
    return record


def parse_records(text: str) -> list[dict[str, str]]:
    return [parse_record(line) for line in text.splitlines() if "=" in line]


def exit_code(record: dict[str, str]) -> tuple[int, int]:
    """(exit status, signal) of an ended job from its `ExitCode=S:N` field."""
    status, _, signal = record["ExitCode"].partition(":")
    return int(status), int(signal or 0)


def task_key(record: dict[str, str]) -> str:
    """`<job>_<task>` for an array task, else the job id: the name scancel takes."""
    task = record.get("ArrayTaskId")
    return f"{record['ArrayJobId']}_{task}" if task else record["JobId"]


def submit(cluster: Cluster, *args: str) -> str:
    """sbatch `args` with --parsable; the job id (an array's id)."""
    out = cluster.run("sbatch", "--parsable", *args).stdout.strip()
    return out.split(";")[0]


def jobs(cluster: Cluster, job_id: str) -> list[dict[str, str]]:
    """scontrol's records of a job: one per array task (a pending range is one record)."""
    done = cluster.run("scontrol", "-o", "show", "job", job_id)
    return parse_records(done.stdout)


def states(cluster: Cluster, job_id: str) -> dict[str, str]:
    """JobState of each task of a job, keyed by task_key."""
    return {task_key(r): r["JobState"] for r in jobs(cluster, job_id)}


def wait_ended(cluster: Cluster, job_id: str, timeout: float = 60) -> list[dict[str, str]]:
    """Poll until every task of `job_id` has ended; its scontrol records."""
    deadline = time.monotonic() + timeout
    while True:
        records = jobs(cluster, job_id)
        if records and all(r["JobState"] in ENDED for r in records):
            return records
        if time.monotonic() > deadline:
            raise TimeoutError(f"job {job_id} still {[r['JobState'] for r in records]} "
                               f"after {timeout:g} s\n{cluster.logs()}")
        time.sleep(0.3)


def wait_state(cluster: Cluster, name: str, state: str, timeout: float = 30) -> None:
    """Poll until the job or array task `name` (`<job>_<task>`) is in `state`."""
    deadline = time.monotonic() + timeout
    while (found := states(cluster, name).get(name)) != state:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{name} is {found!r}, not {state}, after {timeout:g} s")
        time.sleep(0.3)


def jobcomp(cluster: Cluster) -> list[dict[str, str]]:
    """Every line of the jobcomp log: one per ended job or array task."""
    log = cluster.spec.jobcomp
    return parse_records(log.read_text(errors="replace")) if log.exists() else []


def ended(cluster: Cluster, job_id: str) -> dict[str, dict[str, str]]:
    """The jobcomp records of a job or of each task of an array, keyed by task_key.

    Slurm 22.05 writes ArrayJobId and ArrayTaskId into each task's line, whose own JobId is
    another number (the last task keeps the array's).
    """
    return {task_key(r): r for r in jobcomp(cluster)
            if r.get("ArrayJobId") == job_id or (r["JobId"] == job_id and not r.get("ArrayJobId"))}


def queue(cluster: Cluster) -> list[str]:
    """Ids of the jobs squeue still lists, array tasks one per line."""
    return cluster.run("squeue", "-h", "-r", "-o", "%i").stdout.split()
