"""Token covariance, Gaussian-kernel advantage weights and the method registry.

Pure torch (nothing from TRL or transformers), so it can be tested and benchmarked on its own; the TRL
adapter calls :func:`get_method`. Shapes are ``(B, T)`` (``B`` completions of the micro-batch, ``T``
padded completion length) or ``(B,)``; names follow TRL; ``old_logps`` None means on-policy.

Statistics are computed in float32 (float64 inputs stay float64, for ``gradcheck``), with one code path
with or without autograd and no host-device sync. A valid token whose log-prob is not finite, and every
token of a completion whose advantage is not, is treated as padding (covariance 0, weight 0, in no
statistic), so one bad token never turns a micro-batch's weights into NaN.
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
