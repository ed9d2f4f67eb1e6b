"""Inputs shared by the tests of cwgrpo.weighting's modules: method options, random and spread batches."""

from __future__ import annotations

import pytest
import torch

from cwgrpo.weighting import MethodOptions

VARIANTS = ("released", "described")
DEVICES = [
    "cpu",
    pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA")),
]

# The 2x3 example: completion 0 has 2 valid tokens (the third is padding), completion 1 has 3.
LP = [[-1.0, -2.0, -5.0], [-0.5, -1.5, -3.0]]
MASK = [[1, 1, 0], [1, 1, 1]]
ADV = [1.0, -1.0]


def t64(x, dtype=torch.float64):
    return torch.tensor(x, dtype=dtype)


def method_options(**kw) -> MethodOptions:
    base = dict(
        cw_variant="described", clip_cov_ratio=2e-4, clip_cov_lb=1.0, clip_cov_ub=5.0,
        kl_cov_ratio=2e-3, kl_cov_coef=1.0, epsilon_low=0.2, epsilon_high=0.2,
        cw_centring=None, cw_normaliser=None, cw_weight_gradient=None,
    )  # fmt: skip
    return MethodOptions(**(base | kw))


def random_batch(b=6, t=10, seed=0, dtype=torch.float64):
    """Random logps in (-4, 0), right padding with random lengths (one full row), normalised advantages."""
    g = torch.Generator().manual_seed(seed)
    logps = -4 * torch.rand(b, t, generator=g, dtype=torch.float64)
    lengths = torch.randint(1, t + 1, (b,), generator=g)
    lengths[0] = t
    mask = (torch.arange(t)[None, :] < lengths[:, None]).long()
    adv = torch.randn(b, generator=g, dtype=torch.float64)
    adv = (adv - adv.mean()) / adv.std()
    return logps.to(dtype), adv.to(dtype), mask


def spread_batch():
    """Batch-centred covariances spread over (-10, 10) so that many fall in Clip-Cov's band (1, 5)."""
    g = torch.Generator().manual_seed(21)
    logps = -6 * torch.rand(8, 64, generator=g)
    adv = torch.tensor([2.0, -2.0, 1.5, -1.5, 1.0, -1.0, 0.5, -0.5])
    mask = torch.ones(8, 64, dtype=torch.long)
    mask[3, 40:] = 0
    return logps, adv, mask
