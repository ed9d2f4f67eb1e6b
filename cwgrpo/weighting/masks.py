"""Input checks and masked statistics shared by the weighting modules."""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor


def check_mask(mask: Tensor, shape: torch.Size, ref_name: str) -> None:
    """Raise ValueError unless ``mask`` has ``shape`` and, on the CPU only (no host sync), holds only 0/1."""
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


def check_2d(x: Tensor, name: str) -> None:
    if not isinstance(x, Tensor):
        raise ValueError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.ndim != 2:
        raise ValueError(f"{name} must be 2-D (B, T), got shape {tuple(x.shape)}")


def check_inputs(logps: Tensor, advantages: Tensor, mask: Tensor, old_logps: Tensor | None = None) -> None:
    """Validate the shared ``(logps, advantages, mask[, old_logps])`` arguments."""
    check_2d(logps, "logps")
    if not logps.is_floating_point():
        raise ValueError(f"logps must be a floating-point tensor, got dtype {logps.dtype}")
    if not isinstance(advantages, Tensor) or advantages.shape != logps.shape[:1]:
        shape = tuple(advantages.shape) if isinstance(advantages, Tensor) else type(advantages).__name__
        raise ValueError(f"advantages must have shape (B,) = ({logps.shape[0]},), got {shape}")
    if old_logps is not None and (not isinstance(old_logps, Tensor) or old_logps.shape != logps.shape):
        shape = tuple(old_logps.shape) if isinstance(old_logps, Tensor) else type(old_logps).__name__
        raise ValueError(f"old_logps shape {shape} must equal logps shape {tuple(logps.shape)}")
    check_mask(mask, logps.shape, "logps")


def check_choice(value: str, valid: tuple[str, ...], name: str) -> None:
    if value not in valid:
        raise ValueError(f"unknown {name} {value!r}; valid: {list(valid)}")


def check_ratio(ratio: float, name: str) -> None:
    """A share of the valid tokens must be in (0, 1] (0 would still select one token)."""
    if not 0.0 < ratio <= 1.0:
        raise ValueError(f"{name}={ratio!r}: must be in (0, 1]")


def compute_dtype(x: Tensor) -> torch.dtype:
    """float64 stays float64 (gradcheck); everything else is computed in float32."""
    return torch.float64 if x.dtype == torch.float64 else torch.float32


def masked_mean(x: Tensor, mask: Tensor, dim: int | None = None) -> Tensor:
    """Mean of ``x`` where ``mask`` is 1 (0 with none), ignoring even inf or NaN values elsewhere."""
    m = mask.bool()
    total = torch.where(m, x, torch.zeros((), dtype=x.dtype, device=x.device))
    count = m.sum() if dim is None else m.sum(dim)
    total = total.sum() if dim is None else total.sum(dim)
    return total / count.clamp_min(1).to(x.dtype)


class ValidTokens(NamedTuple):
    """A completion mask prepared once per call, with non-finite inputs dropped (see the package docstring)."""

    valid: Tensor  # (B, T) bool, valid tokens whose log-prob and advantage are finite
    valid_float: Tensor  # (B, T) the same as 0/1 in the compute dtype
    per_completion: Tensor  # (B,) such tokens per completion, compute dtype
    total: Tensor  # 0-dim, such tokens in the micro-batch, compute dtype
    finite_advantage: Tensor  # (B,) bool, completions whose advantage is finite


def valid_tokens(mask: Tensor, logps: Tensor, advantages: Tensor, dtype: torch.dtype) -> ValidTokens:
    finite_advantage = torch.isfinite(advantages)  # (B,)
    # (B, T), one fresh buffer
    valid = torch.isfinite(logps).logical_and_(mask).logical_and_(finite_advantage[:, None])
    valid_float = valid.view(torch.uint8).to(dtype)  # on CPU ~8x faster than bool -> float directly
    per_completion = valid_float.sum(1)
    return ValidTokens(valid, valid_float, per_completion, per_completion.sum(), finite_advantage)


def safe_sqrt(x: Tensor) -> Tensor:
    """``sqrt(x)`` with gradient 0 (not inf, hence no NaN downstream) at ``x = 0``."""
    pos = x > 0
    return torch.where(pos, torch.where(pos, x, torch.ones_like(x)).sqrt(), torch.zeros_like(x))


def masked_pop_std(x: Tensor, m: Tensor) -> Tensor:
    """Population std of ``x`` over valid positions (0-dim, 0 if none), with a zero gradient at var = 0."""
    return safe_sqrt(masked_mean((x - masked_mean(x, m)).square(), m))


def nonzero_or_one(x: Tensor) -> Tensor:
    """``x`` where it is nonzero, else 1 (a safe denominator, with no inf in the autograd graph)."""
    return torch.where(x != 0, x, torch.ones_like(x))


def shifted_mean(adv: Tensor, counts: Tensor) -> Tensor:
    """``sum(counts * adv) / max(sum(counts), 1)`` as ``adv[0] + mean(adv - adv[0])``: equal advantages give
    exactly 0 deviation (one ulp of noise would become O(1) weights after rescaling)."""
    if adv.numel() == 0:
        return adv.sum()
    ref = adv[0].detach()
    return ref + ((adv - ref) * counts).sum() / counts.sum().clamp_min(1)


def select_count(ratio: float, n_valid: Tensor) -> Tensor:
    """``max(floor(ratio * N), 1)`` as a 0-dim int64 tensor (float64 product, like verl's Python int())."""
    return torch.floor(n_valid.to(torch.float64) * ratio).clamp_min(1).to(torch.int64)
