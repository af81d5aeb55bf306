"""A container owned by its run: named, removed when the run ends, and by a keeper if it dies."""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import sys
from collections.abc import Iterator

from harness.executors import procs
from harness.run.images import Run

KEEPER_MODULE = "harness.run.keeper"
NAME_PREFIX = "zl-"
# `<engine> stop`'s time for what runs inside to end before SIGKILL: a harness subcommand
# keeps what finished and marks itself interrupted in well under it
STOP_GRACE_S = 10
DONE = b"done"  # what the owner writes to its keeper when it removed the container itself
ENGINE_TIMEOUT_S = 120


def container_name() -> str:
    """A name no other container has: this process's id and a random part."""
    return f"{NAME_PREFIX}{os.getpid()}-{secrets.token_hex(4)}"


def remove(engine: str, name: str, grace_s: int = 0, run: Run = subprocess.run) -> None:
    """Stop the container (SIGTERM, then SIGKILL after `grace_s`; 0: SIGKILL at once) and
    remove it; one that is already gone (`--rm` took it) is no error."""
    stop = [[engine, "stop", "--time", str(grace_s), name]] if grace_s else []
    for argv in [*stop, [engine, "rm", "-f", name]]:
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            run(argv, capture_output=True, text=True, timeout=ENGINE_TIMEOUT_S)


def start_keeper(engine: str, name: str, grace_s: int) -> tuple[subprocess.Popen, int]:
    """A keeper process for `name` in a session of its own (no signal to this run's group
    reaches it) and the write end of its pipe: when every copy of that end is closed without
    DONE written, this process is gone (however it went) and the keeper removes the container
    (with STOP_GRACE_S, or `grace_s` where longer: the client, killed too, passed no signal on)."""
    read_end, write_end = os.pipe()
    try:
        keeper = subprocess.Popen([sys.executable, "-m", KEEPER_MODULE, engine, name,
                                   str(max(grace_s, STOP_GRACE_S))],
                                  stdin=read_end, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL, start_new_session=True,
                                  env=procs.child_env())
    except OSError:
        os.close(write_end)
        raise
    finally:
        os.close(read_end)
    return keeper, write_end


@contextlib.contextmanager
def owned(engine: str | None, name: str | None, grace_s: int = 0, run: Run = subprocess.run
          ) -> Iterator[None]:
    """Own container `name` of `engine` for the block: at its end (a return, an exception, a
    signal's stop) the container is stopped (`grace_s`, see remove) and removed; a keeper does
    it if this process is killed first. No-op where `name` is None (no container).

    Its client passes the run's signal on to it: `grace_s` 0 (one run's pytest) where the
    caller already gave it its grace before the block ends."""
    if engine is None or name is None:
        yield
        return
    keeper, write_end = start_keeper(engine, name, grace_s)
    try:
        yield
    finally:
        try:
            remove(engine, name, grace_s, run)
            with contextlib.suppress(OSError):
                os.write(write_end, DONE)
        finally:
            os.close(write_end)
            keeper.wait()


def main(argv: list[str]) -> int:
    """The keeper: wait for the owner's pipe to close; remove the container unless told DONE."""
    engine, name, grace = argv
    for signum in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
        signal.signal(signum, signal.SIG_IGN)  # its owner's end, not a signal, ends its watch
    said = sys.stdin.buffer.read()
    if said != DONE:
        remove(engine, name, int(grace))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
