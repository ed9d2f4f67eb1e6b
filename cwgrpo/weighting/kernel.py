"""Covariance-aware Gaussian-kernel advantage weights, CW-GRPO's ``w~``.

The two CW variants (spec method.md §2, table):

==========  ======================================  ==========================================
choice      ``described`` (paper text)              ``released`` (authors' code)
==========  ======================================  ==========================================
mean_logp   over all valid tokens of the batch      over the valid tokens of completion i
mean_A      token-weighted over valid tokens        plain mean of A over the B completions
sigma       population std of c over valid tokens   same, + 1e-8
Z           N (mean of w~ over valid tokens = 1)    B*T = mask.numel() (padding counted)
gradient    none (logps detached)                   flows through w~
==========  ======================================  ==========================================
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
from torch import Tensor

from cwgrpo.weighting.covariance import CENTRINGS, covariance_on
from cwgrpo.weighting.masks import (
    ValidTokens,
    check_choice,
    check_inputs,
    compute_dtype,
    nonzero_or_one,
    safe_sqrt,
    valid_tokens,
)

CW_VARIANTS = ("released", "described")
NORMALISERS = ("valid", "padded")  # Z = N (valid tokens) or Z = B*T (padding counted)
RELEASED_SIGMA_EPS = 1e-8  # the authors' code adds this to sigma (spec method.md §2, `released`)


class CWKnobs(NamedTuple):
    """The choices in which ``released`` and ``described`` differ, one by one (the study's ablation)."""

    centring: str
    normaliser: str
    gradient: bool


VARIANT_KNOBS = {
    "released": CWKnobs("sequence", "padded", True),
    "described": CWKnobs("batch", "valid", False),
}


def resolve_knobs(
    variant: str, centring: str | None = None, normaliser: str | None = None, gradient: bool | None = None
) -> CWKnobs:
    """``variant``'s knobs with any given one overridden (None keeps the variant's choice), checked."""
    check_choice(variant, CW_VARIANTS, "variant")
    if centring is not None:
        check_choice(centring, CENTRINGS, "centring")
    if normaliser is not None:
        check_choice(normaliser, NORMALISERS, "normaliser")
    if gradient is not None and not isinstance(gradient, bool):
        raise ValueError(f"gradient must be True, False or None, got {gradient!r}")
    return variant_knobs(variant, centring, normaliser, gradient)


def variant_knobs(
    variant: str, centring: str | None = None, normaliser: str | None = None, gradient: bool | None = None
) -> CWKnobs:
    """:func:`resolve_knobs` of values already checked (the trainer's, by ``CWOptions``)."""
    given = {"centring": centring, "normaliser": normaliser, "gradient": gradient}
    return VARIANT_KNOBS[variant]._replace(**{k: v for k, v in given.items() if v is not None})


def _normalised_kernel(cov: Tensor, tokens: ValidTokens, sigma: Tensor, z: Tensor | float) -> Tensor:
    """``w~ = Z * w / sum(w)`` with ``w = exp(-c^2 / (2 sigma^2)) * m``; 1 before normalising if sigma = 0.

    A masked softmax of ``-c^2 / (2 sigma^2)`` shifted by its (detached) minimum, so ``sum(w) >= 1`` where a
    token is valid and ``w~`` stays finite where every raw ``w`` would underflow; the exponent is floored at
    ``log(finfo.tiny) + 1``, keeping every valid weight > 0 and ``exp`` off its slow underflow path.
    """
    pos = sigma > 0
    k = torch.where(pos, 1 / (2 * torch.where(pos, sigma, torch.ones_like(sigma)).square()), 0.0)
    floor = math.log(torch.finfo(cov.dtype).tiny) + 1
    c2 = cov * cov  # (B, T), 0 on padding
    # min of c^2 over valid tokens, inf if none
    c2_min = torch.where(tokens.valid, c2.detach(), math.inf).amin()
    c2_min = torch.where(torch.isfinite(c2_min), c2_min, 0.0)
    # (B, T), c^2 - min c^2: >= 0, exactly 0 at the min
    excess = torch.addcmul(c2, tokens.valid_float, c2_min, value=-1)
    # (B, T), in (0, 1] on valid tokens, 0 on padding
    w = (excess * -k).clamp_min_(floor).exp_() * tokens.valid_float
    # sum(w) >= 1 if a token is valid (w = exp(0) at the min), else 0
    return w * (z / nonzero_or_one(w.sum()))


def _masked_var(cov: Tensor, tokens: ValidTokens) -> Tensor:
    """Population variance of ``cov`` over valid tokens (``cov`` is 0 on padding; 0 if none)."""
    n = tokens.total.clamp_min(1)
    dev = torch.addcmul(cov, tokens.valid_float, -cov.sum() / n)  # (B, T), c - mean(c), 0 on padding
    return torch.dot(dev.flatten(), dev.flatten()) / n


def _overflow_scale(cov: Tensor, tokens: ValidTokens) -> Tensor:
    """``max |c|`` (detached) where squaring ``c`` could overflow, else exactly 1: the kernel depends only on
    ``c / sigma``, so dividing by it changes no weight but keeps ``c^2`` finite."""
    lo, hi = torch.aminmax(cov.detach())  # cov is 0 on padding: no mask needed, no (B, T) temporary
    amax = torch.maximum(-lo, hi)
    limit = math.sqrt(torch.finfo(cov.dtype).max / max(tokens.valid.numel(), 1)) / 4
    return torch.where(amax > limit, amax, torch.ones_like(amax))


def cw_weights_and_covariance(
    logps: Tensor, advantages: Tensor, mask: Tensor, *, variant: str, knobs: CWKnobs
) -> tuple[Tensor, Tensor]:
    """:func:`cw_weights` for resolved ``knobs``, and the covariance the weights were computed from."""
    check_inputs(logps, advantages, mask)
    dtype = compute_dtype(logps)
    if mask.numel() == 0:
        empty = torch.zeros(mask.shape, dtype=dtype, device=logps.device)
        return empty, empty
    tokens = valid_tokens(mask, logps, advantages, dtype)
    if not knobs.gradient:
        logps, advantages = logps.detach(), advantages.detach()
    cov = covariance_on(logps, advantages, tokens, knobs.centring)
    scale = _overflow_scale(cov, tokens)
    cs = cov / scale  # exactly cov where nothing can overflow
    eps = RELEASED_SIGMA_EPS / scale if variant == "released" else 0.0
    sigma = safe_sqrt(_masked_var(cs, tokens)) + eps
    z = tokens.total if knobs.normaliser == "valid" else float(mask.numel())
    return _normalised_kernel(cs, tokens, sigma, z), cov


def cw_weights(
    logps: Tensor,
    advantages: Tensor,
    mask: Tensor,
    *,
    variant: str,
    centring: str | None = None,
    normaliser: str | None = None,
    gradient: bool | None = None,
) -> Tensor:
    """Covariance-aware Gaussian-kernel advantage weights ``w~`` (spec method.md §2; variants: module table).

    ::

        c[i,t]  = (logp[i,t] - mean_logp) * (A[i] - mean_A)           # token_covariance
        sigma   = population std of {c[i,t] : m[i,t] = 1}            (+ 1e-8 for "released")
        w[i,t]  = exp(-c[i,t]^2 / (2 sigma^2)) * m[i,t]               (1 * m if sigma = 0)
        w~[i,t] = w[i,t] * Z / sum(w)

    The token's advantage becomes ``w~[i,t] * A[i]``; padding, and a micro-batch with no valid token, get 0.
    """
    knobs = resolve_knobs(variant, centring, normaliser, gradient)
    return cw_weights_and_covariance(logps, advantages, mask, variant=variant, knobs=knobs)[0]
