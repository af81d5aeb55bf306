"""One harness run per device on a host: a kernel lock (flock) per device, waited for or refused."""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import json
import math
import os
import re
import shlex
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

from harness.backends import Backend, Device
from harness.errors import EXIT_PREFLIGHT, EXIT_SIGNAL_BASE, HarnessError, UsageError
from harness.executors.devices import select_ids
from harness.executors.procs import deferred_signals
from harness.settings import variables

DIR_VAR = "ZL_DEVICE_LOCK_DIR"  # the host-wide folder of the locks (tests set their own)
DEFAULT_DIR_NAME = "zl-device-locks"  # under the temporary directory, shared by every user
# Set by a holder in its children's environment: their devices are already held by it, and a
# child that locked them again would wait for its own parent.
HELD_VAR = "ZL_DEVICE_HELD"
WAIT_VAR = "ZL_DEVICE_WAIT"  # seconds to wait for a held device; unset: as long as it takes
HOST_KEY = "host"  # a backend without devices (cpu) holds the whole host: one lock
POLL_S = 0.5
WHAT_CHARS = 200  # of the holder's command line, in its record
BUSY_MARKER = "DEVICE_BUSY"
_held: dict[str, int] = {}  # key -> descriptor, for the keys this process holds


class DeviceBusy(HarnessError):
    """A device stayed held by another harness run for longer than ZL_DEVICE_WAIT allows."""

    exit_code = EXIT_PREFLIGHT


class WaitStopped(KeyboardInterrupt):
    """A signal stopped the wait for a device another run holds: nothing ran on it. Raised as
    Ctrl-C's KeyboardInterrupt is, so a campaign records itself interrupted the same way; the
    CLI prints it and exits 128 + the signal's number (SIGTERM killed the waiting process
    without a word)."""

    def __init__(self, signum: int, key: str) -> None:
        super().__init__(f"interrupted by {signal.Signals(signum).name} while waiting for "
                         f"device {key}, which another harness run holds; nothing ran on it")
        self.signum, self.exit_code = signum, EXIT_SIGNAL_BASE + signum


def lock_dir(env: Mapping[str, str] | None = None) -> Path:
    """ZL_DEVICE_LOCK_DIR, else a folder of the temporary directory (one for the host)."""
    env = variables.environ() if env is None else env
    given = env.get(DIR_VAR)
    return Path(given) if given else Path(tempfile.gettempdir()) / DEFAULT_DIR_NAME


def wait_limit(env: Mapping[str, str] | None = None) -> float | None:
    """ZL_DEVICE_WAIT in seconds (0: refuse at once), None where unset: wait as long as it takes;
    UsageError for anything but a finite number of seconds >= 0."""
    env = variables.environ() if env is None else env
    value = env.get(WAIT_VAR, "")
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        seconds = math.nan
    if not math.isfinite(seconds) or seconds < 0:
        raise UsageError(f"{WAIT_VAR}={value!r} is not accepted; expected seconds to wait for "
                         "a device another harness run holds (0: refuse at once; unset: wait "
                         "until it ends)")
    return seconds


def device_key(backend: Backend, device: str | None, found: Sequence[Device]) -> str:
    """The lock's name for one device: the backend and the device's uuid where the vendor's
    tool names one (an index and a uuid of one device are one lock), else its id as given;
    HOST_KEY for a backend without devices."""
    if not backend.is_accelerator or device is None:
        return f"{backend.name}-{HOST_KEY}"
    uuid = next((d.uuid for d in found if d.uuid and device in (str(d.index), d.uuid)), None)
    return f"{backend.name}-{re.sub(r'[^A-Za-z0-9_.-]', '_', uuid or device)}"


def device_keys(backend: Backend, devices: Sequence[str | None],
                env: Mapping[str, str] | None = None,
                enumerate_devices: Callable[[], list[Device]] | None = None) -> list[str]:
    """The sorted lock names of `devices` (None: what the task would see, select_ids's)."""
    ids: list[str | None] = [d for d in devices if d is not None]
    if not ids and backend.is_accelerator:
        ids = [*(select_ids(backend, (), env, enumerate_devices) or [])]
    found = (enumerate_devices or backend.enumerate_devices)() if any(ids) else []
    return sorted({device_key(backend, d, found) for d in ids or [None]})


def _holder(path: Path) -> str:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        return (f"pid={doc['pid']} host={doc['host']} since={doc['since']} "
                f"by={json.dumps(doc['what'])}")
    except (OSError, ValueError, KeyError, TypeError):
        return "pid=? (its holder is starting or wrote no record)"


def _open(path: Path) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(OSError):  # every user's runs share the folder
        os.chmod(path.parent, 0o1777)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
    except PermissionError:  # another user's lock file: flock needs no write access
        return os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    with contextlib.suppress(OSError):
        os.fchmod(fd, 0o666)
    return fd


def _take(key: str, folder: Path, what: str, limit: float | None,
          out: Callable[[str], None]) -> int:
    """The descriptor holding `key`'s lock, after waiting for its holder (saying who)."""
    path = folder / f"{key}.lock"
    fd = _open(path)
    try:
        _wait(fd, path, key, limit, out)
    except BaseException:
        os.close(fd)
        raise
    record = {"pid": os.getpid(), "host": socket.gethostname(), "what": what,
              "since": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")}
    with contextlib.suppress(OSError):
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(record) + "\n").encode(), 0)
    return fd


def _locked(fd: int) -> bool:
    """Take `fd`'s lock if it is free; whether it was."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _wait(fd: int, path: Path, key: str, limit: float | None,
          out: Callable[[str], None]) -> None:
    """Poll `fd`'s lock until it is taken, saying who holds it; while it waits, SIGINT,
    SIGTERM or SIGHUP stop the wait (WaitStopped)."""
    if _locked(fd):
        return

    def stop(signum: int) -> None:
        raise WaitStopped(signum, key)

    said: str | None = None
    started = time.monotonic()
    with deferred_signals(stop):
        while not _locked(fd):
            holder = _holder(path)
            waited = time.monotonic() - started
            if limit is not None and waited >= limit:
                raise DeviceBusy(f"device {key} is held by another harness run ({holder}); "
                                 f"waited {waited:.0f} s ({WAIT_VAR}={limit:g}); run again "
                                 f"once it ends, or raise {WAIT_VAR}")
            if holder != said:
                out(f"{BUSY_MARKER} device={key} held_by: {holder}; waiting "
                    + (f"up to {limit:g} s" if limit is not None else "until it ends")
                    + f" (lock {path})")
                said = holder
            time.sleep(POLL_S)


@contextlib.contextmanager
def holding(backend: Backend, devices: Sequence[str | None], *,
            env: Mapping[str, str] | None = None, out: Callable[[str], None] = print,
            what: str | None = None,
            enumerate_devices: Callable[[], list[Device]] | None = None
            ) -> Iterator[dict[str, str]]:
    """Hold the locks of `devices` for the block (each in sorted order, waiting for another
    run's as ZL_DEVICE_WAIT says); yield the variables a child needs to run on them unlocked.

    Nothing is locked in a child of a holder (HELD_VAR set: its parent holds its devices) nor
    twice in one process. The kernel drops a lock when its process ends, kill -9 included.
    """
    env = variables.environ() if env is None else env
    if env.get(HELD_VAR):
        yield {HELD_VAR: env[HELD_VAR]}
        return
    limit, folder = wait_limit(env), lock_dir(env)
    keys = device_keys(backend, devices, env, enumerate_devices)
    what = what or shlex.join(["harness", *sys.argv[1:]])[:WHAT_CHARS]
    taken: list[str] = []
    try:
        for key in keys:
            if key not in _held:
                _held[key] = _take(key, folder, what, limit, out)
                taken.append(key)
        yield {HELD_VAR: f"{os.getpid()}:{','.join(keys)}"}
    finally:
        for key in taken:
            os.close(_held.pop(key))
