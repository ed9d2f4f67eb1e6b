"""Token covariance, Gaussian-kernel advantage weights and the method registry.

Pure torch: this package imports nothing from TRL or transformers, so it can be tested and benchmarked
on its own; the TRL adapter calls :func:`get_method` and applies the returned multipliers and penalty.
Modules: :mod:`~cwgrpo.weighting.masks` (input checks, masked statistics), :mod:`~.covariance` (token
covariance, Clip-Cov / KL-Cov selections, diagnostics), :mod:`~.kernel` (the CW-GRPO weights and their
two variants), :mod:`~.registry` (a method's inputs, options and output; :data:`METHODS`) and
:mod:`~.methods` (the four registered methods).

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

Numerics: statistics are computed in float32 (float16/bfloat16 inputs are cast up; float64 inputs stay
float64 so that ``gradcheck`` works). One code path, with or without autograd, and no host-device sync.

Non-finite inputs: a valid token whose log-prob is NaN or +-inf, and every token of a completion whose
advantage is, is treated as padding by :func:`token_covariance` and :func:`cw_weights` (and so by the
methods): it enters no statistic (means, sigma, the ``described`` normaliser N) and gets covariance 0
and weight 0, while every other token gets the value it would get without it. So one bad token never
turns a whole micro-batch's weights into NaN; raising instead would need a host sync. (TRL's loss on
such a token is NaN or inf whatever its weight: that is the trainer's signal, not this package's.)
"""

from cwgrpo.weighting.covariance import (
    COV_QUANTILE_KEYS,
    clip_cov_select,
    covariance_diagnostics,
    kl_cov_penalty,
    kl_cov_select,
    token_covariance,
)
from cwgrpo.weighting.kernel import (
    CW_VARIANTS,
    RELEASED_SIGMA_EPS,
    VARIANT_KNOBS,
    CWKnobs,
    cw_weights,
    cw_weights_and_covariance,
    resolve_knobs,
    variant_knobs,
)
from cwgrpo.weighting.masks import masked_mean
from cwgrpo.weighting.methods import method_diagnostics
from cwgrpo.weighting.registry import (
    METHODS,
    UNCLIPPED,
    MethodFn,
    MethodInputs,
    MethodOptions,
    MethodOutput,
    get_method,
    register_method,
)

__all__ = [
    "COV_QUANTILE_KEYS",
    "CW_VARIANTS",
    "METHODS",
    "RELEASED_SIGMA_EPS",
    "UNCLIPPED",
    "VARIANT_KNOBS",
    "CWKnobs",
    "MethodFn",
    "MethodInputs",
    "MethodOptions",
    "MethodOutput",
    "clip_cov_select",
    "covariance_diagnostics",
    "cw_weights",
    "cw_weights_and_covariance",
    "get_method",
    "kl_cov_penalty",
    "kl_cov_select",
    "masked_mean",
    "method_diagnostics",
    "register_method",
    "resolve_knobs",
    "token_covariance",
    "variant_knobs",
]
