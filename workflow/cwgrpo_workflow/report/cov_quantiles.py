"""The paper's covariance quantile table, from the sampled token covariances (``cov_samples.jsonl``).

The paper tabulates c at the 0.01 %, 1 %, 20 %, 40 % and 100 % levels on a positive and a negative side;
read here as tail quantiles of all sampled tokens, pooled over the sampled steps and seeds of each (size,
method): at level x the negative side is the x-quantile of c and the positive side its (1 − x)-quantile.
A sample whose covariance is 0 everywhere (a step where no group had reward spread) is left out and
counted: its zeros would fill the middle levels (every 40 % cell 0.00) and say nothing of the spread.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from cwgrpo_workflow.report.load import cov_samples, run_info
from cwgrpo_workflow.report.options import markdown_table, number

LEVELS = (1e-4, 1e-2, 0.2, 0.4, 1.0)
LEVEL_NAMES = ("0.01 %", "1 %", "20 %", "40 %", "100 %")
# The paper's cells the spec gives (level -> magnitude; the negative side is its negative).
PAPER = {1e-4: 12.0, 0.4: 0.3}


def side_quantiles(cov: Sequence[float] | np.ndarray) -> dict[str, Any]:
    """``{"n", "positive": [...], "negative": [...]}``, one value per level of ``LEVELS``: the negative side
    ``quantile(c, x)``, the positive side ``quantile(c, 1 - x)`` (numpy's linear interpolation, as
    ``torch.quantile`` for the logged ones). No token: every cell None."""
    c = np.asarray(cov, dtype=float).ravel()
    c = c[np.isfinite(c)]
    if c.size == 0:
        return {"n": 0, "positive": [None] * len(LEVELS), "negative": [None] * len(LEVELS)}
    negative = np.quantile(c, LEVELS)
    positive = np.quantile(c, [1.0 - x for x in LEVELS])
    return {"n": int(c.size), "positive": positive.tolist(), "negative": negative.tolist()}


def quantile_rows(runs: Sequence[Path], sizes: Sequence[str]) -> list[dict[str, Any]]:
    """One table per (size, method) of the runs, sizes in ``sizes``' order, methods in first-seen order."""
    pooled: dict[tuple[str, str], list[np.ndarray]] = {}
    seeds: dict[tuple[str, str], set[int]] = {}
    dropped: dict[tuple[str, str], int] = {}
    for run_dir in runs:
        info = run_info(run_dir)
        key = (info["size"], info["method"])
        samples = [np.asarray(r["cov"], dtype=float) for r in cov_samples(run_dir)]
        zero = [np.isfinite(c).any() and not np.any(c[np.isfinite(c)] != 0) for c in samples]
        pooled.setdefault(key, []).extend(c for c, z in zip(samples, zero, strict=True) if not z)
        dropped[key] = dropped.get(key, 0) + sum(zero)  # an all-NaN sample is no zero sample
        seeds.setdefault(key, set()).add(info["seed"])
    rank = {s: i for i, s in enumerate(sizes)}
    keys = sorted(pooled, key=lambda k: rank.get(k[0], len(rank)))
    return [
        {
            "size": size,
            "method": method,
            "seeds": sorted(seeds[(size, method)]),
            "zero_samples_dropped": dropped[(size, method)],
            **side_quantiles(np.concatenate(pooled[(size, method)]) if pooled[(size, method)] else []),
        }
        for size, method in keys
    ]


def quantile_markdown(rows: Sequence[Mapping[str, Any]], size_name: Any, method_name: Any) -> list[str]:
    """The table as Markdown lines: the paper's row first, then each (size, method), both sides."""
    if not rows:
        return []

    def cells(values: Sequence[float | None]) -> list[str]:
        return [number(v, 2, True, small=True) for v in values]

    paper = [PAPER.get(x) for x in LEVELS]
    body = [
        ["paper", "—", "+", "—", "—", *cells(paper)],
        ["paper", "—", "−", "—", "—", *cells([-v if v is not None else None for v in paper])],
    ]
    for r in rows:
        head = [size_name(r["size"]), method_name(r["method"])]
        dropped = r.get("zero_samples_dropped", 0)
        body += [
            [*head, "+", r["n"], dropped, *cells(r["positive"])],
            [*head, "−", r["n"], dropped, *cells(r["negative"])],
        ]
    return [
        "## The covariance quantiles",
        "",
        "The token covariance c at each level, pooled over the sampled steps and seeds "
        "(`cov_samples.jsonl`): on the negative side the x-quantile of c, on the positive side its "
        "(1 − x)-quantile, so 0.01 % is the extreme tail and 100 % the far end of the sample "
        "(`workflow/cwgrpo_workflow/report/cov_quantiles.py`). The paper's cells the spec gives: ±12 at 0.01 %, ±0.3 at 40 %. "
        "Samples whose covariance is 0 everywhere (steps without reward spread) are left out; the table counts them.",
        "",
        *markdown_table(
            ["Size", "Method", "Side", "Tokens", "Zero samples left out", *LEVEL_NAMES],
            body,
            "lllrr" + "r" * len(LEVELS),
        ),
        "",
    ]
