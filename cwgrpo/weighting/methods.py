"""The four registered methods (``grpo``, ``cw_grpo``, ``clip_cov``, ``kl_cov``) and the step's diagnostics."""

from __future__ import annotations

import torch
from torch import Tensor

from cwgrpo.weighting.covariance import (
    clip_cov_select,
    covariance_diagnostics,
    kl_cov_penalty,
    kl_cov_select,
    token_covariance,
)
from cwgrpo.weighting.kernel import cw_weights_and_covariance
from cwgrpo.weighting.masks import compute_dtype
from cwgrpo.weighting.registry import MethodInputs, MethodOptions, MethodOutput, register_method


@torch.no_grad()
def method_diagnostics(
    batch: MethodInputs, opts: MethodOptions, out: MethodOutput
) -> tuple[dict[str, Tensor], Tensor, Tensor]:
    """The step's diagnostics (spec method.md §4): ``(metrics, cov, weights)``, for every method alike."""
    cov, weights = out.cov, out.weights
    if cov is None or weights is None:
        w, c = cw_weights_and_covariance(
            batch.logps.detach(),
            batch.advantages.detach(),
            batch.mask,
            variant=opts.cw_variant,
            knobs=opts.cw_knobs,
        )
        cov = c if cov is None else cov
        weights = w.float() if weights is None else weights
    metrics = {**covariance_diagnostics(cov, weights, batch.mask), **out.metrics}
    return metrics, cov, weights


def _batch_cov(batch: MethodInputs, m: Tensor) -> Tensor:
    """Cui et al.'s covariance: batch-centred, on detached values (selection only)."""
    return token_covariance(batch.logps.detach(), batch.advantages.detach(), m, centring="batch")


def _frac(selected: Tensor, m: Tensor) -> Tensor:
    return (selected.sum() / m.sum().clamp_min(1)).to(torch.float32)


def _ppo_clipped(batch: MethodInputs, m: Tensor, opts: MethodOptions) -> Tensor:
    """Valid tokens the PPO rule clips (verl's ``clip_by_origin``): ``A > 0, r > 1 + eps_high`` or ``A < 0,
    r < 1 - eps_low``."""
    if batch.old_logps is None:
        return torch.zeros_like(m)  # r = 1 exactly: nothing is clipped
    dtype = compute_dtype(batch.logps)
    ratio = torch.exp(batch.logps.detach().to(dtype) - batch.old_logps.detach().to(dtype))  # (B, T)
    adv = batch.advantages.detach().to(dtype)[:, None]
    clipped = ((adv > 0) & (ratio > 1 + opts.epsilon_high)) | ((adv < 0) & (ratio < 1 - opts.epsilon_low))
    return clipped & m


@register_method("grpo")
def grpo(batch: MethodInputs, opts: MethodOptions) -> MethodOutput:
    """Stock GRPO: multipliers exactly 1.0 (``A * 1.0 == A`` bit for bit, so the loss is exactly TRL's)."""
    ones = torch.ones(batch.logps.shape, dtype=torch.float32, device=batch.logps.device)
    return MethodOutput(ones, None, {})


@register_method("cw_grpo")
def cw_grpo(batch: MethodInputs, opts: MethodOptions) -> MethodOutput:
    """CW-GRPO: multipliers ``cw_weights`` with ``opts.cw_knobs`` (spec method.md §2)."""
    weights, cov = cw_weights_and_covariance(
        batch.logps, batch.advantages, batch.mask, variant=opts.cw_variant, knobs=opts.cw_knobs
    )
    multipliers = weights.float()
    return MethodOutput(multipliers, None, {}, cov=cov.detach(), weights=multipliers.detach())


@register_method("clip_cov")
def clip_cov(batch: MethodInputs, opts: MethodOptions) -> MethodOutput:
    """Clip-Cov: multiplier 0 on :func:`~cwgrpo.weighting.covariance.clip_cov_select` tokens not already
    PPO-clipped (spec method.md §3): the same per-token loss and gradient as verl's masked PPO loss."""
    m = batch.mask.bool()
    selected = clip_cov_select(
        _batch_cov(batch, m),
        m,
        ratio=opts.clip_cov_ratio,
        lb=opts.clip_cov_lb,
        ub=opts.clip_cov_ub,
        generator=batch.generator,
        exclude=_ppo_clipped(batch, m, opts),
    )
    multipliers = (~selected).to(torch.float32)
    return MethodOutput(multipliers, None, {"cw/frac_tokens_clipped": _frac(selected, m)})


@register_method("kl_cov", ppo_clip=False)
def kl_cov(batch: MethodInputs, opts: MethodOptions) -> MethodOutput:
    """KL-Cov: penalty ``kl_cov_coef * |logp - old|`` on the top-k covariance tokens (spec method.md §3)."""
    m = batch.mask.bool()
    selected = kl_cov_select(_batch_cov(batch, m), m, ratio=opts.kl_cov_ratio)
    penalty = kl_cov_penalty(batch.logps, batch.old_logps, selected, coef=opts.kl_cov_coef)
    ones = torch.ones(batch.logps.shape, dtype=torch.float32, device=batch.logps.device)
    return MethodOutput(ones, penalty, {"cw/frac_tokens_penalised": _frac(selected, m)})
