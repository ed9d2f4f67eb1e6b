"""The covariance figure's symmetric-log axes: the linear range, bin edges and a few readable ticks.

Token covariances span many decades on both sides of zero; these keep the histogram bins and ticks
inside the data.
"""

from __future__ import annotations

import math

import numpy as np


def linthresh(cov: np.ndarray) -> float:
    """Linear range of the symlog axis: the power of ten at or below the median |cov| (nonzero)."""
    a = np.abs(cov[np.isfinite(cov) & (cov != 0)])
    if a.size == 0:
        return 1.0
    return float(10 ** math.floor(math.log10(np.median(a))))


def symlog_edges(lt: float, top: float, per_side: int = 28) -> np.ndarray:
    top = max(top * 1.001, lt * 10)
    pos = np.geomspace(lt, top, per_side)
    return np.concatenate([-pos[::-1], np.linspace(-lt, lt, 5)[1:-1], pos])


def symlog_ticks(axis, lt: float, per_side: int) -> None:
    """Few, readable ticks on a symlog axis: 0 and at most ``per_side`` decades each side, all in view."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    lo, hi = axis.get_view_interval()
    top = max(abs(lo), abs(hi))
    decades = list(
        range(round(math.log10(lt)), math.floor(math.log10(max(top, lt * 10))) + 1)
    )  # within the data
    step = max(1, math.ceil(len(decades) / per_side))
    chosen = decades[::-1][::step][::-1]  # keep the outermost decade

    def label(v: float, _pos: int) -> str:
        if v == 0:
            return "0"
        d = round(math.log10(abs(v)))
        sign = "−" if v < 0 else ""
        return f"{sign}{10.0**d:g}" if -2 <= d <= 2 else f"{sign}$10^{{{d}}}$"

    axis.set_major_locator(
        FixedLocator([-(10.0**d) for d in reversed(chosen)] + [0.0] + [10.0**d for d in chosen])
    )
    axis.set_major_formatter(FuncFormatter(label))
    axis.set_minor_locator(NullLocator())
