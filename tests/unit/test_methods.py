"""cwgrpo.weighting.methods: what each registered method returns (GRPO's ones, CW-GRPO's weights, Clip-Cov's
zeroed band, KL-Cov's penalty) and the step's diagnostics."""

from __future__ import annotations

import math

import pytest
import torch

from cwgrpo.weighting import (
    VARIANT_KNOBS,
    MethodInputs,
    cw_weights,
    get_method,
    kl_cov_select,
    token_covariance,
)
from cwgrpo.weighting.methods import method_diagnostics
from tests.unit.weighting_batches import VARIANTS, method_options, random_batch, spread_batch


def test_clip_cov_method_on_policy_zeroes_only_band_tokens():
    logps, adv, mask = spread_batch()
    opts = method_options(clip_cov_ratio=0.02)
    out = get_method("clip_cov")(MethodInputs(logps, None, adv, mask, torch.Generator().manual_seed(0)), opts)
    cov = token_covariance(logps, adv, mask, centring="batch")
    band = mask.bool() & (cov > 1) & (cov < 5)
    zeroed = out.multipliers == 0
    n = int(mask.sum())
    assert int(band.sum()) > math.floor(0.02 * n)
    assert int(zeroed.sum()) == math.floor(0.02 * n)
    assert not bool((zeroed & ~band).any())
    assert bool((out.multipliers[~zeroed] == 1).all()) and out.penalty is None
    assert out.metrics.keys() == {"cw/frac_tokens_clipped"}
    torch.testing.assert_close(out.metrics["cw/frac_tokens_clipped"], (zeroed.sum() / n).float())


def test_clip_cov_method_skips_ppo_clipped_tokens():
    logps, adv, mask = spread_batch()
    old = logps.clone()
    old[adv > 0] -= 1.0  # ratio e > 1 + eps_high for A > 0: clipped by the PPO rule
    old[adv < 0, :10] += 1.0  # ratio 1/e < 1 - eps_low for A < 0: clipped too
    clipped = mask.bool() & ((adv[:, None] > 0) | ((adv[:, None] < 0) & (torch.arange(64) < 10)))
    out = get_method("clip_cov")(
        MethodInputs(logps, old, adv, mask, torch.Generator().manual_seed(0)),
        method_options(clip_cov_ratio=1.0),
    )
    cov = token_covariance(logps, adv, mask, centring="batch")
    band = mask.bool() & (cov > 1) & (cov < 5)
    assert bool((band & clipped).any())  # the test would be vacuous otherwise
    assert torch.equal(out.multipliers == 0, band & ~clipped)


def test_kl_cov_method_penalises_top_k():
    logps, adv, mask = spread_batch()
    old = logps - 0.1 * torch.arange(64, dtype=logps.dtype)
    opts = method_options(kl_cov_ratio=0.05, kl_cov_coef=0.5)
    out = get_method("kl_cov")(MethodInputs(logps, old, adv, mask), opts)
    sel = kl_cov_select(token_covariance(logps, adv, mask, centring="batch"), mask, ratio=0.05)
    assert torch.equal(out.multipliers, torch.ones_like(out.multipliers))
    torch.testing.assert_close(out.penalty, torch.where(sel, 0.5 * (logps - old).abs(), torch.zeros(())))
    assert int(sel.sum()) == math.floor(0.05 * int(mask.sum()))
    torch.testing.assert_close(out.metrics["cw/frac_tokens_penalised"], sel.sum() / mask.sum().float())


@pytest.mark.parametrize("on_policy", ["none", "detached"])
def test_kl_cov_penalty_on_policy_has_zero_gradient(on_policy):
    # torch defines d|x|/dx at x = 0 as sign(0) = 0, so the on-policy penalty has exactly zero gradient
    logps, adv, mask = spread_batch()
    logps.requires_grad_(True)
    old = None if on_policy == "none" else logps.detach()
    out = get_method("kl_cov")(MethodInputs(logps, old, adv, mask), method_options(kl_cov_ratio=0.1))
    assert bool((out.penalty == 0).all())
    out.penalty.sum().backward()
    assert torch.equal(logps.grad, torch.zeros_like(logps))


def test_registry_grpo_multipliers_exactly_one():
    logps, adv, mask = spread_batch()
    out = get_method("grpo")(MethodInputs(logps, None, adv, mask), method_options())
    assert torch.equal(out.multipliers, torch.ones_like(logps)) and out.penalty is None


@pytest.mark.parametrize("variant", VARIANTS)
def test_registry_cw_grpo_uses_variant(variant):
    logps, adv, mask = spread_batch()
    out = get_method("cw_grpo")(MethodInputs(logps, None, adv, mask), method_options(cw_variant=variant))
    assert torch.equal(out.multipliers, cw_weights(logps, adv, mask, variant=variant))
    assert out.penalty is None and out.metrics == {}


def test_cw_grpo_method_applies_the_knobs_of_its_options():
    lp, adv, mask = random_batch(seed=11)
    opts = method_options(
        cw_variant="released", cw_centring="batch", cw_normaliser="valid", cw_weight_gradient=False
    )
    out = get_method("cw_grpo")(MethodInputs(lp, None, adv, mask), opts)
    want = cw_weights(lp, adv, mask, variant="released", centring="batch", normaliser="valid", gradient=False)
    assert torch.equal(out.multipliers, want.float())


@pytest.mark.parametrize("variant", VARIANTS)
def test_diagnostics_show_the_weights_cw_grpo_would_assign_whatever_the_method(variant):
    """A method that does not reweight is logged with CW-GRPO's weights and covariance, for comparison;
    the method's own metrics follow the covariance ones."""
    logps, adv, mask = random_batch(seed=4, dtype=torch.float32)
    batch, opts = (
        MethodInputs(logps, None, adv, mask, torch.Generator().manual_seed(0)),
        method_options(cw_variant=variant, clip_cov_ratio=0.1),
    )
    cw = get_method("cw_grpo")(batch, opts)
    want_cov = token_covariance(logps, adv, mask, centring=VARIANT_KNOBS[variant].centring)
    cw_metrics, _, _ = method_diagnostics(batch, opts, cw)
    for name in ("grpo", "cw_grpo", "clip_cov"):
        out = get_method(name)(batch, opts)
        metrics, cov, weights = method_diagnostics(batch, opts, out)
        torch.testing.assert_close(weights, cw.multipliers)
        torch.testing.assert_close(cov, want_cov)
        assert list(metrics) == [*cw_metrics, *out.metrics]
        for key in cw_metrics:
            torch.testing.assert_close(metrics[key], cw_metrics[key], msg=key)
