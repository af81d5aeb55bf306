"""receipt.json: what an A/B campaign ran, pinned by the sha256 of every harness file; verify.

A receipt (schema "harness-receipt/2") is one JSON object:

    schema            "harness-receipt/2"
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
    results           {"runs": [...], "files": {path: sha256}}: the files the verdicts rest on,
                      paths relative to the receipt's directory (the campaign's): every file of
                      each run directory in `sides` and PINNED_RESULTS (ab.json, ab.md)

`verify` recomputes the hashes under a checkout and under the receipt's directory: a file whose
bytes changed, a listed file that is gone, a harness file the receipt does not list and a file
that appeared in a listed run directory all make it fail. A "harness-receipt/1" receipt (no
`results`) is still read; it pins the harness files only.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path, PurePosixPath
from typing import Any

from harness import __version__
from harness.contract import identity
from harness.errors import UsageError
from harness.fsutil import atomic_write_json, read_json
from harness.settings.spec import REPO_ROOT

SCHEMA = "harness-receipt/2"
SCHEMA_PREFIX = "harness-receipt/"
READ_SCHEMAS = ("harness-receipt/1", SCHEMA)  # /1: before `results`
RECEIPT_JSON = "receipt.json"
# The campaign's own files its verdicts rest on, besides its run directories. Not campaign.json
# (the driver saves it after the receipt, state "done"; the receipt's `campaign` and ab.json's
# `units` hold what it said), not ab.png (drawn from ab.json by whatever matplotlib renders it:
# `harness report` may rewrite it with other bytes), not logs/ (a unit's console, not its
# results; its run directory holds run.log) and not receipt.json itself.
PINNED_RESULTS = ("ab.json", "ab.md")
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
    checked: int = 0  # harness files the receipt lists
    results: int | None = None  # result files it lists; None: a receipt without `results`


# ---------------------------------------------------------------- building


def _read_identity(run_dir: Path) -> Mapping[str, Any] | None:
    try:
        found = identity.read_identity(run_dir)
    except UsageError:
        return None  # recorded as null: the receipt says the run left no usable identity
    return None if found is None else found.doc


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


def _inside(run_dir: str, base: Path) -> str | None:
    """The posix path of a run directory relative to `base`; None for one outside it. Both are
    as the campaign's process names them: relative ones from its working directory (OUT=runs,
    the default, names every run directory so)."""
    try:
        return Path(run_dir).resolve().relative_to(base.resolve()).as_posix()
    except ValueError:
        return None


def _files_under(base: Path, runs: Iterable[str]) -> list[str]:
    """Every file now under the run directories `runs` of `base` and the PINNED_RESULTS there,
    as sorted posix paths relative to `base`."""
    found = {p.relative_to(base).as_posix() for run in runs for p in (base / run).rglob("*")
             if p.is_file()}
    found |= {name for name in PINNED_RESULTS if (base / name).is_file()}
    return sorted(found)


def result_hashes(base: Path, run_dirs: Iterable[str]) -> dict[str, Any]:
    """The `results` block: the run directories inside `base` and the sha256 of every file
    under them, with ab.json and ab.md, keyed by their paths relative to `base`."""
    runs = sorted({rel for d in run_dirs if (rel := _inside(d, base)) is not None})
    return {"runs": runs,
            "files": {rel: identity.sha256_file(base / rel) for rel in _files_under(base, runs)}}


def build_receipt(*, campaign: Mapping[str, Any], sides: Mapping[str, Mapping[str, Any]],
                  rows: Sequence[Mapping[str, Any]], commands: Sequence[Sequence[str]],
                  caliber: Mapping[str, Any], root: Path = REPO_ROOT,
                  results_dir: Path | None = None) -> dict[str, Any]:
    """The receipt document of a campaign whose harness checkout is `root`; with
    `results_dir` (the campaign directory, where the receipt goes) its `results` block too."""
    git = identity.git_state(root)
    side_records = {name: side_record(side) for name, side in sides.items()}
    receipt: dict[str, Any] = {
        "schema": SCHEMA,
        "created_utc": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "harness_version": __version__,
        "commit": git["commit"],
        "dirty": git["dirty"],
        "files": identity.file_hashes(root),
        "campaign": dict(campaign),
        "caliber": dict(caliber),
        "sides": side_records,
        "commands": [[str(arg) for arg in argv] for argv in commands],
        "rows": [dict(row) for row in rows],
    }
    if results_dir is not None:
        receipt["results"] = result_hashes(Path(results_dir), [
            run["dir"] for side in side_records.values() for run in side["runs"]])
    return receipt


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


def _hash_map(files: object) -> bool:
    return isinstance(files, dict) and all(
        _safe_path(k) and isinstance(v, str) and _SHA256.fullmatch(v) for k, v in files.items())


def _results_ok(results: object) -> bool:
    """An absent `results` block (a /1 receipt), or one of run directories and hashes inside
    the receipt's directory."""
    if results is None:
        return True
    return (isinstance(results, dict) and isinstance(results.get("runs"), list)
            and all(_safe_path(r) for r in results["runs"]) and _hash_map(results.get("files")))


def _load(path: str | Path) -> tuple[Path, dict[str, Any]]:
    target, data = read_json(path, RECEIPT_JSON, ReceiptError,
                             missing="no receipt at {path!r}",
                             not_json="{path!r} is not a receipt: not JSON ({exc})")
    schema = data.get("schema") if isinstance(data, dict) else None
    if not isinstance(schema, str) or not schema.startswith(SCHEMA_PREFIX):
        raise ReceiptError(f"{str(target)!r} is not a receipt: schema={schema!r}, "
                           f"expected {SCHEMA!r}")
    if schema not in READ_SCHEMAS:
        raise ReceiptError(f"{str(target)!r}: unsupported receipt schema {schema!r}; "
                           f"this harness reads {' and '.join(map(repr, READ_SCHEMAS))}")
    if not _hash_map(data.get("files")):
        raise ReceiptError(f"{str(target)!r} is not a receipt: 'files' must map relative "
                           "paths inside the checkout to sha256 hex digests")
    if not _results_ok(data.get("results")):
        raise ReceiptError(f"{str(target)!r} is not a receipt: 'results' must hold 'runs' and "
                           "'files', relative paths inside its directory and sha256 hex digests")
    return target, data


def load_receipt(path: str | Path) -> dict[str, Any]:
    """The receipt at `path` (a file, or a directory holding receipt.json); ReceiptError if
    it is not one this harness reads."""
    return _load(path)[1]


def _compare(listed: Mapping[str, str], base: Path, now: Iterable[str]
             ) -> tuple[list[str], list[str], list[str]]:
    """(changed, missing, added) paths relative to `base`: `listed` against the files there,
    `now` the ones that would be listed today."""
    changed, missing = [], []
    for rel, digest in sorted(listed.items()):
        file = base / rel
        if not file.is_file():
            missing.append(rel)
        elif identity.sha256_file(file) != digest:
            changed.append(rel)
    return changed, missing, sorted(set(now) - set(listed))


def verify(path: str | Path, root: str | Path = REPO_ROOT) -> VerifyResult:
    """Recompute the sha256 of every harness file the receipt at `path` lists, under `root`,
    and of every result file, under the receipt's directory (named by that directory as
    `path` gives it)."""
    target, data = _load(path)
    root = Path(root)
    if not root.is_dir():
        raise UsageError(f"--root={str(root)!r} is not a directory; expected a harness checkout")
    listed: dict[str, str] = data["files"]
    changed, missing, added = _compare(listed, root,
                                       (p.as_posix() for p in identity.harness_files(root)))
    results = data.get("results")
    if results is not None:
        base = target.parent
        found = _compare(results["files"], base, _files_under(base, results["runs"]))
        for into, rels in zip((changed, missing, added), found, strict=True):
            into += [str(base / rel) for rel in rels]
    return VerifyResult(ok=not (changed or missing or added), changed=changed,
                        missing=missing, added=added, checked=len(listed),
                        results=None if results is None else len(results["files"]))


def verify_lines(result: VerifyResult) -> list[str]:
    """What `harness receipt verify` prints: a line per differing file, then the verdict."""
    lines = [f"{kind} {rel}" for kind, rels in (("changed", result.changed),
                                               ("missing", result.missing),
                                               ("added", result.added)) for rel in rels]
    if result.ok:
        return [*lines, f"RECEIPT_OK files={result.checked}" + (
            "" if result.results is None else f" results={result.results}")]
    return [*lines, f"RECEIPT_MISMATCH changed={len(result.changed)} "
                    f"missing={len(result.missing)} added={len(result.added)}"]
