"""Statistics computed by hand, the expected values of the report's tests (never the code under test)."""

from __future__ import annotations

import math

T975_2 = 4.302652729911275  # the t quantile t_{0.975} with 2 degrees of freedom (3 seeds)


def t_interval_3(values: list[float]) -> tuple[float, float, float]:
    """Mean and 95 % t-interval of three values, by the textbook formula."""
    n = len(values)
    assert n == 3, "T975_2 is the quantile for three values"
    m = sum(values) / n
    sd = math.sqrt(sum((v - m) ** 2 for v in values) / (n - 1))
    h = T975_2 * sd / math.sqrt(n)
    return m, m - h, m + h
