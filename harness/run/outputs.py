"""A finished run's result files: rows from what its pytest wrote, results and shapes.yaml."""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import replace
from pathlib import Path

import yaml

from harness.contract import boundary, identity, results
from harness.providers.flaggems import BENCHMARK_DIR
from harness.run import rescue
from harness.settings.spec import Settings


def _record_logs(run_dir: Path) -> list[Path]:
    """The record logs this run's pytest wrote, as the record_log plugin listed them (without
    its list, a pytest that died early: those in the run directory). One written elsewhere is
    copied in and left where it is: the harness moves or deletes nothing outside its run."""
    listed = run_dir / boundary.RECORD_LOGS_FILE
    try:
        paths = [Path(p) for p in json.loads(listed.read_text(encoding="utf-8"))]
    except (OSError, ValueError, TypeError):
        return sorted(run_dir.glob(boundary.RECORD_LOG_GLOB))
    logs = []
    for path in paths:
        if path.parent.resolve() != run_dir.resolve() and path.is_file():
            copy = run_dir / path.name.replace("::", "__")
            shutil.copyfile(path, copy)
            path = copy
        if path.is_file():
            logs.append(path)
    return logs


def checked_flaggems_dir(settings: Settings) -> Path:
    """FLAGGEMS_DIR of a run whose node preflight resolved: check flaggems_dir refuses None."""
    assert settings.flaggems_dir is not None, "FLAGGEMS_DIR unset after preflight"
    return settings.flaggems_dir


def shape_source(settings: Settings) -> Path:
    """The shape file FlagGems reads for this run: SHAPE_FILE, else its core_shapes.yaml."""
    if settings.shape_mode == "file" and settings.shape_file is not None:
        return settings.shape_file
    return checked_flaggems_dir(settings) / BENCHMARK_DIR / "core_shapes.yaml"


def shapes_document(settings: Settings, rows: list[results.Row]) -> dict[str, object]:
    """shapes.yaml: the shape source and the shapes actually measured, per op and dtype."""
    source = shape_source(settings)
    measured: dict[str, dict[str, list[str]]] = {}
    for row in rows:
        shapes = measured.setdefault(row.op, {}).setdefault(row.dtype, [])
        if row.shape not in shapes:
            shapes.append(row.shape)
    return {
        "shape_mode": settings.shape_mode,
        "level": settings.level,
        "source": str(source),
        "source_sha256": identity.sha256_file(source) if source.is_file() else None,
        "measured": measured,
    }


def _read_timing(run_dir: Path) -> list[dict[str, object]]:
    """The timing plugin's per-row records; the file is folded into results and removed."""
    path = run_dir / boundary.TIMING_FILE
    if not path.is_file():
        return []
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()
               if line.strip()]
    path.unlink()
    return records


def write_outputs(settings: Settings, run_dir: Path, *, rescued: bool = False
                  ) -> tuple[list[results.Row], str]:
    """Parse what pytest wrote into results.csv/.jsonl and shapes.yaml; (rows, their source).

    A `rescued` run (see harness.run.rescue) reads only the console after its rescue line, and
    every row is direct-timed and carries the rescued marker."""
    record_logs = _record_logs(run_dir)
    rows: list[results.Row]
    if settings.warmup_share:  # FlagGems printed latencies, but nothing was timed
        rows, source = [], "warmup_share"
    else:
        record_text = "\n".join(p.read_text(encoding="utf-8", errors="replace")
                                for p in record_logs)
        console = (run_dir / "run.log").read_text(encoding="utf-8", errors="replace")
        if rescued:
            console = console[console.rfind("\n" + rescue.RESCUE_MARKER + " ") + 1:]
        rows, source = results.parse_run_output(record_text or None, console)
        rows = results.merge_timing(rows, _read_timing(run_dir),
                                    "direct" if rescued else settings.timer)
        if rescued:
            rows = [replace(r, timer="direct", markers=(*r.markers, boundary.RESCUED_MARKER))
                    for r in rows]
    results.write_results(run_dir, rows)
    with open(run_dir / "shapes.yaml.tmp", "w", encoding="utf-8") as fh:
        yaml.safe_dump(shapes_document(settings, rows), fh, sort_keys=False)
    os.replace(run_dir / "shapes.yaml.tmp", run_dir / "shapes.yaml")
    return rows, source
