"""The method registry: a method is one function ``(MethodInputs, MethodOptions) -> MethodOutput``.

Adding a method is that function and ``@register_method("name")``; everything else reads
:data:`METHODS`. Inputs and options are checked where they are built, so a method need not.
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
    """Options every registered method receives: ``CWOptions``' fields and the PPO clip range the trainer
    applies; ``cw_knobs`` None (built by hand): resolved and checked here."""

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
    """One loss micro-batch as a method sees it (names follow TRL; ``old_logps`` None means on-policy)."""

    logps: Tensor
    old_logps: Tensor | None
    advantages: Tensor
    mask: Tensor
    generator: torch.Generator | None = None

    def __post_init__(self) -> None:
        check_inputs(self.logps, self.advantages, self.mask, self.old_logps)


@dataclass
class MethodOutput:
    """What a method returns: ``multipliers`` of the advantages, an extra per-token ``penalty`` (or None),
    ``cw/...`` metrics, and the ``cov`` and ``weights`` it computed on the way (else None)."""

    multipliers: Tensor
    penalty: Tensor | None
    metrics: dict[str, Tensor]
    cov: Tensor | None = None
    weights: Tensor | None = None


MethodFn = Callable[[MethodInputs, MethodOptions], MethodOutput]

METHODS: dict[str, MethodFn] = {}
UNCLIPPED: set[str] = set()  # methods under which the trainer turns TRL's PPO ratio clip off


def register_method(name: str, *, ppo_clip: bool = True) -> Callable[[MethodFn], MethodFn]:
    """Register ``fn`` as ``name``; ``ppo_clip=False``: the trainer turns the PPO ratio clip off (KL-Cov)."""

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
