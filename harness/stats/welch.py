"""Tests the history's queries make: Welch's unpaired t, and its weighted form for a step."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from harness.stats.tdist import student_t_two_sided_p


@dataclass(frozen=True)
class Welch:
    """The difference of two means (second minus first), its standard error, df and p."""

    diff: float
    se: float
    df: float
    p_value: float


def _mean_var(values: Sequence[float]) -> tuple[float, float]:
    n = len(values)
    mean = math.fsum(values) / n
    return mean, math.fsum((v - mean) ** 2 for v in values) / (n - 1)


def welch(first: Sequence[float], second: Sequence[float]) -> Welch | None:
    """Welch's t test of two unpaired sets (a night's rounds against another's); None where
    either has fewer than two values. Values that do not vary test as p 0 or 1."""
    if len(first) < 2 or len(second) < 2:
        return None
    m1, v1 = _mean_var(first)
    m2, v2 = _mean_var(second)
    a, b = v1 / len(first), v2 / len(second)
    se = math.sqrt(a + b)
    if se == 0.0:
        return Welch(m2 - m1, 0.0, float(len(first) + len(second) - 2),
                     1.0 if m1 == m2 else 0.0)
    df = (a + b) ** 2 / (a * a / (len(first) - 1) + b * b / (len(second) - 1)) \
        if a and b else float(len(first) + len(second) - 2)
    return Welch(m2 - m1, se, df, student_t_two_sided_p((m2 - m1) / se, df))


def weighted_welch(first: Sequence[float], first_var: Sequence[float],
                   second: Sequence[float], second_var: Sequence[float]) -> Welch | None:
    """Welch's test of two segments' weighted means, each point weighted by 1 / its variance
    (where they differ, a noisy point moves a mean less).

    The spread of each segment about its weighted mean is scaled into its standard error, so
    a segment noisier than its points claim is not trusted more for it. None below 2 a side.
    """
    if len(first) < 2 or len(second) < 2:
        return None
    parts = []
    for values, var in ((first, first_var), (second, second_var)):
        w = [1.0 / max(v, 1e-18) for v in var]
        total = math.fsum(w)
        mean = math.fsum(wi * x for wi, x in zip(w, values, strict=True)) / total
        chi = math.fsum(wi * (x - mean) ** 2 for wi, x in zip(w, values, strict=True))
        chi /= len(values) - 1
        parts.append((mean, max(chi, 1.0) / total, len(values)))
    (m1, a, n1), (m2, b, n2) = parts
    se = math.sqrt(a + b)
    df = (a + b) ** 2 / (a * a / (n1 - 1) + b * b / (n2 - 1))
    return Welch(m2 - m1, se, df, student_t_two_sided_p((m2 - m1) / se, df))
