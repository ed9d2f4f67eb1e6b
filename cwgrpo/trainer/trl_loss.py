"""TRL 1.16's loss types and their reductions of a per-token loss, mirrored for the KL-Cov penalty."""

from __future__ import annotations

import torch

# Every loss TRL 1.16's `_compute_loss` knows; `aggregate_like_trl` mirrors each one's normaliser, and
# tests/parity checks both the `grpo` method's bit-identity with stock TRL and that reduction for each.
TRL_LOSS_TYPES = ("grpo", "sapo", "bnpo", "dr_grpo", "dapo", "cispo", "vespo", "luspo")


def aggregate_like_trl(
    per_token: torch.Tensor,
    mask: torch.Tensor,
    *,
    loss_type: str,
    training: bool,
    gradient_accumulation_steps: int,
    max_completion_length: int | None,
    num_items_in_batch: torch.Tensor | None,
    num_processes: int,
    steps_per_generation: int,
) -> torch.Tensor:
    """Reduce a (B, T) per-token loss to a scalar exactly as TRL 1.16's ``_compute_loss`` reduces its own."""
    mask = mask.to(per_token.dtype)
    accumulation = gradient_accumulation_steps if training else 1.0
    if loss_type in ("grpo", "sapo"):
        return ((per_token * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).mean() / accumulation
    if loss_type == "bnpo":
        return (per_token * mask).sum() / mask.sum().clamp(min=1.0) / accumulation
    if loss_type == "dr_grpo":
        return (per_token * mask).sum() / (per_token.size(0) * max_completion_length) / accumulation
    if loss_type in ("dapo", "cispo", "vespo"):
        normaliser = num_items_in_batch.clamp(min=1.0) / num_processes
        if training:
            normaliser = normaliser * gradient_accumulation_steps / steps_per_generation
        return (per_token * mask).sum() / normaliser
    if loss_type == "luspo":
        return (per_token * mask).sum(-1).mean() / accumulation
    raise ValueError(f"no aggregation for loss_type={loss_type!r}; supported: {list(TRL_LOSS_TYPES)}")
