"""User-facing errors and the exit codes of DESIGN.md."""

from __future__ import annotations

import errno
import os
import signal
import sys

EXIT_OK = 0
EXIT_BENCHMARK_FAILED = 1
EXIT_USAGE = 2
EXIT_PREFLIGHT = 3
EXIT_AXIS_NOT_LIVE = 6
EXIT_FAIL_ON = 7  # the campaign held a verdict that FAIL_ON names
EXIT_SIGNAL_BASE = 128  # a run stopped by signal N exits 128 + N, as a shell reports it
EXIT_BROKEN_PIPE = EXIT_SIGNAL_BASE + signal.SIGPIPE  # its reader left, as `yes | head` ends


def reader_gone() -> int:
    """What a command returns once its output's reader has left (`| head`): stdout then points
    at the null device, so that no last flush fails at exit, and the code is a shell tool's."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return EXIT_BROKEN_PIPE


class HarnessError(Exception):
    """An error the user can fix; the CLI prints it as one line and exits with `exit_code`."""

    exit_code = EXIT_USAGE


class UsageError(HarnessError):
    """A bad invocation or input: an unknown name, a malformed value, a missing file argument."""

    exit_code = EXIT_USAGE


class PreflightError(HarnessError):
    """A named preflight check failed: the environment is broken, not an operator."""

    exit_code = EXIT_PREFLIGHT

    def __init__(self, check: str, detail: str) -> None:
        detail = " | ".join(line.strip() for line in detail.splitlines() if line.strip())
        super().__init__(f"PREFLIGHT_FAILED check={check} detail={detail}")  # one line: a marker
        self.check = check
        self.detail = detail


SHOWN_CHARS = 120  # of a value an error line quotes


def shown(value: object, chars: int = SHOWN_CHARS) -> str:
    """`value`'s repr for a one-line message, cut to `chars` with "..." where longer: a
    hand-edited document may hold a list of a suite's thousand operators."""
    text = repr(value)
    return text if len(text) <= chars else f"{text[:chars]}..."


def choice_error(name: str, value: object, accepted: list[str] | tuple[str, ...],
                 hint: str = "") -> UsageError:
    """Build the one-line error for a value outside a closed set, listing what is accepted
    (and `hint`, a way out, in parentheses)."""
    tail = f" ({hint})" if hint else ""
    return UsageError(f"{name}={value!r} is not accepted; expected one of: "
                      f"{', '.join(accepted)}{tail}")


# A write refused for want of room: the device is full, the user's quota is spent, or a file
# reached the process's size limit (ulimit -f; Python ignores SIGXFSZ, so the write fails).
NO_SPACE_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
NO_SPACE_TEXT = "no space left on device writing"  # how a child's log says it, for its parent
NO_SPACE_LIMIT = " (a file past this process's size limit, ulimit -f)"  # after the path


class NoSpace(HarnessError):
    """A write failed because the filesystem is full (or the quota spent): the environment is
    broken, not an operator; `then` says how to go on once space is free."""

    exit_code = EXIT_PREFLIGHT

    def __init__(self, path: str | os.PathLike[str] | None, then: str = "run it again",
                 limit: bool = False) -> None:
        where = "-" if path is None else str(path)
        why = (f"{NO_SPACE_LIMIT}: raise the limit or free space" if limit
               else ": free space")
        super().__init__(f"{NO_SPACE_TEXT} {where!r}{why}, then {then}")
        self.path, self.then, self.limit = path, then, limit


def no_space(exc: BaseException) -> NoSpace | None:
    """`exc` as a NoSpace: itself, or an OSError of a full device or a spent quota (naming its
    file where it has one); None for anything else."""
    if isinstance(exc, NoSpace):
        return exc
    if isinstance(exc, OSError) and exc.errno in NO_SPACE_ERRNOS:
        return NoSpace(exc.filename, limit=exc.errno == errno.EFBIG)
    return None


# A path no file system can open, or one the user may not: the value is at fault, not the host.
BAD_PATH_ERRNOS = {errno.ENAMETOOLONG: "a path whose every component is at most 255 bytes and "
                   "whole at most 4095", errno.ELOOP: "a path without a loop of symbolic links",
                   errno.EACCES: "a path this user may read (and write, for an output)",
                   errno.EPERM: "a path this user may read (and write, for an output)"}


def bad_path(exc: BaseException) -> UsageError | None:
    """`exc` as a UsageError naming its path, where it is an OSError of a name too long, a
    symbolic link loop or a permission refused; None for anything else."""
    if not isinstance(exc, OSError) or exc.errno not in BAD_PATH_ERRNOS:
        return None
    where = "-" if exc.filename is None else os.fsdecode(exc.filename)
    return UsageError(f"{shown(where)} is not accepted: {exc.strerror}; expected "
                      f"{BAD_PATH_ERRNOS[exc.errno]}")


class Interrupted(KeyboardInterrupt):
    """A run or campaign stopped by a signal after it stopped its children and kept what they
    wrote; the CLI prints the message and exits 128 + the signal's number."""

    def __init__(self, signum: int, step: str, directory: object) -> None:
        name = signal.Signals(signum).name
        super().__init__(f"interrupted by {name} during {step}; what finished is kept in "
                         f"{directory}")
        self.signum, self.step, self.directory = signum, step, directory
        self.exit_code = EXIT_SIGNAL_BASE + signum
