"""The executor seam: tasks in, their ends out, through the local executor."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from harness.campaign.where import LAUNCH
from harness.contract.states import CRASHED, ERROR, FAILED, OK, TIMEOUT
from harness.errors import UsageError
from harness.executors import Build
from harness.executors.base import Ended, Task, last_line, reason_for, state_for
from harness.executors.local import LocalExecutor, build, deal
from harness.settings import spec

# A child that prints its argv and one variable, then exits with the code it is given.
CHILD = ("import os, sys; print('argv', sys.argv[2:]); print('var', os.environ.get('ZL_X'));"
         " sys.exit(int(sys.argv[1]))")


class Recorder:
    def __init__(self) -> None:
        self.starts: list[tuple[str, str]] = []
        self.ends: list[Ended] = []

    def queued(self, task: Task, where: str) -> None:
        raise AssertionError("a local executor never queues")

    def started(self, task: Task, where: str, pid: int | None = None) -> None:
        assert pid is not None
        self.starts.append((task.id, where))

    def ended(self, task: Task, end: Ended) -> None:
        self.ends.append(end)


def task(tmp_path: Path, name: str, rc: int, **kw) -> Task:
    return Task(name, (sys.executable, "-c", CHILD, str(rc)), tmp_path / f"{name}.log", **kw)


def run(tasks, devices=(None,), **kw) -> Recorder:
    events = Recorder()
    outcome = LocalExecutor(list(devices), poll_s=0.01, **kw).run(tasks, events)
    assert outcome.signal is None and not outcome.detached
    return events


def test_a_task_waits_for_the_one_it_follows_and_runs_after_a_failure_not_a_crash(tmp_path):
    tasks = [task(tmp_path, "a/r0", 1), task(tmp_path, "a/r1", 0, after="a/r0"),
             task(tmp_path, "b/r0", 3), task(tmp_path, "b/r1", 0, after="b/r0")]
    events = run(tasks)
    states = {e.task: e.state for e in events.ends}
    # a/r0 failed (its rows still replay): a/r1 runs; b/r0 crashed: b/r1 never starts
    assert states == {"a/r0": FAILED, "a/r1": OK, "b/r0": ERROR}
    assert [t for t, _ in events.starts] == ["a/r0", "a/r1", "b/r0"]
    failed = next(e for e in events.ends if e.task == "a/r0")
    assert failed.reason == "var None" and failed.rc == 1 and failed.wall_s is not None


def test_a_task_that_follows_one_outside_the_plan_runs(tmp_path):
    events = run([task(tmp_path, "a/r1", 0, after="a/r0")])
    assert [e.state for e in events.ends] == [OK]


def test_each_task_gets_its_device_its_own_variables_and_appends_to_its_log(tmp_path):
    one = task(tmp_path, "one", 0, env={"ZL_X": "mine"})
    (tmp_path / "one.log").write_text("an earlier attempt\n")
    events = run([one], devices=("3",), env={"ZL_X": "base", "PATH": "/usr/bin:/bin"})
    log = (tmp_path / "one.log").read_text().splitlines()
    assert log == ["an earlier attempt", "argv ['--devices', '3']", "var mine"]
    assert events.starts == [("one", "3")] and events.ends[0].where == "3"
    run([task(tmp_path, "two", 0)], devices=("5",), pin=False, env={"PATH": "/usr/bin:/bin"})
    assert "argv []" in (tmp_path / "two.log").read_text()


def test_deal_gives_the_next_task_to_the_device_that_frees_first(tmp_path):
    tasks = [task(tmp_path, op, 0) for op in ("mm", "tanh", "add")]
    placed = [(d, t.id) for d, t in deal(tasks, ["0", "1"], {"mm": 10, "add": 2, "tanh": 3})]
    assert placed == [("0", "mm"), ("1", "tanh"), ("1", "add")]
    lines = LocalExecutor(["0", "1"]).describe(tasks, {"mm": 10, "add": 2, "tanh": 3})
    assert lines == ["device 0: mm", "device 1: tanh, add",
                     "pytest: a fresh process per run (WORKERS=0)"]
    assert LocalExecutor(["0"], resident=True).describe(tasks, {})[-1].endswith("(WORKERS=1)")
    many = [task(tmp_path, f"op{i:03d}", 0) for i in range(2754)]
    line = LocalExecutor(["0"]).describe(many, {})[0]  # a suite's plan stays readable
    assert line.startswith("device 0: op000, op001, ") and line.endswith(", ... (2754 in all)")
    assert line.count(",") == 24 and len(line) < 300


@pytest.mark.parametrize(("rc", "interrupted", "state"), [
    (0, False, "ok"), (1, False, "failed"), (2, False, "error"), (5, False, "error"),
    (137, False, "error"), (-9, False, "crashed"), (247, False, "crashed"),
    (None, False, "not_run"), (-15, True, "interrupted")])
def test_states_from_exit_codes(rc, interrupted, state):
    assert state_for(rc, interrupted=interrupted) == state


def test_a_task_stopped_at_its_limit_reads_timeout_whatever_its_exit_code():
    assert state_for(-15, timed_out=True) == TIMEOUT == state_for(143, timed_out=True)


@pytest.mark.slow  # a sleeper stopped at its limit
def test_a_task_past_its_limit_is_stopped_reads_timeout_and_the_next_task_runs(tmp_path):
    # Regression: a hanging operator held its device forever; nothing after it ran.
    # The hang's own end, 600 s in, is far from its 1 s limit: the bound below holds on any
    # load unless the run waited for it.
    hang = Task("hang", (sys.executable, "-c", "import time; time.sleep(600)"),
                tmp_path / "hang.log", timeout_s=1)
    began = time.monotonic()
    events = run([hang, task(tmp_path, "next", 0)], grace_s=1.0)
    assert time.monotonic() - began < 300
    ends = {e.task: e for e in events.ends}
    assert ends["hang"].state == TIMEOUT and ends["hang"].reason == "timeout after 1 s"
    assert ends["hang"].rc == -15
    assert ends["next"].state == OK and [t for t, _ in events.starts] == ["hang", "next"]


def test_a_child_killed_by_a_signal_reads_crashed_with_the_signals_name(tmp_path):
    # Regression: a unit killed by a signal read "error" with its log's last line as reason.
    kill = "import os, signal; print('# started_utc: x', flush=True); " \
           "os.kill(os.getpid(), signal.SIGKILL)"
    events = run([Task("k", (sys.executable, "-c", kill), tmp_path / "k.log")])
    (end,) = events.ends
    assert (end.state, end.rc, end.reason) == (CRASHED, -9, "killed by SIGKILL")


def test_a_harness_child_passing_on_its_childs_signal_death_reads_crashed(tmp_path):
    # `harness run` exits with pytest's negative code: a SIGSEGV reads 245 to its parent.
    assert reason_for(CRASHED, tmp_path / "x.log", rc=245) == "killed by SIGSEGV (rc 245)"


def test_the_reason_is_the_logs_last_line_and_only_for_a_task_that_did_not_end_ok(tmp_path):
    log = tmp_path / "x.log"
    assert last_line(log) == "(no log)"
    log.write_text("first\n\nPREFLIGHT_FAILED check=x\n\n")
    assert reason_for(ERROR, log) == "PREFLIGHT_FAILED check=x" and reason_for(OK, log) is None


@pytest.mark.parametrize("bad", [{"argv": ["x"], "log": "l"}, {"id": "a", "log": "l"},
                                 {"id": "a", "argv": "x y", "log": "l"},
                                 {"id": "a", "argv": ["x", 3], "log": "l"},
                                 {"id": "a", "argv": ["x"], "log": "l", "env": {"A": 1}},
                                 {"id": "a", "argv": ["x"], "log": "l", "timeout_s": "1"}])
def test_a_plan_files_task_without_what_it_needs_is_one_line(bad):
    with pytest.raises(UsageError, match="a task of the plan has no valid"):
        Task.from_json(bad)


def test_a_task_round_trips_through_a_plan_file(tmp_path):
    one = Task("a/r1", ("h", "x y;z"), tmp_path / "l", after="a/r0", stage="later",
               env={"K": "v"}, timeout_s=3600)
    again = Task.from_json(json.loads(json.dumps(one.to_json())))
    assert again == Task("a/r1", ("h", "x y;z"), tmp_path / "l", after="a/r0", stage="later",
                         env={"K": "v"}, timeout_s=3600)
    assert Task.from_json({"id": "a", "argv": ["x"], "log": "l"}).timeout_s is None


def test_a_campaigns_units_write_their_bytecode_whatever_the_caller_says(tmp_path, monkeypatch):
    # Each unit is a process of its own: where the caller set PYTHONDONTWRITEBYTECODE (or its
    # prefix was not writable) every unit compiled the harness again, 0.5 s on an H100's host.
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    monkeypatch.delenv("PYTHONPYCACHEPREFIX", raising=False)
    out = tmp_path / "out dir; x"
    settings = spec.resolve({"backend": "cpu", "runner": "host", "out": str(out)}, env={})
    executor = build(Build(settings, None, tmp_path, LAUNCH, workers="0"))
    (tmp_path / "unit_module.py").write_text("X = 1\n")
    child = f"import sys; sys.path.insert(0, {str(tmp_path)!r}); import unit_module"
    events = Recorder()
    executor.run([Task("u/r0", (sys.executable, "-c", child), tmp_path / "u.log")], events)
    assert [e.state for e in events.ends] == [OK]
    assert list((out / ".pycache").rglob("unit_module*.pyc"))
    assert not list(tmp_path.glob("__pycache__"))  # nothing beside the sources
