"""The released run's entropy and KL statistics on hand-computed values."""

from __future__ import annotations

import math

import pytest
import torch

from cwgrpo.trainer.grpo import k3_kl, per_completion_means


def test_each_completion_is_averaged_over_its_own_tokens():
    values = torch.tensor([[1.0, 2.0, 3.0], [4.0, 9.0, 9.0], [5.0, 5.0, 5.0]])
    mask = torch.tensor([[1, 1, 1], [1, 0, 0], [0, 0, 0]])
    means = per_completion_means(values, mask)
    assert means.tolist() == [2.0, 4.0, 0.0]  # masked tokens ignored; an empty completion is 0
    # the released statistic (mean of the first two completions' means) is 3, TRL's token mean is 2.5
    assert means[:2].mean().item() == 3.0
    assert ((values * mask).sum() / mask.sum()).item() == 2.5


def test_k3_kl_is_zero_on_policy_and_matches_its_formula():
    logps = torch.tensor([[-1.0, -2.0]])
    assert k3_kl(logps, logps).tolist() == [[0.0, 0.0]]
    ref = logps + math.log(2.0)  # ratio ref / policy = 2: 2 - ln 2 - 1
    assert k3_kl(logps, ref)[0, 0].item() == pytest.approx(1 - math.log(2.0), rel=1e-6)
