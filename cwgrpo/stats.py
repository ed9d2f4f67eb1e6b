"""Statistics for evaluation results: means, standard errors, bootstrap and t confidence intervals.

The unit of resampling is the *problem*: with k samples per problem, samples of one problem are not
independent, so intervals over a benchmark resample problems (each with its mean over its k samples),
never individual samples. Everything is deterministic for a given seed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

DEFAULT_RESAMPLES = 10_000


def mean(values: Sequence[float]) -> float:
    """Arithmetic mean; NaN for an empty sequence."""
    x = np.asarray(values, dtype=np.float64)
    return float(x.mean()) if x.size else math.nan


def standard_error(values: Sequence[float]) -> float:
    """Standard error of the mean, ``std(ddof=1) / sqrt(n)``; NaN with fewer than two values."""
    x = np.asarray(values, dtype=np.float64)
    if x.size < 2:
        return math.nan
    return float(x.std(ddof=1) / math.sqrt(x.size))


def bootstrap_ci(
    values: Sequence[float],
    confidence: float = 0.95,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of ``values`` (one value per problem).

    Resamples the values with replacement ``n_resamples`` times from ``numpy.random.default_rng(seed)``
    and returns the ``(1 - confidence) / 2`` and ``(1 + confidence) / 2`` quantiles of the resampled
    means. A single value gives a zero-width interval; an empty sequence gives ``(nan, nan)``.
    """
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    x = np.asarray(values, dtype=np.float64)
    if x.size == 0:
        return math.nan, math.nan
    rng = np.random.default_rng(seed)
    means = np.empty(n_resamples, dtype=np.float64)
    block = max(1, 2_000_000 // x.size)  # bound memory: at most ~2M indices at a time
    for start in range(0, n_resamples, block):
        stop = min(n_resamples, start + block)
        idx = rng.integers(0, x.size, size=(stop - start, x.size))
        means[start:stop] = x[idx].mean(axis=1)
    alpha = (1 - confidence) / 2
    lo, hi = np.quantile(means, [alpha, 1 - alpha])
    return float(lo), float(hi)


def mean_ci_over_seeds(values: Sequence[float], confidence: float = 0.95) -> tuple[float, float, float]:
    """Mean over seeds and its Student-t interval: ``(mean, lo, hi)``.

    ``mean +- t_{(1+confidence)/2, n-1} * std(ddof=1) / sqrt(n)``. With one seed the interval is
    undefined and ``lo``/``hi`` are NaN; with identical values it has zero width.
    """
    from scipy import stats as st

    x = np.asarray(values, dtype=np.float64)
    if x.size == 0:
        return math.nan, math.nan, math.nan
    m = float(x.mean())
    if x.size < 2:
        return m, math.nan, math.nan
    half = float(st.t.ppf((1 + confidence) / 2, df=x.size - 1)) * standard_error(x)
    return m, m - half, m + half


def accuracy_summary(correct: Sequence[Sequence[bool]], seed: int = 0) -> dict[str, float | list[float]]:
    """Benchmark accuracy from a problems x samples table of booleans (every row the same length k).

    Returns ``pass1`` (share of problems whose sample 0 is correct), ``avg_k`` (mean over problems of
    the per-problem share of correct samples), ``avg_k_se`` (standard error over problems) and
    ``avg_k_ci95`` (bootstrap over problems, seeded).
    """
    table = np.asarray(correct, dtype=np.float64)
    if table.ndim != 2 or table.shape[0] == 0 or table.shape[1] == 0:
        raise ValueError(f"expected a non-empty problems x samples table, got shape {table.shape}")
    per_problem = table.mean(axis=1)
    lo, hi = bootstrap_ci(per_problem, seed=seed)
    return {
        "pass1": float(table[:, 0].mean()),
        "avg_k": float(per_problem.mean()),
        "avg_k_se": standard_error(per_problem),
        "avg_k_ci95": [lo, hi],
    }
