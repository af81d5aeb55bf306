"""FAIL_ON: which operator verdicts make a campaign exit 7, and which operators trip it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from harness import stats
from harness.contract.states import RunStatus
from harness.errors import (
    EXIT_AXIS_NOT_LIVE,
    EXIT_BENCHMARK_FAILED,
    EXIT_FAIL_ON,
    EXIT_OK,
    UsageError,
)
from harness.report.abjson import AbDocument, OperatorSummary
from harness.settings import variables

V = stats.OpVerdict
# Each word of FAIL_ON and the operator verdicts (stats.OpVerdict) it names. `failed` also
# names an operator any of whose units failed, crashed or timed out, whatever its rows say.
WORDS: Mapping[str, frozenset[str]] = {
    "slower": frozenset({V.SLOWER}),
    "faster": frozenset({V.FASTER}),
    "any-called": frozenset({V.SLOWER, V.FASTER}),  # a row called either way
    "changed": frozenset({V.SLOWER, V.FASTER, V.INCONCLUSIVE, V.FLAGGED}),  # not shown same
    "failed": frozenset({V.FAILED, V.PENDING}),
}
CALLS = ("slower", "faster", "any-called", "changed")  # the words a row's verdict trips
NONE = "none"  # FAIL_ON's default, as DESIGN.md and junit.xml name it: no gate


@dataclass(frozen=True)
class FailOn:
    """The words of FAIL_ON, in the order given; empty: nothing makes the exit 7."""

    words: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        return ",".join(self.words)

    def trips(self, info: OperatorSummary) -> tuple[str, ...]:
        """The words of this FAIL_ON that `info` (one operator's summary) trips."""
        if info.verdict == V.EXCLUDED:  # left out by EXCLUDE: its units are not judged
            return ()
        return tuple(w for w in self.words if info.verdict in WORDS[w]
                     or (w == "failed" and info.units_failed > 0))


def parse(text: str | None, label: str = "FAIL_ON") -> FailOn:
    """FAIL_ON's words; UsageError naming `label`, the value and the accepted words for any
    other (an empty item included: `slower,` is a typo, not a word)."""
    if text is None or text.strip() in ("", NONE):
        return FailOn()
    words = [w.strip() for w in text.split(",")]
    bad = [w for w in words if w not in WORDS]
    if bad:
        raise UsageError(f"{label}={text!r} is not accepted ({bad[0]!r} is no verdict it "
                         f"takes); expected one or more of {', '.join(WORDS)}, comma-separated")
    return FailOn(tuple(dict.fromkeys(words)))


def from_settings(flags: Mapping[str, object], env: Mapping[str, str]) -> FailOn:
    """FAIL_ON as given (flag first, then ZL_FAIL_ON), checked."""
    var = variables.named("FAIL_ON")
    value, source = var.lookup(flags, env)
    return parse(value, var.label(source))


def operators_of(doc: AbDocument) -> dict[str, OperatorSummary]:
    """The document's operator summaries; for an ab.json without them (a summary's A/B), one
    per operator of its rows."""
    if doc.operators is not None:
        return dict(doc.operators)
    by_op: dict[str, list[str]] = {}
    for row in doc.rows:
        by_op.setdefault(row.op, []).append(row.stats.verdict.value)
    return {op: OperatorSummary(stats.operator_verdict(found, False).value, rows=len(found))
            for op, found in by_op.items()}


def tripped(doc: AbDocument, fail_on: FailOn) -> dict[str, tuple[str, ...]]:
    """Each operator that trips `fail_on`, with the words it trips, in the document's order."""
    out = {}
    for op, info in operators_of(doc).items():
        if found := fail_on.trips(info):
            out[op] = found
    return out


def interrupted(doc: AbDocument) -> bool:
    """Whether the campaign behind ab.json was cut short (a signal, its units left to resume)."""
    return doc.status is not None and doc.status.state == RunStatus.INTERRUPTED


def not_live(doc: AbDocument) -> bool:
    """Whether the campaign's axis showed no sign of reaching the compiler: it exits 6."""
    return doc.liveness is not None and doc.liveness.status == "not_live"


def campaign_exit(doc: AbDocument) -> int:
    """The exit its campaign's driver gave, read back from ab.json for `harness report`: 6
    where the axis was not live, 1 where the campaign was interrupted or an operator (not
    excluded) is pending, failed or has a unit that did not end ok, else 0; so that gating a
    report again exits as gating the campaign did, never 0 for one cut short."""
    if not_live(doc):
        return EXIT_AXIS_NOT_LIVE
    kept = [o for o in (doc.operators or {}).values() if o.verdict != V.EXCLUDED]
    if interrupted(doc) or any(
            o.verdict in (V.FAILED, V.PENDING) or o.units_failed for o in kept):
        return EXIT_BENCHMARK_FAILED
    return EXIT_OK


def exit_code(rc: int, trips: Mapping[str, tuple[str, ...]]) -> int:
    """The command's exit: 7 where an operator tripped FAIL_ON and the campaign otherwise
    exits 0 or 1 (a benchmark failed); any other code (6, the axis not live) stands."""
    return EXIT_FAIL_ON if trips and rc in (EXIT_OK, EXIT_BENCHMARK_FAILED) else rc
