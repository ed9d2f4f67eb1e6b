"""Unit tests for cwgrpo.weighting (spec method.md §2-§4). CPU only, a few seconds."""

from __future__ import annotations

import ast
import dataclasses
import itertools
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from cwgrpo import weighting as W
from cwgrpo.weighting import (
    METHODS,
    MethodInputs,
    MethodOptions,
    MethodOutput,
    clip_cov_select,
    covariance_diagnostics,
    cw_weights,
    get_method,
    kl_cov_penalty,
    kl_cov_select,
    masked_mean,
    register_method,
    token_covariance,
)
from cwgrpo.weighting.kernel import _normalised_kernel
from cwgrpo.weighting.masks import valid_tokens

REPO = Path(__file__).resolve().parents[2]
VARIANTS = ("released", "described")
DEVICES = [
    "cpu",
    pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA")),
]
DIAG_KEYS = {
    "cw/cov_mean", "cw/cov_std", "cw/cov_abs_mean",
    "cw/cov_q0.0001", "cw/cov_q0.01", "cw/cov_q0.4", "cw/cov_q0.6", "cw/cov_q0.99", "cw/cov_q0.9999",
    "cw/weight_mean", "cw/weight_std", "cw/weight_min", "cw/weight_max",
    "cw/weight_frac_below_0.5", "cw/weight_frac_above_2",
}  # fmt: skip

# The 2x3 example: completion 0 has 2 valid tokens (the third is padding), completion 1 has 3.
LP = [[-1.0, -2.0, -5.0], [-0.5, -1.5, -3.0]]
MASK = [[1, 1, 0], [1, 1, 1]]
ADV = [1.0, -1.0]


def _opts(**kw) -> MethodOptions:
    base = dict(
        cw_variant="described", clip_cov_ratio=2e-4, clip_cov_lb=1.0, clip_cov_ub=5.0,
        kl_cov_ratio=2e-3, kl_cov_coef=1.0, epsilon_low=0.2, epsilon_high=0.2,
        cw_centring=None, cw_normaliser=None, cw_weight_gradient=None,
    )  # fmt: skip
    return MethodOptions(**(base | kw))


def _batch(b=6, t=10, seed=0, dtype=torch.float64):
    """Random logps in (-4, 0), right padding with random lengths (one full row), normalised advantages."""
    g = torch.Generator().manual_seed(seed)
    logps = -4 * torch.rand(b, t, generator=g, dtype=torch.float64)
    lengths = torch.randint(1, t + 1, (b,), generator=g)
    lengths[0] = t
    mask = (torch.arange(t)[None, :] < lengths[:, None]).long()
    adv = torch.randn(b, generator=g, dtype=torch.float64)
    adv = (adv - adv.mean()) / adv.std()
    return logps.to(dtype), adv.to(dtype), mask


def _ref_weights(lp, adv, mask, variant):
    """Plain-Python transcription of the spec table (method.md §2), independent of the torch code."""
    b, t = len(lp), len(lp[0])
    valid = [(i, j) for i in range(b) for j in range(t) if mask[i][j]]
    n = len(valid)
    if variant == "described":
        mean_lp = sum(lp[i][j] for i, j in valid) / n
        mean_a = sum(adv[i] for i, _ in valid) / n
        cov = {(i, j): (lp[i][j] - mean_lp) * (adv[i] - mean_a) for i, j in valid}
    else:
        row_mean = {i: sum(lp[i][j] for j in range(t) if mask[i][j]) / sum(mask[i]) for i in range(b)}
        mean_a = sum(adv) / b
        cov = {(i, j): (lp[i][j] - row_mean[i]) * (adv[i] - mean_a) for i, j in valid}
    mu = sum(cov.values()) / n
    sigma = math.sqrt(sum((c - mu) ** 2 for c in cov.values()) / n)
    sigma += 1e-8 if variant == "released" else 0.0
    w = {k: math.exp(-(c**2) / (2 * sigma**2)) for k, c in cov.items()}
    z = n if variant == "described" else b * t
    total = sum(w.values())
    return [[z * w[(i, j)] / total if (i, j) in w else 0.0 for j in range(t)] for i in range(b)], cov


def _t(x, dtype=torch.float64):
    return torch.tensor(x, dtype=dtype)


# ------------------------------------------------------------------------------- hand-computed 2x3


def test_token_covariance_hand_computed_2x3():
    lp, adv, mask = _t(LP), _t(ADV), torch.tensor(MASK)
    # batch: mean_lp = -8/5 = -1.6, mean_A = (2*1 + 3*(-1))/5 = -0.2 (token-weighted)
    expected_batch = [[0.6 * 1.2, -0.4 * 1.2, 0.0], [1.1 * -0.8, 0.1 * -0.8, -1.4 * -0.8]]
    # sequence: row means -1.5 and -5/3, mean_A = 0 (plain mean over completions)
    expected_seq = [[0.5, -0.5, 0.0], [-7 / 6, -1 / 6, 4 / 3]]
    got_batch = token_covariance(lp, adv, mask, centring="batch")
    got_seq = token_covariance(lp, adv, mask, centring="sequence")
    torch.testing.assert_close(got_batch, _t(expected_batch), rtol=0, atol=1e-12)
    torch.testing.assert_close(got_seq, _t(expected_seq), rtol=0, atol=1e-12)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("variant", VARIANTS)
def test_cw_weights_2x3_match_the_python_reference(variant, device):
    expected, _ = _ref_weights(LP, ADV, MASK, variant)
    got = cw_weights(
        _t(LP).to(device), _t(ADV).to(device), torch.tensor(MASK, device=device), variant=variant
    )
    assert got.dtype == torch.float64 and got.device.type == device
    torch.testing.assert_close(got.cpu(), _t(expected), rtol=1e-12, atol=1e-12)


def test_cw_weights_hand_computed_2x3_described_numbers():
    # c = 0.72, -0.48 | -0.88, -0.08, 1.12 ; sigma^2 = mean(c^2) - mean(c)^2 with mean(c) = 0.08
    c = [0.72, -0.48, -0.88, -0.08, 1.12]
    var = sum(x * x for x in c) / 5 - 0.08**2
    w = [math.exp(-x * x / (2 * var)) for x in c]
    expected = [5 * x / sum(w) for x in w]
    got = cw_weights(_t(LP), _t(ADV), torch.tensor(MASK), variant="described")
    torch.testing.assert_close(got[torch.tensor(MASK).bool()], _t(expected), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_cw_weights_matches_python_reference_random(variant, seed):
    logps, adv, mask = _batch(seed=seed)
    expected, _ = _ref_weights(logps.tolist(), adv.tolist(), mask.tolist(), variant)
    got = cw_weights(logps, adv, mask, variant=variant)
    torch.testing.assert_close(got, _t(expected), rtol=1e-10, atol=1e-12)


# --------------------------------------------------------------------------------------- invariants


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_cw_weights_described_mean_one_and_bounds(seed):
    logps, adv, mask = _batch(seed=seed)
    w = cw_weights(logps, adv, mask, variant="described")
    m = mask.bool()
    n = m.sum()
    torch.testing.assert_close(w[m].mean(), _t(1.0), rtol=0, atol=1e-12)
    assert bool((w[m] > 0).all()) and bool((w[m] <= n).all())


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_cw_weights_released_sums_to_padded_size(seed):
    logps, adv, mask = _batch(seed=seed)
    w = cw_weights(logps, adv, mask, variant="released")
    torch.testing.assert_close(w.sum(), _t(float(mask.numel())), rtol=1e-12, atol=0)
    assert bool((w[mask.bool()] > 0).all()) and bool((w <= mask.numel()).all())
    assert w[mask.bool()].mean() >= 1.0  # padding counted in Z


@pytest.mark.parametrize("variant", VARIANTS)
def test_cw_weights_symmetric_in_sign_of_covariance(variant):
    logps, adv, mask = _batch(seed=3)
    centring = W.VARIANT_KNOBS[variant].centring
    # A -> -A flips mean_A too, so every c flips sign
    cov, cov_flip = (token_covariance(logps, a, mask, centring=centring) for a in (adv, -adv))
    torch.testing.assert_close(cov_flip, -cov, rtol=0, atol=1e-12)
    w, w_flip = (cw_weights(logps, a, mask, variant=variant) for a in (adv, -adv))
    torch.testing.assert_close(w_flip, w, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("variant", VARIANTS)
def test_cw_weights_decreasing_in_abs_covariance(variant):
    logps, adv, mask = _batch(b=8, t=16, seed=4)
    centring = W.VARIANT_KNOBS[variant].centring
    m = mask.bool()
    cov = token_covariance(logps, adv, mask, centring=centring)[m]
    w = cw_weights(logps, adv, mask, variant=variant)[m]
    order = cov.abs().argsort()
    assert bool((w[order].diff() <= 1e-12).all())


@pytest.mark.parametrize("variant", VARIANTS)
def test_cw_weights_padding_is_zero_and_ignored(variant):
    logps, adv, mask = _batch(seed=5)
    pad = ~mask.bool()
    assert bool(pad.any())
    w = cw_weights(logps, adv, mask, variant=variant)
    assert bool((w[pad] == 0).all())
    for fill in (1e6, -1e6, math.inf, math.nan):
        edited = logps.masked_fill(pad, fill)
        assert torch.equal(cw_weights(edited, adv, mask, variant=variant), w)


def test_cw_weights_released_padding_gets_zero_gradient():
    logps, adv, mask = _batch(seed=6)
    logps.requires_grad_(True)
    w = cw_weights(logps, adv, mask, variant="released")
    (w * torch.linspace(0, 1, w.numel(), dtype=w.dtype).view_as(w)).sum().backward()
    assert bool((logps.grad[~mask.bool()] == 0).all())
    assert bool(logps.grad[mask.bool()].abs().sum() > 0)


def test_cw_weights_constant_advantages_reproduce_grpo():
    # sigma -> inf limit of the kernel: A constant => every c = 0 => every described weight 1 exactly
    logps, _, mask = _batch(seed=7)
    adv = torch.full((logps.shape[0],), 0.7, dtype=torch.float64)
    assert bool((token_covariance(logps, adv, mask, centring="batch") == 0).all())
    w = cw_weights(logps, adv, mask, variant="described")
    assert torch.equal(w, mask.to(w.dtype))
    assert torch.equal(adv[:, None] * w, adv[:, None] * mask)  # the GRPO per-token advantages
    # released: also flat, but at B*T/N because padding is counted in Z
    w_rel = cw_weights(logps, adv, mask, variant="released")
    flat = mask.numel() / mask.sum().to(torch.float64)
    torch.testing.assert_close(w_rel[mask.bool()], flat.expand(int(mask.sum())), rtol=1e-12, atol=0)


def test_kernel_tends_to_one_as_sigma_grows():
    logps, adv, mask = _batch(seed=8)
    cov = token_covariance(logps, adv, mask, centring="batch")
    tokens = valid_tokens(mask, logps, adv, torch.float64)
    sigmas = torch.tensor([0.1, 1.0, 10.0, 1e3, 1e12], dtype=torch.float64) * cov[mask.bool()].std()
    gaps = [(_normalised_kernel(cov, tokens, s, tokens.total) - mask).abs().max() for s in sigmas]
    assert all(a > b for a, b in itertools.pairwise(gaps)), gaps  # closer to 1 at every step
    assert gaps[-1] <= 1e-12


def test_cw_weights_mask_dtypes_agree():
    logps, adv, mask = _batch(seed=9)
    ref = cw_weights(logps, adv, mask.bool(), variant="described")
    for m in (mask, mask.int(), mask.float(), mask.double()):
        assert torch.equal(cw_weights(logps, adv, m, variant="described"), ref)


# ----------------------------------------------------------------------------- degenerate, dtypes

DTYPES = [torch.float32, torch.float64, torch.bfloat16, torch.float16]


def _degenerate(case, dtype):
    logps, adv, mask = _batch(b=4, t=6, seed=10)
    if case == "sigma0":  # constant advantages: every c = 0
        adv = torch.ones_like(adv)
    elif case == "all_padding":
        mask = torch.zeros_like(mask)
    elif case == "single_valid":
        mask = torch.zeros_like(mask)
        mask[2, 0] = 1
    elif case == "equal_nonzero_cov":  # described: c = (1, 1, 1, 1), sigma = 0 but c != 0
        logps = torch.tensor([[0.0, 0.0], [-2.0, -2.0]], dtype=torch.float64)
        adv, mask = torch.tensor([1.0, -1.0], dtype=torch.float64), torch.ones(2, 2, dtype=torch.long)
    elif case == "underflow":  # |c| >> sigma for every token: exp(-c^2/2sigma^2) underflows everywhere
        logps = torch.tensor([[1.0, 1.001, 0.999], [-1.0, -1.001, -0.999]], dtype=torch.float64)
        adv, mask = torch.tensor([1.0, -1.0], dtype=torch.float64), torch.ones(2, 3, dtype=torch.long)
    return logps.to(dtype), adv.to(dtype), mask


CASES = ["random", "sigma0", "all_padding", "single_valid", "equal_nonzero_cov", "underflow"]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("case", CASES)
def test_cw_weights_finite_on_degenerate_inputs(case, variant, dtype, device):
    logps, adv, mask = (x.to(device) for x in _degenerate(case, dtype))
    logps.requires_grad_(True)
    w = cw_weights(logps, adv, mask, variant=variant)
    assert w.dtype == (torch.float64 if dtype == torch.float64 else torch.float32)
    assert bool(torch.isfinite(w).all())
    m = mask.bool()
    assert bool((w[~m] == 0).all())
    n = int(m.sum())
    if n == 0:
        assert bool((w == 0).all())
    else:  # the normaliser holds in every case
        z = n if variant == "described" else mask.numel()
        torch.testing.assert_close(
            w.sum().double(), torch.tensor(float(z), dtype=torch.float64), rtol=1e-5, atol=0
        )
    if case in ("sigma0", "single_valid", "equal_nonzero_cov") and variant == "described":
        assert bool((w[m] == 1).all())  # sigma = 0: every valid weight 1 (spec §2)
    if variant == "released":
        w.sum().backward()
        assert bool(torch.isfinite(logps.grad).all())


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("variant", VARIANTS)
def test_cw_weights_half_inputs_computed_in_float32(dtype, variant):
    logps, adv, mask = _batch(seed=11, dtype=dtype)
    w = cw_weights(logps, adv, mask, variant=variant)
    ref = cw_weights(logps.float(), adv.float(), mask, variant=variant)
    assert w.dtype == torch.float32
    torch.testing.assert_close(w, ref, rtol=1e-6, atol=1e-6)


# --------------------------------------------------------------------------------------- gradients


def test_cw_weights_described_carries_no_gradient():
    logps, adv, mask = _batch(seed=12, dtype=torch.float32)
    logps.requires_grad_(True)
    w = cw_weights(logps, adv, mask, variant="described")
    assert not w.requires_grad


def test_cw_weights_released_carries_gradient():
    logps, adv, mask = _batch(seed=12, dtype=torch.float32)
    logps.requires_grad_(True)
    w = cw_weights(logps, adv, mask, variant="released")
    assert w.requires_grad
    (w * w).sum().backward()
    assert bool(logps.grad.abs().sum() > 0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_cw_weights_released_same_values_with_and_without_graph(dtype):
    # whether autograd records must not change the numbers
    logps, adv, mask = _batch(b=8, t=32, seed=15, dtype=dtype)
    plain = cw_weights(logps, adv, mask, variant="released")
    tracked = cw_weights(logps.clone().requires_grad_(True), adv, mask, variant="released")
    torch.testing.assert_close(tracked.detach(), plain, rtol=1e-6, atol=0)
    with torch.no_grad():
        torch.testing.assert_close(
            cw_weights(logps.requires_grad_(True), adv, mask, variant="released"), plain
        )


def test_cw_weights_released_gradcheck():
    logps, adv, mask = _batch(b=3, t=4, seed=13)
    logps.requires_grad_(True)
    adv.requires_grad_(True)
    assert torch.autograd.gradcheck(lambda lp, a: cw_weights(lp, a, mask, variant="released"), (logps, adv))


# ---------------------------------------------------------------------------------------- Clip-Cov


def _band_cov(seed=0, b=4, t=50):
    g = torch.Generator().manual_seed(seed)
    cov = torch.empty(b, t).uniform_(-2.0, 8.0, generator=g)
    lengths = torch.tensor([t, t - 10, t - 25, 5])
    mask = torch.arange(t)[None, :] < lengths[:, None]
    return cov, mask


def test_clip_cov_select_count_and_band():
    cov, mask = _band_cov()
    n = int(mask.sum())  # 120
    cand = mask & (cov > 1) & (cov < 5)
    sel = clip_cov_select(cov, mask, ratio=0.1, lb=1.0, ub=5.0, generator=torch.Generator().manual_seed(0))
    assert sel.dtype == torch.bool
    assert int(sel.sum()) == math.floor(0.1 * n) == 12 < int(cand.sum())
    assert not bool((sel & ~cand).any())  # only valid tokens inside (lb, ub)


def test_clip_cov_select_at_least_one_and_at_most_candidates():
    cov, mask = _band_cov()
    g = torch.Generator().manual_seed(0)
    assert int(clip_cov_select(cov, mask, ratio=1e-6, lb=1.0, ub=5.0, generator=g).sum()) == 1
    cand = mask & (cov > 1) & (cov < 5)
    assert torch.equal(clip_cov_select(cov, mask, ratio=1.0, lb=1.0, ub=5.0, generator=g), cand)
    none = clip_cov_select(cov, mask, ratio=1.0, lb=100.0, ub=200.0, generator=g)
    assert not bool(none.any())
    empty = clip_cov_select(cov, torch.zeros_like(mask), ratio=0.5, lb=-10.0, ub=10.0, generator=g)
    assert not bool(empty.any())


def test_clip_cov_select_seeded():
    cov, mask = _band_cov()

    def pick(seed):
        return clip_cov_select(
            cov, mask, ratio=0.05, lb=1.0, ub=5.0, generator=torch.Generator().manual_seed(seed)
        )

    assert torch.equal(pick(123), pick(123))
    assert any(not torch.equal(pick(123), pick(s)) for s in range(5))


def test_clip_cov_select_never_picks_excluded():
    cov, mask = _band_cov()
    exclude = torch.zeros_like(mask)
    exclude[:, ::2] = True
    sel = clip_cov_select(
        cov, mask, ratio=1.0, lb=1.0, ub=5.0, generator=torch.Generator().manual_seed(0), exclude=exclude
    )
    assert not bool((sel & exclude).any())
    assert torch.equal(sel, mask & ~exclude & (cov > 1) & (cov < 5))


def test_clip_cov_select_requires_generator():
    cov, mask = _band_cov()
    with pytest.raises(ValueError, match=r"torch\.Generator"):
        clip_cov_select(cov, mask, ratio=0.1, lb=1.0, ub=5.0, generator=None)


def _spread_batch():
    """Batch-centred covariances spread over (-10, 10) so that many fall in Clip-Cov's band (1, 5)."""
    g = torch.Generator().manual_seed(21)
    logps = -6 * torch.rand(8, 64, generator=g)
    adv = torch.tensor([2.0, -2.0, 1.5, -1.5, 1.0, -1.0, 0.5, -0.5])
    mask = torch.ones(8, 64, dtype=torch.long)
    mask[3, 40:] = 0
    return logps, adv, mask


def test_clip_cov_method_on_policy_zeroes_only_band_tokens():
    logps, adv, mask = _spread_batch()
    opts = _opts(clip_cov_ratio=0.02)
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
    logps, adv, mask = _spread_batch()
    old = logps.clone()
    old[adv > 0] -= 1.0  # ratio e > 1 + eps_high for A > 0: clipped by the PPO rule
    old[adv < 0, :10] += 1.0  # ratio 1/e < 1 - eps_low for A < 0: clipped too
    clipped = mask.bool() & ((adv[:, None] > 0) | ((adv[:, None] < 0) & (torch.arange(64) < 10)))
    out = get_method("clip_cov")(
        MethodInputs(logps, old, adv, mask, torch.Generator().manual_seed(0)), _opts(clip_cov_ratio=1.0)
    )
    cov = token_covariance(logps, adv, mask, centring="batch")
    band = mask.bool() & (cov > 1) & (cov < 5)
    assert bool((band & clipped).any())  # the test would be vacuous otherwise
    assert torch.equal(out.multipliers == 0, band & ~clipped)


# ------------------------------------------------------------------------------------------ KL-Cov


def test_kl_cov_select_top_k_valid():
    cov, mask = _band_cov(seed=1)
    cov = cov.masked_fill(~mask, 1e9)  # padding with huge covariance must never win
    n = int(mask.sum())
    sel = kl_cov_select(cov, mask, ratio=0.1)
    k = math.floor(0.1 * n)
    assert int(sel.sum()) == k and not bool((sel & ~mask).any())
    threshold = cov[mask].sort(descending=True).values[k - 1]
    assert torch.equal(sel, mask & (cov >= threshold))


def test_kl_cov_select_counts():
    cov, mask = _band_cov(seed=2)
    n = int(mask.sum())
    assert int(kl_cov_select(cov, mask, ratio=1e-9).sum()) == 1
    assert torch.equal(kl_cov_select(cov, mask, ratio=1.0), mask)
    assert int(kl_cov_select(cov, mask, ratio=0.5).sum()) == n // 2
    assert not bool(kl_cov_select(cov, torch.zeros_like(mask), ratio=0.5).any())
    one = torch.zeros_like(mask)
    one[1, 3] = True
    assert torch.equal(kl_cov_select(cov, one, ratio=0.5), one)


def test_kl_cov_method_penalises_top_k():
    logps, adv, mask = _spread_batch()
    old = logps - 0.1 * torch.arange(64, dtype=logps.dtype)
    opts = _opts(kl_cov_ratio=0.05, kl_cov_coef=0.5)
    out = get_method("kl_cov")(MethodInputs(logps, old, adv, mask), opts)
    sel = kl_cov_select(token_covariance(logps, adv, mask, centring="batch"), mask, ratio=0.05)
    assert torch.equal(out.multipliers, torch.ones_like(out.multipliers))
    torch.testing.assert_close(out.penalty, torch.where(sel, 0.5 * (logps - old).abs(), torch.zeros(())))
    assert int(sel.sum()) == math.floor(0.05 * int(mask.sum()))
    torch.testing.assert_close(out.metrics["cw/frac_tokens_penalised"], sel.sum() / mask.sum().float())


@pytest.mark.parametrize("on_policy", ["none", "detached"])
def test_kl_cov_penalty_on_policy_has_zero_gradient(on_policy):
    # torch defines d|x|/dx at x = 0 as sign(0) = 0, so the on-policy penalty has exactly zero gradient
    logps, adv, mask = _spread_batch()
    logps.requires_grad_(True)
    old = None if on_policy == "none" else logps.detach()
    out = get_method("kl_cov")(MethodInputs(logps, old, adv, mask), _opts(kl_cov_ratio=0.1))
    assert bool((out.penalty == 0).all())
    out.penalty.sum().backward()
    assert torch.equal(logps.grad, torch.zeros_like(logps))


def test_kl_cov_penalty_off_policy_gradient_is_coef_sign():
    logps = torch.tensor([[0.0, -1.0, -2.0]], requires_grad=True)
    old = torch.tensor([[-0.5, -0.5, -2.0]])
    selected = torch.tensor([[True, True, False]])
    kl_cov_penalty(logps, old, selected, coef=2.0).sum().backward()
    assert torch.equal(logps.grad, torch.tensor([[2.0, -2.0, 0.0]]))


# ------------------------------------------------------------------------------------- diagnostics


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_covariance_diagnostics_values(dtype):
    logps, adv, mask = _batch(b=8, t=32, seed=14, dtype=dtype)
    cov = token_covariance(logps, adv, mask, centring="batch")
    w = cw_weights(logps, adv, mask, variant="described")
    d = covariance_diagnostics(cov, w, mask)
    assert set(d) == DIAG_KEYS
    assert all(v.dtype == torch.float32 and v.ndim == 0 and not v.requires_grad for v in d.values())
    m = mask.bool()
    c, wv = cov[m], w[m]
    qs = torch.tensor([1e-4, 1e-2, 0.4, 0.6, 0.99, 0.9999], dtype=dtype)
    expected = dict(
        zip(sorted(k for k in DIAG_KEYS if "_q" in k), torch.quantile(c, qs).tolist(), strict=True)
    )
    expected |= {
        "cw/cov_mean": c.mean(), "cw/cov_std": c.std(correction=0), "cw/cov_abs_mean": c.abs().mean(),
        "cw/weight_mean": wv.mean(), "cw/weight_std": wv.std(correction=0),
        "cw/weight_min": wv.min(), "cw/weight_max": wv.max(),
        "cw/weight_frac_below_0.5": (wv < 0.5).double().mean(), "cw/weight_frac_above_2": (wv > 2).double().mean(),
    }  # fmt: skip
    for key, value in expected.items():
        torch.testing.assert_close(d[key], torch.as_tensor(value).float(), rtol=1e-5, atol=1e-6, msg=key)


def test_covariance_diagnostics_no_valid_token_gives_zeros():
    cov = torch.randn(3, 4)
    d = covariance_diagnostics(cov, torch.zeros(3, 4), torch.zeros(3, 4, dtype=torch.long))
    assert set(d) == DIAG_KEYS and all(float(v) == 0.0 for v in d.values())


def test_covariance_diagnostics_single_valid_token():
    mask = torch.zeros(2, 3, dtype=torch.bool)
    mask[1, 1] = True
    cov = torch.full((2, 3), 0.3)
    d = covariance_diagnostics(cov, mask.float(), mask)
    assert all(bool(torch.isfinite(v)) for v in d.values())
    assert float(d["cw/cov_q0.0001"]) == pytest.approx(0.3) and float(d["cw/cov_std"]) == 0.0


def test_masked_mean_zero_where_no_valid_token():
    x = torch.tensor([[1.0, 2.0, math.nan], [5.0, 6.0, 7.0]])
    mask = torch.tensor([[1, 1, 0], [0, 0, 0]])
    assert torch.equal(masked_mean(x, mask, dim=1), torch.tensor([1.5, 0.0]))
    assert float(masked_mean(x, mask)) == 1.5
    assert float(masked_mean(x, torch.zeros_like(mask))) == 0.0


# ---------------------------------------------------------------------------------------- registry


@pytest.mark.parametrize("device", DEVICES)
def test_registry_names_resolve_and_run(device):
    assert set(METHODS) == {"grpo", "cw_grpo", "clip_cov", "kl_cov"}
    logps, adv, mask = (x.to(device) for x in _spread_batch())
    for name in METHODS:
        fn = get_method(name)
        assert fn is METHODS[name]
        for variant in VARIANTS:
            gen = torch.Generator().manual_seed(0)  # a CPU generator, as the trainer passes
            out = fn(MethodInputs(logps, logps.detach() - 0.1, adv, mask, gen), _opts(cw_variant=variant))
            assert isinstance(out, MethodOutput)
            assert out.multipliers.shape == logps.shape and out.multipliers.dtype == torch.float32
            assert all(not v.requires_grad and v.ndim == 0 for v in out.metrics.values())


def test_registry_grpo_multipliers_exactly_one():
    logps, adv, mask = _spread_batch()
    out = get_method("grpo")(MethodInputs(logps, None, adv, mask), _opts())
    assert torch.equal(out.multipliers, torch.ones_like(logps)) and out.penalty is None


@pytest.mark.parametrize("variant", VARIANTS)
def test_registry_cw_grpo_uses_variant(variant):
    logps, adv, mask = _spread_batch()
    out = get_method("cw_grpo")(MethodInputs(logps, None, adv, mask), _opts(cw_variant=variant))
    assert torch.equal(out.multipliers, cw_weights(logps, adv, mask, variant=variant))
    assert out.penalty is None and out.metrics == {}


def test_registry_duplicate_raises():
    with pytest.raises(ValueError, match="'grpo' is already registered"):
        register_method("grpo")(lambda *a: None)  # checked once, when a function is registered
    decorator = register_method("_test_tmp")
    try:
        decorator(lambda *a: None)
        with pytest.raises(ValueError, match="already registered"):
            decorator(lambda *a: None)
    finally:
        METHODS.pop("_test_tmp", None)


def test_registration_says_which_methods_run_without_the_ppo_clip():
    assert {"kl_cov"} == W.UNCLIPPED  # KL-Cov (spec method.md §3); Clip-Cov keeps the clip
    try:
        register_method("_test_unclipped", ppo_clip=False)(lambda *a: None)
        register_method("_test_clipped")(lambda *a: None)
        assert {"kl_cov", "_test_unclipped"} == W.UNCLIPPED
    finally:
        for name in ("_test_unclipped", "_test_clipped"):
            METHODS.pop(name, None)
        W.UNCLIPPED.discard("_test_unclipped")


def test_registry_unknown_name_lists_known():
    with pytest.raises(
        ValueError, match=re.escape("unknown method 'nope'; known: ['clip_cov', 'cw_grpo', 'grpo', 'kl_cov']")
    ):
        get_method("nope")


def test_variant_knobs_match_spec_table():
    spec_table = {
        "released": W.CWKnobs(centring="sequence", normaliser="padded", gradient=True),
        "described": W.CWKnobs(centring="batch", normaliser="valid", gradient=False),
    }
    assert spec_table == W.VARIANT_KNOBS
    assert set(W.VARIANT_KNOBS) == set(W.CW_VARIANTS)


def test_method_options_have_no_defaults():
    """Every option's default lives in CWOptions; only the resolved knobs may be left to MethodOptions."""
    fields = {f.name: f.default for f in dataclasses.fields(MethodOptions)}
    assert fields.pop("cw_knobs") is None
    assert all(default is dataclasses.MISSING for default in fields.values())
    with pytest.raises(dataclasses.FrozenInstanceError):
        _opts().cw_variant = "released"


# -------------------------------------------------------------------------------------- bad inputs


def test_bad_inputs_raise_value_error():
    lp, adv, mask = _t(LP), _t(ADV), torch.tensor(MASK)
    with pytest.raises(ValueError, match=r"logps must be 2-D \(B, T\), got shape \(3,\)"):
        cw_weights(lp[0], adv, mask, variant="released")
    with pytest.raises(ValueError, match=r"advantages must have shape \(B,\) = \(2,\), got \(3,\)"):
        cw_weights(lp, _t([1.0, 2.0, 3.0]), mask, variant="released")
    with pytest.raises(ValueError, match=r"mask shape \(2, 2\) must equal logps shape \(2, 3\)"):
        cw_weights(lp, adv, mask[:, :2], variant="released")
    with pytest.raises(ValueError, match="mask must be bool or hold only 0/1"):
        cw_weights(lp, adv, mask * 2, variant="released")
    with pytest.raises(ValueError, match="mask must be bool or hold only 0/1"):
        cw_weights(lp, adv, mask * 0.5, variant="described")
    with pytest.raises(
        ValueError, match=re.escape("unknown variant 'paper'; valid: ['released', 'described']")
    ):
        cw_weights(lp, adv, mask, variant="paper")
    with pytest.raises(ValueError, match=re.escape("unknown centring 'token'; valid: ['batch', 'sequence']")):
        token_covariance(lp, adv, mask, centring="token")
    with pytest.raises(ValueError, match="logps must be a floating-point tensor"):
        cw_weights(mask, adv, mask, variant="released")
    with pytest.raises(ValueError, match=r"old_logps shape \(2, 2\) must equal logps shape \(2, 3\)"):
        MethodInputs(lp, lp[:, :2], adv, mask)
    with pytest.raises(ValueError, match=r"ratio=1.5: must be in \(0, 1\]"):
        kl_cov_select(lp, mask, ratio=1.5)


def test_method_options_built_by_hand_are_checked_and_resolved_ones_are_taken_as_given():
    """The drop-in API (a MethodOptions built by hand) checks its options and resolves the knobs; the
    trainer passes knobs resolved from options CWOptions has checked, which are not checked again."""
    assert _opts(cw_variant="described", cw_centring="sequence").cw_knobs == W.CWKnobs(
        "sequence", "valid", False
    )
    with pytest.raises(ValueError, match=re.escape("unknown variant 'paper'")):
        _opts(cw_variant="paper")
    with pytest.raises(ValueError, match=re.escape("clip_cov_ratio=0.0: must be in (0, 1]")):
        _opts(clip_cov_ratio=0.0)
    knobs = W.variant_knobs("released", None, "valid", None)
    assert knobs == W.resolve_knobs("released", normaliser="valid") == W.CWKnobs("sequence", "valid", True)
    assert _opts(cw_variant="released", cw_normaliser="valid", cw_knobs=knobs).cw_knobs is knobs


# ------------------------------------------------------------------------------------ layering, sync


def test_import_does_not_pull_trl_or_transformers():
    code = "import sys, cwgrpo.weighting; print(sorted({'trl', 'transformers'} & set(sys.modules)))"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    res = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, check=True
    )
    assert res.stdout.strip() == "[]"


def test_source_has_no_host_sync_calls():
    sources = sorted(Path(W.__file__).parent.glob("*.py"))
    assert len(sources) > 1
    for source in sources:
        tree = ast.parse(source.read_text())
        attrs = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
        assert not attrs & {"item", "nonzero", "tolist", "cpu", "numpy"}, source.name
        imports = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        imports |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        ours = {name for name in imports if name.startswith("cwgrpo.")}
        assert all(name.startswith("cwgrpo.weighting.") for name in ours), source.name
        outside = {name.split(".")[0] for name in imports - ours}
        assert outside <= {"torch", "math", "dataclasses", "typing", "collections", "__future__"}, source.name


# ------------------------------------------------------------------ one-knob overrides (the study's ablation)


@pytest.mark.parametrize("variant", VARIANTS)
def test_knobs_left_at_none_or_set_to_the_variants_own_choice_change_nothing(variant):
    lp, adv, mask = _batch()
    own = W.VARIANT_KNOBS[variant]
    plain = cw_weights(lp, adv, mask, variant=variant)
    same = cw_weights(
        lp,
        adv,
        mask,
        variant=variant,
        centring=own.centring,
        normaliser=own.normaliser,
        gradient=own.gradient,
    )
    assert torch.equal(plain, same)


@pytest.mark.parametrize(("variant", "other"), [("released", "described"), ("described", "released")])
def test_flipping_all_three_knobs_gives_the_other_variant(variant, other):
    """Only sigma's + 1e-8 (which follows cw_variant) then separates the two."""
    lp, adv, mask = _batch(seed=3)
    k = W.VARIANT_KNOBS[other]
    flipped = cw_weights(
        lp, adv, mask, variant=variant, centring=k.centring, normaliser=k.normaliser, gradient=k.gradient
    )
    assert torch.allclose(flipped, cw_weights(lp, adv, mask, variant=other), rtol=1e-6, atol=1e-9)
    assert not torch.allclose(flipped, cw_weights(lp, adv, mask, variant=variant), rtol=1e-3)


def test_centring_knob_weights_the_chosen_covariance():
    """released + batch centring = the kernel of the batch-centred covariance, released's Z and sigma."""
    lp, adv, mask = _batch(seed=5)
    w = cw_weights(lp, adv, mask, variant="released", centring="batch")
    c = token_covariance(lp, adv, mask, centring="batch")
    m = mask.bool()
    sigma = c[m].std(unbiased=False) + W.RELEASED_SIGMA_EPS
    raw = torch.exp(-c.square() / (2 * sigma**2)) * m
    assert torch.allclose(w, raw * mask.numel() / raw.sum(), rtol=1e-9)


@pytest.mark.parametrize("variant", VARIANTS)
def test_normaliser_knob_sets_the_valid_token_mean_of_the_weights(variant):
    lp, adv, mask = _batch(seed=7)
    m = mask.bool()
    valid = cw_weights(lp, adv, mask, variant=variant, normaliser="valid")
    padded = cw_weights(lp, adv, mask, variant=variant, normaliser="padded")
    assert valid[m].mean().item() == pytest.approx(1.0, rel=1e-12)
    assert padded[m].mean().item() == pytest.approx(mask.numel() / m.sum().item(), rel=1e-12)


@pytest.mark.parametrize("variant", VARIANTS)
def test_gradient_knob_decides_whether_the_weight_carries_gradient(variant):
    lp, adv, mask = _batch(seed=9)
    lp = lp.clone().requires_grad_(True)
    assert cw_weights(lp, adv, mask, variant=variant, gradient=True).requires_grad
    assert not cw_weights(lp, adv, mask, variant=variant, gradient=False).requires_grad


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"centring": "token"}, "unknown centring 'token'"),
        ({"normaliser": "N"}, "unknown normaliser 'N'"),
        ({"gradient": "yes"}, "gradient must be True, False or None"),
    ],
)
def test_bad_knob_values_are_refused_by_name(kw, message):
    lp, adv, mask = _batch()
    with pytest.raises(ValueError, match=re.escape(message)):
        cw_weights(lp, adv, mask, variant="released", **kw)
    names = {"centring": "cw_centring", "normaliser": "cw_normaliser", "gradient": "cw_weight_gradient"}
    with pytest.raises(ValueError, match=re.escape(message)):
        _opts(cw_variant="released", **{names[k]: v for k, v in kw.items()})


def test_cw_grpo_method_applies_the_knobs_of_its_options():
    lp, adv, mask = _batch(seed=11)
    opts = _opts(cw_variant="released", cw_centring="batch", cw_normaliser="valid", cw_weight_gradient=False)
    out = get_method("cw_grpo")(MethodInputs(lp, None, adv, mask), opts)
    want = cw_weights(lp, adv, mask, variant="released", centring="batch", normaliser="valid", gradient=False)
    assert torch.equal(out.multipliers, want.float())
