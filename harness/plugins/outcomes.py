"""Write how the run's tests ended, and pytest's reason for each skip, into the run directory.

The host cannot tell from pytest's exit code alone a run that measured from one whose tests
pytest skipped (both exit 0), nor from a process that left early with `os._exit(0)` (no file).
From the end of collection, ZL_PLUGIN_RUN_DIR/OUTCOMES_FILE holds
`{"collected", "passed", "failed", "skipped", "skip_reasons", "failure_reasons", "running",
"finished"}` (each failure's exception line, e.g. "MemoryError: ..."), rewritten as each test
starts and ends: `running` is the test under way (null between tests), `finished` true only
once the session has finished, so that a session cut short says where. A module skipped at
collection counts as one skipped test, one that failed to import as one failed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.contract import boundary
from harness.contract.boundary import OUTCOMES_FILE
from harness.fsutil import atomic_write_json

READER = "the outcomes plugin"
PREFIX = "Skipped: "  # what pytest puts before the reason given to pytest.skip


def skip_reason(longrepr: object) -> str:
    """pytest's reason for a skip: the message of its (path, line, message) tuple."""
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix(PREFIX)
    return str(longrepr).removeprefix(PREFIX) if longrepr else "skipped"


def failure_reason(report: pytest.CollectReport | pytest.TestReport) -> str:
    """A failure's exception line: pytest's crash message, else the last "E   " line of its
    report (an import error at collection), else its last line."""
    message = getattr(getattr(report.longrepr, "reprcrash", None), "message", None)
    if message and str(message).strip():
        return str(message).strip().splitlines()[0]
    lines = [line.strip() for line in report.longreprtext.splitlines() if line.strip()]
    errors = [line[1:].strip() for line in lines if line.startswith("E ")]
    return errors[-1] if errors else lines[-1] if lines else "failed"


class Outcomes:
    """Counts of the session's test outcomes, written when the session finishes."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.counts = {"passed": 0, "failed": 0, "skipped": 0}
        self.reasons: list[str] = []
        self.failures: list[str] = []
        self.collected = 0
        self.running: str | None = None

    def _write(self, finished: bool) -> None:
        atomic_write_json(self.run_dir / OUTCOMES_FILE,
                          {"collected": self.collected, **self.counts,
                           "skip_reasons": self.reasons, "failure_reasons": self.failures,
                           "running": self.running, "finished": finished})

    def _skipped(self, longrepr: object) -> None:
        self.counts["skipped"] += 1
        reason = skip_reason(longrepr)
        if reason not in self.reasons:
            self.reasons.append(reason)

    def _failed(self, report: pytest.CollectReport | pytest.TestReport) -> None:
        self.counts["failed"] += 1
        reason = failure_reason(report)
        if reason not in self.failures:
            self.failures.append(reason)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.skipped:  # a module skipped as a whole: pytest.skip(allow_module_level=True)
            self._skipped(report.longrepr)
        elif report.failed:
            self._failed(report)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.failed:
            self._failed(report)
        elif report.skipped:
            self._skipped(report.longrepr)
        elif report.when == "call":
            self.counts["passed"] += 1

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.collected = len(session.items)
        self._write(finished=False)

    def pytest_runtest_logstart(self, nodeid: str) -> None:
        self.running = nodeid
        self._write(finished=False)

    def pytest_runtest_logfinish(self, nodeid: str) -> None:
        self.running = None
        self._write(finished=False)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        self.collected = session.testscollected
        self.running = None
        self._write(finished=True)


def pytest_configure(config: pytest.Config) -> None:
    run_dir = boundary.read(boundary.RUN_DIR, READER, pytest.UsageError)
    config.pluginmanager.register(Outcomes(Path(run_dir)), "harness-outcomes")
