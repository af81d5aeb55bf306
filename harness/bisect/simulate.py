"""Seeded simulations of a bisection with noise in the loop: how often it names the wrong step.

A simulated A/B is one row judged as a campaign with ROUNDS=auto judges it: MIN_ROUNDS rounds,
then a look after each (looks.judge, alpha spent over the looks) and one more round while the
row is inconclusive, up to MAX_ROUNDS. A round's log ratio is the two steps' true log ratio
plus normal noise of sd `noise` (the spread of one row's per-round ratios) and, with `heavy`,
a Student t(3) scaled to it. The search is the harness's own (search.search), its floor the
driver's (half the ends' step).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from harness import stats
from harness.axes.steps import Step
from harness.bisect import search
from harness.stats import looks

KEY = ("sim", "[1]")


@dataclass(frozen=True)
class Trial:
    state: search.State
    named: int | None  # the first bad step named (FOUND), else None
    abs: int
    rounds: int


def ab(rng: np.random.Generator, log_ratio: float, *, noise: float, floor: float,
       least: int, most: int, heavy: bool = False) -> tuple[search.Row, int]:
    """One row's A/B of two steps whose B is `log_ratio` (log of B ms / A ms) slower, judged
    as ROUNDS=auto judges it; (its row, the rounds it ran)."""
    draws = rng.standard_t(3, most) / math.sqrt(3) if heavy else rng.standard_normal(most)
    b_ms = np.exp(log_ratio + noise * draws)
    seen: list[int] = []
    for n in range(least, most + 1):
        seen.append(n)
        row = stats.row_stats([1.0] * n, b_ms[:n].tolist(), noise_floor_pct=floor)
        _, (judged,) = looks.judge([row], [seen], noise_floor_pct=floor,
                                   planned=most - least + 1)
        if judged.verdict is not stats.Verdict.INCONCLUSIVE:
            break
    return search.Row(*KEY, judged.verdict.value, judged.speedup_pct, judged.ci_low_pct,
                      judged.ci_high_pct, n), n


def trial(rng: np.random.Generator, steps: int, first_bad: int, step_pct: float, *,
          noise: float, least: int = 2, most: int = 6, heavy: bool = False) -> Trial:
    """One bisection of `steps` steps whose latency rises by `step_pct` at `first_bad`."""
    log_step = math.log1p(step_pct / 100)
    levels = [0.0 if i < first_bad else log_step for i in range(steps)]
    ends_floor = stats.MIN_NOISE_FLOOR_PCT
    seen: dict[str, float] = {}
    rounds = [0]

    def judge(a: int, b: int) -> search.Comparison:
        floor = seen.get("floor", ends_floor)
        row, n = ab(rng, levels[b] - levels[a], noise=noise, floor=floor, least=least,
                    most=most, heavy=heavy)
        rounds[0] += n
        found = search.Comparison(a, b, (row,), rounds=n)
        if (a, b) == (0, steps - 1):
            seen["floor"] = search.half_step_floor(found, [KEY], stats.MIN_NOISE_FLOOR_PCT,
                                                   stats.MAX_NOISE_FLOOR_PCT)
        return found

    names = [Step(str(i), str(i)) for i in range(steps)]
    out = search.search(names, judge)
    named = out.hi if out.state is search.State.FOUND else None
    return Trial(out.state, named, len(out.comparisons), rounds[0])


@dataclass(frozen=True)
class Summary:
    trials: int
    right: float  # named the first bad step
    wrong: float  # named another step
    undecided: float  # ambiguous, or stopped at the ends
    abs: float  # A/Bs per bisection
    rounds: float  # rounds per bisection, over all its A/Bs


def summarize(trials: Sequence[Trial], first_bad: Sequence[int]) -> Summary:
    n = len(trials)
    right = sum(t.named == f for t, f in zip(trials, first_bad, strict=True))
    wrong = sum(t.named is not None and t.named != f
                for t, f in zip(trials, first_bad, strict=True))
    return Summary(n, right / n, wrong / n, (n - right - wrong) / n,
                   sum(t.abs for t in trials) / n, sum(t.rounds for t in trials) / n)


def run(seed: int, trials: int, steps: int, step_pct: float, noise: float,
        heavy: bool = False) -> Summary:
    """`trials` bisections, the first bad step drawn uniformly from 1..steps-1 each time."""
    rng = np.random.default_rng(seed)
    firsts = [int(rng.integers(1, steps)) for _ in range(trials)]
    done = [trial(rng, steps, f, step_pct, noise=noise, heavy=heavy) for f in firsts]
    return summarize(done, firsts)
