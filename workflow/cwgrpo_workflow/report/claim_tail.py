"""Claim 4 of ``cwgrpo claims``: the heavy tail of the token covariances in ``tail_method``'s runs.

A run whose every sampled covariance is 0 (every group had zero reward spread, so every advantage is 0)
says nothing about the tail: its size is "not testable", not an error that stops the report.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from cwgrpo.io import ResultFileError
from cwgrpo.stats import Effect, mean_ci
from cwgrpo_workflow.report.claim_checks import (
    NO_EFFECT,
    ClaimsConfig,
    _ci_dict,
    _scaled,
    _size_result,
    decide,
    log,
)
from cwgrpo_workflow.report.load import cov_samples, run_info

QUANTILE_KEYS = ("cw/cov_q0.0001", "cw/cov_q0.4", "cw/cov_q0.6", "cw/cov_q0.9999")
ALL_ZERO = "no learning signal: every sampled covariance is 0 (seeds {seeds}), so there is no tail to measure"


def top_share(cov: Sequence[float] | np.ndarray, fraction: float) -> float:
    """Share of sum |c| carried by the ceil(fraction * n) tokens of largest |c| (NaN if sum |c| = 0)."""
    c = np.asarray(cov, dtype=float)
    a = np.abs(c[np.isfinite(c)])
    total = a.sum()
    if a.size == 0 or total == 0:
        return math.nan
    k = max(1, math.ceil(fraction * a.size - 1e-9))
    return float(np.sort(a)[::-1][:k].sum() / total)


def gaussian_top_share(fraction: float) -> float:
    """The same share for a zero-mean Gaussian: exp(-z^2 / 2) with z = Phi^-1(1 - fraction / 2)."""
    from scipy import stats

    z = float(stats.norm.ppf(1 - fraction / 2))
    return math.exp(-(z**2) / 2)


def claim_heavy_tail(
    runs: Sequence[Path], metrics: pd.DataFrame, cfg: ClaimsConfig, sizes: Sequence[str]
) -> list[dict[str, Any]]:
    """Claim 4: top-share of |c| of ``tail_method``'s runs minus ``tail_share_min``, in percentage points."""
    shares: dict[tuple[str, str], dict[int, float]] = {}
    all_zero: dict[str, list[int]] = {}  # size -> seeds whose samples hold no nonzero covariance
    for run_dir in runs:
        info = run_info(run_dir)
        key = (info["size"], info["method"])
        if info["method"] != cfg.tail_method:
            continue
        samples = cov_samples(run_dir)
        per_step = [top_share(r["cov"], cfg.tail_top_fraction) for r in samples]
        per_step = [v for v in per_step if math.isfinite(v)]  # a step with every c = 0 has no share
        if per_step:
            shares.setdefault(key, {})[info["seed"]] = float(np.mean(per_step))
        else:
            log.warning("%s/cov_samples.jsonl has no step with a nonzero covariance", run_dir)
            if samples:
                all_zero.setdefault(info["size"], []).append(info["seed"])
    ratio = quantile_ratio(metrics)
    out = []
    for size in sizes:
        values = shares.get((size, cfg.tail_method))
        if not values and size in all_zero:
            seeds = tuple(sorted(all_zero[size]))
            eff = dataclasses.replace(NO_EFFECT, n=len(seeds), seeds=seeds)
            reason = ALL_ZERO.format(seeds=", ".join(map(str, seeds)))
            out.append(_tail_result(cfg, size, eff, decide(eff, untestable=reason), None, None))
            continue
        if not values:
            raise ResultFileError(
                f"no covariance samples for size={size} method={cfg.tail_method}: no such run in --runs, "
                "or its cov_samples.jsonl is empty"
            )
        above = [v - cfg.tail_share_min for v in mean_ci(values.values())]
        note = f"t-interval over seeds of {cfg.tail_method}'s runs"
        eff = _scaled(Effect(*above, len(values), False, tuple(sorted(values)), note), 100.0)
        quantiles = ratio.get((size, cfg.tail_method))
        out.append(_tail_result(cfg, size, eff, decide(eff), _ci_dict(values, 100.0), quantiles))
    return out


def _tail_result(
    cfg: ClaimsConfig, size: str, eff: Effect, verdict: tuple[str, str], shares: Any, quantiles: Any
) -> dict[str, Any]:
    return _size_result(
        cfg,
        size,
        eff,
        "points above the threshold",
        verdict,
        top_share_pct=shares,
        threshold_pct=cfg.tail_share_min * 100.0,
        gaussian_share_pct=gaussian_top_share(cfg.tail_top_fraction) * 100.0,
        quantile_ratio=quantiles,
    )


def quantile_ratio(metrics: pd.DataFrame) -> dict[tuple[str, str], dict[str, Any]]:
    """(q0.9999 - q0.0001) / (q0.6 - q0.4) of the logged per-step quantiles, mean over steps, per run.

    For reference: a Gaussian gives 14.7; the paper's quantiles (±12 vs ±0.3) give about 40.
    """
    if not all(k in metrics.columns for k in QUANTILE_KEYS):
        return {}
    q = metrics[list(QUANTILE_KEYS)].astype(float)
    centre = q[QUANTILE_KEYS[2]] - q[QUANTILE_KEYS[1]]
    r = ((q[QUANTILE_KEYS[3]] - q[QUANTILE_KEYS[0]]) / centre).where(centre > 0)
    per_run = metrics.assign(ratio=r).groupby(["size", "method", "seed"])["ratio"].mean()
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for (size, method), group in per_run.groupby(level=["size", "method"]):
        values = {int(s): float(v) for (_, _, s), v in group.items() if math.isfinite(v)}
        if values:
            out[(size, method)] = {**_ci_dict(values), "gaussian": 14.67, "paper_approx": 40.0}
    return out
