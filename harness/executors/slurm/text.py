"""Slurm's own words: parsers of sbatch, squeue, scontrol and jobcomp output; SLURM_* checks."""

from __future__ import annotations

import heapq
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from harness.errors import UsageError, choice_error
from harness.settings.variables import SLURM_UNITS

# Task states after which a task never runs again (squeue's long names).
TERMINAL = frozenset({"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED",
                      "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE", "REVOKED"})
# Options the harness itself sets on every submission: SLURM_ARGS may not change them.
RESERVED_OPTIONS = frozenset({"array", "parsable", "output", "error", "input", "wrap",
                              "job-name", "dependency", "chdir", "export", "export-file",
                              "test-only", "wait", "hold", "usage", "help", "version"})
# What SLURM_ARGS may pass to sbatch: full long names only. sbatch reads an abbreviation as
# the option it begins (--ar is --array, --hol --hold), so a list of refused names cannot hold;
# the partition, account and time limit have their own variables.
USER_OPTIONS = frozenset({
    "qos", "reservation", "constraint", "cluster-constraint", "gres", "gres-flags", "mem",
    "mem-per-cpu", "mem-per-gpu", "cpus-per-task", "cpus-per-gpu", "gpus", "gpus-per-node",
    "gpus-per-task", "gpu-bind", "gpu-freq", "ntasks-per-node", "exclude", "nodelist", "nice",
    "priority", "comment", "mail-type", "mail-user", "licenses", "exclusive", "oversubscribe",
    "requeue", "no-requeue", "signal", "begin", "deadline", "time-min", "tmp", "switches",
    "hint", "mincpus", "sockets-per-node", "cores-per-socket", "threads-per-core",
    "distribution", "wckey", "network", "power", "core-spec", "thread-spec", "spread-job",
    "use-min-nodes", "kill-on-invalid-dep", "acctg-freq", "profile", "mcs-label"})
_OPTION = re.compile(r"--([a-z][a-z0-9-]*)(?:=([^\n\r\0]*))?")
_TIME = re.compile(r"(?:\d+-\d{1,2}(?::\d{1,2}){0,2}|\d+(?::\d{1,2}){0,2}|UNLIMITED|INFINITE)")
_NAME = re.compile(r"[A-Za-z0-9_.-]+(?:,[A-Za-z0-9_.-]+)*")


@dataclass(frozen=True)
class TaskState:
    """One array task as Slurm reports it: `state` is squeue's long name, `exit_code` is
    scontrol's `code:signal`, None where the source does not say."""

    task: str  # "<array job id>_<index>"
    state: str
    reason: str | None = None
    exit_code: str | None = None

    @property
    def ended(self) -> bool:
        return self.state in TERMINAL

    def describe(self) -> str:
        exit_code = f" exit={self.exit_code}" if self.exit_code else ""
        reason = f" reason={self.reason}" if self.reason and self.reason != "None" else ""
        return f"slurm task {self.task} {self.state}{exit_code}{reason}"


def settled(task: str, ended: Mapping[str, TaskState], started: Mapping[str, str]
            ) -> TaskState:
    """How a task that left no done file ended: Slurm's record of it (`ended`), else
    `unrecorded`. A task cancelled before it started reads cancelled_while_pending either way:
    Slurm keeps a record of such an element only when it had split it off the array's pending
    range, and then with the pending reason (JobArrayTaskLimit) and a meaningless 0:0."""
    state = ended.get(task)
    if state is None:
        return unrecorded(task, ended, started)
    if state.state == "CANCELLED" and task not in started:
        return TaskState(task, "CANCELLED", "cancelled_while_pending")
    return state


def unrecorded(task: str, ended: Mapping[str, TaskState], started: Mapping[str, str]
                ) -> TaskState:
    """A task Slurm has no record of. One that never started while its array's other tasks
    are remembered was scancel'led while pending: Slurm drops such an element from the
    array's pending range without a record of its own (scontrol and jobcomp both)."""
    job = task.split("_")[0]
    if task not in started and any(t.split("_")[0] == job for t in ended):
        return TaskState(task, "CANCELLED", "cancelled_while_pending")
    return TaskState(task, "UNKNOWN")


# --------------------------------------------------------------------------- parsing


def parse_sbatch(text: str) -> str:
    """The job id of `sbatch --parsable` (`id` or `id;cluster`); UsageError otherwise."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    job = lines[-1].split(";", 1)[0] if lines else ""
    if not job.isdigit():
        raise UsageError(f"sbatch --parsable printed {text.strip()!r}; expected a job id")
    return job


def parse_squeue(text: str) -> dict[str, TaskState]:
    """Tasks of `squeue --array --noheader --format=%i|%T|%r`, by task id; a line of another
    form (a pending range `12_[3-5]` where --array was lost) raises ValueError."""
    found = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = line.strip().split("|")
        if len(parts) != 3 or not re.fullmatch(r"\d+_\d+", parts[0]):
            raise ValueError(f"squeue: {line!r} is not '<job>_<task>|<state>|<reason>'")
        found[parts[0]] = TaskState(parts[0], parts[1], parts[2] or None)
    return found


def parse_key_values(text: str) -> dict[str, str]:
    """`Key=value Key=value ...` as Slurm prints it; a token without `=` continues the value
    before it (a value with a space, such as a command line)."""
    values: dict[str, str] = {}
    last = None
    for token in text.split():
        key, sep, value = token.partition("=")
        if sep and re.fullmatch(r"[A-Za-z][A-Za-z0-9_:/]*", key):
            values[key], last = value, key
        elif last is not None:
            values[last] += " " + token
    return values


def task_indices(text: str) -> list[int]:
    """`ArrayTaskId` of a record: `3`, or tasks not split off yet, `4-7,9` or `0-9:2`."""
    found: list[int] = []
    for part in text.split("%")[0].split(","):
        m = re.fullmatch(r"(\d+)(?:-(\d+)(?::(\d+))?)?", part)
        if not m:
            return []
        first = int(m.group(1))
        found += range(first, int(m.group(2) or first) + 1, int(m.group(3) or 1))
    return found


def parse_scontrol_jobs(text: str) -> dict[str, TaskState]:
    """Array tasks of `scontrol [-o] show job ID` (one line or indented lines per job, a
    record starting at each `JobId=`), by `<ArrayJobId>_<ArrayTaskId>`; a record of tasks
    not split off yet (`ArrayTaskId=4-7`) stands for each; jobs not in an array are left out."""
    found = {}
    for chunk in re.split(r"(?=(?:^|\s)JobId=)", text):
        record = parse_key_values(chunk)
        job = record.get("ArrayJobId")
        if not (job and "JobState" in record):
            continue
        for index in task_indices(record.get("ArrayTaskId", "")):
            task = f"{job}_{index}"
            found[task] = TaskState(task, record["JobState"], record.get("Reason"),
                                    record.get("ExitCode"))
    return found


def parse_jobcomp(text: str) -> dict[str, TaskState]:
    """The jobcomp/filetxt log's lines by the job's own id (`JobId`) and, where the line has
    `ArrayJobId` and `ArrayTaskId`, also by `<ArrayJobId>_<ArrayTaskId>`; the last line of a
    job wins (a requeued task writes one per run)."""
    found = {}
    for line in text.splitlines():
        record = parse_key_values(line)
        job = record.get("JobId")
        if not job or "JobState" not in record:
            continue
        array = (record.get("ArrayJobId"), record.get("ArrayTaskId"))
        keys = [job, f"{array[0]}_{array[1]}"] if all(array) else [job]
        for key in keys:
            found[key] = TaskState(key, record["JobState"], None, record.get("ExitCode"))
    return found


def parse_config(text: str) -> dict[str, str]:
    """`scontrol show config`'s `Key = value` lines."""
    values = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() and " " not in key.strip():
            values[key.strip()] = value.strip()
    return values


def jobcomp_log(config: Mapping[str, str]) -> str | None:
    """The filetxt log's path where the cluster writes one, else None."""
    if config.get("JobCompType") == "jobcomp/filetxt" and config.get("JobCompLoc"):
        return config["JobCompLoc"]
    return None


# --------------------------------------------------------------------------- checks


def check_args(value: str | None) -> tuple[str, ...]:
    """SLURM_ARGS as sbatch options: split like a shell would (never run by one), each a
    long `--option` or `--option=value` of USER_OPTIONS, spelt in full."""
    if not value:
        return ()
    try:
        items = shlex.split(value)
    except ValueError as exc:
        raise UsageError(f"SLURM_ARGS={value!r} is not accepted ({exc})") from None
    for item in items:
        m = _OPTION.fullmatch(item)
        if not m:
            raise UsageError(f"SLURM_ARGS={value!r} is not accepted: {item!r} is not a long "
                             "sbatch option; expected --option or --option=value, e.g. "
                             "--qos=high --constraint=h200")
        name = m.group(1)
        if name in RESERVED_OPTIONS:
            raise UsageError(f"SLURM_ARGS={value!r} is not accepted: --{name} is set by "
                             f"the harness; not accepted: {', '.join(sorted(RESERVED_OPTIONS))}")
        if name not in USER_OPTIONS:
            raise UsageError(f"SLURM_ARGS={value!r} is not accepted: --{name} is not an sbatch "
                             "option SLURM_ARGS passes (full names only; SLURM_PARTITION, "
                             "SLURM_ACCOUNT and SLURM_TIME have their own variables); expected "
                             f"one of: {', '.join('--' + o for o in sorted(USER_OPTIONS))}")
    return tuple(items)


def check_time(value: str | None) -> str | None:
    if value and not _TIME.fullmatch(value):
        raise UsageError(f"SLURM_TIME={value!r} is not accepted; expected a Slurm time limit: "
                         "minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS or UNLIMITED")
    return value or None


def check_name(name: str, value: str | None) -> str | None:
    if value and not _NAME.fullmatch(value):
        raise UsageError(f"{name}={value!r} is not accepted; expected names of letters, "
                         "digits, '_', '.', '-', comma-separated")
    return value or None


def check_parallel(value: str | None) -> int | None:
    if not value:
        return None
    if not re.fullmatch(r"[0-9]+", value) or int(value) < 1:
        raise UsageError(f"SLURM_PARALLEL={value!r} is not accepted; expected a whole number "
                         "of at least 1 (array tasks at once)")
    return int(value)


def check_unit(value: str | None, default: str) -> str:
    unit = value or default
    if unit not in SLURM_UNITS:
        raise choice_error("SLURM_UNIT", unit, SLURM_UNITS)
    return unit


# --------------------------------------------------------------------------- planning


def shares(count: int, tasks: int) -> list[list[int]]:
    """Task i of K takes items i, i+K, ...: every item once, no two tasks the same one."""
    return [list(range(i, count, tasks)) for i in range(min(tasks, count))]


def array_spec(tasks: int, parallel: int | None) -> str:
    """`--array` of `tasks` tasks, throttled to `parallel` at once where given."""
    spec = "0" if tasks == 1 else f"0-{tasks - 1}"
    return f"{spec}%{parallel}" if parallel else spec


def makespan(walls: Sequence[float], slots: int) -> float:
    """Seconds until the last of `walls` ends when each next-longest one starts on the slot
    that frees first (longest-first list scheduling)."""
    if slots < 1:
        raise ValueError("slots must be at least 1")
    free = [0.0] * min(slots, max(len(walls), 1))
    for wall in sorted(walls, reverse=True):
        heapq.heapreplace(free, free[0] + wall)
    return max(free)
