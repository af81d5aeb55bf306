"""The capture rescue: an operator whose graph-timed pytest died after a capture failure is run
again, in a fresh process, with the direct timer.

A failed capture can leave the process unusable: the capture is invalidated
(BENCHMARK_CAPTURE_POISONED), or a shape falls back and a later one dies of the state the
capture left behind (torch's "Offset increment outside graph capture encountered unexpectedly").
FlagGems' own `--mode cudagraph` loses such an operator; its kernel mode runs it. The rescue keeps
the operator: the first attempt's side files move to CAPTURE_ATTEMPT_DIR, run.log keeps its lines
and a RESCUE_MARKER line, and every row of the second attempt carries RESCUED_MARKER (never
called faster or slower in a campaign, like any direct-timed fallback).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path

from harness.contract.boundary import DIRECT_MARKER, POISONED_MARKER

RESCUE_MARKER = "BENCHMARK_CAPTURE_RESCUE"  # run.log: the operator is run again, direct
CAPTURE_ATTEMPT_DIR = "capture_attempt"  # the failed attempt's side files

_REASON = re.compile(r"reason=(\".*\")\s*$")


def rescue_reason(timer: str, rc: int, output: str) -> str | None:
    """Why this run's operator is run again with the direct timer, or None.

    Only a graph-timed run whose pytest did not pass (`rc` not 0: a failure or a signal of its
    own) after a capture failed in it: `output` (this attempt's console) holds a poisoned
    capture or a shape's fallback. A failure without a capture failure is the operator's own.
    """
    if timer != "graph" or rc == 0:
        return None
    lines = output.splitlines()
    for marker in (POISONED_MARKER, DIRECT_MARKER):
        found = [line for line in lines if line.startswith(marker + " ")]
        if found:
            return f"{marker}: {_reason_of(found[-1])}; then pytest exit code {rc}"
    return None


def _reason_of(line: str) -> str:
    match = _REASON.search(line)
    if match:
        try:
            return str(json.loads(match.group(1)))
        except ValueError:
            pass
    return line


def set_aside(run_dir: Path, before: Iterable[str], keep: Iterable[str]) -> list[str]:
    """Move what the failed attempt added to `run_dir` (names not in `before`, other than
    `keep`) into CAPTURE_ATTEMPT_DIR; return the names moved."""
    old, kept = set(before), set(keep) | {CAPTURE_ATTEMPT_DIR}
    moved = sorted(p.name for p in run_dir.iterdir() if p.name not in old | kept)
    if moved:
        attempt = run_dir / CAPTURE_ATTEMPT_DIR
        attempt.mkdir(exist_ok=True)
        for name in moved:
            (run_dir / name).rename(attempt / name)
    return moved
