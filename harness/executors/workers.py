"""Workers that stay up: a pytest process per environment and device runs session after session.

A `WorkerHost` lives in the process that runs a plan's tasks (the local executor, on this host or
in a cluster task). Its thread listens on a Unix socket, named to every task by ZL_WORKER_HOST,
starts workers (`harness.plugins.worker`), leases each to one run at a time and stops them all
when the plan ends. A run (`start_pytest`) asks for a worker of its exact environment: the
interpreter, working directory and every variable but the run's own (ZL_PLUGIN_*, which the
plugins read per session) must match, so an A/B campaign's two sides never share one and each
(side, device) pair keeps its own. It names a generation too (a campaign's round): a worker
serves one, and is stopped when a run of its environment names the next. With no host, or a
worker that cannot start, the run's pytest is a fresh process as it always was; either way the
run says which (`facts`). The run's side of a lease is executors/lease.py.

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
import selectors
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.contract import boundary
from harness.executors.lease import HOST_VAR, READY_TIMEOUT_S, send_line
from harness.executors.procs import GRACE_S, owned_tempdir, stop_children

WORKERS_DIR_PREFIX = "zl-workers-"  # the host's socket folder, under the temporary directory
WORKER_MODULE = "harness.plugins.worker"
LOG_TAIL = 2000  # characters of a worker's own log that a failed start reports
SHOWN_VARIABLES = 4  # names of the variables that kept a run from an idle worker


def shared_env(env: Mapping[str, str]) -> dict[str, str]:
    """The variables two runs must share to use one worker: all but the run's own plugin
    variables (ZL_PLUGIN_*, which the plugins read per session)."""
    return {k: v for k, v in env.items() if not k.startswith(boundary.PREFIX)}


def worker_key(python: str, cwd: Path, env: Mapping[str, str]) -> str:
    """What two runs must share to use one worker: the interpreter, the working directory and
    `shared_env`."""
    text = json.dumps([python, str(cwd), sorted(shared_env(env).items())])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def differing(a: Mapping[str, str], b: Mapping[str, str]) -> list[str]:
    """The names of the variables that two environments set differently, sorted."""
    return sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))


@dataclass(eq=False)
class _Worker:
    key: str
    proc: subprocess.Popen
    path: str
    log: Path
    ready: int | None  # the read end of its ready pipe while it starts
    generation: str = ""  # the runs it serves name it (a campaign's round)
    env: dict[str, str] = field(default_factory=dict)  # shared_env of the runs it serves
    why: str = ""  # why the run it started for found no worker to reuse
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
    _ended: dict[str, str] = field(default_factory=dict)  # key: how its last worker ended
    _latest: dict[str, str] = field(default_factory=dict)  # key: the generation last leased
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
            self._lease(conn, str(doc["python"]), Path(doc["cwd"]), dict(doc["env"]),
                        str(doc.get("generation") or ""))
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
                    self._drop(worker, "the last one of its environment retired")
                elif self._latest.get(worker.key, worker.generation) != worker.generation:
                    stop_children([worker.proc], GRACE_S)  # a later generation began meanwhile
                    self._drop(worker)

    def _drop(self, worker: _Worker, ended: str | None = None) -> None:
        """Lease `worker` (stopped or exited) no more; `ended`: how it ended, which the next
        run of its environment is told."""
        if worker in self._workers:
            self._workers.remove(worker)
        if ended is not None:
            self._ended[worker.key] = ended

    def _reply(self, conn: _Conn, doc: Mapping[str, Any]) -> None:
        conn.sock.setblocking(True)
        with contextlib.suppress(OSError):
            send_line(conn.sock, doc)
        conn.sock.setblocking(False)

    def _lease(self, conn: _Conn, python: str, cwd: Path, env: dict[str, str],
               generation: str = "") -> None:
        key = worker_key(python, cwd, env)
        self._latest[key] = generation
        for dead in [w for w in self._workers if w.proc.poll() is not None]:
            self._drop(dead, f"the last one of its environment exited {dead.proc.returncode}")
        idle = [w for w in self._workers if w.lease is None and w.ready is None]
        match = next((w for w in idle if w.key == key and w.generation == generation), None)
        if match is not None:
            match.lease, conn.worker = conn, match
            self._reply(conn, {"socket": match.path, "pid": match.proc.pid,
                               "session": match.runs + 1})
            return
        why = self._why_new(key, generation, shared_env(env), idle)
        # an idle worker of this environment and another generation serves no run again
        done = [w for w in idle if w.key == key]
        rest = [w for w in idle if w.key != key]
        done += sorted(rest, key=lambda w: w.idle_since)[:max(0, len(rest) - self.max_idle + 1)]
        for old in done:
            stop_children([old.proc], GRACE_S)
            self._drop(old, None if old.key == key else
                       f"the last one of its environment was stopped to keep {self.max_idle} idle")
        try:
            worker = self._start(key, python, cwd, env)
        except OSError as exc:
            self._reply(conn, {"error": f"cannot start {python}: {exc}"})
            return
        worker.why, worker.generation = why, generation
        worker.lease, conn.worker = conn, worker
        self._workers.append(worker)

    def _why_new(self, key: str, generation: str, env: dict[str, str],
                 idle: list[_Worker]) -> str:
        """Why a run of `key` and `generation` gets a new worker: its generation is new, its
        last one's end, its busy one, or the variables that set it apart from the idle ones."""
        mine = [w for w in self._workers if w.key == key]
        if any(w.generation == generation for w in mine):
            return "the worker of its environment is busy"
        if mine:
            return (f"its generation {generation!r} is new (its environment's worker served "
                    f"{mine[-1].generation!r})")
        if key in self._ended:
            return self._ended[key]
        if not idle:
            return "the first of its environment"
        apart = min((differing(w.env, env) for w in idle), key=len)
        shown = ", ".join(apart[:SHOWN_VARIABLES]) + (
            f" and {len(apart) - SHOWN_VARIABLES} more" if len(apart) > SHOWN_VARIABLES else "")
        return f"the idle workers' environments differ in {shown or 'the interpreter or cwd'}"

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
        worker = _Worker(key, proc, path, log, ready_r, env=shared_env(env),
                         idle_since=time.monotonic())
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
                                   "session": 1, "new": worker.why})
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
