"""Statistics: every interval the package reports is computed here (over problems and over seeds).

Over a benchmark the unit of resampling is the *problem* (its k samples are not independent). Over seeds,
Student-t intervals are written out rather than taken from scipy's ``confidence_interval()``, which rounds
differently in the last bit for about a third of inputs and would change every report file's bytes.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # pandas only for the report's per-step band: `cwgrpo evaluate` runs without it
    import pandas as pd

DEFAULT_RESAMPLES = 10_000
Z95 = 1.959963984540054  # normal quantile for a 95 % interval from a standard error


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
    """Seeded percentile bootstrap interval of the mean of ``values`` (one per problem)."""
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


def accuracy_summary(correct: Sequence[Sequence[bool]], seed: int = 0) -> dict[str, float | list[float]]:
    """``pass1``, ``avg_k``, its standard error and bootstrap interval, from problems x samples booleans."""
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


def mean_ci(values: Iterable[float], level: float = 0.95) -> tuple[float, float, float]:
    """Mean over seeds and its Student-t interval ``(mean, lo, hi)``, missing values (None, NaN) dropped;
    with one seed ``lo``/``hi`` are NaN, with none all three."""
    from scipy import stats as st

    x = np.asarray([float(v) for v in values if v is not None and np.isfinite(v)], dtype=np.float64)
    if x.size == 0:
        return math.nan, math.nan, math.nan
    m = float(x.mean())
    if x.size < 2:
        return m, math.nan, math.nan
    half = float(st.t.ppf((1 + level) / 2, df=x.size - 1)) * standard_error(x)
    return m, m - half, m + half


@dataclass(frozen=True)
class Effect:
    """A difference ``treatment - reference`` over seeds with its 95 % CI (NaN when unavailable)."""

    mean: float
    lo: float
    hi: float
    n: int  # pairs when paired, else the smaller group size
    paired: bool
    seeds: tuple[int, ...]
    note: str = ""

    @property
    def has_ci(self) -> bool:
        return not (math.isnan(self.lo) or math.isnan(self.hi))

    @property
    def half(self) -> float:
        return (self.hi - self.lo) / 2 if self.has_ci else math.nan

    def as_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["seeds"] = list(self.seeds)
        out["ci95"] = [self.lo, self.hi] if self.has_ci else None
        return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in out.items()}


def seed_effect(treatment: Mapping[int, float], reference: Mapping[int, float]) -> Effect:
    """``treatment - reference`` over seeds: paired on two or more common seeds (the note names those
    dropped), else Welch with two or more a side, else no interval."""
    if not treatment or not reference:
        return Effect(math.nan, math.nan, math.nan, 0, False, (), "no values")
    common = sorted(set(treatment) & set(reference))
    if common and (set(treatment) == set(reference) or len(common) >= 2):
        dropped = sorted(set(treatment) ^ set(reference))
        m, lo, hi = mean_ci(treatment[s] - reference[s] for s in common)
        note = f"paired by seed; seeds without a partner dropped: {dropped}" if dropped else "paired by seed"
        return Effect(m, lo, hi, len(common), True, tuple(common), note)
    a = np.array(list(treatment.values()), dtype=float)
    b = np.array(list(reference.values()), dtype=float)
    m = float(a.mean() - b.mean())
    seeds = tuple(sorted(set(treatment) | set(reference)))
    if a.size < 2 or b.size < 2:
        return Effect(m, math.nan, math.nan, min(a.size, b.size), False, seeds, "unpaired; CI unavailable")
    from scipy import stats

    va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
    se = math.sqrt(va + vb)
    if se == 0:
        return Effect(m, m, m, min(a.size, b.size), False, seeds, "unpaired (Welch); zero variance")
    df = (va + vb) ** 2 / (va**2 / (a.size - 1) + vb**2 / (b.size - 1))
    half = float(stats.t.ppf(0.975, df) * se)
    return Effect(m, m - half, m + half, min(a.size, b.size), False, seeds, "unpaired (Welch t-interval)")


def t_band(piv: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """Per row of ``piv`` (steps x seeds): the 95 % t-interval of the mean over its seeds (NaN below two)."""
    import pandas as pd
    from scipy import stats

    n = piv.notna().sum(axis=1)
    mean = piv.mean(axis=1)
    t = pd.Series(stats.t.ppf(0.975, np.maximum(n - 1, 1)), index=piv.index)
    half = (t * piv.std(axis=1, ddof=1) / np.sqrt(n)).where(n >= 2)
    return mean - half, mean + half


def normal_ci(mean: float, se: float) -> tuple[float, float]:
    """``mean ± 1.96 se`` (a 95 % normal interval); NaN if ``se`` is not finite."""
    return (mean - Z95 * se, mean + Z95 * se) if np.isfinite(se) else (math.nan, math.nan)


def mean_normal_ci(avg: float, ses: np.ndarray) -> tuple[float, float]:
    """95 % normal interval of ``avg``, the mean of independent estimates with standard errors ``ses``."""
    if not np.all(np.isfinite(ses)):
        return (math.nan, math.nan)
    half = Z95 * math.sqrt(float(np.sum(ses**2))) / len(ses)  # the estimates are independent samples
    return (avg - half, avg + half)


def paired_sd(treatment: Mapping[int, float], reference: Mapping[int, float]) -> float:
    """Standard deviation (ddof 1) of the per-seed differences over the seeds both have; NaN under two."""
    common = sorted(set(treatment) & set(reference))
    d = np.array([treatment[s] - reference[s] for s in common], dtype=float)
    return float(d.std(ddof=1)) if d.size >= 2 else math.nan


def paired_mde(sd_diff: float, n: int, alpha: float = 0.05, power: float = 0.8) -> float:
    """Minimum detectable effect of a paired two-sided t-test over ``n`` seeds:
    ``(t_{1-alpha/2, n-1} + t_{power, n-1}) * sd_diff / sqrt(n)`` (the study's power calculation)."""
    from scipy import stats

    if n < 2 or not math.isfinite(sd_diff):
        return math.nan
    return float((stats.t.ppf(1 - alpha / 2, n - 1) + stats.t.ppf(power, n - 1)) * sd_diff / math.sqrt(n))
