"""run_identity.json's name and reader, and the fingerprints it pins: file hashes, git state."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path
from typing import Any

from harness.errors import UsageError
from harness.fsutil import atomic_write_json

# The files whose bytes decide what a run does; receipts pin each one's sha256.
HARNESS_GLOBS = ("harness/**/*.py", "examples/**/*", "containers/**/*", "scripts/**/*",
                 "Makefile", "pyproject.toml", "noxfile.py")
IDENTITY_FILE = "run_identity.json"


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


def read_identity(run_dir: Path) -> dict[str, Any] | None:
    """A run directory's run_identity.json; None when the run left none. A file that is not a
    JSON object is a UsageError naming it."""
    path = Path(run_dir) / IDENTITY_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except ValueError as exc:
        raise UsageError(f"{str(path)!r} is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise UsageError(f"{str(path)!r} is not a JSON object")
    return data


def write_identity(run_dir: Path, doc: dict[str, object]) -> None:
    """Write a run directory's run_identity.json, atomically."""
    atomic_write_json(Path(run_dir) / IDENTITY_FILE, doc)
