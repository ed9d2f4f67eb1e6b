"""cwgrpo_workflow.report.cov_quantiles: the paper's covariance quantile table, on hand-computed values."""

from __future__ import annotations

import json

import numpy as np
import pytest

from cwgrpo_workflow.report.claim_checks import ClaimsConfig
from cwgrpo_workflow.report.claims import claims_markdown, evaluate_claims
from cwgrpo_workflow.report.cov_quantiles import LEVELS, side_quantiles
from tests.unit.test_claims import make_inputs


def test_side_quantiles_by_hand():
    """c = -50, -49, ..., 50 (101 tokens): numpy's linear quantile at level q is 100 q - 50."""
    table = side_quantiles(np.arange(101.0) - 50)
    assert LEVELS == (1e-4, 1e-2, 0.2, 0.4, 1.0)
    assert table["n"] == 101
    assert table["negative"] == pytest.approx([-49.99, -49.0, -30.0, -10.0, 50.0])
    assert table["positive"] == pytest.approx([49.99, 49.0, 30.0, 10.0, -50.0])


def test_side_quantiles_skip_non_finite_and_empty():
    assert side_quantiles([np.nan, 2.0, np.inf])["negative"] == [2.0] * 5
    assert side_quantiles([]) == {"n": 0, "positive": [None] * 5, "negative": [None] * 5}


def test_claims_report_pools_each_method_over_steps_and_seeds(tmp_path):
    """test_claims' inputs: each GRPO seed samples 1 x 50, -1 x 49 and -big (big 99, 49, 149), so the
    300 pooled tokens sort as -149, -99, -49, -1 x 147, 1 x 150 (positions 0..299)."""
    report = evaluate_claims(ClaimsConfig(kind="tiny"), *make_inputs(tmp_path))
    rows = {r["method"]: r for r in report["cov_quantiles"]}
    assert sorted(rows) == ["cw_grpo", "grpo"]
    grpo = rows["grpo"]
    assert (grpo["size"], grpo["seeds"], grpo["n"]) == ("small", [0, 1, 2], 300)
    # level 1e-4: position 0.0299 -> -149 + 0.0299 * 50; level 0.01: position 2.99 -> -49 + 0.99 * 48
    assert grpo["negative"] == pytest.approx([-147.505, -1.48, -1.0, -1.0, 1.0])
    assert grpo["positive"] == pytest.approx([1.0, 1.0, 1.0, 1.0, -149.0])
    text = claims_markdown(report, ClaimsConfig(kind="tiny"))
    assert (
        "| Size | Method | Side | Tokens | Zero samples left out | 0.01 % | 1 % | 20 % | 40 % | 100 % |"
        in text
    )
    assert "| paper | — | − | — | — | −12.00 | — | — | −0.30 | — |" in text
    assert "| small (≈1.5B) | GRPO | − | 300 | 0 | −147.50 | −1.48 | −1.00 | −1.00 | +1.00 |" in text


def test_samples_whose_covariance_is_zero_everywhere_are_left_out_and_counted(tmp_path):
    """A step without reward spread logs a sample of zeros: pooled, its zeros would fill the middle levels.
    Two such samples beside test_claims' inputs leave every cell as before and are counted."""
    summaries, runs = make_inputs(tmp_path)
    grpo_run = next(r for r in runs if "/grpo/" in str(r))
    with open(grpo_run / "cov_samples.jsonl", "a") as f:
        for step in (6, 7):
            f.write(json.dumps({"step": step, "cov": [0.0] * 100, "weight": [1.0] * 100}) + "\n")
        f.write(json.dumps({"step": 8, "cov": [float("nan")] * 3, "weight": [1.0] * 3}) + "\n")  # no zeros
    rows = {
        r["method"]: r for r in evaluate_claims(ClaimsConfig(kind="tiny"), summaries, runs)["cov_quantiles"]
    }
    grpo = rows["grpo"]
    assert (grpo["n"], grpo["zero_samples_dropped"], rows["cw_grpo"]["zero_samples_dropped"]) == (300, 2, 0)
    assert grpo["negative"] == pytest.approx([-147.505, -1.48, -1.0, -1.0, 1.0])
