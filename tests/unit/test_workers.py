"""Workers that stay up: sessions in one process, each as a fresh process would run it, and a
worker's failures costing the worker, never the next run."""

from __future__ import annotations

import gc
import os
import signal
import sys
import types
from pathlib import Path

import pytest

from harness.contract import boundary
from harness.executors import workers
from harness.executors.lease import WorkerRun, start_pytest
from harness.executors.procs import stop_children
from harness.executors.workers import WorkerHost, worker_key
from harness.plugins import leftovers, owned
from harness.providers.flaggems import Node
from harness.run import runner
from harness.run.plugin_plan import PLUGINS_VAR
from harness.run.preflight import Plan
from harness.settings import spec
from harness.settings.spec import REPO_ROOT
from tests.procs import wait_for

# each test so marked starts a worker (an interpreter importing torch) or a pytest process
SLOW = pytest.mark.slow
TESTS = {
    "test_env.py": '''import os


def test_env():
    print("pid", os.getpid(), "run", os.environ.get("ZL_PLUGIN_RUN"), "cwd", os.getcwd())
''',
    # module state: a fresh process imports the module again, so the count is 1 each time
    "test_state.py": '''import helper


def test_state():
    helper.COUNT += 1
    print("count", helper.COUNT)
''',
    "helper.py": "COUNT = 0\n",
    "statefulplug.py": '''SESSIONS = []


def pytest_sessionstart(session):
    SESSIONS.append(1)
    print("plugin sessions", len(SESSIONS))
''',
    "test_fails.py": "def test_fails():\n    assert False\n",
    # garbage in a cycle made while collecting is collected before what collection imported
    # is frozen, as a fresh process's collection after the first shape would reclaim it; a
    # cycle alive at the freeze that a test drops stays through the session's collections
    # and is collected when the session ends
    "test_frozen.py": '''import gc
import os


class Cycle:
    def __init__(self, name):
        self.name, self.me = name, self

    def __del__(self):
        with open(os.environ["ZL_TEST_MARK"] + "-" + self.name, "w") as fh:
            fh.write("collected")


def made(name):
    return os.path.exists(os.environ["ZL_TEST_MARK"] + "-" + name)


Cycle("collection")
held = Cycle("held")


def test_frozen():
    global held
    gone = made("collection")
    held = None
    gc.collect()  # as FlagGems does after every shape
    print("frozen", gc.get_freeze_count(), "tracked", len(gc.get_objects()), "gone", gone,
          "held", not made("held"))
''',
    # a cycle made at collection that a test drops, whose finalizer patches torch: frozen
    # past its session, it runs when the worker collects everything
    "test_del_patch.py": '''import torch


class Patcher:
    def __init__(self):
        self.me = self

    def __del__(self):
        torch.tanh = lambda x: x


held = Patcher()


def test_del_patch():
    global held
    held = None
    print("patched", getattr(torch.tanh, "__name__", "") == "<lambda>")
''',
    "test_thread.py": '''import threading
import time


def test_thread():
    threading.Thread(target=time.sleep, args=(60,), daemon=True, name="leaky").start()
''',
    "test_patches.py": '''import torch


def test_patches():
    torch.tanh = lambda x: x
''',
    # what a benchmark can leave behind that a later session would call or run under
    "test_patch_methods.py": '''import time

import torch

ORIGINAL = torch.Tensor.add_


def slow_add_(self, *args, **kwargs):
    time.sleep(0.001)
    return ORIGINAL(self, *args, **kwargs)


def test_patch_methods():
    torch.Tensor.add_ = slow_add_
    torch.nn.functional.softmax = lambda *args, **kwargs: None
''',
    "test_patch_dtype.py": '''import torch


def test_patch_dtype():
    torch.set_default_dtype(torch.float64)
''',
    "test_patch_flag.py": '''import torch


def test_patch_flag():
    torch.backends.mkldnn.enabled = False
''',
    "test_patch_grad.py": '''import torch


def test_patch_grad():
    torch.set_grad_enabled(False)
''',
    "test_patch_mode.py": '''from torch.overrides import TorchFunctionMode


def test_patch_mode():
    TorchFunctionMode().__enter__()
''',
    "test_patch_kernel.py": '''import torch

LIB = torch.library.Library("aten", "IMPL")


def test_patch_kernel():
    LIB.impl("tanh", lambda x: x, "CPU")
''',
    "test_patch_code.py": '''import torch.nn.functional as F


def test_patch_code():
    F.softmax.__code__ = (lambda *args, **kwargs: None).__code__
''',
    "test_patch_modules.py": '''import sys
import types


def test_patch_modules():
    sys.modules["torch.nn.functional"] = types.ModuleType("torch.nn.functional")
''',
    # a module first imported by this session's collection, patched by its test
    "test_patch_new.py": '''import colorsys


def test_patch_new():
    colorsys.rgb_to_hsv = lambda *args: (0, 0, 0)
''',
    "test_leaks_child.py": '''import subprocess
import sys


def test_leaks_child():
    child = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    print("child", child.pid, flush=True)
''',
    "test_settles.py": '''import signal

import torch


def test_settles():
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    torch.set_num_threads(1)
''',
    "test_sees.py": '''import os
import signal

import torch


def test_sees():
    print("pid", os.getpid(), "sigterm", signal.getsignal(signal.SIGTERM) is signal.SIG_DFL,
          "threads", torch.get_num_threads())
''',
    "test_segv.py": '''import os
import signal


def test_segv():
    os.kill(os.getpid(), signal.SIGSEGV)
''',
    "test_sleeps.py": '''import time


def test_sleeps():
    print("sleeping", flush=True)
    time.sleep(60)
''',
    "test_logs.py": '''import logging


def test_logs():
    logger = logging.getLogger("flag_gems_benchmark")
    logger.addHandler(logging.FileHandler("record.log"))
    logger.warning("row")
''',
}


@pytest.fixture
def suite(tmp_path: Path) -> Path:
    root = tmp_path / "suite"
    (root / "tests").mkdir(parents=True)
    for name, text in TESTS.items():
        (root / "tests" / name).write_text(text)
    return root


def env(**extra: str) -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(REPO_ROOT),
            "PYTHONUNBUFFERED": "1", boundary.BACKEND_VAR: "cpu", **extra}


def run(host: WorkerHost | None, suite: Path, test: str, generation: str = "", **extra: str
        ) -> tuple[int, str, dict]:
    argv = [sys.executable, "-m", "pytest", f"tests/{test}", "-s", "-q", "-p",
            "no:cacheprovider"]
    proc, facts = start_pytest(argv, suite, env(**extra), host.path if host else None,
                               generation)
    assert proc.stdout is not None
    text = proc.stdout.read().decode()
    return proc.wait(), text, facts


def pid_of(text: str) -> int:
    return int(text.split("pid ", 1)[1].split()[0])


@SLOW
def test_sessions_of_one_environment_share_a_worker_that_sees_each_runs_own_variables(suite):
    with WorkerHost() as host:
        rc1, out1, facts1 = run(host, suite, "test_env.py", ZL_PLUGIN_RUN="1")
        rc2, out2, facts2 = run(host, suite, "test_env.py", ZL_PLUGIN_RUN="2")
        rc3, out3, facts3 = run(host, suite, "test_env.py", ZL_PLUGIN_RUN="3", OTHER="x")
    assert (rc1, rc2, rc3) == (0, 0, 0)
    assert pid_of(out1) == pid_of(out2) == facts1["pid"] == facts2["pid"]
    assert (facts1["kind"], facts1["session"], facts2["session"]) == ("worker", 1, 2)
    assert "run 1 " in out1 and "run 2 " in out2 and f"cwd {suite}" in out2
    assert pid_of(out3) != pid_of(out1) and facts3["session"] == 1  # another environment
    assert host.started == 2
    # a new worker says why no worker was reused; a reused one says nothing
    assert facts1["new_because"] == "the first of its environment"
    assert "new_because" not in facts2
    assert facts3["new_because"] == "the idle workers' environments differ in OTHER"


@SLOW
def test_a_sessions_collections_skip_what_the_worker_held_before_it(suite, tmp_path):
    # FlagGems collects garbage after every shape; on an H100 a worker holding torch, Triton
    # and flag_gems spent 0.15-0.2 s a shape on it. What lived before the session (and what
    # its collection imported) is frozen out of those collections for the session alone.
    from harness.plugins.worker import COLLECT_ALL_EVERY

    with WorkerHost() as host:
        mark = tmp_path / "collected"
        for n in range(1, COLLECT_ALL_EVERY + 1):
            for made in tmp_path.glob("collected-*"):
                made.unlink()
            rc, out, facts = run(host, suite, "test_frozen.py", ZL_TEST_MARK=str(mark))
            assert rc == 0 and facts["session"] == n, (out, facts)
            # the dropped cycle stays frozen past its session; the worker's whole collection
            # every COLLECT_ALL_EVERY sessions takes every session's (one session's own
            # collection costs a fraction of a whole one)
            whole = n == COLLECT_ALL_EVERY
            assert (tmp_path / "collected-held").exists() == whole, (n, out)
            assert ("collect" in facts["worker_s"]) == whole, facts["worker_s"]
            frozen, tracked = (int(out.split(word + " ", 1)[1].split()[0])
                               for word in ("frozen", "tracked"))
            assert frozen > tracked, out  # torch and pytest are frozen, the session's not
            assert "gone True" in out  # collection's garbage went before the freeze
            assert "held True" in out  # frozen: the session's own collection passed it by


@SLOW
def test_a_finalizer_a_whole_collection_runs_is_seen_before_the_next_session(suite):
    # Regression: the whole collection ran after the session's state was compared, so a
    # frozen finalizer's patch of torch reached the next sessions and retired nothing.
    from harness.plugins.worker import COLLECT_ALL_EVERY

    with WorkerHost() as host:
        for n in range(1, COLLECT_ALL_EVERY + 1):
            rc, out, facts = run(host, suite, "test_del_patch.py")
            assert rc == 0 and facts["session"] == n and "patched False" in out, (n, out)
            if n < COLLECT_ALL_EVERY:
                assert not facts.get("retired"), (n, facts)
        assert "torch.tanh" in facts["retired"], facts  # the 16th, whose end collected all
        rc, out, facts = run(host, suite, "test_del_patch.py")
        assert facts["session"] == 1 and "patched False" in out  # a new worker


@SLOW
def test_a_worker_serves_one_generation_and_is_stopped_when_the_next_begins(suite):
    with WorkerHost() as host:
        _, out1, facts1 = run(host, suite, "test_env.py", "r0")
        _, out2, facts2 = run(host, suite, "test_env.py", "r0")
        _, out3, facts3 = run(host, suite, "test_env.py", "r1")
        alive = [w.proc.pid for w in host._workers if w.proc.poll() is None]
    assert pid_of(out1) == pid_of(out2) != pid_of(out3)
    assert (facts2["session"], facts3["session"]) == (2, 1)
    assert facts3["new_because"] == ("its generation 'r1' is new (its environment's worker "
                                     "served 'r0')")
    assert alive == [pid_of(out3)]  # r0's worker serves no run again: stopped, not kept idle


def test_the_variables_that_keep_a_run_from_an_idle_worker_are_named_in_order():
    from harness.executors.workers import differing

    assert differing({"A": "1", "B": "2", "C": "3"}, {"C": "3", "B": "x", "D": "4", "A": "1"}
                     ) == ["B", "D"]
    assert differing({"A": "1"}, {"A": "1"}) == []


def test_worker_key_ignores_only_the_runs_own_plugin_variables():
    base = {"A": "1", boundary.RUN_DIR_VAR: "/r1"}
    assert worker_key("py", Path("/f"), base) == worker_key(
        "py", Path("/f"), {**base, boundary.RUN_DIR_VAR: "/r2"})
    assert worker_key("py", Path("/f"), base) != worker_key("py", Path("/f"), {**base, "A": "2"})
    assert worker_key("py", Path("/f"), base) != worker_key("py2", Path("/f"), base)
    assert worker_key("py", Path("/f"), base) != worker_key("py", Path("/g"), base)


@SLOW
def test_each_session_imports_the_tests_own_modules_afresh(suite):
    with WorkerHost() as host:
        outs = [run(host, suite, "test_state.py") for _ in range(2)]
    assert [rc for rc, _, _ in outs] == [0, 0]
    assert all("count 1" in out for _, out, _ in outs), [out for _, out, _ in outs]
    assert outs[0][2]["pid"] == outs[1][2]["pid"]


@SLOW
def test_a_plugin_the_session_names_starts_afresh_as_in_a_new_process(suite):
    (suite / "tests" / "statefulplug.py").rename(suite / "statefulplug.py")
    with WorkerHost() as host:
        outs = [run(host, suite, "test_env.py", PYTEST_PLUGINS="statefulplug")
                for _ in range(2)]
    assert [rc for rc, _, _ in outs] == [0, 0] and outs[0][2]["pid"] == outs[1][2]["pid"]
    assert all("plugin sessions 1" in out for _, out, _ in outs), [o for _, o, _ in outs]


@SLOW
def test_ordinary_sessions_of_the_cpu_suite_with_the_runs_plugins_keep_their_worker(tmp_path):
    # Regression: every second session of an ordinary cpu campaign retired its worker with
    # "changed what a later session would use: harness.plugins.capture, ...": the plugin
    # modules dropped after a session stayed bound in the harness.plugins package, and the next
    # session's import rebinding them read as a change.
    settings = spec.resolve({"backend": "cpu", "flaggems_dir": str(REPO_ROOT / "examples"
                             / "cpu_suite"), "runner": "host", "out": str(tmp_path)}, {})
    plan = Plan(node=Node("benchmark/test_tanh.py", "test_tanh", ("tanh",)), op="tanh",
                python=sys.executable, python_version="", features={})
    facts = []
    with WorkerHost() as host:
        for n in range(3):
            run_dir = tmp_path / f"r{n}"
            run_dir.mkdir()
            inv = runner.build_invocation(settings, plan, run_dir)
            proc, fact = start_pytest(inv.argv, inv.cwd, env(**inv.env), host.path)
            assert proc.stdout is not None
            out = proc.stdout.read().decode()
            assert proc.wait() == 0, out
            facts.append(fact)
    assert inv.env[PLUGINS_VAR].split(",") == list(inv.plugins) and inv.plugins
    assert [(f["kind"], f["session"], f["retired"]) for f in facts] == [
        ("worker", n, None) for n in (1, 2, 3)]
    assert len({f["pid"] for f in facts}) == 1 and host.started == 1


# pytest-mock's layout: the entry point names the package, whose hooks live in its submodule;
# at configure they patch.object asserts that AsyncMock inherits, and stopping the patches at
# the end deletes them from AsyncMock again.
ENTRY_POINT_PLUGIN = {"zlwrap/__init__.py": "from zlwrap.plugin import pytest_configure\n",
                      "zlwrap/plugin.py": """import unittest.mock

AsyncMockType = unittest.mock.AsyncMock
_patches = []


def _wrapped(self, *args, **kwargs):
    return None


def _unwrap():
    for patcher in _patches:
        patcher.stop()
    _patches.clear()


def pytest_configure(config):
    for name in ("assert_awaited", "assert_not_awaited"):
        patcher = unittest.mock.patch.object(AsyncMockType, name, _wrapped)
        patcher.start()
        _patches.append(patcher)
    config.add_cleanup(_unwrap)
    print("zlwrap configured")
"""}


@SLOW
def test_what_an_installed_pytest_plugin_sets_at_configure_and_takes_back_keeps_the_worker(
        suite, tmp_path):
    # On an H200 every session of FlagGems' suite retired its worker, after its first:
    # "pytest_mock.plugin.AsyncMockType.assert_awaited (deleted)". The plugin pytest registers
    # is the package; the asserts it patched in are its submodule's functions.
    site = tmp_path / "site"
    (site / "zlwrap-0.dist-info").mkdir(parents=True)
    (site / "zlwrap").mkdir()
    for name, text in ENTRY_POINT_PLUGIN.items():
        (site / name).write_text(text)
    (site / "zlwrap-0.dist-info" / "METADATA").write_text("Name: zlwrap\nVersion: 0\n")
    (site / "zlwrap-0.dist-info" / "entry_points.txt").write_text(
        "[pytest11]\nzlwrap = zlwrap\n")
    path = f"{site}{os.pathsep}{REPO_ROOT}"
    with WorkerHost() as host:
        outs = [run(host, suite, "test_env.py", PYTHONPATH=path) for _ in range(3)]
    assert [rc for rc, _, _ in outs] == [0, 0, 0], [out for _, out, _ in outs]
    assert all("zlwrap configured" in out for _, out, _ in outs)  # loaded by its entry point
    assert [(f["session"], f["retired"]) for _, _, f in outs] == [(1, None), (2, None),
                                                                    (3, None)]
    assert host.started == 1


def test_a_plugins_modules_are_its_own_and_those_its_hooks_come_from():
    hooks = types.ModuleType("zlpkg.plugin")
    exec("def pytest_configure(config):\n    pass\n", hooks.__dict__)
    package = types.ModuleType("zlpkg")
    package.pytest_configure = hooks.pytest_configure  # as pytest_mock re-exports its hooks

    class Probe:
        def pytest_configure(self, config: object) -> None:
            pass

    manager = pytest.PytestPluginManager()
    for plugin in (package, types.ModuleType("zlbare"), Probe()):
        manager.register(plugin)
    # an object's hooks are not a module plugin's: this test module's state stays watched
    assert owned.plugin_modules(manager) == {"zlpkg", "zlpkg.plugin", "zlbare"}


@SLOW
def test_a_session_that_fails_retires_its_worker_and_the_next_runs_in_a_fresh_one(suite):
    with WorkerHost() as host:
        rc1, _, facts1 = run(host, suite, "test_fails.py")
        rc2, out2, facts2 = run(host, suite, "test_env.py")
    assert (rc1, rc2) == (1, 0)
    assert facts1["retired"] == "its session exited 1"
    assert pid_of(out2) != facts1["pid"] and facts2["session"] == 1
    assert facts2["new_because"] == "the last one of its environment retired"


CHANGED = "the session changed what a later session would use: "


LEAVES_STATE = [
    ("test_thread.py", "the session left threads running: leaky"),
    ("test_patches.py", CHANGED + "torch.tanh"),
    ("test_patch_methods.py", CHANGED + "torch._tensor.Tensor.add_ (added), "
                                        "torch.nn.functional.softmax"),
    ("test_patch_dtype.py", CHANGED + "torch.Storage, torch.get_default_dtype(): "
                                      "'torch.float32' -> 'torch.float64'"),
    ("test_patch_flag.py", CHANGED + "torch._C._get_mkldnn_enabled(): True -> False"),
    ("test_patch_grad.py", CHANGED + "torch.is_grad_enabled(): True -> False"),
    ("test_patch_mode.py", CHANGED + "torch._C._len_torch_function_stack(): 0 -> 1"),
    ("test_patch_kernel.py", CHANGED + "torch.library._impls: +aten/tanh/CPU"),
    ("test_patch_code.py", CHANGED + "torch.nn.functional.softmax"),
    ("test_patch_modules.py", CHANGED + "sys.modules['torch.nn.functional'] replaced"),
    ("test_patch_new.py", CHANGED + "colorsys.rgb_to_hsv"),
]


@SLOW
def test_a_session_that_leaves_state_behind_retires_its_worker(suite):
    # Regression: a thread a benchmark left wrote into the next operator's run.log, and a
    # patched torch.tanh timed the next operator's reference 400 times slower, both ok; a
    # benchmark that set torch.Tensor.add_ to a slow wrapper and replaced
    # torch.nn.functional.softmax left its worker alive (only vars(torch) was compared), and
    # the next operator's tanh read 0.74 ms against 0.019 ms alone.
    # One host for every case: each session retires its worker, so each runs in a worker of
    # its own (a new pid), as the next operator's would; one worker start each instead of two.
    pids: list[int] = []
    with WorkerHost() as host:
        for test, why in LEAVES_STATE:
            rc, _, facts = run(host, suite, test)
            assert (test, rc, facts["retired"]) == (test, 0, why)
            assert facts["pid"] not in pids and facts["session"] == 1, (test, facts)
            pids.append(facts["pid"])
        rc_next, out, _ = run(host, suite, "test_env.py")
    assert rc_next == 0 and pid_of(out) not in pids


@SLOW
def test_a_session_that_leaves_a_child_running_has_it_stopped_before_the_run_ends(suite):
    # Regression: a benchmark's busy subprocess.Popen ran on with ppid 1 after its campaign;
    # the worker said "left child processes running" and left them.
    with WorkerHost() as host:
        rc, out, facts = run(host, suite, "test_leaks_child.py")
        child = int(out.split("child ", 1)[1].split()[0])
        assert not _alive(child)  # gone once the run has read its output and its end
        rc_next, out_next, _ = run(host, suite, "test_env.py")
    assert (rc, rc_next) == (0, 0)
    assert facts["retired"] == f"the session left child processes running (stopped): {child}"
    assert pid_of(out_next) != facts["pid"]


@SLOW
def test_signal_handlers_and_torch_threads_are_put_back_for_the_next_session(suite):
    # Regression: a benchmark that ignored SIGTERM left a worker that outlived its driver
    import torch

    with WorkerHost() as host:
        run(host, suite, "test_settles.py")
        rc, out, facts = run(host, suite, "test_sees.py")
    assert rc == 0 and facts["session"] == 2
    assert f"sigterm True threads {torch.get_num_threads()}" in out


@SLOW
def test_a_crash_reads_as_the_crash_of_a_fresh_pytest_and_costs_only_the_worker(suite):
    with WorkerHost() as host:
        rc, _, facts = run(host, suite, "test_segv.py")
        rc_next, out_next, _ = run(host, suite, "test_env.py")
    fresh, _, _ = run(None, suite, "test_segv.py")
    assert rc == fresh == -signal.SIGSEGV
    assert "died" in facts["retired"]
    assert rc_next == 0 and pid_of(out_next) != facts["pid"]


@SLOW
def test_stopping_a_session_stops_its_worker_as_it_would_a_process(suite):
    with WorkerHost() as host:
        argv = [sys.executable, "-m", "pytest", "tests/test_sleeps.py", "-s", "-q"]
        proc, _ = start_pytest(argv, suite, env(), host.path)
        assert isinstance(proc, WorkerRun) and proc.stdout is not None
        assert b"sleeping" in proc.stdout.readline()
        stop_children([proc], grace_s=5.0)
        # SIGTERM ended it (a session that outlived the grace would end by SIGKILL)
        assert proc.wait() == -signal.SIGTERM
        rc, _, facts = run(host, suite, "test_env.py")
    assert rc == 0 and facts["pid"] != proc.pid


@SLOW
def test_a_run_that_dies_holding_its_worker_has_the_worker_stopped(suite):
    with WorkerHost() as host:
        argv = [sys.executable, "-m", "pytest", "tests/test_sleeps.py", "-s", "-q"]
        proc, _ = start_pytest(argv, suite, env(), host.path)
        assert isinstance(proc, WorkerRun)
        proc._lease.close()  # as the death of the process that held the lease closes it
        # a worker nobody stops stays up: a generous limit costs nothing when it is stopped
        wait_for(lambda: not _alive(proc.pid), 60, "the worker to stop", poll=0.1)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as fh:  # a zombie is gone for this purpose
        return fh.read().split(") ", 1)[1][0] != "Z"


@SLOW
def test_log_handlers_a_session_adds_are_closed_after_it(suite):
    with WorkerHost() as host:
        rc1, _, _ = run(host, suite, "test_logs.py")
        (suite / "record.log").unlink()
        rc2, _, _ = run(host, suite, "test_logs.py")
    assert (rc1, rc2) == (0, 0)
    assert (suite / "record.log").read_text() == "row\n"  # one handler, the second session's


def test_a_worker_that_cannot_start_leaves_the_run_to_a_fresh_process(suite, tmp_path):
    broken = tmp_path / "python"
    broken.write_text("#!/bin/sh\necho 'no module named pytest' >&2\nexit 7\n")
    broken.chmod(0o755)
    with WorkerHost() as host:
        proc, facts = start_pytest([str(broken), "-m", "pytest", "x"], suite, env(), host.path)
        assert proc.wait() == 7
    assert facts["kind"] == "process"
    assert "exited 7 before it was ready: no module named pytest" in facts["worker_unavailable"]


@SLOW
def test_no_host_is_a_fresh_process_and_a_gone_host_says_so(suite, tmp_path):
    rc, out, facts = run(None, suite, "test_env.py")
    assert rc == 0 and facts == {"kind": "process"}
    argv = [sys.executable, "-m", "pytest", "tests/test_env.py", "-q", "-p", "no:cacheprovider"]
    proc, facts = start_pytest(argv, suite, env(), str(tmp_path / "gone"))
    assert proc.wait() == 0 and "does not answer" in facts["worker_unavailable"]


@SLOW
def test_the_host_stops_its_workers_when_the_plan_ends(suite):
    with WorkerHost() as host:
        _, _, facts = run(host, suite, "test_env.py")
        assert _alive(facts["pid"])
    assert not _alive(facts["pid"])


class _Device:
    """A device module as torch.cuda is, whose state the test sets."""

    def __init__(self, capturing: bool = False, held: int = 0, total: int | None = None
                 ) -> None:
        self.capturing, self.held, self.total = capturing, held, total

    def is_initialized(self) -> bool:
        return True

    def is_current_stream_capturing(self) -> bool:
        return self.capturing

    def synchronize(self) -> None:
        pass

    def empty_cache(self) -> None:
        pass

    def memory_allocated(self) -> int:
        return self.held

    def mem_get_info(self) -> tuple[int, int]:
        if self.total is None:
            raise RuntimeError("not this device's")
        return self.total - self.held, self.total


class _Torch:
    def __init__(self, device: _Device, generator_ok: bool = True) -> None:
        self.cuda, self.generator_ok = device, generator_ok

    def randn(self, *shape: int, device: str) -> None:
        if not self.generator_ok:
            raise RuntimeError("Offset increment outside graph capture encountered "
                               "unexpectedly.")


@pytest.mark.parametrize(("torch", "why"), [
    (_Torch(_Device()), None),
    (_Torch(_Device(), generator_ok=False), "the device failed after the session: "
     "RuntimeError: Offset increment outside graph capture encountered unexpectedly."),
    (_Torch(_Device(capturing=True)), "a graph capture was left open by the session"),
    (_Torch(_Device(held=512 << 20)), "512 MiB of device memory still allocated after the "
     "session (no tensor that Python holds: a library's own allocation)"),
    # 1% of the device may stay held (a library's cache of its last call, seen on an H200);
    # beyond it, kept sessions' leftovers added up, the worker retires
    (_Torch(_Device(held=512 << 20, total=140 << 30)), None),
    (_Torch(_Device(held=1500 << 20, total=140 << 30)), "1500 MiB of device memory still "
     "allocated after the session (no tensor that Python holds: a library's own allocation)"),
], ids=["healthy", "generator_in_capture", "capture_open", "memory_held", "within_1pct",
        "beyond_1pct"])
def test_a_device_the_session_left_unusable_retires_the_worker(torch, why):
    from harness.plugins.worker import Worker

    worker = Worker()
    worker.torch = torch
    assert worker.retire_reason(0, {boundary.BACKEND_VAR: "cuda"}) == why
    assert worker.retire_reason(1, {boundary.BACKEND_VAR: "cuda"}) == "its session exited 1"


def test_a_fingerprint_taken_while_the_worker_waits_is_the_next_sessions_and_sees_changes_since(
        monkeypatch):
    # The fingerprint a session is compared with is taken as the worker waits (the other
    # side's session runs then), not at the session's start: a change in between, which one
    # taken at the start would have missed, reads as a difference.
    from harness.plugins import worker as worker_module

    worker = worker_module.Worker()
    worker.torch = None
    watched = types.ModuleType("zl_idle_change")
    watched.call = len
    monkeypatch.setitem(sys.modules, "zl_idle_change", watched)
    worker.take_ahead()
    assert worker.ahead is not None and worker.ahead_s > 0
    watched.call = sorted  # patched while the worker waited
    before = worker._before(None)
    assert worker.ahead is None and worker.seconds["ahead"] == worker.ahead_s
    found = leftovers.differences(before, {}, lambda n: False, lambda n: False)
    assert "zl_idle_change.call" in found, found
    # without one taken ahead (a worker's first session after a retired one), one is taken now
    again = worker._before(None)
    assert again is not before and leftovers.differences(
        again, {}, lambda n: False, lambda n: False) == []


def test_device_memory_other_than_its_baseline_collects_everything_after_the_session(
        monkeypatch):
    # What lived before a session stays frozen after it, so garbage frozen with it (a test
    # module's tensor it dropped) goes only with a whole collection: one runs wherever the
    # device's allocated bytes differ from those after the last one, more or fewer (a library
    # cache let go can hide garbage under the old count), and every COLLECT_ALL_EVERY sessions.
    from harness.plugins import worker as worker_module

    device = _Device(held=8 << 20)
    worker = worker_module.Worker()
    worker.torch = _Torch(device)
    assert worker.collect_due("cuda")  # no baseline yet
    worker.collect_all("cuda")
    assert worker.baseline == 8 << 20 and "collect" in worker.seconds
    worker.runs = 1
    assert not worker.collect_due("cuda")
    for held_now in (1 << 30, 4 << 20):
        device.held = held_now
        assert worker.collect_due("cuda"), held_now
    device.held = 8 << 20
    worker.runs = worker_module.COLLECT_ALL_EVERY
    assert worker.collect_due("cuda")  # its every Nth session
    worker.runs += 1
    assert not worker.collect_due("cuda") and not worker.collect_due(None)


def test_memory_held_says_so_even_where_naming_what_holds_it_fails(monkeypatch):
    from harness.plugins import held

    def broken(*_: object, **__: object) -> str:
        raise NotImplementedError("Cannot access storage of SparseTensorImpl")

    monkeypatch.setattr(held, "held_by", broken)
    assert held.retire_reason(None, _Device(held=512 << 20), "cuda", 512 << 20) == (
        "512 MiB of device memory still allocated after the session")


@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors")
def test_memory_held_after_a_session_is_named_by_its_tensor_and_what_holds_it():
    # seen on an H200: FlagGems' outer left 128 MiB, a (1024, 65536) float16 tensor, every
    # session; the reason must say what holds it, down to a name a user can look up
    import torch

    from harness.plugins.held import held_by

    class Inputs:
        cached = ([torch.empty(1 << 28, dtype=torch.uint8)],)

    said = held_by(torch, "cpu", shown=1)
    assert said.startswith("(268435456,) torch.uint8 256 MiB held by list < tuple < ")
    assert said.split(";")[0].endswith("type test_memory_held_after_a_session_is_named_by_its_"
                                       "tensor_and_what_holds_it.<locals>.Inputs")
    del Inputs.cached
    assert "256 MiB" not in held_by(torch, "cpu", shown=1)

    holder = types.ModuleType("zl_holder")  # a module's list of (output, input) pairs
    holder.kept = [(torch.empty(1 << 28, dtype=torch.uint8), None)]
    gc.collect()  # the holders now old: the lists held_by makes as it looks are found first
    assert held_by(torch, "cpu", shown=1).split(";")[0] == (
        "(268435456,) torch.uint8 256 MiB held by tuple < list < module zl_holder")
    del holder.kept

    # a sparse or nested tensor alive has no storage or no single shape to read: named, and
    # naming never fails (a worker that raised here died before its reply: the run failed)
    kept = [torch.sparse_coo_tensor([[0]], [1.0], (2,), check_invariants=True),
            torch.nested.nested_tensor([torch.zeros(2), torch.zeros(3)])]
    assert held_by(torch, "cpu", shown=len(kept) + 100).count("held by") >= len(kept)
    del kept

    def inputs():  # a benchmark's input generator left suspended holds what it made
        made = torch.empty(1 << 28, dtype=torch.uint8)
        yield made

    suspended = inputs()
    next(suspended)
    assert held_by(torch, "cpu", shown=1).startswith(
        "(268435456,) torch.uint8 256 MiB held by generator test_memory_held_after_a_session_"
        "is_named_by_its_tensor_and_what_holds_it.<locals>.inputs (")


def test_a_host_removes_the_socket_folders_of_hosts_killed_before_they_could(tmp_path,
                                                                            monkeypatch):
    import subprocess
    import tempfile

    from harness.executors.procs import OWNER_FILE
    from harness.executors.workers import WORKERS_DIR_PREFIX

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # a pid that no longer runs: a driver killed by SIGKILL
    folders = {name: tmp_path / f"{WORKERS_DIR_PREFIX}{name}" for name in
               ("dead", "alive", "unknown")}
    for folder in folders.values():
        folder.mkdir()
        (folder / "host").write_bytes(b"")
    (folders["dead"] / OWNER_FILE).write_text(str(gone.pid))
    (folders["alive"] / OWNER_FILE).write_text(str(os.getpid()))
    (tmp_path / "zl-other-dead").mkdir()
    with WorkerHost() as host:
        assert Path(host.path).parent.parent == tmp_path
        assert (Path(host.path).parent / OWNER_FILE).read_text() == str(os.getpid())
        assert not folders["dead"].exists()
        assert folders["alive"].exists() and folders["unknown"].exists()
    assert not Path(host.path).parent.exists()
    assert (tmp_path / "zl-other-dead").exists()


def test_a_worker_busy_when_the_next_generation_begins_stops_when_its_run_ends(monkeypatch):
    # two runs of one environment at once, then a later generation's, with no process started:
    # the reasons given, and the earlier generation's worker stopped once its run is done
    class Alive:
        pid, returncode = 1, None

        def poll(self) -> None:
            return None

    stopped: list[object] = []
    monkeypatch.setattr(workers, "stop_children", lambda procs, grace: stopped.extend(procs))
    host = WorkerHost()
    monkeypatch.setattr(host, "_reply", lambda conn, doc: None)
    monkeypatch.setattr(host, "_start", lambda key, python, cwd, env: workers._Worker(
        key, Alive(), "/socket", Path("/log"), None, env=workers.shared_env(env)))

    def lease(generation: str) -> workers._Conn:
        conn = workers._Conn(sock=None)
        host._on_message(conn, {"op": "lease", "python": "py", "cwd": "/c", "env": {"A": "1"},
                                "generation": generation})
        return conn

    first, second = lease("r1"), lease("r1")
    assert (first.worker.why, second.worker.why) == (
        "the first of its environment", "the worker of its environment is busy")
    third = lease("r2")
    assert third.worker.why == ("its generation 'r2' is new (its environment's worker served "
                                "'r1')")
    fourth = lease("r2")  # r1's workers still there: its own generation's is busy
    assert fourth.worker.why == "the worker of its environment is busy"
    old = first.worker.proc
    host._on_message(first, {"op": "done", "retired": False})
    assert stopped == [old] and len(host._workers) == 3  # r1's, still busy, and r2's
    for conn in (second, third, fourth):
        host._on_message(conn, {"op": "done", "retired": False})
    assert [w.generation for w in host._workers] == ["r2", "r2"]


def test_a_module_is_the_sessions_exactly_where_its_file_lies_under_a_test_root(tmp_path):
    # Compared as text (pathlib's is_relative_to took 0.2 s a look on an H100 host): a sibling
    # whose name only starts like a root's is not under it.
    roots = (str(tmp_path / "benchmark"), str(tmp_path / "tests") + "/")
    for path, expected in ((tmp_path / "benchmark" / "test_mm.py", True),
                           (tmp_path / "benchmark", True),
                           (tmp_path / "benchmark_old" / "test_mm.py", False),
                           (tmp_path / "benchmark.py", False),
                           (tmp_path / "tests" / "conftest.py", True),
                           (tmp_path / "other" / "benchmark" / "x.py", False)):
        assert owned._under(str(path), roots) is expected, path
        assert any(path.is_relative_to(r) for r in roots) is expected, path  # as before


def test_a_workers_module_files_are_resolved_once_however_many_sessions_look(monkeypatch,
                                                                             tmp_path):
    # Each session looked up every module's file twice (its collection's and its end's):
    # resolving some 2,000 of them took 0.1 s each time.
    calls = []
    real = Path.resolve

    def counted(self, *args, **kwargs):
        calls.append(str(self))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(owned, "_RESOLVED", {})
    monkeypatch.setattr(Path, "resolve", counted)
    first = owned.session_modules([tmp_path], set())
    looked = len(calls)
    assert looked > 100  # every module with a file
    assert owned.session_modules([tmp_path], set()) == first
    assert len(calls) == looked  # the second look resolved nothing again
