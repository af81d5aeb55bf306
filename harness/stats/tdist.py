"""Student's t and chi-square without scipy, t intervals of a mean and Benjamini-Hochberg
adjustment; pure."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

CONFIDENCE = 0.95
_CF_ITERATIONS = 400
_EPS = 3e-16


# ---------------------------------------------------------------- Student's t, without scipy


def _beta_continued_fraction(x: float, a: float, b: float) -> float:
    """The continued fraction of I_x(a, b), by the modified Lentz method."""
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, _CF_ITERATIONS):
        for aa in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                   -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + aa / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < _EPS:
            return h
    raise ArithmeticError(f"incomplete beta did not converge: x={x!r} a={a!r} b={b!r}")


def regularized_beta(x: float, a: float, b: float) -> float:
    """The regularized incomplete beta function I_x(a, b), for 0 <= x <= 1 and a, b > 0.

    The continued fraction converges fast for x below (a + 1) / (a + b + 2); above it the
    symmetry I_x(a, b) = 1 - I_(1-x)(b, a) is used instead.
    """
    if not (a > 0 and b > 0 and 0.0 <= x <= 1.0):
        raise ValueError(f"regularized beta needs 0 <= x <= 1 and a, b > 0: x={x!r} a={a!r} "
                         f"b={b!r}")
    if x in (0.0, 1.0):
        return x
    log_front = (math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                 + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _beta_continued_fraction(x, a, b) / a
    return 1.0 - math.exp(log_front) * _beta_continued_fraction(1.0 - x, b, a) / b


def _check_df(df: float) -> None:
    if not (math.isfinite(df) and df > 0):
        raise ValueError(f"degrees of freedom must be positive and finite, got {df!r}")


def student_t_two_sided_p(t: float, df: float) -> float:
    """P(|T| >= |t|) for Student's t with `df` degrees of freedom: I_(df/(df+t^2))(df/2, 1/2)."""
    _check_df(df)
    if math.isnan(t):
        raise ValueError("t statistic is nan")
    if math.isinf(t):
        return 0.0
    return regularized_beta(df / (df + t * t), df / 2.0, 0.5)


@lru_cache(maxsize=256)
def student_t_quantile(p: float, df: float) -> float:
    """The t with P(T <= t) = p, for 0 < p < 1, found by bisection on the CDF.

    Bisection (not Newton) because it cannot diverge in the heavy tails of one or two degrees
    of freedom; 200 halvings pin t to the last bits of a float.
    """
    _check_df(df)
    if not 0.0 < p < 1.0:
        raise ValueError(f"quantile needs 0 < p < 1, got {p!r}")
    if p < 0.5:
        return -student_t_quantile(1.0 - p, df)
    if p == 0.5:
        return 0.0
    tail = 2.0 * (1.0 - p)  # the two-sided p of the answer
    low, high = 0.0, 1.0
    while student_t_two_sided_p(high, df) > tail:
        low, high = high, high * 2.0
    for _ in range(200):
        mid = (low + high) / 2.0
        if mid in (low, high):
            break
        low, high = (mid, high) if student_t_two_sided_p(mid, df) > tail else (low, mid)
    return (low + high) / 2.0


def regularized_gamma(a: float, x: float) -> float:
    """The regularized lower incomplete gamma function P(a, x), for a > 0 and x >= 0.

    Its series converges fast for x below a + 1; above it the continued fraction of
    Q(a, x) = 1 - P(a, x) is used instead (modified Lentz).
    """
    if not (a > 0 and x >= 0.0 and math.isfinite(x)):
        raise ValueError(f"regularized gamma needs a > 0 and finite x >= 0: a={a!r} x={x!r}")
    if x == 0.0:
        return 0.0
    log_front = a * math.log(x) - x - math.lgamma(a)
    if x < a + 1.0:
        term = total = 1.0 / a
        for n in range(1, _CF_ITERATIONS * 10):
            term *= x / (a + n)
            total += term
            if abs(term) < abs(total) * _EPS:
                return math.exp(log_front) * total
        raise ArithmeticError(f"incomplete gamma series did not converge: a={a!r} x={x!r}")
    tiny = 1e-300
    b = x + 1.0 - a
    c, d = 1.0 / tiny, 1.0 / b
    h = d
    for i in range(1, _CF_ITERATIONS):
        an = -i * (i - a)
        b += 2.0
        d = an * d + b
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = b + an / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        if abs(d * c - 1.0) < _EPS:
            return 1.0 - math.exp(log_front) * h
    raise ArithmeticError(f"incomplete gamma did not converge: a={a!r} x={x!r}")


@lru_cache(maxsize=256)
def chi2_quantile(p: float, df: float) -> float:
    """The x with P(X <= x) = p for a chi-square X of `df` degrees of freedom, 0 < p < 1:
    bisection on its CDF, P(df / 2, x / 2)."""
    _check_df(df)
    if not 0.0 < p < 1.0:
        raise ValueError(f"quantile needs 0 < p < 1, got {p!r}")
    low, high = 0.0, max(1.0, df)
    while regularized_gamma(df / 2.0, high / 2.0) < p:
        low, high = high, high * 2.0
    for _ in range(200):
        mid = (low + high) / 2.0
        if mid in (low, high):
            break
        low, high = (mid, high) if regularized_gamma(df / 2.0, mid / 2.0) < p else (low, mid)
    return (low + high) / 2.0


# ---------------------------------------------------------------- intervals and tests


@dataclass(frozen=True)
class TInterval:
    """A t interval of a mean of log ratios, with the two-sided p of "the mean is zero"."""

    mean: float
    low: float
    high: float
    p_value: float
    n: int


def t_interval(values: Sequence[float], confidence: float = CONFIDENCE) -> TInterval | None:
    """The Student-t interval of the mean of `values` and the t test of mean = 0; None below 2.

    The interval is mean +- t(1 - alpha/2, n - 1) * sd / sqrt(n): its coverage is exact for
    normal values at any n, which per-round log ratios of latencies roughly are; with three
    rounds it is wide (t = 4.30), as three rounds warrant. Values that do not vary give a point
    interval and p = 0 (1 when the mean is zero too): the data show no spread to test against.
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence={confidence!r}; expected 0 < confidence < 1")
    n = len(values)
    if n < 2:
        return None
    if not all(math.isfinite(v) for v in values):
        raise ValueError(f"t interval needs finite values, got {list(values)!r}")
    mean = math.fsum(values) / n
    # float arithmetic, not statistics.stdev's exact fractions: as accurate to a few ulps and
    # tens of times faster, which a campaign of thousands of rows judged at each look needs
    spread = math.fsum((v - mean) ** 2 for v in values) if min(values) < max(values) else 0.0
    se = math.sqrt(spread / (n - 1)) / math.sqrt(n)
    if se == 0.0:
        return TInterval(mean, mean, mean, 1.0 if mean == 0.0 else 0.0, n)
    half = student_t_quantile(1.0 - (1.0 - confidence) / 2.0, n - 1) * se
    return TInterval(mean, mean - half, mean + half, student_t_two_sided_p(mean / se, n - 1), n)


def benjamini_hochberg(p_values: Sequence[float | None]) -> tuple[float | None, ...]:
    """Benjamini-Hochberg adjusted p-values, in the order given; None stays None.

    The family is the p-values that are not None. A row whose adjusted p is at most q survives
    the step-up procedure at false-discovery rate q: among the rows called different, the
    expected share of null ones is at most q (independent or positively dependent tests). It
    errs toward keeping a real difference out when few rows differ among many.
    """
    tested = sorted((p, i) for i, p in enumerate(p_values) if p is not None)
    if any(not 0.0 <= p <= 1.0 for p, _ in tested):
        raise ValueError(f"p-values must lie in [0, 1], got {list(p_values)!r}")
    adjusted: list[float | None] = [None] * len(p_values)
    running = 1.0
    for rank in range(len(tested), 0, -1):
        p, index = tested[rank - 1]
        running = min(running, p * len(tested) / rank)
        adjusted[index] = running
    return tuple(adjusted)
