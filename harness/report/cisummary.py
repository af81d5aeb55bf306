"""ci-summary.md: a campaign's answer for a CI job's page, short at any number of operators."""

from __future__ import annotations

from collections.abc import Mapping

from harness import stats
from harness.axes.liveness import NOT_LIVE_MARKER
from harness.errors import EXIT_FAIL_ON
from harness.report.abjson import AbDocument, OperatorSummary
from harness.report.gate import FailOn, interrupted, not_live, operators_of
from harness.report.junit import JUNIT_XML
from harness.report.render import interval, pct
from harness.report.rerun import command

CI_SUMMARY_MD = "ci-summary.md"
LISTED = 8  # operators each section lists, the largest first; ab.md has every one
FAILED_VERDICTS = ("failed", "pending")


def _counts(operators: Mapping[str, OperatorSummary]) -> str:
    found = [o.verdict for o in operators.values()]
    return " · ".join(f"{v.value} {found.count(v.value)}" for v in stats.OpVerdict
                      if found.count(v.value))


REASON_CHARS = 160  # of a failed operator's reason, in the step summary


def _gate_line(fail_on: FailOn, trips: Mapping[str, tuple[str, ...]], exit_code: int) -> str:
    if not fail_on.words:
        return "FAIL_ON not set: this job does not fail on a verdict"
    if not trips:
        return f"FAIL_ON={fail_on.text}: no operator holds such a verdict"
    return (f"**FAIL_ON={fail_on.text}: {len(trips)} operator(s) hold such a verdict, exit "
            f"{exit_code}**: " + ", ".join(list(trips)[:LISTED])
            + (" ..." if len(trips) > LISTED else ""))


def _ended_lines(doc: AbDocument) -> list[str]:
    """What makes the verdicts above less than a campaign's: it was cut short, or its axis
    showed no sign of reaching the compiler (the job exits 6 whatever FAIL_ON says)."""
    out = []
    if interrupted(doc):
        stop = doc.status.interrupted if doc.status else None
        out += [f"**interrupted** ({stop.signal if stop else '-'}): its verdicts are those of "
                "the units that finished; `harness ab --resume <campaign>` completes it", ""]
    if not_live(doc):
        out += [f"**{NOT_LIVE_MARKER}**: the axis showed no sign of reaching the compiler "
                "(the job exits 6)", ""]
    return out


def _section(title: str, items: list[tuple[str, OperatorSummary]], doc: AbDocument,
             what: str) -> list[str]:
    """A bounded list of operators, each with what it shows (`what`: reason or speedup) and
    the command that reruns it."""
    if not items:
        return []
    lines = [f"### {title} ({len(items)})", ""]
    for op, info in items[:LISTED]:
        if what == "reason":
            reason = info.reason or "no paired row"  # whole in ab.md; cut here, and said so
            said = reason if len(reason) <= REASON_CHARS else reason[:REASON_CHARS - 1] + "…"
        else:
            worst = info.worst
            said = (f"geomean {pct(info.geomean_speedup_pct)}%, {info.rows} rows"
                    + (f", worst {pct(worst.speedup_pct)}% {worst.dtype} {worst.shape}"
                       if worst else ""))
        lines.append(f"- **{op}**: {said} · `{command(doc.caliber, op)}`")
    if len(items) > LISTED:
        lines.append(f"- and {len(items) - LISTED} more: ab.md lists every operator")
    return [*lines, ""]


def _by_effect(operators: Mapping[str, OperatorSummary], verdict: str, sign: int
               ) -> list[tuple[str, OperatorSummary]]:
    found = [(op, o) for op, o in operators.items() if o.verdict == verdict]
    return sorted(found, key=lambda item: sign * (item[1].geomean_speedup_pct or 0.0))


def _flagged(doc: AbDocument) -> str:
    """" (K flagged)" where rows read flagged (timed under another regime on a side): the mean
    counts them, and no gate reads them."""
    flagged = sum(1 for r in doc.rows if r.stats.flagged)
    return f" ({flagged} flagged)" if flagged else ""


def render(doc: AbDocument, fail_on: FailOn, trips: Mapping[str, tuple[str, ...]],
           exit_code: int = EXIT_FAIL_ON) -> str:
    """The summary: verdict counts, the geometric mean with its interval, the gate, then the
    operators that failed and those called slower and faster (largest effect first, LISTED of
    each) with a rerun command each, and where the rest is."""
    operators = operators_of(doc)
    c = doc.caliber
    mean = ("no paired rows" if doc.geomean_speedup_pct is None else
            f"geometric mean speedup **{pct(round(doc.geomean_speedup_pct, 1) or 0.0)}%** "
            f"{interval(doc.geomean_ci_low_pct, doc.geomean_ci_high_pct)} over "
            f"{len(doc.rows)} rows" + _flagged(doc))
    failed = [(op, o) for op, o in operators.items()
              if o.verdict in FAILED_VERDICTS or o.units_failed]
    out = [f"## A/B {c.axis or 'none'}: {c.text('a') or '-'} vs {c.text('b') or '-'} "
           f"({len(operators)} operators, {c.text('backend') or '-'})", "",
           f"{_counts(operators) or 'no operator'}; {mean}", "",
           _gate_line(fail_on, trips, exit_code), "",
           *_ended_lines(doc),
           *_section("failed", failed, doc, "reason"),
           *_section("slower", _by_effect(operators, "slower", 1), doc, "effect"),
           *_section("faster", _by_effect(operators, "faster", -1), doc, "effect"),
           f"Speedup is (A_ms / B_ms - 1) * 100 from per-round log ratios; every row is in "
           f"ab.md and ab.json, one test case per operator in {JUNIT_XML}."]
    return "\n".join(out) + "\n"
