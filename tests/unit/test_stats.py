"""Standard errors, bootstrap over problems, t-intervals over seeds: hand-computed cases."""

from __future__ import annotations

import math

import pytest

from cwgrpo import stats


def test_standard_error_hand_computed():
    # sample std of 1..4 is sqrt(5/3); se = sqrt(5/3)/2
    assert stats.standard_error([1.0, 2.0, 3.0, 4.0]) == pytest.approx(math.sqrt(5 / 3) / 2)
    assert math.isnan(stats.standard_error([1.0]))


def test_bootstrap_ci_is_seeded_and_brackets_the_mean():
    values = [0.0, 1.0, 1.0, 0.0, 1.0, 0.5, 0.25, 1.0, 0.0, 1.0] * 3
    a = stats.bootstrap_ci(values, seed=3)
    b = stats.bootstrap_ci(values, seed=3)
    c = stats.bootstrap_ci(values, seed=4)
    assert a == b and a != c
    lo, hi = a
    assert lo < sum(values) / len(values) < hi
    # roughly mean +- 1.96 se for a sample of 30
    se = stats.standard_error(values)
    assert hi - lo == pytest.approx(2 * 1.96 * se, rel=0.2)


def test_bootstrap_ci_degenerate_cases():
    assert stats.bootstrap_ci([1.0] * 5) == (1.0, 1.0)
    assert stats.bootstrap_ci([0.3]) == (pytest.approx(0.3), pytest.approx(0.3))
    assert all(math.isnan(x) for x in stats.bootstrap_ci([]))
    with pytest.raises(ValueError, match="confidence"):
        stats.bootstrap_ci([1.0], confidence=1.5)


def test_mean_ci_t_interval():
    m, lo, hi = stats.mean_ci([1.0, 2.0, 3.0])
    half = 4.302652729749464 * 1.0 / math.sqrt(3)  # t_{0.975, 2} * sd / sqrt(n)
    assert (m, lo, hi) == (pytest.approx(2.0), pytest.approx(2.0 - half), pytest.approx(2.0 + half))
    m, lo, hi = stats.mean_ci([0.7])
    assert m == 0.7 and math.isnan(lo) and math.isnan(hi)
    assert stats.mean_ci([0.5, 0.5]) == (0.5, 0.5, 0.5)


def test_accuracy_summary_pass1_and_avg_k():
    table = [[True, False], [False, False], [True, True], [False, True]]
    s = stats.accuracy_summary(table, seed=0)
    assert s["pass1"] == 0.5  # sample 0 correct for problems 0 and 2
    assert s["avg_k"] == pytest.approx((0.5 + 0 + 1 + 0.5) / 4)
    assert s["avg_k_se"] == pytest.approx(stats.standard_error([0.5, 0.0, 1.0, 0.5]))
    lo, hi = s["avg_k_ci95"]
    assert 0.0 <= lo <= s["avg_k"] <= hi <= 1.0
    with pytest.raises(ValueError, match="problems x samples"):
        stats.accuracy_summary([])
