"""A pytest process that stays up: it runs one pytest session after another, as a host asks.

`python -m harness.plugins.worker SOCKET HOST_PID READY_FD` runs in the interpreter that runs
FlagGems' pytest. It imports pytest (and torch, where installed) once, listens on the Unix
socket SOCKET, writes `ready` to READY_FD, and serves one connection at a time. A request is one
JSON line with the session's `args` (pytest's, after `-m pytest`), `cwd` and whole `env`, and
one file descriptor passed beside it: the session's stdout and stderr. The reply is one JSON
line, `{"rc": ..., "run": n, "retire": why | null, "seconds": {...}}`; the descriptor is
closed before it, so the caller reads the output to its end and then the reply.

Between sessions the worker puts back what a fresh process would have: the environment, the
working directory, sys.path and sys.argv, torch's seeds, the log handlers a session added, the
modules of the tests' own tree and of the harness's plugins (out of sys.modules and their
packages, imported again by the next session, so no state of theirs carries over), and the
device's cached memory. What it keeps is the point of it: imported libraries, the device
context, compiled kernels in memory.

A session that did not pass (rc other than 0), that left child processes (stopped before the
reply) or threads running, that changed what a later session would import or call (a patched
torch.Tensor method, a torch.backends flag, the default dtype: harness.plugins.leftovers'
fingerprint, taken before and after it), a device that no longer synchronizes or draws random
inputs (a failed graph capture can leave its generator unusable), or memory still held after
the session (harness.plugins.held names what holds it) retires the worker: it replies, exits,
and the host starts a fresh one; the reply and its log say why. It dies with its host thread.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import json
import logging
import os
import signal
import socket
import sys
import threading
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.contract import boundary
from harness.plugins import descendants, held, leftovers
from harness.plugins.owned import Probe, forget, session_modules, session_plugins, test_roots

REQUEST_LIMIT = 16 << 20  # bytes of one request line: argv and environment
PR_SET_PDEATHSIG = 1
RESTORED_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2,
                    signal.SIGALRM)
THREAD_GRACE_S = 1.0  # a session's threads that end within this are not left behind
CHILD_GRACE_S = 2.0  # SIGTERM, then this long before SIGKILL, for what a session left running
SHOWN_CHANGES = 8  # names of changed state in a retirement's reason
# Sessions between two collections of everything (collect_due): a whole collection took a
# median 0.19 s on an H100 holding torch, Triton and flag_gems; a session's own, 0.2 ms.
COLLECT_ALL_EVERY = 16


def read_request(conn: socket.socket) -> tuple[dict[str, Any], int | None]:
    """One request line and the descriptor that came with it (None: none came)."""
    data, fds, _, _ = socket.recv_fds(conn, 65536, 1)
    fd = fds[0] if fds else None
    while data and not data.endswith(b"\n"):
        chunk = conn.recv(65536)
        if not chunk or len(data) > REQUEST_LIMIT:
            break
        data += chunk
    if not data.endswith(b"\n"):
        raise ValueError("the request ended before its line did")
    return json.loads(data), fd


@contextlib.contextmanager
def output_to(fd: int) -> Iterator[None]:
    """Descriptors 1 and 2 (and so sys.stdout, sys.stderr and every child) write to `fd` for
    the block; `fd` is closed after it, so the reader sees the end of the output."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    try:
        yield
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        os.close(saved[0])
        os.close(saved[1])


def _handlers() -> dict[str, list[logging.Handler]]:
    loggers = [logging.getLogger(), *(logging.getLogger(name)
                                     for name in list(logging.Logger.manager.loggerDict))]
    return {logger.name: list(logger.handlers) for logger in loggers}


def _drop_handlers(before: dict[str, list[logging.Handler]]) -> None:
    """Close and remove the log handlers the session added (FlagGems' --record log file)."""
    for name, handlers in _handlers().items():
        logger = logging.getLogger() if name == "root" else logging.getLogger(name)
        for handler in handlers:
            if handler not in before.get(name, []):
                logger.removeHandler(handler)
                with contextlib.suppress(Exception):
                    handler.close()


def threads_left(threads: set[threading.Thread]) -> str | None:
    """The threads a session started that are still running after a short grace, or None."""
    deadline = time.monotonic() + THREAD_GRACE_S
    for thread in set(threading.enumerate()) - threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    running = [t.name for t in set(threading.enumerate()) - threads if t.is_alive()]
    return f"the session left threads running: {', '.join(sorted(running))}" if running \
        else None


class Worker:
    """The sessions of one worker and what a fresh process had before its first."""

    def __init__(self) -> None:
        self.runs = 0
        self.env = dict(os.environ)
        self.cwd = os.getcwd()
        self.path = list(sys.path)
        self.argv = list(sys.argv)
        self.torch: Any = None
        self.seed: int | None = None
        self.threads = 0
        with contextlib.suppress(ImportError):
            import torch
            self.torch, self.seed = torch, torch.initial_seed()
            self.threads = torch.get_num_threads()
        self.signals = {s: signal.getsignal(s) for s in RESTORED_SIGNALS}
        self.left: str | None = None  # what the last session left that a fresh process lacks
        # the last session's own seconds: `prepare` (its fingerprint before), `restore`,
        # `garbage` (its own), `compare`, `device`, and `collect` (everything) where one ran
        self.seconds: dict[str, float] = {}
        # the device's bytes allocated after the last whole collection (collect_all)
        self.baseline: int | None = None
        # the fingerprint of the worker as it waits for its next session (take_ahead), and
        # the seconds it took; the last session's own, let go after its reply
        self.ahead: leftovers.Fingerprint | None = None
        self.ahead_s = 0.0
        self.spent: object = None

    def session(self, request: dict[str, Any], fd: int) -> int:
        """Run one pytest session with its output on `fd`; its exit code (3 where pytest
        itself raised)."""
        args = [str(a) for a in request["args"]]
        cwd = Path(request["cwd"])
        env = {str(k): str(v) for k, v in request["env"].items()}
        began, self.seconds = time.perf_counter(), {}
        roots, plugins = test_roots(args, cwd), session_plugins(args, env)
        handlers = _handlers()
        threads = set(threading.enumerate())
        device = self._device(env)
        before = self._before(device)
        probe = Probe(set(before.modules), roots, plugins)
        self.runs += 1
        with output_to(fd):
            try:
                os.environ.clear()
                os.environ.update(env)
                os.chdir(cwd)
                sys.argv = ["pytest", *args]
                if self.torch is not None and self.seed is not None:
                    self.torch.manual_seed(self.seed)  # as a fresh process starts
                # FlagGems collects garbage after every shape, over every object of a process
                # holding torch, Triton and flag_gems (on an H100 a worker's rows spent
                # 0.18-0.24 s between calls, a 64x64 input's too). What was alive before the
                # session outlives it, so it is frozen out of the session's collections
                # (Python's gc.freeze, as a server freezes before it forks); collect_all
                # unfreezes it now and then.
                gc.freeze()
                self.seconds["prepare"] = time.perf_counter() - began
                rc = int(pytest.main(args, plugins=[probe]))
            except SystemExit as exc:
                rc = exc.code if isinstance(exc.code, int) else 1
            except BaseException:
                traceback.print_exc()
                rc = int(pytest.ExitCode.INTERNAL_ERROR)
        with self._timed("restore"):
            gone = set(self._restore(handlers, roots, plugins))
        # What lived before the session (and what its collection imported) stays frozen: the
        # session's own garbage is collected, and everything where collect_due says so, both
        # before the session's state is compared (what a finalizer changes is then seen).
        with self._timed("garbage"):
            gc.collect()
        if self.collect_due(device):
            self.collect_all(device)
        with self._timed("compare"):
            self.left = self.left_behind(threads, before, probe.collected, gone, device,
                                         probe.plugin_modules)
        self.spent = (before, probe)  # let go after the reply: 8 ms of a run's wall
        return rc

    def take_ahead(self) -> None:
        """Fingerprint the worker while it waits for its next session, which then starts
        without taking one (about 0.1 s of each run's startup on an H100's host: the other
        side's session runs meanwhile). It errs the safe way: a change between now and that
        session, which a fingerprint taken at its start would have missed, reads as the
        session's own and retires the worker."""
        began = time.perf_counter()
        self.ahead = leftovers.take(lambda n: True)
        self.ahead_s = time.perf_counter() - began

    def _before(self, device: str | None) -> leftovers.Fingerprint:
        """The fingerprint a session is compared with: the one taken ahead, with the switches
        read now (some are the session's device's), else one taken now."""
        ahead, self.ahead = self.ahead, None
        if ahead is None:
            return leftovers.take(lambda n: True, self.torch, device)
        self.seconds["ahead"] = self.ahead_s
        ahead.switches = leftovers.switches(self.torch, device) if self.torch is not None else {}
        return ahead

    @contextlib.contextmanager
    def _timed(self, key: str) -> Iterator[None]:
        """Add the seconds of the block to `seconds[key]`."""
        began = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[key] = self.seconds.get(key, 0.0) + time.perf_counter() - began

    def _device(self, env: dict[str, str]) -> str | None:
        if self.torch is None or boundary.BACKEND_VAR not in env:
            return None
        return boundary.read(boundary.BACKEND, "the worker", environ=env).torch_device

    def left_behind(self, threads: set[threading.Thread], before: leftovers.Fingerprint,
                    collected: leftovers.Fingerprint | None, gone: set[str],
                    device: str | None, plugin_modules: frozenset[str] | set[str] = frozenset()
                    ) -> str | None:
        """What a session left that the next one would inherit and a fresh process would
        not: child processes (stopped first: they may hold the session's output open),
        threads still running, state that differs from `before` (or, for the modules its
        collection imported, from `collected`, taken after the session's pytest plugins
        `plugin_modules` had configured: what they set then and took back is no difference).
        None: nothing."""
        if stopped := descendants.stop_left_children(CHILD_GRACE_S):
            return ("the session left child processes running (stopped): "
                    + ", ".join(map(str, stopped)))
        if running := threads_left(threads):
            return running
        imported = set(sys.modules) - set(before.modules) - gone
        changed = leftovers.differences(before, leftovers.switches(self.torch, device)
                                        if self.torch is not None else {},
                                        imported.__contains__, gone.__contains__)
        if collected is not None:
            late = imported - set(collected.modules)
            changed += leftovers.differences(collected, {}, late.__contains__,
                                             (gone | plugin_modules).__contains__,
                                             own_back=True)
        if changed:
            shown = ", ".join(changed[:SHOWN_CHANGES])
            more = f" and {len(changed) - SHOWN_CHANGES} more" \
                if len(changed) > SHOWN_CHANGES else ""
            return f"the session changed what a later session would use: {shown}{more}"
        return None

    def _restore(self, handlers: dict[str, list[logging.Handler]], roots: list[Path],
                 plugins: set[str]) -> list[str]:
        """Put back what a fresh process has; the modules removed (the session's own)."""
        _drop_handlers(handlers)
        gone = session_modules(roots, plugins)
        forget(gone)
        os.environ.clear()
        os.environ.update(self.env)
        os.chdir(self.cwd)
        sys.path[:] = self.path
        sys.argv = list(self.argv)
        for signum, handler in self.signals.items():
            with contextlib.suppress(OSError, ValueError, TypeError):
                signal.signal(signum, handler)
        if self.torch is not None and self.threads:
            self.torch.set_num_threads(self.threads)
        return gone

    def collect_due(self, device: str | None) -> bool:
        """Whether everything is collected after this session: every COLLECT_ALL_EVERY
        sessions, and wherever the device's allocated bytes differ from those after the last
        whole collection (garbage still frozen may hold them, or have let them go)."""
        if self.runs % COLLECT_ALL_EVERY == 0:
            return True
        allocated = held.allocated(self.torch, device)
        return allocated is not None and allocated != self.baseline

    def collect_all(self, device: str | None = None) -> None:
        """Collect every object, the frozen ones too (the next session freezes again); the
        device's allocated bytes then are the baseline."""
        with self._timed("collect"):
            gc.unfreeze()
            gc.collect()
            self.baseline = held.allocated(self.torch, device)

    def retire_reason(self, rc: int, env: dict[str, str]) -> str | None:
        """Why this worker must not run another session after one that exited `rc` with the
        session environment `env`, or None."""
        if rc != 0:
            return f"its session exited {rc}"
        if self.left:
            return self.left
        backend = boundary.read(boundary.BACKEND, "the worker", environ=env)
        module = getattr(self.torch, backend.torch_device, None) if self.torch else None
        initialized = getattr(module, "is_initialized", None)
        if module is None or initialized is None or not initialized() \
                or not hasattr(module, "memory_allocated"):
            return None
        capturing = getattr(module, "is_current_stream_capturing", lambda: False)
        try:
            if capturing():
                return "a graph capture was left open by the session"
            module.synchronize()
            # The next benchmark's first act: inputs drawn on the device. A capture that failed
            # can leave the device's generator in capture state (torch: "Offset increment
            # outside graph capture encountered unexpectedly"), which only this shows.
            self.torch.randn(16, device=backend.torch_device)
            module.synchronize()
            module.empty_cache()
            allocated = int(module.memory_allocated())
        except Exception as exc:  # noqa: BLE001 - any error here means the device is unusable
            return f"the device failed after the session: {type(exc).__name__}: {exc}"
        return held.retire_reason(self.torch, module, backend.torch_device, allocated)

    def serve(self, listener: socket.socket) -> None:
        """Run sessions until one retires the worker."""
        while True:
            self.spent = None
            self.take_ahead()
            conn, _ = listener.accept()
            with conn:
                try:
                    request, fd = read_request(conn)
                    if fd is None:
                        raise ValueError("no output descriptor came with it")
                except (OSError, ValueError) as exc:
                    print(f"worker: a request that does not read: {exc}", flush=True)
                    continue
                rc = self.session(request, fd)
                with self._timed("device"):
                    try:
                        why = self.retire_reason(rc, request["env"])
                    except Exception as exc:  # noqa: BLE001 - the run must get its reply
                        why = f"its state could not be checked: {type(exc).__name__}: {exc}"
                seconds = {k: round(v, 6) for k, v in self.seconds.items()}
                with contextlib.suppress(OSError):
                    conn.sendall(json.dumps({"rc": rc, "run": self.runs, "retire": why,
                                             "seconds": seconds}).encode() + b"\n")
            if why is not None:
                print(f"worker: retired after session {self.runs}: {why}", flush=True)
                return


def die_with_host(host_pid: int) -> None:
    """SIGKILL this process when the thread that started it ends (Linux; SIGKILL, since a
    benchmark may have set SIGTERM aside mid-session); exit at once when the host is already
    gone."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL),
                                                    0, 0, 0)
    if os.getppid() != host_pid:
        os._exit(128 + int(signal.SIGTERM))


def main(argv: list[str]) -> int:
    path, host_pid, ready_fd = argv[0], int(argv[1]), int(argv[2])
    die_with_host(host_pid)
    descendants.become_subreaper()  # a session's orphaned children are then still found here
    worker = Worker()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(1)
    os.write(ready_fd, f"ready {os.getpid()}\n".encode())
    os.close(ready_fd)
    worker.serve(listener)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
