"""Token covariance, Gaussian-kernel advantage weights and the method registry.

Pure torch (nothing from TRL or transformers); shapes are ``(B, T)`` or ``(B,)`` and names follow TRL.
Statistics are in float32 (float64 stays float64, for ``gradcheck``), with no host-device sync. A valid
token whose log-prob is not finite, and every token of a completion whose advantage is not, counts as
padding, so one bad token never turns a micro-batch's weights into NaN.
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
