"""cwgrpo.weighting.covariance: the token covariance by hand, Clip-Cov's and KL-Cov's selections, KL-Cov's
penalty, and the step's covariance and weight diagnostics."""

from __future__ import annotations

import math

import pytest
import torch

from cwgrpo.weighting.covariance import (
    clip_cov_select,
    covariance_diagnostics,
    kl_cov_penalty,
    kl_cov_select,
    token_covariance,
)
from cwgrpo.weighting.kernel import cw_weights
from tests.unit.weighting_batches import ADV, LP, MASK, random_batch, t64

DIAG_KEYS = {
    "cw/cov_mean", "cw/cov_std", "cw/cov_abs_mean",
    "cw/cov_q0.0001", "cw/cov_q0.01", "cw/cov_q0.4", "cw/cov_q0.6", "cw/cov_q0.99", "cw/cov_q0.9999",
    "cw/weight_mean", "cw/weight_std", "cw/weight_min", "cw/weight_max",
    "cw/weight_frac_below_0.5", "cw/weight_frac_above_2",
}  # fmt: skip


def test_token_covariance_hand_computed_2x3():
    lp, adv, mask = t64(LP), t64(ADV), torch.tensor(MASK)
    # batch: mean_lp = -8/5 = -1.6, mean_A = (2*1 + 3*(-1))/5 = -0.2 (token-weighted)
    expected_batch = [[0.6 * 1.2, -0.4 * 1.2, 0.0], [1.1 * -0.8, 0.1 * -0.8, -1.4 * -0.8]]
    # sequence: row means -1.5 and -5/3, mean_A = 0 (plain mean over completions)
    expected_seq = [[0.5, -0.5, 0.0], [-7 / 6, -1 / 6, 4 / 3]]
    got_batch = token_covariance(lp, adv, mask, centring="batch")
    got_seq = token_covariance(lp, adv, mask, centring="sequence")
    torch.testing.assert_close(got_batch, t64(expected_batch), rtol=0, atol=1e-12)
    torch.testing.assert_close(got_seq, t64(expected_seq), rtol=0, atol=1e-12)


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


def test_kl_cov_penalty_off_policy_gradient_is_coef_sign():
    logps = torch.tensor([[0.0, -1.0, -2.0]], requires_grad=True)
    old = torch.tensor([[-0.5, -0.5, -2.0]])
    selected = torch.tensor([[True, True, False]])
    kl_cov_penalty(logps, old, selected, coef=2.0).sum().backward()
    assert torch.equal(logps.grad, torch.tensor([[2.0, -2.0, 0.0]]))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_covariance_diagnostics_values(dtype):
    logps, adv, mask = random_batch(b=8, t=32, seed=14, dtype=dtype)
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
