"""A run's side of a worker that stays up: its lease from the host, its pytest session in the
worker (used as a child process is), or a fresh pytest where none can be had; and the line
protocol host and run speak (executors/workers.py is the host's side)."""

from __future__ import annotations

import contextlib
import json
import os
import select
import socket
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from harness.executors.procs import die_with_parent

HOST_VAR = "ZL_WORKER_HOST"  # the host's socket, in the environment of every task it serves
READY_TIMEOUT_S = 600.0  # importing torch from a slow file system can take minutes


class WorkerUnavailable(Exception):
    """No worker could be leased (the host is gone, or the worker died before it was ready)."""


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


class WorkerRun:
    """One pytest session in a leased worker, used as a child process is (pid, poll, wait) and
    read through `stdout`, which ends when the session does.

    `pid` is the worker's: stopping its process group stops the session, as it would a fresh
    pytest's. The exit code is the session's, or the worker's exit status where it died.
    """

    def __init__(self, host: str, python: str, args: Sequence[str], cwd: Path,
                 env: Mapping[str, str], generation: str = "",
                 timeout_s: float = READY_TIMEOUT_S + 60) -> None:
        self.returncode: int | None = None
        self._lease = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._lease.settimeout(timeout_s)
            self._lease.connect(host)
            send_line(self._lease, {"op": "lease", "python": python, "cwd": str(cwd),
                                    "env": dict(env), "generation": generation})
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
        if given.get("new"):
            self.facts["new_because"] = given["new"]  # a new worker: why none was reused
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
            if isinstance(reply.get("seconds"), dict):
                self.facts["worker_s"] = reply["seconds"]  # its own work around the session
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
                 host: str | None, generation: str = ""
                 ) -> tuple[WorkerRun | subprocess.Popen, dict[str, Any]]:
    """pytest for `argv` ([python, -m, pytest, ...]): in a worker of `host` and `generation`
    where one is given and can be had, else in a fresh process in its own session that dies
    with this one; the child (its output on `.stdout`) and how it ran, for the run's
    identity."""
    if host and list(argv[1:3]) == ["-m", "pytest"]:
        try:
            run = WorkerRun(host, argv[0], argv[3:], cwd, env, generation)
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
