"""Atomic file writes (a temporary file in the same directory, then a rename) and exclusive
locks on a file."""

from __future__ import annotations

import fcntl
import json
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from harness.errors import HarnessError, NoSpace, UsageError, no_space


def _umask() -> int:
    # No call reads the umask without setting it; set it back at once.
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write `data` to `path` so that readers see either the old file or the whole new one.

    The file gets the mode a plain open() would give it (0666 less the umask): mkstemp's
    private 0600 would hide results from the other users of a shared machine.
    """
    target = Path(path)
    if target.is_dir():  # os.replace would fail only after the whole file was written
        raise UsageError(f"{str(target)!r} is a directory; expected a file to write there")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as exc:  # a full device may refuse even the empty file (no inode left)
        if (full := no_space(exc)) is not None:
            raise NoSpace(target, limit=full.limit) from exc
        raise
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, target)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)  # a failed write leaves no temporary file behind
        if (full := no_space(exc)) is not None:  # name the file meant, not the temporary one
            raise NoSpace(target, limit=full.limit) from exc
        raise
    return target


def atomic_write_text(path: str | os.PathLike[str], text: str) -> Path:
    """Write `text` as UTF-8 with LF line ends, atomically."""
    return atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike[str], data: Any) -> Path:
    """Write `data` as indented, key-sorted JSON, atomically."""
    return atomic_write_text(path, json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")


def json_by_line(doc: dict[str, Any]) -> str:
    """`doc` as key-sorted JSON, one top-level key a line, and each item of a top-level list
    or dict on a line of its own: a campaign's thousands of units stay readable and greppable
    (a unit's line), and the whole is encoded by json's C encoder, which an indent turns off
    (a suite's campaign.json then took 0.1 s to write, twice a unit)."""
    compact = json.JSONEncoder(sort_keys=True, default=str, separators=(", ", ": ")).encode

    def keyed(value: dict[Any, Any]) -> dict[str, Any]:
        """Its keys as json writes them; two that read alike are refused, as json's sort
        refuses keys of two types, rather than one of them lost."""
        found = {k if isinstance(k, str) else json.loads(compact({k: 0})).popitem()[0]: v
                 for k, v in value.items()}
        if len(found) < len(value):
            raise TypeError(f"keys that read alike in JSON: {sorted(map(repr, value))[:8]}")
        return found

    lines = []
    for key, value in sorted(keyed(doc).items()):
        if isinstance(value, list) and value:
            inner = ",\n".join(f"    {compact(item)}" for item in value)
            lines.append(f"  {compact(key)}: [\n{inner}\n  ]")
        elif isinstance(value, dict) and value:
            inner = ",\n".join(f"    {compact(k)}: {compact(v)}"
                               for k, v in sorted(keyed(value).items()))
            lines.append(f"  {compact(key)}: {{\n{inner}\n  }}")
        else:
            lines.append(f"  {compact(key)}: {compact(value)}")
    return "\n".join(["{", ",\n".join(lines), "}"] if lines else ["{", "}"]) + "\n"


def take_json(path: Path) -> Any:
    """The JSON document a plugin left at `path` for the host, removed once read; None where
    there is none."""
    if not path.is_file():
        return None
    data = json.loads(path.read_text(encoding="utf-8"))
    path.unlink()
    return data


def read_json(path: str | os.PathLike[str], name: str, error: type[HarnessError], *,
              missing: str, not_json: str) -> tuple[Path, Any]:
    """The JSON document at `path`, or named `name` inside the directory `path`: (its file,
    its data).

    A missing file raises `error(missing)`, one that is not a regular file or not UTF-8 JSON
    `error(not_json)`; both are format strings of `path` (the file, with !r) and, for
    `not_json`, `exc`.
    """
    target = Path(path)
    target = target / name if target.is_dir() else target
    if target.exists() and not target.is_file():  # a FIFO or /dev/zero would never end
        raise error(not_json.format(path=str(target), exc="not a regular file"))
    try:
        return target, json.loads(target.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise error(missing.format(path=str(target))) from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise error(not_json.format(path=str(target), exc=exc)) from None


def read_jsonl(path: str | os.PathLike[str], error: type[HarnessError],
               what: str) -> list[tuple[int, Any]]:
    """(line number, value) of every non-blank line of the JSON-lines file at `path`; a line
    that is not UTF-8 JSON (binary, cut short) raises `error` naming the file and the line, as
    "<file> line N is not `what`"."""
    rows = []
    with open(path, "rb") as fh:
        data = fh.read()
    for number, raw in enumerate(data.splitlines(), start=1):
        try:
            line = raw.decode("utf-8")
            if line.strip():
                rows.append((number, json.loads(line)))
        except (UnicodeDecodeError, ValueError) as exc:
            raise error(f"{str(path)!r} line {number} is not {what}: {exc}") from None
    return rows


def take_lock(path: Path, busy: Callable[[], Exception], wait_s: float = 0.0,
              poll_s: float = 0.2) -> int:
    """An exclusive lock on `path` (created where missing), waiting up to `wait_s` for another
    holder to let go, then raising `busy()`: the descriptor that holds it. The lock goes when
    every descriptor of it is closed, at the latest when the process ends, however it ends."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if time.monotonic() >= deadline:
                os.close(fd)
                raise busy() from None
            time.sleep(poll_s)
        except BaseException:
            os.close(fd)
            raise


def lock_held(path: Path) -> bool:
    """Whether a process holds take_lock's lock on `path` now. It only looks: the file is
    opened read-only and never created; a shared lock is taken for an instant, so a taker
    that may meet a look passes take_lock a wait_s."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


@contextmanager
def exclusive_lock(path: Path, busy: Callable[[], Exception], wait_s: float = 0.0,
                   poll_s: float = 0.2) -> Iterator[None]:
    """Hold take_lock's lock on `path` for the block."""
    fd = take_lock(path, busy, wait_s, poll_s)
    try:
        yield
    finally:
        os.close(fd)
