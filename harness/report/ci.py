"""What a CI job reads beside ab.json: junit.xml, ci-summary.md, its step summary, the gate."""

from __future__ import annotations

import datetime as dt
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

from harness.errors import EXIT_OK
from harness.fsutil import atomic_write_bytes, atomic_write_text
from harness.report import abjson, cisummary, gate, junit

STEP_SUMMARY_VAR = "GITHUB_STEP_SUMMARY"  # the file a GitHub Actions step appends its page to


def write_ci_files(directory: Path, doc: abjson.AbDocument, fail_on: gate.FailOn,
                   env: Mapping[str, str], rc: int = EXIT_OK) -> dict[str, tuple[str, ...]]:
    """Write junit.xml and ci-summary.md beside ab.json, and append the summary to the file
    that GITHUB_STEP_SUMMARY names where `env` sets it; the operators that trip `fail_on`.
    `rc`: the command's exit before the gate, so that the summary names the exit it gets."""
    trips = gate.tripped(doc, fail_on)
    stamp = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    atomic_write_bytes(directory / junit.JUNIT_XML, junit.junit_xml(doc, trips, fail_on, stamp))
    text = cisummary.render(doc, fail_on, trips, gate.exit_code(rc, trips))
    atomic_write_text(directory / cisummary.CI_SUMMARY_MD, text)
    if target := env.get(STEP_SUMMARY_VAR):
        try:
            with open(target, "a", encoding="utf-8") as fh:  # the CI's file: appended, as asked
                fh.write(text + "\n")
        except OSError as exc:  # a CI's page, not the campaign's result: the exit stands
            print(f"warning: {STEP_SUMMARY_VAR}={target!r} could not be appended to "
                  f"({exc.strerror or exc}); {cisummary.CI_SUMMARY_MD} holds the summary",
                  file=sys.stderr)
    return trips


def conclude(directory: Path, rc: int, fail_on: gate.FailOn, env: Mapping[str, str],
             out: Callable[[str], None]) -> int:
    """After a campaign wrote ab.json: its CI files, a FAIL_ON line, and the exit (7 where an
    operator holds a verdict FAIL_ON names, gate.exit_code). Without ab.json (the campaign
    never reached one) nothing is written and `rc` stands."""
    if not (directory / abjson.AB_JSON).is_file():
        return rc
    trips = write_ci_files(directory, abjson.read_ab(directory), fail_on, env, rc)
    if fail_on.words:
        listed = ", ".join(f"{op} ({'/'.join(w)})" for op, w in list(trips.items())[:20])
        more = f" and {len(trips) - 20} more" if len(trips) > 20 else ""
        out(f"FAIL_ON={fail_on.text}: " + (f"{len(trips)} operator(s) tripped: {listed}{more}"
                                           if trips else "no operator tripped"))
    return gate.exit_code(rc, trips)
