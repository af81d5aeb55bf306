"""Where a pytest session's seconds go, and the device clocks beside each timed call.

Used by the timing plugin, which sees every phase: a `Split` sums one get_latency call's
seconds by phase (warmup, capture, replays under the graph timer, the direct timer's whole
call), `Session` stamps collection, the tests and the teardown and writes one line of
`boundary.PHASES_FILE` per session, which the host folds into time_breakdown.json. Stamps are
`time.monotonic()` (the host's clock for the run's wall), durations `time.perf_counter()`.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.backends import Backend, ClockReader
from harness.contract import boundary
from harness.contract.boundary import CLOCK_CHANGE

ROW_PHASES = ("inputs", "reference", "warmup", "capture", "replays", "direct")


class Split:
    """One call's seconds by phase: `enter` ends the phase running and starts the next."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.phase: str | None = None
        self.mark = 0.0

    def enter(self, phase: str | None) -> None:
        now = time.perf_counter()
        if self.phase is not None:
            self.seconds[self.phase] = self.seconds.get(self.phase, 0.0) + now - self.mark
        self.phase, self.mark = phase, now

    def total(self) -> float:
        return sum(self.seconds.values())


def row_phases(gaps: Sequence[float], splits: Sequence[dict[str, float]]) -> dict[str, float]:
    """A row's seconds by phase from its calls: the gaps before them (its inputs), the first
    call as torch's reference where the row has two, the last split by phase."""
    phases = {"inputs": sum(gaps)}
    if len(splits) > 1:
        phases["reference"] = sum(sum(s.values()) for s in splits[:-1])
    for phase, seconds in (splits[-1] if splits else {}).items():
        phases[phase] = phases.get(phase, 0.0) + seconds
    return {k: round(v, 6) for k, v in phases.items()}


def throttled(reads: Sequence[dict[str, Any] | None]) -> bool:
    """Whether clocks read around a row say it was timed throttled: a throttle reason other
    than idle in any reading, or the SM clock moving by more than CLOCK_CHANGE of its highest
    reading across them."""
    known = [r for r in reads if r]
    if any(r.get("throttle") for r in known):
        return True
    sm = [r["sm_mhz"] for r in known if r.get("sm_mhz")]
    return bool(sm) and max(sm) - min(sm) > CLOCK_CHANGE * max(sm)


def open_reader(backend: Backend, ordinal: int) -> tuple[ClockReader | None, str]:
    """The backend's clock reader for device `ordinal` of this process, or why there is none
    ("" where the backend reads no clocks at all)."""
    variable = backend.visibility_vars[0] if backend.visibility_vars else None
    try:
        opened = backend.open_clocks(os.environ.get(variable) if variable else None, ordinal)
    except Exception as exc:  # a management library that misbehaves costs the clocks only
        opened = f"clock reader failed to open: {exc}"
    return (None, opened) if isinstance(opened, str) else (opened, "")


def read(reader: ClockReader | None) -> dict[str, int | None] | None:
    """One reading as a dict; None without a reader or when the reading fails."""
    if reader is None:
        return None
    try:
        return reader().to_dict()
    except Exception:
        return None


class Session:
    """One pytest session's stamps and sums; written at unconfigure."""

    def __init__(self, run_dir: Path | None) -> None:
        self.path = run_dir / boundary.PHASES_FILE if run_dir else None
        self.configured = time.monotonic()
        self.collect_start: float | None = None
        self.seconds: dict[str, float] = {"collection": 0.0, "tests": 0.0, "teardown": 0.0}
        self.rows: list[dict[str, Any]] = []
        self.finish_start: float | None = None

    def add(self, phase: str, seconds: float) -> None:
        self.seconds[phase] = self.seconds.get(phase, 0.0) + seconds

    def document(self, ended: float) -> dict[str, Any]:
        """The session's line: its stamps, its phases (the tests' time less its rows' is
        tests_other), its rows."""
        phases = {p: 0.0 for p in ROW_PHASES}
        for row in self.rows:
            for phase, seconds in row["time"].items():
                phases[phase] = phases.get(phase, 0.0) + seconds
        session = dict(self.seconds)
        if self.finish_start is not None:
            session["teardown"] = ended - self.finish_start
        tests = session.pop("tests")
        phases["tests_other"] = max(0.0, tests - sum(phases.values()))
        phases.update(session)
        start = self.collect_start if self.collect_start is not None else self.configured
        phases["session_other"] = max(0.0, ended - start - sum(phases.values()))
        return {"pid": os.getpid(), "configured": self.configured, "collect_start": start,
                "ended": ended, "phases": {k: round(v, 6) for k, v in phases.items()},
                "rows": self.rows}

    def write(self) -> None:
        if self.path is None:
            return
        append_line(self.path, json.dumps(self.document(time.monotonic()), default=str))


def append_line(path: Path, line: str) -> None:
    """Append `line` to `path` as a line of its own, also after a line that a killed session
    cut short (no newline at the file's end), which would otherwise swallow it."""
    with open(path, "a+b") as fh:
        if fh.tell():
            fh.seek(-1, 2)
            if fh.read(1) != b"\n":
                fh.write(b"\n")
        fh.write(line.encode("utf-8") + b"\n")
