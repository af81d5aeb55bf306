"""The search of a bisection, with noise in the loop: pure, given a judge that compares two steps.

First the ends: an A/B of GOOD (A) against BAD (B) must call a row of the operator slower or
faster; the rows so called are the bisection's targets and their verdict its direction, else it
stops there. Then, while more than one step could be the first bad one, the untried step
nearest the middle of the range (GOOD's side `lo`, BAD's side `hi`) is judged against both:

- a step whose code fingerprint is that of `lo` or `hi` takes its verdict without timing;
- else an A/B of `lo` against it: its targets must read the direction (bad) or same (good),
  anything else leaves it undecided, and a failure unbuildable; then an A/B of it against `hi`
  must agree (same where it is bad, the direction where it is good), else it is undecided;
  a side that ran the same code as the other (the campaign's `unchanged` kernels and the same
  Python source for the operator) reads same.

An undecided or unbuildable step is skipped, as `git bisect skip` does, and named; the result is
the first bad step, or the steps it could be where skips leave more than one.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from enum import Enum

from harness.axes.steps import Step

SLOWER, FASTER, SAME, INCONCLUSIVE = "slower", "faster", "same", "inconclusive"
DIRECTIONS = (SLOWER, FASTER)
MIXED, FAILED = "mixed", "failed"  # an aggregate of rows: two verdicts, or no row to read


class Verdict(str, Enum):
    """A step's verdict."""

    GOOD = "good"
    BAD = "bad"
    UNDECIDED = "undecided"  # its two A/Bs did not agree, or one could not tell
    UNBUILDABLE = "unbuildable"  # its A/B had no row: a failed import, a failed unit

    def __str__(self) -> str:
        return str.__str__(self)


class State(str, Enum):
    """How a bisection ended."""

    FOUND = "found"  # one first bad step
    AMBIGUOUS = "ambiguous"  # skipped steps leave several that could be it
    NO_DIFFERENCE = "no-difference"  # the ends' A/B called no row slower or faster
    ENDS_FAILED = "ends-failed"  # the ends' A/B had no row to read

    def __str__(self) -> str:
        return str.__str__(self)


@dataclass(frozen=True)
class Row:
    """One row's verdict in an A/B of two steps (B against A)."""

    dtype: str
    shape: str
    verdict: str
    speedup_pct: float
    ci_low_pct: float | None
    ci_high_pct: float | None
    rounds: int

    @property
    def key(self) -> tuple[str, str]:
        return self.dtype, self.shape


@dataclass(frozen=True)
class Comparison:
    """An A/B of step `a` (side A) against step `b` (side B): the operator's rows it read,
    whether B ran the same code as A (kernels and Python source), why it read no row
    (`failed`), where it is and the GPU seconds its units took."""

    a: int
    b: int
    rows: tuple[Row, ...] = ()
    same_code: bool = False
    failed: str | None = None
    directory: str | None = None
    gpu_s: float = 0.0
    rounds: int = 0
    floor_pct: float | None = None  # the noise floor its rows were judged at (None: 1%)


@dataclass(frozen=True)
class Tried:
    """A step tried: its verdict, how it was reached, and the A/Bs that reached it."""

    index: int
    verdict: Verdict
    how: str
    comparisons: tuple[Comparison, ...] = ()


@dataclass(frozen=True)
class Outcome:
    state: State
    ends: Comparison
    direction: str | None
    targets: tuple[tuple[str, str], ...]
    tried: tuple[Tried, ...]
    lo: int
    hi: int
    candidates: tuple[int, ...]  # the steps that can be the first bad one, `hi` last
    evidence: Comparison | None  # the A/B that sizes the step at the first bad one

    @property
    def comparisons(self) -> tuple[Comparison, ...]:
        return (self.ends, *(c for t in self.tried for c in t.comparisons))

    @property
    def gpu_s(self) -> float:
        return sum(c.gpu_s for c in self.comparisons)


Judge = Callable[[int, int], Comparison]


def aggregate(rows: Sequence[Row], targets: Sequence[tuple[str, str]] | None = None) -> str:
    """The verdict of `rows` (those of `targets` only, where given) taken together: the one
    verdict they share, `mixed` for several, `failed` where a target has no row."""
    if targets is not None:
        found = {r.key: r for r in rows}
        if any(t not in found for t in targets):
            return FAILED
        rows = [found[t] for t in targets]
    verdicts = {r.verdict for r in rows}
    if not verdicts:
        return FAILED
    return verdicts.pop() if len(verdicts) == 1 else MIXED


def moved(rows: Sequence[Row]) -> tuple[str | None, tuple[tuple[str, str], ...]]:
    """The ends' direction and targets: the rows called slower, else faster, where more rows
    were called faster than slower; (None, ()) where no row was called either."""
    by = {d: tuple(r.key for r in rows if r.verdict == d) for d in DIRECTIONS}
    direction = max(DIRECTIONS, key=lambda d: len(by[d]))  # a tie: slower, the regression
    return (direction, by[direction]) if by[direction] else (None, ())


def half_step_floor(ends: Comparison, targets: Sequence[tuple[str, str]],
                    least: float, most: float) -> float:
    """The floor a step's A/Bs are judged at: half the smallest step of the ends' targets
    (half its log ratio), within [least, most]. A step then reads the direction only where
    it carries more than half the ends' change, and same only where it carries less."""
    found = {r.key: r for r in ends.rows}
    logs = [abs(math.log1p(found[t].speedup_pct / 100)) for t in targets if t in found]
    half = math.expm1(min(logs) / 2) * 100 if logs else least
    return round(min(most, max(least, half)), 2)


def next_index(lo: int, hi: int, skipped: set[int]) -> int | None:
    """The untried step between `lo` and `hi` nearest their middle (the lower of two)."""
    left = [k for k in range(lo + 1, hi) if k not in skipped]
    middle = (lo + hi) / 2
    return min(left, key=lambda k: (abs(k - middle), k)) if left else None


def search(steps: Sequence[Step], judge: Judge,
           on_try: Callable[[Tried], None] = lambda tried: None) -> Outcome:
    """Bisect `steps` (GOOD first, BAD last) with `judge`; `on_try` sees each step tried."""
    last = len(steps) - 1
    ends = judge(0, last)
    direction, targets = moved(ends.rows)
    if ends.failed is not None or direction is None:
        state = State.ENDS_FAILED if ends.failed is not None else State.NO_DIFFERENCE
        return Outcome(state, ends, direction, targets, (), 0, last, (), None)
    lo, hi = 0, last
    skipped: set[int] = set()
    tried: list[Tried] = []
    while (i := next_index(lo, hi, skipped)) is not None:
        step = _try(steps, i, lo, hi, judge, direction, targets)
        tried.append(step)
        on_try(step)
        if step.verdict is Verdict.GOOD:
            lo = i
        elif step.verdict is Verdict.BAD:
            hi = i
        else:
            skipped.add(i)
    candidates = (*sorted(k for k in skipped if lo < k < hi), hi)
    state = State.FOUND if len(candidates) == 1 else State.AMBIGUOUS
    outcome = Outcome(state, ends, direction, targets, tuple(tried), lo, hi, candidates, None)
    return replace(outcome, evidence=_evidence(outcome))


def _try(steps: Sequence[Step], i: int, lo: int, hi: int, judge: Judge, direction: str,
         targets: Sequence[tuple[str, str]]) -> Tried:
    code = steps[i].code
    for end, verdict in ((lo, Verdict.GOOD), (hi, Verdict.BAD)):
        if code is not None and code == steps[end].code:
            return Tried(i, verdict, f"same code as step {end} ({steps[end].label})")
    first = judge(lo, i)
    if first.failed is not None:
        return Tried(i, Verdict.UNBUILDABLE, first.failed, (first,))
    if first.same_code:
        return Tried(i, Verdict.GOOD, f"ran the same code as step {lo}", (first,))
    against_lo = aggregate(first.rows, targets)
    if against_lo not in (SAME, direction):
        return Tried(i, Verdict.UNDECIDED, f"against step {lo}: {against_lo}", (first,))
    second = judge(i, hi)
    if second.failed is not None:
        return Tried(i, Verdict.UNDECIDED, f"against step {hi}: {second.failed}",
                     (first, second))
    if second.same_code:
        return Tried(i, Verdict.BAD, f"ran the same code as step {hi}", (first, second))
    against_hi = aggregate(second.rows, targets)
    said = f"against step {lo}: {against_lo}; against step {hi}: {against_hi}"
    if (against_lo, against_hi) == (SAME, direction):
        return Tried(i, Verdict.GOOD, said, (first, second))
    if (against_lo, against_hi) == (direction, SAME):
        return Tried(i, Verdict.BAD, said, (first, second))
    return Tried(i, Verdict.UNDECIDED, said, (first, second))


def _evidence(outcome: Outcome) -> Comparison | None:
    """The A/B of the first bad step (B) against the good step nearest before it (A)."""
    if outcome.state is not State.FOUND:
        return None
    good = {0} | {t.index for t in outcome.tried if t.verdict is Verdict.GOOD}
    sized = [c for c in outcome.comparisons if c.b == outcome.hi and c.a in good and c.rows]
    return max(sized, key=lambda c: c.a) if sized else None
