"""The method registry: a method is one function ``(MethodInputs, MethodOptions) -> MethodOutput``.

Adding a method is that function and ``@register_method("name")``: the trainer (``cw_method``), the
CLI's help, the workflow's parse-time check and the report read :data:`METHODS`. Inputs and options
are checked where they are built (:class:`MethodInputs`, :class:`MethodOptions`), so a method need not.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import Tensor

from cwgrpo.weighting.kernel import CWKnobs, resolve_knobs
from cwgrpo.weighting.masks import check_inputs, check_ratio


@dataclass(frozen=True)
class MethodOptions:
    """Options every registered method receives: ``CWOptions``' fields of the same names (their help and
    defaults live there), and TRL's PPO clip range as the trainer applies it. ``cw_knobs`` None (built by
    hand): resolved here, and the options checked; the trainer passes them resolved from checked options.
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
    cw_knobs: CWKnobs | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.cw_knobs is not None:
            return
        check_ratio(self.clip_cov_ratio, "clip_cov_ratio")
        check_ratio(self.kl_cov_ratio, "kl_cov_ratio")
        knobs = resolve_knobs(self.cw_variant, self.cw_centring, self.cw_normaliser, self.cw_weight_gradient)
        object.__setattr__(self, "cw_knobs", knobs)


@dataclass(frozen=True)
class MethodInputs:
    """One loss micro-batch as a method sees it (shapes ``(B, T)`` or ``(B,)``; names follow TRL).

    Attributes:
        logps: log-probability of each sampled token under the current policy (gradient flows).
        old_logps: the same under the policy that sampled, or None meaning on-policy (``logps.detach()``).
        advantages: ``(B,)`` group-normalised advantage of each completion.
        mask: completion mask, bool or 0/1.
        generator: a seeded ``torch.Generator`` for the method's random draws (Clip-Cov's), or None.
    """

    logps: Tensor
    old_logps: Tensor | None
    advantages: Tensor
    mask: Tensor
    generator: torch.Generator | None = None

    def __post_init__(self) -> None:
        check_inputs(self.logps, self.advantages, self.mask, self.old_logps)


@dataclass
class MethodOutput:
    """What a method returns to the trainer adapter.

    Attributes:
        multipliers: ``(B, T)`` float32; the token's advantage becomes ``A[i] * multipliers[i, t]``.
        penalty: ``(B, T)`` extra per-token loss added to the policy loss and aggregated like it (by
            the caller's ``loss_type``), or None.
        metrics: detached 0-dim tensors keyed ``cw/...``.
        cov, weights: the detached ``(B, T)`` covariance and CW-GRPO weights that the diagnostics
            describe (:func:`~cwgrpo.weighting.methods.method_diagnostics`), when the method computed them
            on the way; None otherwise (the diagnostics then compute them once).
    """

    multipliers: Tensor
    penalty: Tensor | None
    metrics: dict[str, Tensor]
    cov: Tensor | None = None
    weights: Tensor | None = None


MethodFn = Callable[[MethodInputs, MethodOptions], MethodOutput]

METHODS: dict[str, MethodFn] = {}
UNCLIPPED: set[str] = set()  # methods under which the trainer turns TRL's PPO ratio clip off


def register_method(name: str, *, ppo_clip: bool = True) -> Callable[[MethodFn], MethodFn]:
    """Decorator registering ``fn`` under ``name`` (and returning it unchanged); ``ppo_clip=False``: the
    trainer applies no PPO ratio clip to any token while this method runs (KL-Cov's rule).
    """

    def decorator(fn: MethodFn) -> MethodFn:
        if name in METHODS:
            raise ValueError(f"method {name!r} is already registered; known: {sorted(METHODS)}")
        METHODS[name] = fn
        if not ppo_clip:
            UNCLIPPED.add(name)
        return fn

    return decorator


def get_method(name: str) -> MethodFn:
    """The method registered under ``name``; unknown names raise ValueError listing the known ones."""
    if name not in METHODS:
        raise ValueError(f"unknown method {name!r}; known: {sorted(METHODS)}")
    return METHODS[name]
