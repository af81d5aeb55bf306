"""What a pytest of a process of its own leaves running is stopped when it ends, and its
output is read to the end although a leftover child still held it open."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from harness.executors import procs as supervise
from harness.run import runner

# A "pytest" that starts two busy children and exits at once: one keeps its output open, one
# leaves its process group and session (and its output) as a daemon would.
# Each ends on its own in the end, so that a copy that waits for them (as it did) ends too.
LEAVES = '''import subprocess, sys
busy = "import time\\nstart = time.time()\\nwhile time.time() - start < {}: pass"
held = subprocess.Popen([sys.executable, "-c", busy.format(20)])
away = subprocess.Popen([sys.executable, "-c", busy.format(120)], start_new_session=True,
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print("children", held.pid, away.pid, flush=True)
'''


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            return fh.read().rsplit(") ", 1)[1][:1] not in ("Z", "X")
    except OSError:
        return False


def test_what_a_pytest_left_running_is_stopped_with_its_run(tmp_path: Path):
    # Regression: a benchmark's busy subprocess.Popen kept running after its campaign ended,
    # with ppid 1, beside the next one.
    inv = runner.Invocation(argv=[sys.executable, "-c", LEAVES], cwd=tmp_path,
                            env={"PATH": os.environ.get("PATH", "")}, plugins=())
    echoed: list[bytes] = []
    launches: list[dict[str, object]] = []
    with open(tmp_path / "log", "wb") as log:
        rc = runner._stream(inv, log, echoed.append, supervise.GroupStopper(), launches,
                            worker=None)
    held, away = (int(p) for p in b"".join(echoed).decode().split()[1:3])
    assert rc == 0
    assert not _running(held) and not _running(away)
    assert sorted(launches[0]["left_running"]) == sorted([held, away])
    assert (f"# pytest left child processes running, stopped with it: {held}, {away}"
            in (tmp_path / "log").read_text()) or (
        f"stopped with it: {away}, {held}" in (tmp_path / "log").read_text())


def test_a_process_that_was_there_before_the_run_is_not_the_runs_to_stop(tmp_path: Path):
    # A container's keeper (started before pytest) or another test's leftover in this process:
    # the run stopped every descendant of its process once pytest ended, not only pytest's.
    import subprocess

    before = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        inv = runner.Invocation(argv=[sys.executable, "-c", "print('done')"], cwd=tmp_path,
                                env={"PATH": os.environ.get("PATH", "")}, plugins=())
        launches: list[dict[str, object]] = []
        with open(tmp_path / "log", "wb") as log:
            rc = runner._stream(inv, log, lambda _: None, supervise.GroupStopper(), launches,
                                worker=None)
        assert rc == 0 and _running(before.pid)
        assert "left_running" not in launches[0]
    finally:
        before.kill()
        before.wait()
