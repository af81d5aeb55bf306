"""One harness run per device on a host: two processes, one real flock, the second waits or
refuses naming the holder; a kill -9 frees the device; a holder's children never wait for it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from harness import backends
from harness.backends import Device
from harness.cli import main
from harness.contract.states import OK
from harness.errors import UsageError
from harness.executors import device_lock
from harness.executors.base import Task
from harness.executors.device_lock import DeviceBusy
from harness.executors.local import LocalExecutor
from harness.settings.spec import REPO_ROOT

CPU, CUDA = backends.get("cpu"), backends.get("cuda")
# A process that holds cuda device 0 until its stdin closes, saying "held" once it does.
HOLDER = """
import sys
from harness import backends
from harness.executors import device_lock
with device_lock.holding(backends.get(sys.argv[1]), sys.argv[2:] or [None], what="the holder",
                         enumerate_devices=lambda: []) as held:
    print("held", held[device_lock.HELD_VAR], flush=True)
    sys.stdin.read()
"""
# A process that waits for cuda device 0 and says how its wait ended.
WAITER = """
from harness import backends
from harness.executors import device_lock
try:
    with device_lock.holding(backends.get("cuda"), ["0"], enumerate_devices=lambda: []):
        print("held", flush=True)
except device_lock.WaitStopped as exc:
    print("stopped", exc.exit_code, exc, flush=True)
"""


def holder(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, *args], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, cwd=REPO_ROOT,
                            env={**os.environ, "PYTHONPATH": str(REPO_ROOT), **(env or {})})
    return proc


def wait_for(proc: subprocess.Popen, prefix: str) -> list[str]:
    """The lines `proc` printed up to and including the first that starts with `prefix`."""
    assert proc.stdout is not None
    lines = []
    for line in proc.stdout:
        lines.append(line.rstrip("\n"))
        if line.startswith(prefix):
            return lines
    raise AssertionError(f"{prefix!r} never came: {lines}")


@pytest.fixture
def held_cuda0():
    first = holder("cuda", "0")
    wait_for(first, "held")
    yield first
    first.kill()
    first.wait()


def test_a_second_run_on_a_held_device_waits_saying_who_holds_it_then_runs(held_cuda0):
    # Regression: two campaigns on one device both ran to the end with no word.
    second = holder("cuda", "0")
    seen = wait_for(second, device_lock.BUSY_MARKER)
    (busy,) = seen
    assert f"device=cuda-0 held_by: pid={held_cuda0.pid} " in busy
    assert 'by="the holder"' in busy and "waiting until it ends" in busy
    held_cuda0.stdin.close()  # the first run ends: the second takes the device
    assert wait_for(second, "held")[-1].startswith(f"held {second.pid}:cuda-0")
    second.stdin.close()
    assert second.wait() == 0


def test_a_signal_stops_a_wait_for_a_held_device_saying_so(held_cuda0):
    # Regression: SIGTERM killed a run waiting for a device without a word (exit 143 and a
    # campaign left "running"); now the wait ends as Ctrl-C's does, naming the signal.
    second = subprocess.Popen([sys.executable, "-c", WAITER], stdout=subprocess.PIPE,
                              text=True, cwd=REPO_ROOT,
                              env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    wait_for(second, device_lock.BUSY_MARKER)
    second.send_signal(signal.SIGTERM)
    (stopped,) = wait_for(second, "stopped")[-1:]
    assert stopped == ("stopped 143 interrupted by SIGTERM while waiting for device cuda-0, "
                       "which another harness run holds; nothing ran on it")
    assert second.wait() == 0


def test_with_a_bound_the_second_run_refuses_naming_the_holder(held_cuda0, monkeypatch):
    monkeypatch.setenv(device_lock.WAIT_VAR, "0")
    with pytest.raises(DeviceBusy, match=rf"^device cuda-0 is held by another harness run "
                       rf"\(pid={held_cuda0.pid} .*by=\"the holder\"\); waited 0 s "
                       r"\(ZL_DEVICE_WAIT=0\)"):
        with device_lock.holding(CUDA, ["0"], enumerate_devices=lambda: []):
            pass
    other = device_lock.holding(CUDA, ["1"], enumerate_devices=lambda: [])
    with other as held:  # another device is free
        assert held[device_lock.HELD_VAR] == f"{os.getpid()}:cuda-1"


def test_a_holder_killed_outright_frees_its_device(held_cuda0, monkeypatch):
    held_cuda0.send_signal(signal.SIGKILL)
    held_cuda0.wait()
    monkeypatch.setenv(device_lock.WAIT_VAR, "0")
    with device_lock.holding(CUDA, ["0"], enumerate_devices=lambda: []):
        pass


def test_a_holders_children_and_its_own_nested_holds_never_wait_for_it(monkeypatch):
    monkeypatch.setenv(device_lock.WAIT_VAR, "0")
    with device_lock.holding(CPU, [None]) as held:
        with device_lock.holding(CPU, [None]):  # one process: one holder
            pass
        child = holder("cpu", env=held)  # a campaign's unit: its driver holds the host
        assert wait_for(child, "held")[-1] == f"held {held[device_lock.HELD_VAR]}"
        child.stdin.close()
        assert child.wait() == 0
        stranger = holder("cpu", env={device_lock.WAIT_VAR: "0"})
        assert stranger.wait() == 1  # another campaign on cpu: refused (DeviceBusy)


def test_an_index_and_a_uuid_of_one_device_are_one_lock_and_cpu_is_the_whole_host():
    found = [Device(0, "H200", "GPU-aa"), Device(1, "H200", "GPU-bb")]
    keys = device_lock.device_keys(CUDA, ["1", "GPU-aa"], enumerate_devices=lambda: found)
    assert keys == ["cuda-GPU-aa", "cuda-GPU-bb"]
    assert device_lock.device_keys(CUDA, ["3"], enumerate_devices=lambda: found) == ["cuda-3"]
    assert device_lock.device_keys(CPU, [None]) == ["cpu-host"]


def test_the_local_executor_holds_its_devices_for_the_session_and_hands_its_tasks_the_hold(
        tmp_path, monkeypatch):
    monkeypatch.setenv(device_lock.WAIT_VAR, "0")
    log = tmp_path / "t.log"
    probe = ("import os, sys; print(os.environ['ZL_DEVICE_HELD']); "
             "sys.exit(0 if os.environ['ZL_DEVICE_HELD'] else 3)")
    executor = LocalExecutor([None], backend=CPU, poll_s=0.01)

    class Events:
        ends: list = []

        def started(self, *_a, **_k) -> None: ...

        def ended(self, task, end) -> None:
            self.ends.append(end.state)

    with executor.session():
        stranger = holder("cpu", env={device_lock.WAIT_VAR: "0"})
        assert stranger.wait() == 1  # held for the whole session, between its runs too
        executor.run([Task("t", (sys.executable, "-c", probe), log)], Events())
    assert Events.ends == [OK]
    assert log.read_text().strip() == f"{os.getpid()}:cpu-host"


def test_a_bad_wait_is_one_line_before_anything_is_created(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(device_lock.WAIT_VAR, "nan")
    out = tmp_path / "runs"
    assert main(["run", "--backend", "cpu", "--op", "tanh", "--out", str(out)]) == 2
    assert capsys.readouterr().err == ("error: ZL_DEVICE_WAIT='nan' is not accepted; expected "
                                       "seconds to wait for a device another harness run holds"
                                       " (0: refuse at once; unset: wait until it ends)\n")
    assert not out.exists()
    with pytest.raises(UsageError, match="ZL_DEVICE_WAIT='-1'"):
        device_lock.wait_limit({device_lock.WAIT_VAR: "-1"})


def test_the_lock_folder_is_this_test_runs_own():
    assert Path(os.environ[device_lock.DIR_VAR]) == device_lock.lock_dir()
    assert device_lock.lock_dir({}).name == device_lock.DEFAULT_DIR_NAME
