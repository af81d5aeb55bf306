"""receipt.json: what an A/B campaign ran, pinned by the sha256 of every harness file; verify.

A receipt (schema "harness-receipt/1") is one JSON object:

    schema            "harness-receipt/1"
    created_utc       when it was written, "YYYY-MM-DDTHH:MM:SSZ"
    harness_version   the package version
    commit, dirty     git state of the harness checkout (null outside a git work tree)
    files             {posix path: sha256} of every harness file (identity.harness_files)
    campaign          what the campaign says of itself (axis, op, directory, ...)
    caliber           the caliber variables (backend, level, timer, shape mode, rounds, ...)
    sides             {"A": {"image_digests": [...], "runs": [{"dir", "identity"}]}, "B": ...}:
                      each run's run_identity.json as it was (null where the run wrote none)
    commands          every command line the campaign ran, as argv lists
    rows              the per-row table with verdicts: the rows of ab.json (harness.report.write)

`verify` recomputes the hashes under a checkout: a file whose bytes changed, a listed file that
is gone, and a harness file the receipt does not list all make it fail.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path, PurePosixPath
from typing import Any

from harness import __version__
from harness.errors import UsageError
from harness.fsutil import atomic_write_json, read_json
from harness.run import identity
from harness.settings.spec import REPO_ROOT

SCHEMA = "harness-receipt/1"
SCHEMA_PREFIX = "harness-receipt/"
RECEIPT_JSON = "receipt.json"
_SHA256 = re.compile(r"[0-9a-f]{64}")


class ReceiptError(UsageError):
    """The path is not a receipt this harness reads: missing, not JSON, or the wrong schema."""


@dataclass(frozen=True)
class VerifyResult:
    """The files of a receipt compared with a checkout; ok only when nothing differs."""

    ok: bool
    changed: list[str] = field(default_factory=list)  # listed, present, other bytes
    missing: list[str] = field(default_factory=list)  # listed, gone
    added: list[str] = field(default_factory=list)  # a harness file now, not listed
    checked: int = 0  # files the receipt lists


# ---------------------------------------------------------------- building


def _read_identity(run_dir: Path) -> dict[str, Any] | None:
    try:
        return identity.read_identity(run_dir)
    except UsageError:
        return None  # recorded as null: the receipt says the run left no usable identity


def _run_entry(run: str | Path | Mapping[str, Any]) -> dict[str, Any]:
    """{"dir", "identity"} of one run: a run directory (its run_identity.json is read) or a
    mapping that already holds both."""
    if isinstance(run, Mapping):
        return {"dir": str(run.get("dir")), "identity": run.get("identity")}
    return {"dir": str(run), "identity": _read_identity(Path(run))}


def side_record(side: Mapping[str, Any]) -> dict[str, Any]:
    """One side of the receipt from {"runs": [...], "image_digests": [...] (optional)}.

    The side's image digests are the ones given plus every run identity's image_digest, so a
    side whose rounds ran in two images shows both.
    """
    runs = [_run_entry(r) for r in side.get("runs", ())]
    digests = list(side.get("image_digests") or ())
    digests += [r["identity"].get("image_digest") for r in runs if r["identity"]]
    return {"image_digests": sorted({str(d) for d in digests if d}), "runs": runs}


def build_receipt(*, campaign: Mapping[str, Any], sides: Mapping[str, Mapping[str, Any]],
                  rows: Sequence[Mapping[str, Any]], commands: Sequence[Sequence[str]],
                  caliber: Mapping[str, Any], root: Path = REPO_ROOT) -> dict[str, Any]:
    """The receipt document of a campaign whose harness checkout is `root`."""
    git = identity.git_state(root)
    return {
        "schema": SCHEMA,
        "created_utc": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "harness_version": __version__,
        "commit": git["commit"],
        "dirty": git["dirty"],
        "files": identity.file_hashes(root),
        "campaign": dict(campaign),
        "caliber": dict(caliber),
        "sides": {name: side_record(side) for name, side in sides.items()},
        "commands": [[str(arg) for arg in argv] for argv in commands],
        "rows": [dict(row) for row in rows],
    }


def write_receipt(path: str | Path, receipt: Mapping[str, Any]) -> Path:
    """Write the receipt atomically (a directory gets receipt.json inside it)."""
    target = Path(path)
    if target.is_dir():
        target = target / RECEIPT_JSON
    return atomic_write_json(target, receipt)


# ---------------------------------------------------------------- verifying


def _safe_path(rel: object) -> bool:
    """A listed path must stay inside the checkout: relative, no '..', no backslashes."""
    if not isinstance(rel, str) or not rel or "\\" in rel:
        return False
    pure = PurePosixPath(rel)
    return not pure.is_absolute() and ".." not in pure.parts


def load_receipt(path: str | Path) -> dict[str, Any]:
    """The receipt at `path` (a file, or a directory holding receipt.json); ReceiptError if
    it is not one this harness reads."""
    target, data = read_json(path, RECEIPT_JSON, ReceiptError,
                             missing="no receipt at {path!r}",
                             not_json="{path!r} is not a receipt: not JSON ({exc})")
    schema = data.get("schema") if isinstance(data, dict) else None
    if not isinstance(schema, str) or not schema.startswith(SCHEMA_PREFIX):
        raise ReceiptError(f"{str(target)!r} is not a receipt: schema={schema!r}, "
                           f"expected {SCHEMA!r}")
    if schema != SCHEMA:
        raise ReceiptError(f"{str(target)!r}: unsupported receipt schema {schema!r}; "
                           f"this harness reads {SCHEMA!r}")
    files = data.get("files")
    if not isinstance(files, dict) or not all(
            _safe_path(k) and isinstance(v, str) and _SHA256.fullmatch(v)
            for k, v in files.items()):
        raise ReceiptError(f"{str(target)!r} is not a receipt: 'files' must map relative "
                           "paths inside the checkout to sha256 hex digests")
    return data


def verify(path: str | Path, root: str | Path = REPO_ROOT) -> VerifyResult:
    """Recompute the sha256 of every file the receipt at `path` lists, under `root`."""
    listed: dict[str, str] = load_receipt(path)["files"]
    root = Path(root)
    if not root.is_dir():
        raise UsageError(f"--root={str(root)!r} is not a directory; expected a harness checkout")
    changed, missing = [], []
    for rel, digest in sorted(listed.items()):
        file = root / rel
        if not file.is_file():
            missing.append(rel)
        elif identity.sha256_file(file) != digest:
            changed.append(rel)
    added = sorted(p.as_posix() for p in identity.harness_files(root)
                   if p.as_posix() not in listed)
    return VerifyResult(ok=not (changed or missing or added), changed=changed,
                        missing=missing, added=added, checked=len(listed))


def verify_lines(result: VerifyResult) -> list[str]:
    """What `harness receipt verify` prints: a line per differing file, then the verdict."""
    lines = [f"{kind} {rel}" for kind, rels in (("changed", result.changed),
                                               ("missing", result.missing),
                                               ("added", result.added)) for rel in rels]
    if result.ok:
        return [*lines, f"RECEIPT_OK files={result.checked}"]
    return [*lines, f"RECEIPT_MISMATCH changed={len(result.changed)} "
                    f"missing={len(result.missing)} added={len(result.added)}"]
