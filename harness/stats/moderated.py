"""Each row's round-to-round variance moderated by the campaign's other rows; pure.

A row of three rounds has two degrees of freedom: its t interval is mean +- 4.30 standard
errors, and its sample variance is itself so noisy that a row whose rounds happened to agree
reads narrow and one whose rounds happened to differ reads wide. A campaign has many rows
whose noise is alike in kind (kernels of a similar duration timed the same way), so each
row's variance is estimated from its own rounds and from the others': Smyth's (2004)
empirical Bayes, as limma uses it (Linear models and empirical Bayes methods for assessing
differential expression in microarray experiments, Stat Appl Genet Mol Biol 3:3). The rows'
sample variances are taken as draws around a prior variance s0^2 with d0 degrees of freedom;
d0 and s0^2 come from the moments of their logarithms (limma's fitFDist), s0^2 trending with
the row's latency (limma-trend), as microsecond rows move more than long ones. A row's
moderated variance is (d0 s0^2 + d s^2) / (d0 + d), with d0 + d degrees of freedom: where
rows' variances spread no more than sampling explains, d0 is large and every row borrows the
campaign's noise; where they differ truly, d0 is small and each row keeps its own.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

# Rows behind a prior: fewer give moments too noisy to trust, and every row keeps its own
# variance (an operator's handful of rows, a bisection's one).
MIN_PRIOR_ROWS = 12
# A variance this many times below the rows' median is taken as that floor in the fit (limma's
# offset for zeros): a row whose rounds agree to the last bit says nothing about log s^2.
TINY_VARIANCE = 1e-5
MAX_PRIOR_DF = 4.0


@dataclass(frozen=True)
class Prior:
    """A row's prior variance (of per-round log ratios) and its degrees of freedom;
    `df` is math.inf where every row's variance is the trend's, `df_cap` the rows' pooled
    degrees of freedom, which no row's moderated degrees of freedom exceed."""

    df: float
    var: float
    df_cap: float

    def moderate(self, var: float, df: float) -> tuple[float, float]:
        """(moderated variance, its degrees of freedom) of a row's sample variance `var`
        with `df` degrees of freedom."""
        if math.isinf(self.df):
            return self.var, self.df_cap
        return ((self.df * self.var + df * var) / (self.df + df),
                min(self.df + df, self.df_cap))


# ---------------------------------------------------------------- polygamma, without scipy


def _shifted(x: float, order: int) -> tuple[float, float]:
    """(x moved to at least 6 by the recurrence, what the moves add to polygamma `order`)."""
    if not (math.isfinite(x) and x > 0):
        raise ValueError(f"polygamma needs a positive finite x, got {x!r}")
    added = 0.0
    while x < 6.0:
        added += (-1.0 / x, 1.0 / x ** 2, -2.0 / x ** 3)[order]
        x += 1.0
    return x, added


def digamma(x: float) -> float:
    """psi(x) = d/dx log Gamma(x), for x > 0 (recurrence to x >= 6, then the asymptotic
    series; about 1e-13 relative)."""
    x, added = _shifted(x, 0)
    r = 1.0 / (x * x)
    series = r * (1 / 12 - r * (1 / 120 - r * (1 / 252 - r * (1 / 240 - r * (1 / 132)))))
    return added + math.log(x) - 0.5 / x - series


def trigamma(x: float) -> float:
    """psi'(x), for x > 0."""
    x, added = _shifted(x, 1)
    r = 1.0 / (x * x)
    series = 1 / 6 - r * (1 / 30 - r * (1 / 42 - r * (1 / 30 - r * (5 / 66))))
    return added + 1.0 / x + r / 2 + r / x * series


def tetragamma(x: float) -> float:
    """psi''(x), for x > 0."""
    x, added = _shifted(x, 2)
    r = 1.0 / (x * x)
    series = 1 / 6 - r * (1 / 6 - r * (3 / 10 - r * (5 / 6)))
    return added - r - r / x - r * r / 2 + r * r * r * series


def trigamma_inverse(y: float) -> float:
    """The x > 0 with trigamma(x) = y, for y > 0: Newton's method on 1 / trigamma, from
    0.5 + 1 / y, as limma's trigammaInverse (it converges from above, monotonically)."""
    if not (math.isfinite(y) and y > 0):
        raise ValueError(f"trigamma_inverse needs a positive finite y, got {y!r}")
    if y > 1e7:
        return 1.0 / math.sqrt(y)
    if y < 1e-6:
        return 1.0 / y
    x = 0.5 + 1.0 / y
    for _ in range(50):
        tri = trigamma(x)
        step = tri * (1.0 - tri / y) / tetragamma(x)
        x += step
        if -step / x < 1e-8:
            return x
    raise ArithmeticError(f"trigamma_inverse did not converge for y={y!r}")


# ---------------------------------------------------------------- the prior


def _linear_fit(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float]:
    """(intercept, slope) of least squares; slope 0 where the xs do not vary."""
    n = len(xs)
    mx, my = math.fsum(xs) / n, math.fsum(ys) / n
    sxx = math.fsum((x - mx) ** 2 for x in xs)
    if sxx <= 0.0:
        return my, 0.0
    slope = math.fsum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
    return my - slope * mx, slope


def priors(rows: Sequence[tuple[float, float, float] | None]) -> list[Prior | None]:
    """Each row's Prior from the rows given, or all None where fewer than MIN_PRIOR_ROWS rows
    can be fitted.

    A row is (sample variance of its per-round log ratios, its degrees of freedom, its
    latency in ms), or None for one left out (flagged, a single round): it gets None. The
    fit is limma's fitFDist with log latency as a linear covariate: e = log s^2 -
    digamma(d / 2) + log(d / 2) is regressed on log latency; the residuals' variance, less
    what sampling gives (the mean of trigamma(d / 2)), is trigamma(d0 / 2); s0^2 at a latency
    is exp(fitted e + digamma(d0 / 2) - log(d0 / 2)). A non-positive excess gives d0 = inf.
    """
    used = [(i, r) for i, r in enumerate(rows)
            if r is not None and r[1] > 0 and math.isfinite(r[0]) and r[0] >= 0 and r[2] > 0]
    if len(used) < MIN_PRIOR_ROWS:
        return [None] * len(rows)
    positive = sorted(v for _, (v, _, _) in used if v > 0)
    if not positive:
        return [None] * len(rows)
    tiny = positive[len(positive) // 2] * TINY_VARIANCE
    xs = [math.log(ms) for _, (_, _, ms) in used]
    es = [math.log(max(v, tiny)) - digamma(d / 2) + math.log(d / 2) for _, (v, d, _) in used]
    intercept, slope = _linear_fit(xs, es)
    residual = math.fsum((e - intercept - slope * x) ** 2 for x, e in zip(xs, es, strict=True))
    excess = (residual / (len(used) - 2)
              - math.fsum(trigamma(d / 2) for _, (_, d, _) in used) / len(used))
    d0 = min(MAX_PRIOR_DF, 2.0 * trigamma_inverse(excess) if excess > 0 else math.inf)
    shift = 0.0 if math.isinf(d0) else digamma(d0 / 2) - math.log(d0 / 2)
    cap = math.fsum(d for _, (_, d, _) in used)
    out: list[Prior | None] = [None] * len(rows)
    for i, (_, _, ms) in used:
        out[i] = Prior(df=d0, var=math.exp(intercept + slope * math.log(ms) + shift), df_cap=cap)
    for i, r in enumerate(rows):  # a row outside the fit (a zero latency) keeps its own
        if r is not None and out[i] is None and r[2] > 0 and r[1] > 0:
            out[i] = Prior(df=d0, var=math.exp(intercept + slope * math.log(r[2]) + shift),
                           df_cap=cap)
    return out
