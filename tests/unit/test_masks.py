"""cwgrpo.weighting.masks: which tokens count, and the masked statistics built on them, by hand (0, not NaN,
where no token is valid)."""

from __future__ import annotations

import math

import pytest
import torch

from cwgrpo.weighting.masks import (
    compute_dtype,
    masked_mean,
    masked_pop_std,
    select_count,
    shifted_mean,
    valid_tokens,
)


def test_masked_mean_zero_where_no_valid_token():
    x = torch.tensor([[1.0, 2.0, math.nan], [5.0, 6.0, 7.0]])
    mask = torch.tensor([[1, 1, 0], [0, 0, 0]])
    assert torch.equal(masked_mean(x, mask, dim=1), torch.tensor([1.5, 0.0]))
    assert float(masked_mean(x, mask)) == 1.5
    assert float(masked_mean(x, torch.zeros_like(mask))) == 0.0


def test_a_token_with_a_non_finite_log_prob_or_advantage_is_not_valid():
    mask = torch.tensor([[1, 1, 0], [1, 1, 1], [1, 0, 0]])
    logps = torch.tensor([[-1.0, math.nan, -1.0], [-1.0, -math.inf, -2.0], [-1.0, -1.0, -1.0]])
    tokens = valid_tokens(mask, logps, torch.tensor([1.0, -1.0, math.inf]), torch.float32)
    assert tokens.valid.tolist() == [[True, False, False], [True, False, True], [False, False, False]]
    assert tokens.per_completion.tolist() == [1.0, 2.0, 0.0] and float(tokens.total) == 3.0
    assert tokens.finite_advantage.tolist() == [True, True, False]
    assert tokens.valid_float.dtype == torch.float32


def test_equal_advantages_centre_to_exactly_zero_and_counts_weight_the_mean():
    adv = torch.full((3,), 0.1, dtype=torch.float32)
    assert torch.equal(adv - shifted_mean(adv, torch.tensor([3.0, 1.0, 7.0])), torch.zeros(3))
    mean = shifted_mean(torch.tensor([1.0, -1.0]), torch.tensor([2.0, 3.0]))  # (2 - 3) / 5
    assert float(mean) == pytest.approx(-0.2)


def test_population_std_and_selection_counts_by_hand():
    x = torch.tensor([[1.0, 3.0, 100.0]])
    assert float(masked_pop_std(x, torch.tensor([[1, 1, 0]]))) == 1.0
    assert float(masked_pop_std(x, torch.zeros(1, 3))) == 0.0
    assert [int(select_count(r, torch.tensor(120.0))) for r in (0.1, 1e-6, 1.0)] == [12, 1, 120]
    assert compute_dtype(torch.zeros(1, dtype=torch.bfloat16)) == torch.float32
    assert compute_dtype(torch.zeros(1, dtype=torch.float64)) == torch.float64
