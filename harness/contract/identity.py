"""run_identity.json's name and reader, and the fingerprints it pins: file hashes, git state."""

from __future__ import annotations

import hashlib
import json
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.contract.jsonfields import Fields
from harness.errors import UsageError
from harness.fsutil import atomic_write_json

# The files whose bytes decide what a run does; receipts pin each one's sha256.
HARNESS_GLOBS = ("harness/**/*.py", "examples/**/*", "containers/**/*", "scripts/**/*",
                 "Makefile", "pyproject.toml", "noxfile.py")
IDENTITY_FILE = "run_identity.json"
# run_identity.json's field of a campaign round recorded without a run: why it was not run
NOT_RUN = "not_run"
# What timed a graph-timed run whose identity (or campaign, or header) predates GRAPH_TIMER.
FORMER_GRAPH_TIMER = "upstream"
SCHEMA = 1


def harness_files(root: Path) -> list[Path]:
    """Every harness file under `root`, sorted, caches and run outputs excluded."""
    found: set[Path] = set()
    for pattern in HARNESS_GLOBS:
        for path in root.glob(pattern):
            rel = path.relative_to(root)
            if path.is_file() and "__pycache__" not in rel.parts and rel.suffix != ".pyc":
                found.add(rel)
    return sorted(found)


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def file_hashes(root: Path) -> dict[str, str]:
    """{posix relative path: sha256} of every harness file."""
    return {p.as_posix(): sha256_file(root / p) for p in harness_files(root)}


def _git(root: Path, *args: str) -> str | None:
    try:
        proc = subprocess.run(["git", "-C", str(root), *args], capture_output=True,
                              text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


def git_state(root: Path) -> dict[str, object]:
    """Commit and dirty flag of the checkout whose top is `root`; both None when `root` is not
    the top of a git work tree. A folder inside another repository (a FlagGems archive unpacked
    in some project) must not be given that project's commit."""
    top = _git(root, "rev-parse", "--show-toplevel")
    if top is None or Path(top).resolve() != Path(root).resolve():
        return {"commit": None, "dirty": None}
    commit = _git(root, "rev-parse", "HEAD")
    if commit is None:
        return {"commit": None, "dirty": None}
    status = _git(root, "status", "--porcelain", "--untracked-files=no")
    return {"commit": commit, "dirty": bool(status) if status is not None else None}


@dataclass(frozen=True)
class RunIdentity:
    """A run's run_identity.json as read: the fields its readers act on, and the document whole
    (a receipt keeps it as it was; a report reads its caliber)."""

    doc: Mapping[str, Any]
    state: str | None = None  # how the run ended (states.UnitState's words), and why
    reason: str | None = None
    partial: bool = False  # the rows of a session cut short
    rows: int | None = None
    node: str | None = None
    backend: str | None = None
    timer: str | None = None
    flaggems_commit: str | None = None


def read_identity(run_dir: Path) -> RunIdentity | None:
    """A run directory's run_identity.json; None when the run left none. A file that is not a
    JSON object, of another schema, or with a field of the wrong type is a UsageError naming
    the file (and the field)."""
    path = Path(run_dir) / IDENTITY_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except ValueError as exc:
        raise UsageError(f"{str(path)!r} is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise UsageError(f"{str(path)!r} is not a JSON object")
    f = Fields(str(path), "", data)
    schema = f.opt_integer("schema")
    if schema not in (None, SCHEMA):  # None: written before the field was
        raise f.fail("schema", f"is {schema!r}; this harness reads schema {SCHEMA}")
    versions = f.opt_object("versions")
    return RunIdentity(data, state=f.opt_text("state"), reason=f.opt_text("reason"),
                       partial=bool(f.opt_flag("partial")), rows=f.opt_integer("rows"),
                       node=f.opt_text("node"), backend=f.opt_text("backend"),
                       timer=f.opt_text("timer"),
                       flaggems_commit=None if versions is None
                       else versions.opt_text("flaggems_commit"))


def write_identity(run_dir: Path, doc: Mapping[str, object]) -> None:
    """Write a run directory's run_identity.json, atomically."""
    atomic_write_json(Path(run_dir) / IDENTITY_FILE, {"schema": SCHEMA, **doc})


def update_identity(run_dir: Path, **fields: object) -> None:
    """Add `fields` to a run's run_identity.json (what a campaign learns after the run);
    nothing where the run left none."""
    found = read_identity(run_dir)
    if found is not None:
        write_identity(run_dir, {**found.doc, **fields})
