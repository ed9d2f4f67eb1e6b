"""The released run's per-step entropy and KL statistics.

The authors' TRL 0.15.2 averages each completion's per-token values over its own tokens, then averages
the completions; TRL 1.16 logs one token-weighted mean over the whole batch (``entropy``, ``kl``), which
weights long completions more. Both are logged; the paper's figures and claims use these.
"""

from __future__ import annotations

import torch


def per_completion_means(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Each row's mean of ``values`` over its valid tokens, shape (B,); a row with no valid token is 0."""
    mask = mask.to(values.dtype)
    return (values * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)


def k3_kl(logps: torch.Tensor, ref_logps: torch.Tensor) -> torch.Tensor:
    """Per-token k3 estimate of KL(policy || reference), as the released loss computes it (no correction)."""
    log_ratio = ref_logps - logps
    return torch.exp(log_ratio) - log_ratio - 1
