"""Token covariance, the Clip-Cov / KL-Cov token selections and the step's diagnostics.

Clip-Cov/KL-Cov follow Cui et al. 2025 as implemented in verl (``verl/trainer/ppo/core_algos.py``,
``compute_policy_loss_clip_cov``/``_kl_cov``); the code here is our own, and each docstring lists where it
differs from verl. Every public function checks its own arguments (shapes, and a non-bool mask's 0/1
values on CPU only: :func:`~cwgrpo.weighting.masks.check_mask`).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from cwgrpo.weighting.masks import (
    ValidTokens,
    check_2d,
    check_choice,
    check_inputs,
    check_mask,
    check_ratio,
    compute_dtype,
    masked_mean,
    masked_pop_std,
    select_count,
    shifted_mean,
    valid_tokens,
)

CENTRINGS = ("batch", "sequence")
COV_QUANTILES = (1e-4, 1e-2, 0.4, 0.6, 0.99, 0.9999)
COV_QUANTILE_KEYS = tuple(f"cw/cov_q{q}" for q in ("0.0001", "0.01", "0.4", "0.6", "0.99", "0.9999"))
WEIGHT_KEYS = tuple(f"cw/weight_{s}" for s in ("mean", "std", "min", "max", "frac_below_0.5", "frac_above_2"))


def covariance_on(logps: Tensor, advantages: Tensor, tokens: ValidTokens, centring: str) -> Tensor:
    """Token covariance on prepared valid tokens (see :func:`token_covariance`); 0 on padding."""
    dtype = tokens.valid_float.dtype
    # padding values (even inf/NaN) never enter the maths, nor does a non-finite advantage
    lp = torch.where(tokens.valid, logps.to(dtype), 0.0)
    adv = torch.where(tokens.finite_advantage, advantages.to(dtype), 0.0)
    if centring == "batch":
        mean_lp = lp.sum() / tokens.total.clamp_min(1)  # 0-dim, over all valid tokens of the micro-batch
        mean_a = shifted_mean(adv, tokens.per_completion)  # token-weighted over valid tokens
    else:
        # (B, 1), per completion over its valid tokens
        mean_lp = (lp.sum(1) / tokens.per_completion.clamp_min(1))[:, None]
        mean_a = shifted_mean(adv, tokens.finite_advantage.to(dtype))  # plain mean over the completions
    # (B, T), lp - mean_lp on valid tokens, 0 on padding
    d_lp = torch.addcmul(lp, tokens.valid_float, -mean_lp)
    return d_lp * (adv - mean_a)[:, None]  # (B, T)


def token_covariance(logps: Tensor, advantages: Tensor, mask: Tensor, *, centring: str) -> Tensor:
    """Token covariance ``c[i,t] = (logp[i,t] - mean_logp) * (A[i] - mean_A)`` (method.md §2), 0 on padding.

    ``centring="batch"`` (``described``, and Cui et al.'s): both means over the micro-batch's valid tokens
    (``mean_A`` token-weighted, as verl's ``masked_mean(advantages, response_mask)``). ``"sequence"``
    (``released``): ``mean_logp`` per completion, ``mean_A`` the plain mean over the ``B`` completions.
    ``mean_A`` is ``A[0] + mean(A - A[0])``, so equal advantages give c = 0 exactly. Unlike verl, gradient
    flows through whatever the caller passes (Clip-Cov/KL-Cov detach first: they only select by ``c``).
    """
    check_inputs(logps, advantages, mask)
    check_choice(centring, CENTRINGS, "centring")
    tokens = valid_tokens(mask, logps, advantages, compute_dtype(logps))
    return covariance_on(logps, advantages, tokens, centring)


def clip_cov_select(
    cov: Tensor,
    mask: Tensor,
    *,
    ratio: float,
    lb: float,
    ub: float,
    generator: torch.Generator | None,
    exclude: Tensor | None = None,
) -> Tensor:
    """Tokens whose policy loss Clip-Cov zeroes (Cui et al. 2025; spec method.md §3): of the valid, not
    ``exclude``d tokens with ``lb < c < ub``, ``max(floor(ratio * N), 1)`` picked uniformly at random.

    Unlike verl, the draw is a seeded ``torch.randperm`` over all ``B*T`` positions (candidates taken in that
    order), so no host sync: the same distribution, other picks for a given seed.
    """
    check_2d(cov, "cov")
    check_mask(mask, cov.shape, "cov")
    check_ratio(ratio, "ratio")
    if exclude is not None and (not isinstance(exclude, Tensor) or exclude.shape != cov.shape):
        raise ValueError(f"exclude must be a bool tensor of shape {tuple(cov.shape)}")
    if not isinstance(generator, torch.Generator):
        raise ValueError("clip_cov_select needs a seeded torch.Generator (generator=None is not allowed)")
    m = mask.bool()
    cand = m & (cov > lb) & (cov < ub)
    if exclude is not None:
        cand = cand & ~exclude.bool()
    flat = cand.flatten()
    perm = torch.randperm(flat.numel(), generator=generator, device=generator.device).to(cov.device)
    in_order = flat[perm]  # candidates in random order
    keep = in_order & (torch.cumsum(in_order, 0) <= select_count(ratio, m.sum()))
    return torch.zeros_like(flat).index_put((perm,), keep).view(cov.shape)


def kl_cov_select(cov: Tensor, mask: Tensor, *, ratio: float) -> Tensor:
    """Top ``k = min(max(floor(ratio * N), 1), N)`` valid tokens by covariance (KL-Cov, spec method.md §3).

    Unlike verl (``topk`` on the CPU with a data-dependent ``k``), ``topk`` runs on the device with the static
    bound ``max(floor(ratio * B*T), 1)`` and the first ``k`` are kept, so nothing syncs.
    """
    check_2d(cov, "cov")
    check_mask(mask, cov.shape, "cov")
    check_ratio(ratio, "ratio")
    m = mask.bool()
    n_max = min(max(math.floor(ratio * cov.numel()), 1), cov.numel())  # static: shapes only
    if n_max == 0:
        return torch.zeros_like(m)
    scores = torch.where(m, cov.detach(), torch.full((), -math.inf, dtype=cov.dtype, device=cov.device))
    idx = torch.topk(scores.flatten(), n_max).indices  # sorted, largest first
    n_valid = m.sum()
    keep = torch.arange(n_max, device=cov.device) < torch.minimum(select_count(ratio, n_valid), n_valid)
    selected = torch.zeros(cov.numel(), dtype=torch.bool, device=cov.device).index_put((idx,), keep)
    return selected.view(cov.shape) & m


def kl_cov_penalty(logps: Tensor, old_logps: Tensor | None, selected: Tensor, *, coef: float) -> Tensor:
    """KL-Cov's extra per-token loss ``coef * |logp - logp_old|`` on selected tokens (verl's ``ppo_kl_coef *
    abs_kl``); on-policy (``old_logps`` None) it and its gradient are exactly 0."""
    check_2d(logps, "logps")
    if old_logps is not None and (not isinstance(old_logps, Tensor) or old_logps.shape != logps.shape):
        raise ValueError(f"old_logps must have shape {tuple(logps.shape)}")
    check_mask(selected, logps.shape, "logps")
    dtype = compute_dtype(logps)
    old = logps.detach() if old_logps is None else old_logps
    diff = (logps.to(dtype) - old.to(dtype)).abs()
    return torch.where(selected.bool(), coef * diff, torch.zeros((), dtype=dtype, device=diff.device))


def _masked_quantiles(x: Tensor, m: Tensor, qs: tuple[float, ...]) -> Tensor:
    """``torch.quantile(x[m], qs)`` (linear interpolation) without the data-dependent ``x[m]`` sync."""
    if x.numel() == 0:  # no token at all: every quantile is 0, as with no valid token
        return torch.zeros(len(qs), dtype=x.dtype, device=x.device)
    n = m.sum()
    inf = torch.full((), math.inf, dtype=x.dtype, device=x.device)
    ordered = torch.where(m, x, inf).flatten().sort().values  # valid values first
    pos = torch.tensor(qs, dtype=torch.float64, device=x.device) * (n - 1).clamp_min(0)
    lo = pos.floor().to(torch.int64)
    hi = pos.ceil().to(torch.int64)
    frac = (pos - lo).to(x.dtype)
    vals = torch.lerp(ordered[lo], ordered[hi], frac)
    return torch.where(n > 0, vals, torch.zeros_like(vals))


@torch.no_grad()
def covariance_diagnostics(cov: Tensor, weights: Tensor, mask: Tensor) -> dict[str, Tensor]:
    """Per-step covariance and weight statistics over valid tokens (spec method.md §4; 0.0 with none)."""
    check_2d(cov, "cov")
    check_2d(weights, "weights")
    check_mask(mask, cov.shape, "cov")
    if weights.shape != cov.shape:
        raise ValueError(f"weights shape {tuple(weights.shape)} must equal cov shape {tuple(cov.shape)}")
    m = mask.bool()
    c, w = cov.to(compute_dtype(cov)), weights.to(compute_dtype(weights))
    out = {
        "cw/cov_mean": masked_mean(c, m),
        "cw/cov_std": masked_pop_std(c, m),
        "cw/cov_abs_mean": masked_mean(c.abs(), m),
    }
    out.update(zip(COV_QUANTILE_KEYS, _masked_quantiles(c, m, COV_QUANTILES).unbind(), strict=True))
    if m.numel() == 0:  # no token at all (B or T is 0): every statistic is 0, as with no valid token
        return {k: torch.zeros((), dtype=torch.float32, device=c.device) for k in (*out, *WEIGHT_KEYS)}
    any_valid = m.any()
    inf = torch.full((), math.inf, dtype=w.dtype, device=w.device)
    w_min, w_max = torch.where(m, w, inf).amin(), torch.where(m, w, -inf).amax()
    out |= {
        "cw/weight_mean": masked_mean(w, m),
        "cw/weight_std": masked_pop_std(w, m),
        "cw/weight_min": torch.where(any_valid, w_min, torch.zeros_like(w_min)),
        "cw/weight_max": torch.where(any_valid, w_max, torch.zeros_like(w_max)),
        "cw/weight_frac_below_0.5": masked_mean((w < 0.5).to(w.dtype), m),
        "cw/weight_frac_above_2": masked_mean((w > 2).to(w.dtype), m),
    }
    return {k: v.detach().to(torch.float32) for k, v in out.items()}
