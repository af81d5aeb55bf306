"""Process helpers for the tests that prove no child outlives an interrupt (Linux /proc)."""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from harness.settings.spec import REPO_ROOT


def alive(pid: int) -> bool:
    """True while `pid` exists and is not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def wait_for(predicate, timeout: float, what: str, poll: float = 0.05) -> None:
    """Poll `predicate` until it holds; fail naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(poll)


def interrupt_driver(source: str, tmp_path: Path, signum: int, what: str
                     ) -> tuple[int, str, list[int]]:
    """Run the driver script `source` (argv: a runs directory, a pids file) until it has written
    two lines of pids, send it `signum`; return its exit code, its output and those pids."""
    pids, driver = tmp_path / "pids.txt", tmp_path / "driver.py"
    driver.write_text(textwrap.dedent(source))
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    proc = subprocess.Popen([sys.executable, str(driver), str(tmp_path / "runs"), str(pids)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        # Generous limits: what is awaited happens in seconds or never (the driver's children
        # sleep 300 s), and a limit is only spent when the test fails anyway.
        wait_for(lambda: pids.is_file() and len(pids.read_text().splitlines()) == 2, 120, what)
        proc.send_signal(signum)
        output, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, output, [int(p) for line in pids.read_text().splitlines()
                                     for p in line.split()]


def children(pid: int, needle: str = "") -> list[int]:
    """Live children of `pid` whose command line holds `needle` (Linux /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            cmdline = (stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z" and needle in cmdline:
            found.append(int(stat.parent.name))
    return found


def _tree(pid: int) -> list[str]:
    """`pid` and its live descendants, one line each: pid, state, kernel wait, command line."""
    lines, todo = [], [pid]
    while todo:
        here = todo.pop()
        try:
            state = Path(f"/proc/{here}/stat").read_text().rsplit(")", 1)[1].split()[0]
            wchan = Path(f"/proc/{here}/wchan").read_text()
            cmdline = Path(f"/proc/{here}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        lines.append(f"{here} {state} {wchan or '-'} {cmdline[:300]}")
        todo.extend(children(here))
    return lines


def communicate_or_dump(proc: subprocess.Popen, timeout: float) -> tuple[str, str]:
    """proc.communicate(timeout); past it, fail with what the process tree was doing and every
    thread's stack of `proc` (started with PYTHONFAULTHANDLER=1, it prints them on SIGABRT),
    so that a hang seen once on a loaded machine can be read rather than guessed."""
    try:
        return proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        tree = _tree(proc.pid)
        with contextlib.suppress(OSError):  # the stacks, not a core file in the checkout
            resource.prlimit(proc.pid, resource.RLIMIT_CORE, (0, 0))
        proc.send_signal(signal.SIGABRT)
        try:
            out, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        raise AssertionError(
            f"{proc.args} did not end within {timeout} s; its processes:\n" + "\n".join(tree)
            + f"\nits output's end:\n{(out or '')[-3000:]}\nits threads at SIGABRT:\n"
            + f"{(err or '')[-8000:]}") from None
