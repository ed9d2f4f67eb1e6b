"""Token covariance, Gaussian-kernel advantage weights and the method registry (spec method.md §2-§4).

Pure torch: this module imports nothing from TRL or transformers, so it can be tested and benchmarked
on its own; the TRL adapter calls :func:`get_method` and applies the returned multipliers and penalty.

Glossary (shapes are ``(B, T)`` or ``(B,)``; names follow TRL):

- ``B``: number of completions in the micro-batch (in the paper's setup, one GRPO group of G completions).
- ``T``: completion length (padded).
- ``logps``: ``(B, T)`` log-probability of the sampled token under the current policy.
- ``old_logps``: ``(B, T)`` log-probability under the policy that sampled, or ``None`` meaning
  on-policy (taken equal to ``logps.detach()``).
- ``advantages``: ``(B,)`` group-normalised advantage ``A[i]`` of completion ``i``.
- ``mask``: ``(B, T)`` completion mask ``m[i, t]`` in {0, 1} (bool or 0/1 numeric).
- ``N``: number of valid tokens, ``sum(m)``.
- ``c``: ``(B, T)`` token covariance ``(logp - mean_logp) * (A - mean_A)``, zero on padding.

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

Numerics: statistics are computed in float32 (float16/bfloat16 inputs are cast up; float64 inputs stay
float64 so that ``gradcheck`` works). One code path, with or without autograd. Nothing calls ``.item()``, ``nonzero`` or indexes with a
data-dependent shape, so no function forces a host-device sync; for the same reason the 0/1 value check
of a non-bool ``mask`` runs on CPU tensors only (see :func:`_check_mask`).

Non-finite inputs: a valid token whose log-prob is NaN or +-inf, and every token of a completion whose
advantage is, is treated as padding by :func:`token_covariance` and :func:`cw_weights` (and so by the
methods): it enters no statistic (means, sigma, the ``described`` normaliser N) and gets covariance 0
and weight 0, while every other token gets the value it would get without it. So one bad token never
turns a whole micro-batch's weights into NaN; raising instead would need a host sync. (TRL's loss on
such a token is NaN or inf whatever its weight: that is the trainer's signal, not this module's.)

Methods (:data:`METHODS`, one name -> one :data:`MethodFn`): ``grpo``, ``cw_grpo``, ``clip_cov``,
``kl_cov``. Inputs are validated once, where a method is called through the registry (each public
function validates its own arguments; the private helpers behind them do not check again). A method
returns the covariance and weights it computed on the way, so :func:`method_diagnostics` computes only
what is missing. Clip-Cov/KL-Cov follow Cui et al. 2025 as implemented in verl
(``verl/trainer/ppo/core_algos.py``, ``compute_policy_loss_clip_cov``/``_kl_cov``); the code here is
our own, and each docstring lists where it differs from verl.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import Tensor

CW_VARIANTS = ("released", "described")
CENTRINGS = ("batch", "sequence")
VARIANT_CENTRING = {"released": "sequence", "described": "batch"}  # the covariance each variant weights
NORMALISERS = ("valid", "padded")  # Z = N (valid tokens) or Z = B*T (padding counted)


class CWKnobs(NamedTuple):
    """The choices in which ``released`` and ``described`` differ, one by one (the study's ablation).

    ``centring`` in :data:`CENTRINGS`, ``normaliser`` in :data:`NORMALISERS`, ``gradient``: whether
    gradient flows through the weight. (sigma's ``+ 1e-8`` follows the variant; the fourth knob, the
    micro-batch scope, is the trainer's batch geometry, not a weighting choice.)
    """

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
    """``variant``'s knobs with any given one overridden (None keeps the variant's choice).

    Raises:
        ValueError: on an unknown variant, centring or normaliser, or a non-bool ``gradient``.
    """
    _check_choice(variant, CW_VARIANTS, "variant")
    knobs = VARIANT_KNOBS[variant]
    if centring is not None:
        _check_choice(centring, CENTRINGS, "centring")
        knobs = knobs._replace(centring=centring)
    if normaliser is not None:
        _check_choice(normaliser, NORMALISERS, "normaliser")
        knobs = knobs._replace(normaliser=normaliser)
    if gradient is not None:
        if not isinstance(gradient, bool):
            raise ValueError(f"gradient must be True, False or None, got {gradient!r}")
        knobs = knobs._replace(gradient=gradient)
    return knobs


RELEASED_SIGMA_EPS = 1e-8  # the authors' code adds this to sigma (spec method.md §2, `released`)
COV_QUANTILES = (1e-4, 1e-2, 0.4, 0.6, 0.99, 0.9999)
COV_QUANTILE_KEYS = tuple(f"cw/cov_q{q}" for q in ("0.0001", "0.01", "0.4", "0.6", "0.99", "0.9999"))
WEIGHT_KEYS = tuple(f"cw/weight_{s}" for s in ("mean", "std", "min", "max", "frac_below_0.5", "frac_above_2"))


# --------------------------------------------------------------------------------------------- checks


def _check_mask(mask: Tensor, shape: torch.Size, ref_name: str) -> None:
    """Raise ValueError unless ``mask`` has ``shape`` and holds only 0/1.

    The value check of a non-bool mask needs the values on the host, so it runs only for CPU tensors;
    on an accelerator it is skipped to avoid a host sync (TRL's completion mask is 0/1 by construction).
    """
    if not isinstance(mask, Tensor):
        raise ValueError(f"mask must be a torch.Tensor, got {type(mask).__name__}")
    if mask.shape != shape:
        raise ValueError(f"mask shape {tuple(mask.shape)} must equal {ref_name} shape {tuple(shape)}")
    if mask.dtype == torch.bool or mask.device.type != "cpu" or mask.numel() == 0:
        return
    if mask.is_floating_point() or mask.is_complex():
        ok = bool(((mask == 0) | (mask == 1)).all())
    else:  # an integer in [0, 1] is 0 or 1; one aminmax pass is ~15x cheaper than two comparisons
        lo, hi = mask.aminmax()
        ok = bool(lo >= 0) and bool(hi <= 1)
    if not ok:
        raise ValueError(f"mask must be bool or hold only 0/1 values (dtype {mask.dtype})")


def _check_2d(x: Tensor, name: str) -> None:
    if not isinstance(x, Tensor):
        raise ValueError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.ndim != 2:
        raise ValueError(f"{name} must be 2-D (B, T), got shape {tuple(x.shape)}")


def _check_inputs(logps: Tensor, advantages: Tensor, mask: Tensor, old_logps: Tensor | None = None) -> None:
    """Validate the shared ``(logps, advantages, mask[, old_logps])`` arguments."""
    _check_2d(logps, "logps")
    if not logps.is_floating_point():
        raise ValueError(f"logps must be a floating-point tensor, got dtype {logps.dtype}")
    if not isinstance(advantages, Tensor) or advantages.shape != logps.shape[:1]:
        shape = tuple(advantages.shape) if isinstance(advantages, Tensor) else type(advantages).__name__
        raise ValueError(f"advantages must have shape (B,) = ({logps.shape[0]},), got {shape}")
    if old_logps is not None and (not isinstance(old_logps, Tensor) or old_logps.shape != logps.shape):
        shape = tuple(old_logps.shape) if isinstance(old_logps, Tensor) else type(old_logps).__name__
        raise ValueError(f"old_logps shape {shape} must equal logps shape {tuple(logps.shape)}")
    _check_mask(mask, logps.shape, "logps")


def _check_choice(value: str, valid: tuple[str, ...], name: str) -> None:
    if value not in valid:
        raise ValueError(f"unknown {name} {value!r}; valid: {list(valid)}")


def _check_ratio(ratio: float, name: str) -> None:
    if not 0.0 <= ratio <= 1.0:
        raise ValueError(f"{name} must be in [0, 1], got {ratio}")


def _compute_dtype(x: Tensor) -> torch.dtype:
    """float64 stays float64 (gradcheck); everything else is computed in float32."""
    return torch.float64 if x.dtype == torch.float64 else torch.float32


# -------------------------------------------------------------------------------------------- helpers


def masked_mean(x: Tensor, mask: Tensor, dim: int | None = None) -> Tensor:
    """Mean of ``x`` over the positions where ``mask`` is 1; 0 where there is none.

    ``mean = sum(x * m) / max(sum(m), 1)``. Values of ``x`` at masked-out positions are ignored even if
    they are inf or NaN (selected with ``torch.where``, so they also receive zero gradient).

    Args:
        x: tensor of any shape, floating point.
        mask: bool or 0/1 tensor of the same shape.
        dim: reduce over this dimension; ``None`` reduces over all elements (0-dim result).

    Returns:
        The masked mean in ``x``'s dtype, 0 where no position is valid.
    """
    m = mask.bool()
    total = torch.where(m, x, torch.zeros((), dtype=x.dtype, device=x.device))
    count = m.sum() if dim is None else m.sum(dim)
    total = total.sum() if dim is None else total.sum(dim)
    return total / count.clamp_min(1).to(x.dtype)


class _Mask(NamedTuple):
    """A completion mask prepared once per call, with non-finite inputs dropped (see the module docstring)."""

    m: Tensor  # (B, T) bool, valid tokens whose log-prob and advantage are finite
    mf: Tensor  # (B, T) 0/1 in the compute dtype
    counts: Tensor  # (B,) such tokens per completion, compute dtype
    n: Tensor  # 0-dim, such tokens in the micro-batch, compute dtype
    rows: Tensor  # (B,) bool, completions whose advantage is finite


def _prepare_mask(mask: Tensor, logps: Tensor, advantages: Tensor, dtype: torch.dtype) -> _Mask:
    rows = torch.isfinite(advantages)  # (B,)
    m = torch.isfinite(logps).logical_and_(mask).logical_and_(rows[:, None])  # (B, T), one fresh buffer
    mf = m.view(torch.uint8).to(dtype)  # on CPU ~8x faster than bool -> float directly
    counts = mf.sum(1)
    return _Mask(m, mf, counts, counts.sum(), rows)


def _safe_sqrt(x: Tensor) -> Tensor:
    """``sqrt(x)`` with gradient 0 (not inf, hence no NaN downstream) at ``x = 0``."""
    pos = x > 0
    return torch.where(pos, torch.where(pos, x, torch.ones_like(x)).sqrt(), torch.zeros_like(x))


def _masked_pop_std(x: Tensor, m: Tensor) -> Tensor:
    """Population std of ``x`` over valid positions (0-dim, 0 if none), with a zero gradient at var = 0."""
    return _safe_sqrt(masked_mean((x - masked_mean(x, m)).square(), m))


def _nonzero(x: Tensor) -> Tensor:
    """``x`` where it is nonzero, else 1 (a safe denominator, with no inf in the autograd graph)."""
    return torch.where(x != 0, x, torch.ones_like(x))


def _shifted_mean(adv: Tensor, counts: Tensor) -> Tensor:
    """``sum(counts * adv) / max(sum(counts), 1)`` computed as ``adv[0] + mean(adv - adv[0])``.

    Equal advantages then give ``adv - mean = 0`` exactly (a plain float mean of equal values can be
    off by one ulp, which would turn c = 0 into rounding noise that the kernel rescales to O(1)).
    """
    if adv.numel() == 0:
        return adv.sum()
    ref = adv[0].detach()
    return ref + ((adv - ref) * counts).sum() / counts.sum().clamp_min(1)


def _select_count(ratio: float, n_valid: Tensor) -> Tensor:
    """``max(floor(ratio * N), 1)`` as a 0-dim int64 tensor (float64 product, like verl's Python int())."""
    return torch.floor(n_valid.to(torch.float64) * ratio).clamp_min(1).to(torch.int64)


# --------------------------------------------------------------------------------- covariance, weights


def _covariance(logps: Tensor, advantages: Tensor, mk: _Mask, centring: str) -> Tensor:
    """Token covariance on a prepared mask (see :func:`token_covariance`); 0 on padding."""
    dtype = mk.mf.dtype
    lp = torch.where(mk.m, logps.to(dtype), 0.0)  # padding values (even inf/NaN) never enter the maths
    adv = torch.where(mk.rows, advantages.to(dtype), 0.0)  # nor does a non-finite advantage
    if centring == "batch":
        mean_lp = lp.sum() / mk.n.clamp_min(1)  # 0-dim, over all valid tokens of the micro-batch
        mean_a = _shifted_mean(adv, mk.counts)  # token-weighted over valid tokens
    else:
        # (B, 1), per completion over its valid tokens
        mean_lp = (lp.sum(1) / mk.counts.clamp_min(1))[:, None]
        mean_a = _shifted_mean(adv, mk.rows.to(dtype))  # plain mean over the completions (finite A)
    d_lp = torch.addcmul(lp, mk.mf, -mean_lp)  # (B, T), lp - mean_lp on valid tokens, 0 on padding
    return d_lp * (adv - mean_a)[:, None]  # (B, T)


def token_covariance(logps: Tensor, advantages: Tensor, mask: Tensor, *, centring: str) -> Tensor:
    """Token covariance ``c[i,t] = (logp[i,t] - mean_logp) * (A[i] - mean_A)`` (spec method.md §2).

    ``centring="batch"`` (the ``described`` variant, and Cui et al.'s Clip-Cov/KL-Cov):
    ``mean_logp`` is the mean over all valid tokens of the micro-batch and ``mean_A`` the token-weighted
    mean ``sum_i n_i A[i] / N`` over the valid tokens (n_i = valid tokens of completion i), exactly
    verl's ``masked_mean(advantages, response_mask)`` with token-level advantages.

    ``centring="sequence"`` (the ``released`` variant): ``mean_logp[i]`` is the mean over the valid
    tokens of completion ``i`` and ``mean_A`` the plain mean of ``A`` over the ``B`` completions
    (a completion with no valid token still counts in ``mean_A``, as the spec's table reads).

    ``mean_A`` is computed as ``A[0] + mean(A - A[0])`` so that equal advantages give c = 0 exactly.

    Differs from verl's clip_cov/kl_cov: verl subtracts ``mean(logp.detach())`` from a non-detached
    ``logp``; here gradient flows through whatever the caller passes (detach first for Clip-Cov/KL-Cov,
    which only use ``c`` for selection). Padding gets 0, not ``-inf``.

    Args:
        logps: ``(B, T)`` float log-probabilities of the sampled tokens.
        advantages: ``(B,)`` advantages.
        mask: ``(B, T)`` bool or 0/1 completion mask.
        centring: ``"batch"`` or ``"sequence"``.

    Returns:
        ``(B, T)`` covariance in float32 (float64 for float64 ``logps``), 0 on padding.

    Raises:
        ValueError: on bad shapes, mask values or an unknown ``centring``.
    """
    _check_inputs(logps, advantages, mask)
    _check_choice(centring, CENTRINGS, "centring")
    return _token_covariance(logps, advantages, mask, centring)


def _token_covariance(logps: Tensor, advantages: Tensor, mask: Tensor, centring: str) -> Tensor:
    """:func:`token_covariance` on checked inputs."""
    return _covariance(
        logps, advantages, _prepare_mask(mask, logps, advantages, _compute_dtype(logps)), centring
    )


def _normalised_kernel(cov: Tensor, mk: _Mask, sigma: Tensor, z: Tensor | float) -> Tensor:
    """``w~ = Z * w / sum(w)`` with ``w = exp(-c^2 / (2 sigma^2)) * m``; 1 before normalising if sigma = 0.

    Computed as a masked softmax of ``-q = -c^2 / (2 sigma^2)``: subtracting the (detached) minimum of
    ``q`` over valid tokens changes nothing mathematically but guarantees ``sum(w) >= 1`` whenever a
    token is valid, so ``w~`` stays finite even where every raw ``w`` would underflow to 0/0. The
    exponent is floored at ``log(finfo.tiny) + 1`` (about -86 in float32): a token that far out gets
    ``w ~ 3e-38`` instead of underflowing, which keeps every valid weight > 0 and keeps ``exp`` off its
    ~10x slower underflow path. ``cov`` must be 0 on padding.
    """
    pos = sigma > 0
    k = torch.where(pos, 1 / (2 * torch.where(pos, sigma, torch.ones_like(sigma)).square()), 0.0)
    floor = math.log(torch.finfo(cov.dtype).tiny) + 1
    c2 = cov * cov  # (B, T), 0 on padding
    c2_min = torch.where(mk.m, c2.detach(), math.inf).amin()  # min of c^2 over valid tokens, inf if none
    c2_min = torch.where(torch.isfinite(c2_min), c2_min, 0.0)
    excess = torch.addcmul(c2, mk.mf, c2_min, value=-1)  # (B, T), c^2 - min c^2: >= 0, exactly 0 at the min
    w = (excess * -k).clamp_min_(floor).exp_() * mk.mf  # (B, T), in (0, 1] on valid tokens, 0 on padding
    return w * (z / _nonzero(w.sum()))  # sum(w) >= 1 if a token is valid (w = exp(0) at the min), else 0


def _masked_var(cov: Tensor, mk: _Mask) -> Tensor:
    """Population variance of ``cov`` over valid tokens (``cov`` is 0 on padding; 0 if none)."""
    n = mk.n.clamp_min(1)
    dev = torch.addcmul(cov, mk.mf, -cov.sum() / n)  # (B, T), c - mean(c), 0 on padding
    return torch.dot(dev.flatten(), dev.flatten()) / n


def _overflow_scale(cov: Tensor, mk: _Mask) -> Tensor:
    """0-dim, detached: ``max |c|`` over valid tokens when squaring ``c`` (or summing N squares) could
    overflow, else exactly 1. The kernel depends only on ``c / sigma``, so dividing ``c`` by it (and the
    released variant's ``sigma`` epsilon with it) changes no weight, but keeps ``c^2`` finite where a
    finite log-prob of -1e20 or an advantage of 1e30 would otherwise make every weight NaN."""
    lo, hi = torch.aminmax(cov.detach())  # cov is 0 on padding: no mask needed, no (B, T) temporary
    amax = torch.maximum(-lo, hi)
    limit = math.sqrt(torch.finfo(cov.dtype).max / max(mk.m.numel(), 1)) / 4
    return torch.where(amax > limit, amax, torch.ones_like(amax))


def _cw(
    logps: Tensor, advantages: Tensor, mask: Tensor, variant: str, knobs: CWKnobs
) -> tuple[Tensor, Tensor]:
    """Weights and the covariance they were computed from (see :func:`cw_weights`); inputs checked."""
    dtype = _compute_dtype(logps)
    if mask.numel() == 0:
        empty = torch.zeros(mask.shape, dtype=dtype, device=logps.device)
        return empty, empty
    mk = _prepare_mask(mask, logps, advantages, dtype)
    if not knobs.gradient:
        logps, advantages = logps.detach(), advantages.detach()
    cov = _covariance(logps, advantages, mk, knobs.centring)
    scale = _overflow_scale(cov, mk)
    cs = cov / scale  # exactly cov where nothing can overflow
    sigma = _safe_sqrt(_masked_var(cs, mk)) + (RELEASED_SIGMA_EPS / scale if variant == "released" else 0.0)
    z = mk.n if knobs.normaliser == "valid" else float(mask.numel())
    return _normalised_kernel(cs, mk, sigma, z), cov


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
    """Covariance-aware Gaussian-kernel advantage weights ``w~`` (spec method.md §2).

    ::

        c[i,t]  = (logp[i,t] - mean_logp) * (A[i] - mean_A)           # token_covariance
        sigma   = population std of {c[i,t] : m[i,t] = 1}            (+ 1e-8 for "released")
        w[i,t]  = exp(-c[i,t]^2 / (2 sigma^2)) * m[i,t]               (1 * m if sigma = 0)
        w~[i,t] = w[i,t] * Z / sum(w)

    The token's advantage becomes ``w~[i,t] * A[i]``.

    ``variant="described"``: ``centring="batch"`` (both means over all valid tokens of the micro-batch,
    ``mean_A`` token-weighted), ``Z = N`` so ``w~`` averages exactly 1 over valid tokens, and no
    gradient (``logps`` is detached first). If sigma = 0 every valid token gets ``w = 1``.

    ``variant="released"``: ``centring="sequence"`` (``mean_logp`` per completion over its valid tokens,
    ``mean_A`` the plain mean over completions), sigma + 1e-8, ``Z = B*T = mask.numel()`` (padding is
    counted, so the valid-token mean of ``w~`` is ``B*T/N >= 1``), and gradient flows through
    ``mean_logp``, ``c``, ``sigma`` and ``sum(w)``.

    Both: sigma is over valid tokens only; padding gets 0; a micro-batch with no valid token gets all
    zeros; a token whose log-prob or advantage is NaN or +-inf counts as padding (module docstring). The normalisation is done as a min-shifted softmax (identical where the direct formula is
    finite, finite where it would underflow to 0/0), and ``exp`` is floored at about ``e * finfo.tiny``,
    so a token more than ~13 sigma (float32) further out than the least extreme one gets a weight of
    ~1e-38 instead of exactly 0.

    Args:
        logps: ``(B, T)`` float log-probabilities of the sampled tokens under the current policy.
        advantages: ``(B,)`` group-normalised advantages.
        mask: ``(B, T)`` bool or 0/1 completion mask.
        variant: ``"released"`` or ``"described"``.
        centring, normaliser, gradient: override one of the variant's choices (:func:`resolve_knobs`;
            None keeps it): the study's one-knob ablation between the two variants.

    Returns:
        ``(B, T)`` weights ``w~`` in float32 (float64 for float64 ``logps``), 0 on padding.

    Raises:
        ValueError: on bad shapes, mask values or an unknown ``variant`` or knob value.
    """
    knobs = resolve_knobs(variant, centring, normaliser, gradient)
    _check_inputs(logps, advantages, mask)
    return _cw(logps, advantages, mask, variant, knobs)[0]


# ---------------------------------------------------------------------------- Clip-Cov and KL-Cov


def clip_cov_select(
    cov: Tensor,
    mask: Tensor,
    *,
    ratio: float,
    lb: float,
    ub: float,
    generator: torch.Generator,
    exclude: Tensor | None = None,
) -> Tensor:
    """Tokens whose policy loss Clip-Cov zeroes (Cui et al. 2025; spec method.md §3).

    Candidates are the valid, not excluded tokens with ``lb < c < ub``; ``max(floor(ratio * N), 1)`` of
    them (``N`` = valid tokens of the micro-batch) are picked uniformly at random, or all of them if
    there are fewer.

    Differs from verl's ``compute_policy_loss_clip_cov``: the draw is a seeded ``torch.randperm`` over
    all ``B*T`` positions (candidates are taken in that random order up to the count), not an unseeded
    ``randperm`` over the candidate list, so no ``.item()``/``nonzero`` host sync; for a given seed the
    picks therefore differ from verl's, the distribution (uniform subset) is the same.

    Args:
        cov: ``(B, T)`` token covariance (batch-centred, detached).
        mask: ``(B, T)`` bool or 0/1 completion mask.
        ratio: fraction r in [0, 1] of valid tokens to clip.
        lb: exclusive lower bound of the covariance band.
        ub: exclusive upper bound of the covariance band.
        generator: seeded ``torch.Generator`` (required: no unseeded draws); on ``cov``'s device or on
            the CPU (the permutation is then drawn on the CPU and copied to ``cov``'s device).
        exclude: optional ``(B, T)`` bool, tokens already clipped by the PPO rule; never picked.

    Returns:
        ``(B, T)`` bool, True on the selected tokens.
    """
    _check_2d(cov, "cov")
    _check_mask(mask, cov.shape, "cov")
    _check_ratio(ratio, "ratio")
    if exclude is not None and (not isinstance(exclude, Tensor) or exclude.shape != cov.shape):
        raise ValueError(f"exclude must be a bool tensor of shape {tuple(cov.shape)}")
    _check_generator(generator)
    return _clip_cov_select(cov, mask.bool(), ratio, lb, ub, generator, exclude)


def _check_generator(generator: torch.Generator | None) -> None:
    if not isinstance(generator, torch.Generator):
        raise ValueError("clip_cov_select needs a seeded torch.Generator (generator=None is not allowed)")


def _clip_cov_select(
    cov: Tensor,
    m: Tensor,
    ratio: float,
    lb: float,
    ub: float,
    generator: torch.Generator,
    exclude: Tensor | None,
) -> Tensor:
    """:func:`clip_cov_select` on checked inputs (``m`` bool)."""
    cand = m & (cov > lb) & (cov < ub)
    if exclude is not None:
        cand = cand & ~exclude.bool()
    flat = cand.flatten()
    perm = torch.randperm(flat.numel(), generator=generator, device=generator.device).to(cov.device)
    in_order = flat[perm]  # candidates in random order
    keep = in_order & (torch.cumsum(in_order, 0) <= _select_count(ratio, m.sum()))
    return torch.zeros_like(flat).index_put((perm,), keep).view(cov.shape)


def kl_cov_select(cov: Tensor, mask: Tensor, *, ratio: float) -> Tensor:
    """Top ``k = min(max(floor(ratio * N), 1), N)`` valid tokens by covariance (KL-Cov, spec method.md §3).

    Differs from verl's ``compute_policy_loss_kl_cov``: verl gathers the valid tokens to the CPU and
    calls ``topk`` with a data-dependent ``k``; here ``topk`` runs on the device with the static upper
    bound ``max(floor(ratio * B*T), 1)`` and the first ``k`` are kept, so nothing syncs. Ties at the
    cut are broken by ``torch.topk`` (implementation-defined, as in verl).

    Args:
        cov: ``(B, T)`` token covariance (batch-centred, detached).
        mask: ``(B, T)`` bool or 0/1 completion mask.
        ratio: fraction k in [0, 1] of valid tokens to penalise.

    Returns:
        ``(B, T)`` bool, True on the selected tokens (none if no token is valid).
    """
    _check_2d(cov, "cov")
    _check_mask(mask, cov.shape, "cov")
    _check_ratio(ratio, "ratio")
    return _kl_cov_select(cov, mask.bool(), ratio)


def _kl_cov_select(cov: Tensor, m: Tensor, ratio: float) -> Tensor:
    """:func:`kl_cov_select` on checked inputs (``m`` bool)."""
    n_max = min(max(math.floor(ratio * cov.numel()), 1), cov.numel())  # static: shapes only
    if n_max == 0:
        return torch.zeros_like(m)
    scores = torch.where(m, cov.detach(), torch.full((), -math.inf, dtype=cov.dtype, device=cov.device))
    idx = torch.topk(scores.flatten(), n_max).indices  # sorted, largest first
    n_valid = m.sum()
    keep = torch.arange(n_max, device=cov.device) < torch.minimum(_select_count(ratio, n_valid), n_valid)
    selected = torch.zeros(cov.numel(), dtype=torch.bool, device=cov.device).index_put((idx,), keep)
    return selected.view(cov.shape) & m


def kl_cov_penalty(logps: Tensor, old_logps: Tensor | None, selected: Tensor, *, coef: float) -> Tensor:
    """KL-Cov's extra per-token loss ``coef * |logp - logp_old|`` on selected tokens, 0 elsewhere.

    Same term as verl's ``ppo_kl_coef * abs_kl``. With ``old_logps`` None (on-policy) the difference is
    exactly 0, and so is the gradient (torch's ``|x|'`` at 0 is ``sign(0) = 0``).

    Args:
        logps: ``(B, T)`` current log-probabilities (gradient flows).
        old_logps: ``(B, T)`` sampling-policy log-probabilities, or None for ``logps.detach()``.
        selected: ``(B, T)`` bool from :func:`kl_cov_select`.
        coef: the coefficient beta_kl.

    Returns:
        ``(B, T)`` penalty in float32 (float64 for float64 ``logps``).
    """
    _check_2d(logps, "logps")
    if old_logps is not None and (not isinstance(old_logps, Tensor) or old_logps.shape != logps.shape):
        raise ValueError(f"old_logps must have shape {tuple(logps.shape)}")
    _check_mask(selected, logps.shape, "logps")
    return _kl_cov_penalty(logps, old_logps, selected, coef)


def _kl_cov_penalty(logps: Tensor, old_logps: Tensor | None, selected: Tensor, coef: float) -> Tensor:
    """:func:`kl_cov_penalty` on checked inputs."""
    dtype = _compute_dtype(logps)
    old = logps.detach() if old_logps is None else old_logps
    diff = (logps.to(dtype) - old.to(dtype)).abs()
    return torch.where(selected.bool(), coef * diff, torch.zeros((), dtype=dtype, device=diff.device))


# ---------------------------------------------------------------------------------------- diagnostics


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
    """Per-step covariance and weight statistics over valid tokens (spec method.md §4).

    Keys: ``cw/cov_mean``, ``cw/cov_std`` (population), ``cw/cov_abs_mean``, the quantiles
    ``cw/cov_q{0.0001,0.01,0.4,0.6,0.99,0.9999}`` (``torch.quantile``'s linear interpolation, computed
    by one masked sort so nothing syncs), ``cw/weight_mean``, ``cw/weight_std`` (population),
    ``cw/weight_min``, ``cw/weight_max``, ``cw/weight_frac_below_0.5``, ``cw/weight_frac_above_2``.
    Every statistic is over the valid tokens only; with no valid token every value is 0.0.

    Args:
        cov: ``(B, T)`` token covariance.
        weights: ``(B, T)`` advantage multipliers (``w~``).
        mask: ``(B, T)`` bool or 0/1 completion mask.

    Returns:
        dict of detached float32 0-dim tensors.
    """
    _check_2d(cov, "cov")
    _check_2d(weights, "weights")
    _check_mask(mask, cov.shape, "cov")
    if weights.shape != cov.shape:
        raise ValueError(f"weights shape {tuple(weights.shape)} must equal cov shape {tuple(cov.shape)}")
    return _covariance_diagnostics(cov, weights, mask.bool())


def _covariance_diagnostics(cov: Tensor, weights: Tensor, m: Tensor) -> dict[str, Tensor]:
    """:func:`covariance_diagnostics` on checked inputs (``m`` bool)."""
    c, w = cov.to(_compute_dtype(cov)), weights.to(_compute_dtype(weights))
    out = {
        "cw/cov_mean": masked_mean(c, m),
        "cw/cov_std": _masked_pop_std(c, m),
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
        "cw/weight_std": _masked_pop_std(w, m),
        "cw/weight_min": torch.where(any_valid, w_min, torch.zeros_like(w_min)),
        "cw/weight_max": torch.where(any_valid, w_max, torch.zeros_like(w_max)),
        "cw/weight_frac_below_0.5": masked_mean((w < 0.5).to(w.dtype), m),
        "cw/weight_frac_above_2": masked_mean((w > 2).to(w.dtype), m),
    }
    return {k: v.detach().to(torch.float32) for k, v in out.items()}


# ------------------------------------------------------------------------------------ method registry


@dataclass(frozen=True)
class MethodOptions:
    """Options every registered method receives. No defaults: they live once, in the TRL config.

    Attributes:
        cw_variant: ``"released"`` or ``"described"`` (see :func:`cw_weights`).
        clip_cov_ratio: Clip-Cov fraction r of valid tokens to clip.
        clip_cov_lb: Clip-Cov lower covariance bound (exclusive).
        clip_cov_ub: Clip-Cov upper covariance bound (exclusive).
        kl_cov_ratio: KL-Cov fraction k of valid tokens to penalise.
        kl_cov_coef: KL-Cov coefficient beta_kl.
        epsilon_low: PPO clip range below 1 (tokens with A < 0 and ratio < 1 - epsilon_low are clipped).
        epsilon_high: PPO clip range above 1 (tokens with A > 0 and ratio > 1 + epsilon_high are clipped).
        cw_centring, cw_normaliser, cw_weight_gradient: one-knob overrides of ``cw_variant``
            (:func:`resolve_knobs`); None keeps the variant's choice.
    """

    cw_variant: str
    clip_cov_ratio: float
    clip_cov_lb: float
    clip_cov_ub: float
    kl_cov_ratio: float
    kl_cov_coef: float
    epsilon_low: float
    epsilon_high: float
    cw_centring: str | None
    cw_normaliser: str | None
    cw_weight_gradient: bool | None

    @property
    def cw_knobs(self) -> CWKnobs:
        """The CW-GRPO weight's choices: ``cw_variant``'s, with the overrides applied (resolved, and so
        checked, once per options object; a bad value raises ValueError on every access)."""
        knobs = self.__dict__.get("_cw_knobs")
        if knobs is None:
            knobs = resolve_knobs(
                self.cw_variant, self.cw_centring, self.cw_normaliser, self.cw_weight_gradient
            )
            object.__setattr__(
                self, "_cw_knobs", knobs
            )  # a cache, not a field: frozen, eq and hash unchanged
        return knobs


@dataclass
class MethodOutput:
    """What a method returns to the trainer adapter.

    Attributes:
        multipliers: ``(B, T)`` float32; the token's advantage becomes ``A[i] * multipliers[i, t]``.
        penalty: ``(B, T)`` extra per-token loss added to the policy loss and aggregated like it (by
            the caller's ``loss_type``), or None.
        metrics: detached 0-dim tensors keyed ``cw/...``.
        cov, weights: the detached ``(B, T)`` covariance and CW-GRPO weights that the diagnostics
            describe (:func:`method_diagnostics`), when the method computed them on the way; None
            otherwise (the diagnostics then compute them once).
    """

    multipliers: Tensor
    penalty: Tensor | None
    metrics: dict[str, Tensor]
    cov: Tensor | None = None
    weights: Tensor | None = None


MethodFn = Callable[
    [Tensor, Tensor | None, Tensor, Tensor, MethodOptions, torch.Generator | None], MethodOutput
]
"""``(logps, old_logps, advantages, mask, opts, generator) -> MethodOutput``."""

METHODS: dict[str, MethodFn] = {}


def _check_options(opts: MethodOptions) -> None:
    if not isinstance(opts, MethodOptions):
        raise ValueError(f"opts must be a MethodOptions, got {type(opts).__name__}")
    _check_ratio(opts.clip_cov_ratio, "clip_cov_ratio")
    _check_ratio(opts.kl_cov_ratio, "kl_cov_ratio")
    _ = opts.cw_knobs  # resolved (and so checked) once per options object


def _checked(fn: MethodFn) -> MethodFn:
    """``fn`` behind the registry boundary: inputs and options are checked here, once per call."""

    def method(
        logps: Tensor,
        old_logps: Tensor | None,
        advantages: Tensor,
        mask: Tensor,
        opts: MethodOptions,
        generator: torch.Generator | None,
    ) -> MethodOutput:
        _check_inputs(logps, advantages, mask, old_logps)
        _check_options(opts)
        return fn(logps, old_logps, advantages, mask, opts, generator)

    method.__name__, method.__qualname__, method.__doc__ = fn.__name__, fn.__qualname__, fn.__doc__
    method.__wrapped__ = fn  # type: ignore[attr-defined]
    return method


def register_method(name: str) -> Callable[[MethodFn], MethodFn]:
    """Decorator registering a method under ``name``; the registered (and returned) function checks its
    inputs before ``fn`` runs, so ``fn`` itself need not. Raises ValueError if the name is taken."""

    def decorator(fn: MethodFn) -> MethodFn:
        if name in METHODS:
            raise ValueError(f"method {name!r} is already registered; known: {sorted(METHODS)}")
        METHODS[name] = _checked(fn)
        return METHODS[name]

    return decorator


def get_method(name: str) -> MethodFn:
    """The method registered under ``name``; unknown names raise ValueError listing the known ones."""
    if name not in METHODS:
        raise ValueError(f"unknown method {name!r}; known: {sorted(METHODS)}")
    return METHODS[name]


@torch.no_grad()
def method_diagnostics(
    logps: Tensor, advantages: Tensor, mask: Tensor, opts: MethodOptions, out: MethodOutput
) -> tuple[dict[str, Tensor], Tensor, Tensor]:
    """The step's diagnostics (spec method.md §4): ``(metrics, cov, weights)``, all detached.

    ``cov`` is the covariance of ``opts.cw_knobs.centring`` and ``weights`` the CW-GRPO weights for
    ``opts`` (for a method that does not reweight, the weights CW-GRPO would have assigned, for
    comparison in the figures). What ``out`` carries is reused; the rest costs one :func:`_cw` pass.
    ``metrics`` is :func:`covariance_diagnostics` followed by the method's own ``out.metrics``. Call it
    with the arguments the method was called with (already checked there).
    """
    cov, weights = out.cov, out.weights
    if cov is None or weights is None:
        w, c = _cw(logps.detach(), advantages.detach(), mask, opts.cw_variant, opts.cw_knobs)
        cov = c if cov is None else cov
        weights = w.float() if weights is None else weights
    metrics = {**_covariance_diagnostics(cov, weights, mask.bool()), **out.metrics}
    return metrics, cov, weights


def _batch_cov(logps: Tensor, advantages: Tensor, mask: Tensor) -> Tensor:
    """Cui et al.'s covariance: batch-centred, on detached values (selection only)."""
    return _token_covariance(logps.detach(), advantages.detach(), mask, "batch")


def _frac(selected: Tensor, m: Tensor) -> Tensor:
    return (selected.sum() / m.sum().clamp_min(1)).to(torch.float32)


def _ppo_clipped(
    logps: Tensor, old_logps: Tensor | None, advantages: Tensor, m: Tensor, opts: MethodOptions
) -> Tensor:
    """Valid tokens the PPO rule clips: ``(A > 0 and r > 1 + eps_high) or (A < 0 and r < 1 - eps_low)``.

    Same set as verl's ``clip_by_origin = (pg_losses2 > pg_losses1) & mask`` with ``r = exp(logp - old)``.
    """
    if old_logps is None:
        return torch.zeros_like(m)  # r = 1 exactly: nothing is clipped
    dtype = _compute_dtype(logps)
    ratio = torch.exp(logps.detach().to(dtype) - old_logps.detach().to(dtype))  # (B, T)
    adv = advantages.detach().to(dtype)[:, None]
    clipped = ((adv > 0) & (ratio > 1 + opts.epsilon_high)) | ((adv < 0) & (ratio < 1 - opts.epsilon_low))
    return clipped & m


@register_method("grpo")
def grpo(
    logps: Tensor,
    old_logps: Tensor | None,
    advantages: Tensor,
    mask: Tensor,
    opts: MethodOptions,
    generator: torch.Generator | None,
) -> MethodOutput:
    """Stock GRPO: multipliers exactly 1.0 everywhere (padding included; the caller masks padding).

    ``A * 1.0 == A`` bit for bit, so the loss is exactly TRL's GRPO loss. No metrics.
    """
    return MethodOutput(torch.ones(logps.shape, dtype=torch.float32, device=logps.device), None, {})


@register_method("cw_grpo")
def cw_grpo(
    logps: Tensor,
    old_logps: Tensor | None,
    advantages: Tensor,
    mask: Tensor,
    opts: MethodOptions,
    generator: torch.Generator | None,
) -> MethodOutput:
    """CW-GRPO: multipliers ``cw_weights(variant=opts.cw_variant)`` (spec method.md §2).

    With ``opts.cw_centring`` / ``cw_normaliser`` / ``cw_weight_gradient`` set, that knob of the variant
    is overridden (:func:`resolve_knobs`). No metrics of its own; returns the covariance the weights were
    computed from (``opts.cw_knobs.centring``) for :func:`method_diagnostics`. ``old_logps`` is unused.
    """
    weights, cov = _cw(logps, advantages, mask, opts.cw_variant, opts.cw_knobs)
    multipliers = weights.float()
    return MethodOutput(multipliers, None, {}, cov=cov.detach(), weights=multipliers.detach())


@register_method("clip_cov")
def clip_cov(
    logps: Tensor,
    old_logps: Tensor | None,
    advantages: Tensor,
    mask: Tensor,
    opts: MethodOptions,
    generator: torch.Generator | None,
) -> MethodOutput:
    """Clip-Cov: multiplier 0 on :func:`clip_cov_select` tokens, 1 elsewhere (spec method.md §3).

    Excludes the tokens the PPO rule already clipped. Differs from verl: verl multiplies the clipped
    PPO loss by the 0/1 mask; zeroing the advantage gives the same per-token loss and gradient when the
    caller applies PPO clipping. Only the policy-gradient term is zeroed; a KL-to-reference term, if
    any, is untouched (as in verl). Needs a seeded ``generator`` on the tokens' device (ValueError if
    None). Metrics: ``cw/frac_tokens_clipped`` (selected / valid tokens).
    """
    _check_generator(generator)
    m = mask.bool()
    cov = _batch_cov(logps, advantages, m)
    exclude = _ppo_clipped(logps, old_logps, advantages, m, opts)
    selected = _clip_cov_select(
        cov, m, opts.clip_cov_ratio, opts.clip_cov_lb, opts.clip_cov_ub, generator, exclude
    )
    multipliers = (~selected).to(torch.float32)
    return MethodOutput(multipliers, None, {"cw/frac_tokens_clipped": _frac(selected, m)})


@register_method("kl_cov")
def kl_cov(
    logps: Tensor,
    old_logps: Tensor | None,
    advantages: Tensor,
    mask: Tensor,
    opts: MethodOptions,
    generator: torch.Generator | None,
) -> MethodOutput:
    """KL-Cov: multipliers 1, penalty ``kl_cov_coef * |logp - old|`` on the top-k covariance tokens.

    Differs from verl: verl also turns PPO clipping off for every token; that is the caller's job here
    (this function cannot change how the caller clips). With ``old_logps`` None the penalty and its
    gradient are exactly 0 (spec method.md §3). Metrics: ``cw/frac_tokens_penalised`` (selected / valid
    tokens).
    """
    m = mask.bool()
    cov = _batch_cov(logps, advantages, m)
    selected = _kl_cov_select(cov, m, opts.kl_cov_ratio)
    penalty = _kl_cov_penalty(logps, old_logps, selected, opts.kl_cov_coef)
    ones = torch.ones(logps.shape, dtype=torch.float32, device=logps.device)
    return MethodOutput(ones, penalty, {"cw/frac_tokens_penalised": _frac(selected, m)})
