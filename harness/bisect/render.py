"""bisect.md and the lines a bisection prints: its result first, then every step tried."""

from __future__ import annotations

from collections.abc import Sequence

from harness.axes.steps import Step
from harness.bisect.search import Comparison, Outcome, State, Tried, Verdict, aggregate


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:+.1f}%"


def sized(c: Comparison) -> str:
    """An A/B's rows as `dtype shape: speedup [low, high] (verdict, N rounds)`."""
    return "; ".join(f"{r.dtype} {r.shape}: {_pct(r.speedup_pct)} [{_pct(r.ci_low_pct)}, "
                     f"{_pct(r.ci_high_pct)}] ({r.verdict}, {r.rounds} rounds)" for r in c.rows)


def step_text(steps: Sequence[Step], index: int) -> str:
    s = steps[index]
    said = f" {s.subject!r}" if s.subject else ""
    return f"step {index} {s.label}{said}" + (f" ({s.date})" if s.date else "")


def headline(outcome: Outcome, steps: Sequence[Step]) -> list[str]:
    """The result in a few lines, as printed and as bisect.md opens."""
    if outcome.state is State.ENDS_FAILED:
        return [f"the ends' A/B read no row: {outcome.ends.failed}"]
    if outcome.state is State.NO_DIFFERENCE:
        verdict = aggregate(outcome.ends.rows)
        return [f"the ends do not differ: their A/B called no row slower or faster (rows: "
                f"{verdict}); nothing to bisect", f"  {sized(outcome.ends)}"]
    found = [f"direction: {outcome.direction}, rows: "
             f"{', '.join(f'{d} {s}' for d, s in outcome.targets)}"]
    if outcome.state is State.FOUND:
        found.insert(0, f"first bad: {step_text(steps, outcome.hi)}: {steps[outcome.hi].value}")
        if outcome.evidence is not None:
            found.append(f"step size (B {outcome.evidence.b} against A {outcome.evidence.a}): "
                         f"{sized(outcome.evidence)}")
        else:
            found.append("step size: not timed (its verdict came from its code)")
    else:
        found.insert(0, "ambiguous: skipped steps leave the first bad one among: "
                     + ", ".join(step_text(steps, i) for i in outcome.candidates))
    skipped = [t for t in outcome.tried if t.verdict in (Verdict.UNDECIDED, Verdict.UNBUILDABLE)]
    if skipped:
        found.append("skipped: " + "; ".join(f"step {t.index} ({t.verdict}: {t.how})"
                                            for t in skipped))
    found.append(f"GPU time: {outcome.gpu_s:.1f} s in {len(outcome.comparisons)} A/Bs, "
                 f"{len(outcome.tried)} steps tried beyond the ends")
    return found


def tried_line(t: Tried, steps: Sequence[Step]) -> str:
    rounds = "/".join(str(c.rounds) for c in t.comparisons) or "-"
    return f"bisect: {step_text(steps, t.index)}: {t.verdict} ({t.how}; rounds {rounds})"


def markdown(op: str, kind: str, steps: Sequence[Step], outcome: Outcome) -> str:
    """bisect.md."""
    lines = [f"# bisect: {op}, {kind}, {steps[0].label} (good) .. {steps[-1].label} (bad)", ""]
    lines += [f"- {line}" for line in headline(outcome, steps)]
    lines += ["", "## Steps tried", "",
              "| step | label | subject | verdict | how | rounds | rows | campaigns |",
              "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    ends = (len(steps) - 1, outcome.direction or aggregate(outcome.ends.rows),
            "the ends' A/B (step 0 against the last)", (outcome.ends,))
    for index, verdict, how, comparisons in (
            ends, *((t.index, str(t.verdict), t.how, t.comparisons) for t in outcome.tried)):
        s = steps[index]
        rows = " / ".join(sized(c) for c in comparisons if c.rows) or "-"
        where = ", ".join(f"`{c.directory}`" for c in comparisons if c.directory) or "-"
        rounds = "/".join(str(c.rounds) for c in comparisons) or "-"
        lines.append(f"| {index} | {s.label} | {_cell(s.subject)} | {verdict} | "
                     f"{_cell(how)} | {rounds} | {_cell(rows)} | {where} |")
    verdicts = {t.index: str(t.verdict) for t in outcome.tried}
    verdicts.update({0: "good (GOOD)", len(steps) - 1: "bad (BAD)"})
    lines += ["", "## Every step", "", "| step | label | date | subject | verdict |",
              "| --- | --- | --- | --- | --- |"]
    lines += [f"| {i} | {s.label} | {s.date or '-'} | {_cell(s.subject)} | "
              f"{verdicts.get(i, '-')} |" for i, s in enumerate(steps)]
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ") or "-"
