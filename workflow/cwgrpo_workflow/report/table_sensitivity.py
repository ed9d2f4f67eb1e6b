"""The metric-sensitivity table: how much the choice of grader moves each Table 1 number.

Per size, method and benchmark at the reported step (and the base model at its step): accuracy under
the strict metric (ours) and the paper's (lighteval 0.8.1), their difference in points, and the share
of samples on which the two verdicts differ, each a mean over seeds. It reads the summaries'
``by_metric`` and ``n_disagree`` (``cwgrpo grade --summary-in``); a summary scored by one metric only
gives an empty paper column and a note saying so. Written by ``cwgrpo table`` beside Table 1.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from cwgrpo.io import read_json
from cwgrpo_workflow.report.options import ReportConfig, markdown_table, number

COLUMNS = ["size", "method", "benchmark", "seeds", "strict", "paper", "paper_minus_strict", "disagree"]


def _accuracy(block: dict[str, Any] | None, k: int) -> float:
    if not block:
        return math.nan
    value = block.get("avg_k") if k > 1 else block.get("pass1")
    return math.nan if value is None else float(value)


def sensitivity_frame(summaries: Sequence[str | Path], cfg: ReportConfig) -> pd.DataFrame:
    """One row per (size, method, benchmark) at the reported step (fractions in [0, 1])."""
    rows = []
    for path in summaries:
        s = read_json(path)
        tags = s.get("tags") or {}
        method, step = str(tags.get("method")), int(tags.get("step", -1))
        if step != (cfg.base_step if method == cfg.base_method else cfg.step):
            continue
        k = int(s.get("k") or 1)
        by = dict(s.get("by_metric") or {})
        if "strict" not in by and s.get("primary_metric", "strict") == "strict":
            by["strict"] = s  # a summary written before by_metric: its accuracy is the strict one
        n = int(s.get("n_samples") or 0)
        disagree = s.get("n_disagree")
        rows.append(
            {
                "size": str(tags.get("size")),
                "method": method,
                "benchmark": str(s.get("benchmark")),
                "strict": _accuracy(by.get("strict"), k),
                "paper": _accuracy(by.get("paper"), k),
                "disagree": disagree / n if disagree is not None and n else math.nan,
            }
        )
    if not rows:
        return pd.DataFrame(columns=COLUMNS)
    frame = pd.DataFrame(rows)
    out = (
        frame.groupby(["size", "method", "benchmark"], sort=False)
        .agg(
            seeds=("strict", "size"),
            strict=("strict", "mean"),
            paper=("paper", "mean"),
            disagree=("disagree", "mean"),
        )
        .reset_index()
    )
    out["paper_minus_strict"] = out["paper"] - out["strict"]
    sizes = cfg.order_sizes(out["size"].unique())
    methods = cfg.order_methods(out["method"].unique())
    benchmarks = cfg.order_benchmarks(out["benchmark"].unique())
    out["_key"] = [
        (sizes.index(a), methods.index(b) if b in methods else len(methods), benchmarks.index(c))
        for a, b, c in zip(out["size"], out["method"], out["benchmark"], strict=True)
    ]
    return out.sort_values("_key").drop(columns="_key")[COLUMNS].reset_index(drop=True)


def sensitivity_markdown(frame: pd.DataFrame, cfg: ReportConfig) -> str:
    """The table in Markdown, accuracies and differences in percent."""
    lines = [
        "# Metric sensitivity",
        "",
        "Accuracy (%) of each Table 1 cell under our strict grader and under the paper's metric "
        "(lighteval 0.8.1, the released configuration), their difference (points), and the share of "
        "samples (%) whose two verdicts differ; means over seeds.",
        "",
    ]
    if frame.empty:
        return "\n".join([*lines, "No summary at the reported step.", ""])
    if frame["paper"].isna().all():
        lines += ["The paper metric was not scored (evaluate.paper_metric: false): strict only.", ""]
    pct = {"percent": True, "minus": "-"}
    rows = [
        [cfg.size_name(r.size), cfg.method_name(r.method), cfg.benchmark_name(r.benchmark), r.seeds,
         number(r.strict, **pct), number(r.paper, **pct), number(r.paper_minus_strict, sign=True, **pct),
         number(r.disagree, **pct)]
        for r in frame.itertuples(index=False)
    ]  # fmt: skip
    header = ["size", "method", "benchmark", "seeds", "strict", "paper", "paper − strict", "disagree"]
    lines += markdown_table(header, rows, "lllrrrrr")
    return "\n".join([*lines, ""])
