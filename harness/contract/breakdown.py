"""time_breakdown.json: where a run's wall went, from its sessions' time_phases.jsonl lines.

The timing plugin writes one line per pytest session (harness.plugins.phases); the host, which
timed the run's wall, adds what no session sees: `startup` (the launch, the interpreter, the
imports of torch, pytest and flag_gems, pytest's configuration, up to collection; between two
sessions of one run, such as a capture rescue, the time from one's end to the next one's
collection, the first one's own phases counted as a session's), `worker_checks` (a worker's own
work after each session, before it answers:
putting back what a fresh process has, comparing its state with the session's start, the
device's state; its `prepare` before the session is part of startup) and `unattributed` (the
wall less every phase: the process's exit, the host's own work). Stamps are
`time.monotonic()` on both sides; a startup that does not fit the wall (a clock not shared
with the host) is left out and lands in `unattributed`. Outside that wall the
host's run adds `host`: its seconds before pytest's launch (the run directory, the devices
read, the replayed winners laid out) and after pytest ended (outputs, fingerprints, the
devices read again, the identity), which a campaign's units pay on top of their runs' walls.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.contract import boundary
from harness.fsutil import atomic_write_text

BREAKDOWN_FILE = "time_breakdown.json"
SCHEMA = 1
# In the order a session spends them; every session phase of the plugin and the host's two.
PHASES = ("startup", "collection", "inputs", "reference", "warmup", "capture", "replays",
          "direct", "tests_other", "teardown", "session_other", "worker_checks",
          "unattributed")
# A worker's seconds after a session (launch facts' `worker_s`) that worker_checks sums.
WORKER_CHECKS = ("restore", "garbage", "compare", "device", "collect")


def read_sessions(run_dir: Path) -> list[dict[str, Any]]:
    """The session lines of a run; a line cut short by a killed pytest is skipped."""
    path = run_dir / boundary.PHASES_FILE
    if not path.is_file():
        return []
    sessions = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            sessions.append(json.loads(line))
        except ValueError:
            continue
    return [s for s in sessions if isinstance(s, dict) and isinstance(s.get("phases"), dict)]


def worker_checks(launches: Sequence[Mapping[str, Any]]) -> float:
    """The seconds the run's workers spent after their sessions (the launch facts of
    lease.start_pytest); 0 for a run in fresh processes."""
    total = 0.0
    for facts in launches:
        seconds = facts.get("worker_s")
        if isinstance(seconds, Mapping):
            total += sum(float(seconds.get(k) or 0.0) for k in WORKER_CHECKS)
    return total


def compose(sessions: Sequence[Mapping[str, Any]], started: float, wall_s: float,
            checks_s: float = 0.0) -> dict[str, Any]:
    """The document of a run whose pytest sessions were `sessions`, launched at `started`
    (monotonic) and ended `wall_s` later, its workers having spent `checks_s` after them."""
    totals = {p: 0.0 for p in PHASES}
    totals["worker_checks"] = checks_s
    previous_end = started
    for session in sessions:
        startup = float(session["collect_start"]) - previous_end
        if 0 <= startup <= wall_s:
            totals["startup"] += startup
        for phase, seconds in session["phases"].items():
            totals[phase] = totals.get(phase, 0.0) + float(seconds)
        previous_end = float(session["ended"])
    totals["unattributed"] = wall_s - sum(v for k, v in totals.items() if k != "unattributed")
    return {"schema": SCHEMA, "wall_s": round(wall_s, 6), "sessions": len(sessions),
            "phases": {k: round(v, 6) for k, v in totals.items()},
            "replay_fraction": round(totals["replays"] / wall_s, 6) if wall_s > 0 else None,
            "rows": [r for s in sessions for r in s.get("rows", [])]}


def write(run_dir: Path, started: float, wall_s: float,
          launches: Sequence[Mapping[str, Any]] = ()) -> Path:
    """Fold the run's session lines (and its workers' checks, from `launches`) into
    time_breakdown.json and remove them."""
    sessions = read_sessions(run_dir)
    doc = compose(sessions, started, wall_s, worker_checks(_of_sessions(launches, sessions)))
    path = atomic_write_text(run_dir / BREAKDOWN_FILE, json.dumps(doc, indent=1) + "\n")
    (run_dir / boundary.PHASES_FILE).unlink(missing_ok=True)
    return path


def _of_sessions(launches: Sequence[Mapping[str, Any]], sessions: Sequence[Mapping[str, Any]]
                 ) -> Sequence[Mapping[str, Any]]:
    """The launches whose sessions wrote a line: by the worker's pid where the lines and
    launches name one, else the last ones. A launch that wrote none (killed before its
    session ended) is in the next session's startup, its checks with it."""
    pids = {s.get("pid") for s in sessions} - {None}
    if pids and all(isinstance(launch.get("pid"), int) for launch in launches):
        return [launch for launch in launches if launch.get("pid") in pids]
    return launches[max(0, len(launches) - len(sessions)):]


HOST_PHASES = ("host_before", "host_after")


def add_host(run_dir: Path, before_s: float, after_s: float) -> None:
    """Record in the run's document the host's seconds before pytest's launch and after its
    end; nothing where the run wrote none."""
    path = run_dir / BREAKDOWN_FILE
    doc = read(path)
    if doc is None:
        return
    doc["host"] = {"host_before": round(before_s, 6), "host_after": round(after_s, 6)}
    atomic_write_text(path, json.dumps(doc, indent=1) + "\n")


def read(path: Path) -> dict[str, Any] | None:
    """A run's breakdown document; None where it is missing or not one."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(doc, dict) or not is_seconds(doc.get("wall_s")) or doc["wall_s"] < 0:
        return None
    wall = float(doc["wall_s"])
    phases, host = doc.get("phases"), doc.get("host", {k: 0.0 for k in HOST_PHASES})
    if not isinstance(phases, dict) or not all(
            is_seconds(v) and -SLACK_S <= v <= wall + SLACK_S for v in phases.values()):
        return None
    if not isinstance(host, dict) or set(host) != set(HOST_PHASES) or not all(
            is_seconds(v) and v >= 0 for v in host.values()):
        return None
    return doc


# How far below 0 (`unattributed`, what is left, in rounding) or past the wall a phase may
# read in a document this harness wrote.
SLACK_S = 1.0


def is_seconds(value: object) -> bool:
    """Whether `value` is a number of seconds: a finite float, not a bool."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return False
    try:
        return math.isfinite(float(value))
    except OverflowError:  # an int past float's range
        return False
