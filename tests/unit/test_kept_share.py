"""cwgrpo.weighting.kept_share on hand-computed groups: what share of each outcome's push the kernel keeps."""

from __future__ import annotations

import math

import pytest
import torch

from cwgrpo.weighting import cw_weights
from cwgrpo.weighting.kept_share import group_kept_shares, kept_share_metrics


def test_one_success_of_four_by_hand():
    """A = +1.5 for the success, -0.5 for each failure; mean weights 0.5 (the success: its tokens hold the
    extreme covariance), 1.0, 1.2 and 1.3. Kept: 1.5 * 0.5 / 1.5 = 0.5 of the positive push,
    (0.5 + 0.6 + 0.65) / 1.5 = 7/6 of the negative; the group's push sum 0.75 - 1.75 = -1.0 (GRPO: 0)."""
    advantages = torch.tensor([1.5, -0.5, -0.5, -0.5])
    mask = torch.tensor([[1, 1, 0], [1, 1, 1], [1, 0, 0], [1, 1, 0]])
    weights = torch.tensor([[0.4, 0.6, 9.0], [1.0, 1.0, 1.0], [1.2, 9.0, 9.0], [1.3, 1.3, 9.0]])  # 9: padding
    rows = group_kept_shares(advantages, weights, mask, group_size=4)
    assert rows[0].tolist() == pytest.approx([1.0, 0.5, 7 / 6, -1.0]) and rows.shape == (1, 4)
    metrics = kept_share_metrics(rows, group_size=4)
    assert metrics["cw/group_kept_positive"].item() == pytest.approx(0.5)
    assert metrics["cw/kept_negative_k1"].item() == pytest.approx(7 / 6)
    assert math.isnan(metrics["cw/kept_positive_k2"].item())  # no group with 2 successes


def test_groups_are_consecutive_runs_and_a_group_without_spread_is_left_out_of_the_means():
    advantages = torch.tensor([1.0, -1.0, 0.0, 0.0])  # one mixed pair, one pair with equal rewards
    mask = torch.ones(4, 2)
    weights = torch.tensor([[2.0, 2.0], [1.0, 1.0], [1.0, 1.0], [1.0, 1.0]])
    rows = group_kept_shares(advantages, weights, mask, group_size=2)
    assert rows[0].tolist() == pytest.approx([1.0, 2.0, 1.0, 1.0])
    assert rows[1, 0].item() == 0 and math.isnan(rows[1, 1].item()) and math.isnan(rows[1, 2].item())
    metrics = kept_share_metrics(rows, group_size=2)
    assert metrics["cw/group_push_sum"].item() == pytest.approx(
        1.0
    )  # the equal-reward pair is not averaged in
    assert group_kept_shares(advantages, weights, mask, group_size=3) is None  # not whole groups


def test_grpo_keeps_every_push_and_the_released_kernel_cuts_a_rare_success():
    """Weights of 1 keep every share at 1 and the push sum at 0; the released CW weights, on a group with one
    success whose log-probs sit far from its completion's mean, keep less than all of the positive push."""
    torch.manual_seed(0)
    rewards = torch.tensor([1.0, 0, 0, 0, 0, 0, 0, 0])
    advantages = (rewards - rewards.mean()) / (rewards.std() + 1e-4)
    logps = -torch.rand(8, 12) * 2
    logps[0, ::2] -= 4.0  # the success's tokens spread widely: the extreme covariances are its own
    mask = torch.ones(8, 12, dtype=torch.bool)
    ones = group_kept_shares(advantages, torch.ones(8, 12), mask, 8)
    assert ones[0].tolist() == pytest.approx([1.0, 1.0, 1.0, 0.0], abs=1e-6)
    released = group_kept_shares(advantages, cw_weights(logps, advantages, mask, variant="released"), mask, 8)
    assert released[0, 1].item() < 1.0 < released[0, 2].item()


def test_a_group_with_a_non_finite_advantage_or_weight_is_left_out_not_counted_as_zero():
    """Campaign #42/#43: such a group's shares are NaN, and they once entered the means as 0."""
    advantages = torch.tensor([1.0, 1.0, -1.0, -1.0, float("nan"), 1.0, -1.0, -1.0])
    weights = torch.ones(8, 2)
    weights[0, 0] = 0.5
    rows = group_kept_shares(advantages, weights, torch.ones(8, 2), group_size=4)
    metrics = kept_share_metrics(rows, group_size=4)
    assert metrics["cw/kept_positive_k2"].item() == pytest.approx(0.875)  # the finite group only
    assert math.isnan(metrics["cw/kept_positive_k1"].item())  # the NaN group's count is no evidence
