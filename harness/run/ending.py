"""How a run ended: its state, why, and its exit code, from pytest's code, rows and outcomes."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.contract.boundary import OUTCOMES_FILE
from harness.contract.states import CRASHED, FAILED, OK, SKIPPED
from harness.errors import EXIT_BENCHMARK_FAILED, EXIT_OK
from harness.executors.base import reason_for, state_for

# A node of a module skipped as a whole reads "found no collectors" (pytest's usage error, 4),
# a module or file that collects none of its tests "no tests collected" (5).
SKIP_CODES = (0, 4, 5)


@dataclass(frozen=True)
class RunEnd:
    """A run's state (executors.base's words), why where it is not ok, its exit code."""

    state: str
    reason: str | None
    exit_code: int
    partial: bool = False  # its session was cut short: its rows are kept, never compared


def decide(rc: int, rows: int, outcomes: Mapping[str, Any] | None,
           times_nothing: bool = False, dtypes: Sequence[str] = ()) -> RunEnd:
    """The state of a run whose pytest exited `rc` after `rows` result rows (of `dtypes`).

    `outcomes` is the outcomes plugin's file (None, or not `finished`: pytest never finished
    its session, e.g. `os._exit`). skipped: pytest skipped a test or module and ran or failed
    nothing else (exit 0, the reason pytest's; see SKIP_CODES). failed: pytest exited 0 with no
    row and no skip, or without finishing its session (exit 1; the rows it had are `partial`),
    unless the run `times_nothing` (a parallel warmup's shard). Any other code passes through,
    its state as executors.base.state_for reads it.
    """
    found = outcomes or {}
    cut = outcomes is None or found.get("finished") is False
    partial = cut and rows > 0
    skipped, passed, failed = (int(found.get(k) or 0) for k in ("skipped", "passed", "failed"))
    if rc in SKIP_CODES and skipped and not (passed or failed) and not cut:
        reasons = [str(r) for r in found.get("skip_reasons") or ()]
        return RunEnd(SKIPPED, "; ".join(reasons) or "skipped", EXIT_OK)
    if rc != 0:
        state = state_for(rc)
        if state == CRASHED:  # the same words the executor gives a unit killed so
            return RunEnd(state, reason_for(state, Path(), rc=rc), rc, partial)
        why = f"{failed} test(s) failed" if state == FAILED and failed else None
        causes = [str(r) for r in found.get("failure_reasons") or ()]
        cause = f": {causes[0]}" if causes else ""  # the first exception line, e.g. MemoryError
        return RunEnd(state, (why or f"pytest exit code {rc}") + cause, rc, partial)
    if times_nothing:
        return RunEnd(OK, None, EXIT_OK)
    if cut:
        return RunEnd(FAILED, cut_reason(rows, found, dtypes), EXIT_BENCHMARK_FAILED, partial)
    if rows:
        return RunEnd(OK, None, EXIT_OK)
    if not passed:
        why = "0 rows: pytest ran no test"
    else:
        why = f"0 rows: {passed} test(s) passed and recorded no result"
    return RunEnd(FAILED, why, EXIT_BENCHMARK_FAILED)


def cut_reason(rows: int, found: Mapping[str, Any], dtypes: Sequence[str]) -> str:
    """Why a session that pytest left with exit 0 before finishing it is failed: where it
    stopped and what it had measured."""
    where = ""
    if found.get("running"):
        where = f" inside {found['running']}"
    elif found:
        done = sum(int(found.get(k) or 0) for k in ("passed", "failed", "skipped"))
        where = f" after {done} of {int(found.get('collected') or 0)} tests"
    exited = f"pytest exited 0 without finishing its session{where} (os._exit or a killed child)"
    if not rows:
        return f"0 rows: {exited}"
    names = dict.fromkeys(d.removeprefix("torch.") for d in dtypes)
    measured = f" ({', '.join(names)})" if names else ""
    return (f"cut short: {exited}; the rest of its rows are missing, and the {rows} it "
            f"had{measured} are kept, never compared")


def read_outcomes(run_dir: Path) -> dict[str, Any] | None:
    """The outcomes plugin's file, removed once read; None where pytest wrote none."""
    path = run_dir / OUTCOMES_FILE
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return None
    path.unlink()
    return doc if isinstance(doc, dict) else None
