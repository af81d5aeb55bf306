"""Workers that stay up: a pytest process per environment and device runs session after session.

A `WorkerHost` lives in the process that runs a plan's tasks (the local executor, on this host or
in a cluster task). Its thread listens on a Unix socket, named to every task by ZL_WORKER_HOST,
starts workers (`harness.plugins.worker`), leases each to one run at a time and stops them all
when the plan ends. A run (`start_pytest`) asks for a worker of its exact environment: the
interpreter, working directory and every variable but the run's own (ZL_PLUGIN_*, which the
plugins read per session) must match, so an A/B campaign's two sides never share one and each
(side, device) pair keeps its own. With no host, or a worker that cannot start, the run's pytest
is a fresh process as it always was; either way the run says which (`facts`).

A worker's fate is tied to its lease: the run that holds it stops it (SIGTERM, then SIGKILL, to
its process group, as it would stop its own pytest) on a signal or at the unit's limit; a run
that dies holding it (SIGKILL) closes its lease, and the host stops the worker. A worker that
dies mid-session is reported with the exit status the host reaped: a crash reads as the crash
of a fresh pytest would. The next run gets a fresh worker.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import select
import selectors
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from harness.contract import boundary
from harness.executors.procs import GRACE_S, die_with_parent, owned_tempdir, stop_children

WORKERS_DIR_PREFIX = "zl-workers-"  # the host's socket folder, under the temporary directory
HOST_VAR = "ZL_WORKER_HOST"  # the host's socket, in the environment of every task it serves
WORKER_MODULE = "harness.plugins.worker"
READY_TIMEOUT_S = 600.0  # importing torch from a slow file system can take minutes
LOG_TAIL = 2000  # characters of a worker's own log that a failed start reports


class WorkerUnavailable(Exception):
    """No worker could be leased (the host is gone, or the worker died before it was ready)."""


def worker_key(python: str, cwd: Path, env: Mapping[str, str]) -> str:
    """What two runs must share to use one worker: the interpreter, the working directory and
    every variable but the run's own plugin variables."""
    kept = sorted((k, v) for k, v in env.items() if not k.startswith(boundary.PREFIX))
    text = json.dumps([python, str(cwd), kept])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def send_line(conn: socket.socket, doc: Mapping[str, Any]) -> None:
    conn.sendall(json.dumps(doc).encode() + b"\n")


def recv_line(conn: socket.socket) -> dict[str, Any] | None:
    """The next JSON line from a blocking socket; None at end of stream."""
    data = b""
    while not data.endswith(b"\n"):
        chunk = conn.recv(65536)
        if not chunk:
            return None
        data += chunk
    doc: dict[str, Any] = json.loads(data)
    return doc


@dataclass(eq=False)
class _Worker:
    key: str
    proc: subprocess.Popen
    path: str
    log: Path
    ready: int | None  # the read end of its ready pipe while it starts
    lease: _Conn | None = None
    runs: int = 0
    idle_since: float = 0.0


@dataclass(eq=False)
class _Conn:
    sock: socket.socket
    buffer: bytes = b""
    worker: _Worker | None = None
    done: bool = False


@dataclass
class WorkerHost:
    """Start, lease and stop workers for the tasks of one plan (a context manager).

    `max_idle`: idle workers kept; starting one more stops the longest idle first (a batch whose
    runs each want their own caches would otherwise keep a worker per run).
    """

    max_idle: int = 2
    ready_timeout_s: float = READY_TIMEOUT_S
    path: str = ""
    started: int = 0  # workers started, for the plan's summary and the tests
    _dir: str = ""
    _workers: list[_Worker] = field(default_factory=list)
    _closing: bool = False

    def __enter__(self) -> WorkerHost:
        # a short folder of its own: a Unix socket's path is limited to about 100 bytes
        self._dir = owned_tempdir(WORKERS_DIR_PREFIX)
        self.path = os.path.join(self._dir, "host")
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(self.path)
        self._listener.listen(64)
        self._listener.setblocking(False)
        self._wake_r, self._wake_w = os.pipe()
        self._sel = selectors.DefaultSelector()
        self._sel.register(self._listener, selectors.EVENT_READ, ("listen", None))
        self._sel.register(self._wake_r, selectors.EVENT_READ, ("wake", None))
        # the workers die with the thread that starts them: this one, which outlives them
        self._thread = threading.Thread(target=self._loop, name="worker-host", daemon=True)
        self._thread.start()
        return self

    def env(self) -> dict[str, str]:
        """What a task needs to find this host."""
        return {HOST_VAR: self.path}

    def __exit__(self, *exc: object) -> None:
        self._closing = True
        os.write(self._wake_w, b"x")
        self._thread.join()
        stop_children([w.proc for w in self._workers if w.proc.poll() is None], GRACE_S)
        for fd in (self._wake_r, self._wake_w):
            os.close(fd)
        self._sel.close()
        self._listener.close()
        shutil.rmtree(self._dir, ignore_errors=True)

    # -- the host's thread --------------------------------------------------------------------

    def _loop(self) -> None:
        while not self._closing:
            for key, _ in self._sel.select(timeout=1.0):
                kind, obj = key.data
                if kind == "listen":
                    with contextlib.suppress(BlockingIOError):
                        sock, _ = self._listener.accept()
                        sock.setblocking(False)
                        self._sel.register(sock, selectors.EVENT_READ, ("conn", _Conn(sock)))
                elif kind == "conn":
                    self._on_conn(obj)
                elif kind == "ready":
                    self._on_ready(obj)
                else:
                    os.read(self._wake_r, 64)
            self._starting_too_long()

    def _on_conn(self, conn: _Conn) -> None:
        try:
            chunk = conn.sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            chunk = b""
        if not chunk:
            self._close(conn)
            return
        conn.buffer += chunk
        while b"\n" in conn.buffer:
            line, conn.buffer = conn.buffer.split(b"\n", 1)
            self._on_message(conn, json.loads(line))

    def _on_message(self, conn: _Conn, doc: dict[str, Any]) -> None:
        op = doc.get("op")
        if op == "lease":
            self._lease(conn, str(doc["python"]), Path(doc["cwd"]), dict(doc["env"]))
        elif op == "ended" and conn.worker is not None:
            self._reply(conn, {"rc": self._reap(conn.worker)})
        elif op == "done":
            conn.done = True
            worker, conn.worker = conn.worker, None
            if worker is not None:
                worker.lease, worker.idle_since = None, time.monotonic()
                worker.runs += 1
                if doc.get("retired"):  # it exits after its reply: never lease it again
                    self._reap(worker)
                    if worker in self._workers:
                        self._workers.remove(worker)

    def _reply(self, conn: _Conn, doc: Mapping[str, Any]) -> None:
        conn.sock.setblocking(True)
        with contextlib.suppress(OSError):
            send_line(conn.sock, doc)
        conn.sock.setblocking(False)

    def _lease(self, conn: _Conn, python: str, cwd: Path, env: dict[str, str]) -> None:
        key = worker_key(python, cwd, env)
        self._workers = [w for w in self._workers if w.proc.poll() is None]
        idle = [w for w in self._workers if w.lease is None and w.ready is None]
        match = next((w for w in idle if w.key == key), None)
        if match is not None:
            match.lease, conn.worker = conn, match
            self._reply(conn, {"socket": match.path, "pid": match.proc.pid,
                               "session": match.runs + 1})
            return
        for old in sorted(idle, key=lambda w: w.idle_since)[:max(0, len(idle) - self.max_idle
                                                                 + 1)]:
            stop_children([old.proc], GRACE_S)
            self._workers.remove(old)
        try:
            worker = self._start(key, python, cwd, env)
        except OSError as exc:
            self._reply(conn, {"error": f"cannot start {python}: {exc}"})
            return
        worker.lease, conn.worker = conn, worker
        self._workers.append(worker)

    def _start(self, key: str, python: str, cwd: Path, env: dict[str, str]) -> _Worker:
        self.started += 1
        path = os.path.join(self._dir, f"w{self.started}")
        log = Path(self._dir, f"w{self.started}.log")
        ready_r, ready_w = os.pipe()
        try:
            with open(log, "wb") as fh:
                proc = subprocess.Popen(
                    [python, "-m", WORKER_MODULE, path, str(os.getpid()), str(ready_w)],
                    cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=fh,
                    stderr=subprocess.STDOUT, pass_fds=(ready_w,), start_new_session=True)
        except OSError:
            os.close(ready_r)
            raise
        finally:
            os.close(ready_w)
        worker = _Worker(key, proc, path, log, ready_r, idle_since=time.monotonic())
        self._sel.register(ready_r, selectors.EVENT_READ, ("ready", worker))
        return worker

    def _on_ready(self, worker: _Worker) -> None:
        assert worker.ready is not None
        said = os.read(worker.ready, 256)
        self._sel.unregister(worker.ready)
        os.close(worker.ready)
        worker.ready = None
        conn = worker.lease
        if said.startswith(b"ready"):
            if conn is not None:
                self._reply(conn, {"socket": worker.path, "pid": worker.proc.pid,
                                   "session": 1})
            return
        rc = self._reap(worker)
        if conn is not None:
            self._reply(conn, {"error": f"the worker exited {rc} before it was ready: "
                                        f"{self._tail(worker)}"})
            conn.worker, worker.lease = None, None

    def _starting_too_long(self) -> None:
        for worker in self._workers:
            if worker.ready is not None and worker.proc.poll() is None \
                    and time.monotonic() - worker.idle_since > self.ready_timeout_s:
                stop_children([worker.proc], GRACE_S)  # its ready pipe then reads empty

    def _reap(self, worker: _Worker) -> int:
        """The worker's exit status, stopping it if it has not exited within the grace time."""
        try:
            return worker.proc.wait(GRACE_S)
        except subprocess.TimeoutExpired:
            stop_children([worker.proc], 0.0)
            return worker.proc.wait()

    def _tail(self, worker: _Worker) -> str:
        try:
            text = worker.log.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return "(no log)"
        return " | ".join(line for line in text[-LOG_TAIL:].splitlines() if line.strip())

    def _close(self, conn: _Conn) -> None:
        """A run's connection ended: a lease it did not give back was a run that died holding
        its worker, whose session must not go on unwatched."""
        self._sel.unregister(conn.sock)
        conn.sock.close()
        worker = conn.worker
        if worker is not None and not conn.done:
            if worker.proc.poll() is None:
                stop_children([worker.proc], GRACE_S)
            worker.lease = None


class WorkerRun:
    """One pytest session in a leased worker, used as a child process is (pid, poll, wait) and
    read through `stdout`, which ends when the session does.

    `pid` is the worker's: stopping its process group stops the session, as it would a fresh
    pytest's. The exit code is the session's, or the worker's exit status where it died.
    """

    def __init__(self, host: str, python: str, args: Sequence[str], cwd: Path,
                 env: Mapping[str, str], timeout_s: float = READY_TIMEOUT_S + 60) -> None:
        self.returncode: int | None = None
        self._lease = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._lease.settimeout(timeout_s)
            self._lease.connect(host)
            send_line(self._lease, {"op": "lease", "python": python, "cwd": str(cwd),
                                    "env": dict(env)})
            given = recv_line(self._lease)
        except OSError as exc:
            self._lease.close()
            raise WorkerUnavailable(f"the worker host does not answer: {exc}") from None
        if given is None or "error" in given:
            self._lease.close()
            raise WorkerUnavailable(given["error"] if given else "the worker host went away")
        self.pid: int = int(given["pid"])
        self.facts: dict[str, Any] = {"kind": "worker", "pid": self.pid,
                                      "session": given["session"]}
        read_end, write_end = os.pipe()
        self._conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._conn.connect(given["socket"])
            request = {"args": list(args), "cwd": str(cwd), "env": dict(env)}
            socket.send_fds(self._conn, [json.dumps(request).encode() + b"\n"], [write_end])
        except OSError:
            os.close(read_end)
            self._conn.close()
            self._release()
            raise
        finally:
            os.close(write_end)
        self.stdout: IO[bytes] = open(read_end, "rb")  # noqa: SIM115 - closed by the reader

    def poll(self) -> int | None:
        if self.returncode is None and select.select([self._conn], [], [], 0)[0]:
            self._finish()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            if timeout is not None and not select.select([self._conn], [], [], timeout)[0]:
                raise subprocess.TimeoutExpired("pytest (worker)", timeout)
            self._finish()
        assert self.returncode is not None
        return self.returncode

    def _finish(self) -> None:
        try:
            reply = recv_line(self._conn)
        except OSError:
            reply = None
        self._conn.close()
        if reply is not None:
            self.returncode = int(reply["rc"])
            self.facts["retired"] = reply.get("retire")
        else:  # the worker died mid-session: its exit status, as the host reaped it
            try:
                send_line(self._lease, {"op": "ended"})
                ended = recv_line(self._lease) or {}
            except OSError:
                ended = {}
            rc = ended.get("rc")
            self.returncode = int(rc) if rc is not None else -9
            self.facts["retired"] = f"the worker died (exit status {self.returncode})"
        self._release()

    def _release(self) -> None:
        with contextlib.suppress(OSError):
            send_line(self._lease, {"op": "done", "retired": bool(self.facts.get("retired"))})
        self._lease.close()


def start_pytest(argv: Sequence[str], cwd: Path, env: Mapping[str, str],
                 host: str | None) -> tuple[WorkerRun | subprocess.Popen, dict[str, Any]]:
    """pytest for `argv` ([python, -m, pytest, ...]): in a worker of `host` where one is given
    and can be had, else in a fresh process in its own session that dies with this one; the
    child (its output on `.stdout`) and how it ran, for the run's identity."""
    if host and list(argv[1:3]) == ["-m", "pytest"]:
        try:
            run = WorkerRun(host, argv[0], argv[3:], cwd, env)
            return run, run.facts
        except (OSError, WorkerUnavailable) as exc:
            why = str(exc)
        facts: dict[str, Any] = {"kind": "process", "worker_unavailable": why}
    else:
        facts = {"kind": "process"}
    proc = subprocess.Popen(list(argv), cwd=cwd, env=dict(env), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True,
                            preexec_fn=die_with_parent())
    return proc, facts
