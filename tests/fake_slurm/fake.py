"""A fake Slurm for tests: sbatch, squeue, scontrol and scancel over a state directory.

sbatch records an array job and starts a simulator process that runs each task's batch script
locally with SLURM_ARRAY_TASK_ID set, at most %P at once, after the job it depends on has
ended. squeue and scontrol print what Slurm 22.05 prints for the same options; scancel stops
the simulator, which cancels the pending tasks and SIGTERMs the running ones.

Knobs (environment, inherited from the harness that calls sbatch):
  FAKE_SLURM_STATE      the state directory (required)
  FAKE_SLURM_NODE_FAIL  a task index whose task ends NODE_FAIL without running
  FAKE_SLURM_PURGED=1   scontrol no longer knows ended jobs (only the jobcomp log does)
  FAKE_SLURM_JOBCOMP=1  the cluster writes a jobcomp/filetxt log
  FAKE_SLURM_SBATCH_FAIL  sbatch prints this to stderr and exits 1
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

STATE = Path(os.environ.get("FAKE_SLURM_STATE", "/nonexistent-fake-slurm"))
TERMINAL = {"COMPLETED", "FAILED", "CANCELLED", "NODE_FAIL", "TIMEOUT"}


@contextmanager
def locked():
    STATE.mkdir(parents=True, exist_ok=True)
    with open(STATE / "lock", "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        yield


def job_path(job: str) -> Path:
    return STATE / "jobs" / f"{job}.json"


def load(job: str) -> dict | None:
    try:
        return json.loads(job_path(job).read_text())
    except FileNotFoundError:
        return None


def save(doc: dict) -> None:
    path = job_path(doc["id"])
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc))
    os.replace(tmp, path)


def update(job: str, index: int, **fields) -> dict:
    with locked():
        doc = load(job)
        doc["tasks"][index].update(fields)
        save(doc)
        return doc


def sbatch(args: list[str]) -> int:
    if os.environ.get("FAKE_SLURM_SBATCH_FAIL"):
        print(os.environ["FAKE_SLURM_SBATCH_FAIL"], file=sys.stderr)
        return 1
    opts = dict(re.fullmatch(r"--([a-z-]+)(?:=(.*))?", a).groups() for a in args[:-1])
    spec = re.fullmatch(r"(\d+)(?:-(\d+))?(?:%(\d+))?", opts["array"])
    count = int(spec.group(2) or spec.group(1)) + 1
    with locked():
        counter = STATE / "next_id"
        first = int(counter.read_text()) if counter.exists() else 100
        counter.write_text(str(first + count + 1))
        doc = {"id": str(first), "script": args[-1], "options": opts,
               "parallel": int(spec.group(3) or count),
               "after": (opts.get("dependency") or "").partition(":")[2] or None,
               "tasks": [{"state": "PENDING", "reason": "Priority", "exit": "0:0",
                          "job_id": str(first + 1 + i), "node": "fake1"}
                         for i in range(count)]}
        if doc["after"]:
            for task in doc["tasks"]:
                task["reason"] = "Dependency"
        save(doc)
    sim = subprocess.Popen([sys.executable, __file__, "_simulate", doc["id"]],
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=open(STATE / f"sim-{doc['id']}.err", "w"),
                           start_new_session=True)
    with locked():
        doc = load(doc["id"])
        doc["sim_pid"] = sim.pid
        save(doc)
    print(doc["id"])
    return 0


def _jobcomp(doc: dict, index: int) -> None:
    if os.environ.get("FAKE_SLURM_JOBCOMP") != "1":
        return
    task = doc["tasks"][index]
    # Slurm 22.05's filetxt adds the array fields after EligibleTime for an array task.
    line = (f"JobId={task['job_id']} UserId=root(0) GroupId=root(0) Name=fake "
            f"JobState={task['state']} Partition=debug TimeLimit=UNLIMITED "
            "StartTime=2026-11-30T10:00:00 EndTime=2026-11-30T10:00:05 NodeList=fake1 "
            "NodeCnt=1 ProcCnt=1 WorkDir=/ ReservationName= Tres=cpu=1,node=1,billing=1 "
            "Account= QOS= WcKey= Cluster=fake SubmitTime=2026-11-30T10:00:00 "
            f"EligibleTime=2026-11-30T10:00:00 ArrayJobId={doc['id']} ArrayTaskId={index} "
            f"DerivedExitCode=0:0 ExitCode={task['exit']}\n")
    with open(STATE / "jobcomp.log", "a") as fh:
        fh.write(line)


def _cancelled(job: str, index: int) -> bool:
    return (STATE / "cancel" / f"{job}_{index}").exists()


def simulate(job: str) -> int:
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    doc = load(job)
    while doc["after"] and not stop:
        before = load(doc["after"])
        if before is None or all(t["state"] in TERMINAL for t in before["tasks"]):
            break
        time.sleep(0.1)
    running: dict[int, subprocess.Popen] = {}
    todo = list(range(len(doc["tasks"])))
    signalled: set[int] = set()
    while (todo or running) and not stop:
        for i in [i for i in todo if _cancelled(job, i)]:
            todo.remove(i)
            _jobcomp(update(job, i, state="CANCELLED", reason="None", exit="0:15"), i)
        for i in [i for i in running if _cancelled(job, i) and i not in signalled]:
            signalled.add(i)
            os.killpg(running[i].pid, signal.SIGTERM)
        while todo and len(running) < doc["parallel"]:
            i = todo.pop(0)
            if os.environ.get("FAKE_SLURM_NODE_FAIL") == str(i):
                _jobcomp(update(job, i, state="NODE_FAIL", reason="NodeDown", exit="0:0"), i)
                continue
            out = doc["options"]["output"].replace("%A", job).replace("%a", str(i))
            env = {**os.environ, "SLURM_ARRAY_TASK_ID": str(i), "SLURM_ARRAY_JOB_ID": job,
                   "SLURM_JOB_ID": doc["tasks"][i]["job_id"]}
            running[i] = subprocess.Popen(["bash", doc["script"]], env=env,
                                          cwd=doc["options"].get("chdir"),
                                          stdout=open(out, "ab"), stderr=subprocess.STDOUT,
                                          start_new_session=True)
            update(job, i, state="RUNNING", reason="None")
        for i, proc in list(running.items()):
            rc = proc.poll()
            if rc is not None:
                del running[i]
                state = ("CANCELLED" if i in signalled else "COMPLETED" if rc == 0
                         else "FAILED")
                _jobcomp(update(job, i, state=state, exit=f"{max(rc, 0)}:0"), i)
        time.sleep(0.05)
    if stop:
        for proc in running.values():
            os.killpg(proc.pid, signal.SIGTERM)
        for proc in running.values():
            proc.wait()
        for i in [*todo, *running]:
            _jobcomp(update(job, i, state="CANCELLED", reason="None", exit="0:15"), i)
    return 0


def squeue(args: list[str]) -> int:
    opts = dict(re.fullmatch(r"--([a-z-]+)(?:=(.*))?", a).groups() for a in args)
    assert opts.get("format") == "%i|%T|%r" and "array" in opts and "noheader" in opts, args
    docs = [d for j in opts["jobs"].split(",") if (d := load(j))]
    active = [(d, i, t) for d in docs for i, t in enumerate(d["tasks"])
              if t["state"] not in TERMINAL]
    if not active:
        print("slurm_load_jobs error: Invalid job id specified", file=sys.stderr)
        return 1
    for d, i, t in active:
        print(f"{d['id']}_{i}|{t['state']}|{t['reason']}")
    return 0


def scontrol(args: list[str]) -> int:
    if args == ["show", "config"]:
        print("Configuration data as of 2026-11-30T10:00:00\nAccountingStorageType   = "
              "(null)\nClusterName             = fake")
        if os.environ.get("FAKE_SLURM_JOBCOMP") == "1":
            print(f"JobCompLoc              = {STATE / 'jobcomp.log'}\n"
                  "JobCompType             = jobcomp/filetxt")
        return 0
    assert args[:3] == ["-o", "show", "job"], args
    doc = load(args[3])
    if doc is None or os.environ.get("FAKE_SLURM_PURGED") == "1":
        print("slurm_load_jobs error: Invalid job id specified", file=sys.stderr)
        return 1
    for i, t in enumerate(doc["tasks"]):
        print(f"JobId={t['job_id']} ArrayJobId={doc['id']} ArrayTaskId={i} JobName=fake "
              f"UserId=root(0) GroupId=root(0) MCS_label=N/A Priority=1 Nice=0 Account=(null) "
              f"QOS=normal JobState={t['state']} Reason={t['reason']} Dependency=(null) "
              f"Requeue=1 Restarts=0 BatchFlag=1 Reboot=0 ExitCode={t['exit']} "
              f"RunTime=00:00:05 TimeLimit=UNLIMITED TimeMin=N/A Partition=debug "
              f"NodeList={t['node']} BatchHost={t['node']} NumNodes=1 NumCPUs=1 "
              f"Command={doc['script']} WorkDir=/ StdOut=/dev/null Power=")
    return 0


def scancel(args: list[str]) -> int:
    for job in args:
        if "_" in job:  # one task of an array
            (STATE / "cancel").mkdir(parents=True, exist_ok=True)
            (STATE / "cancel" / job).touch()
            continue
        doc = load(job)
        if doc and doc.get("sim_pid"):
            try:
                os.kill(doc["sim_pid"], signal.SIGTERM)
            except ProcessLookupError:
                pass
    return 0


if __name__ == "__main__":
    command, rest = sys.argv[1], sys.argv[2:]
    if command == "_simulate":
        sys.exit(simulate(rest[0]))
    sys.exit({"sbatch": sbatch, "squeue": squeue, "scontrol": scontrol,
              "scancel": scancel}[command](rest))
