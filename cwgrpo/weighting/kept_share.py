"""How much of each outcome's push the CW kernel keeps, per GRPO group: which side of the kernel a run is on.

With binary rewards and group-normalised advantages, |A| is largest for a group's rarer outcome (1 success
of 8: A = +2.47 for it, -0.35 for each failure); the covariance scales with |A|, so the kernel shrinks the
rare outcome's tokens and the normaliser hands their weight to the majority. A completion's push under
TRL's per-completion token mean is ``A[i] * wbar[i]`` (``wbar``: its mean weight over valid tokens; GRPO's
is ``A[i]``), so an outcome's kept share is ``sum(A * wbar) / sum(A)`` over its completions, and a group's
``sum(A * wbar)`` is what CW-GRPO adds to GRPO's zero.
"""

from __future__ import annotations

import torch
from torch import Tensor

KEPT_SHARE_COLUMNS = ("successes", "kept_positive", "kept_negative", "push_sum")


def group_kept_shares(advantages: Tensor, weights: Tensor, mask: Tensor, group_size: int) -> Tensor | None:
    """``(groups, 4)`` float32 rows ``KEPT_SHARE_COLUMNS`` for each run of ``group_size`` consecutive
    completions (TRL lays a group out so): its count of completions with A > 0, the positive and the
    negative outcome's kept share (NaN where the group has no such completion) and its ``sum(A * wbar)``.
    None where the micro-batch does not hold whole groups."""
    if group_size < 1 or advantages.shape[0] == 0 or advantages.shape[0] % group_size:
        return None
    m = mask.to(torch.float32)
    wbar = (weights.detach().float() * m).sum(1) / m.sum(1).clamp(min=1.0)
    a = advantages.detach().float().reshape(-1, group_size)
    push = a * wbar.reshape(-1, group_size)

    def kept(side: Tensor) -> Tensor:
        total = (a * side).sum(1)
        present = side.any(1)
        return torch.where(present, (push * side).sum(1) / torch.where(present, total, 1.0), torch.nan)

    return torch.stack([(a > 0).sum(1).float(), kept(a > 0), kept(a < 0), push.sum(1)], dim=1)


def kept_share_metrics(rows: Tensor, group_size: int) -> dict[str, Tensor]:
    """``cw/`` metrics of one micro-batch's groups (``group_kept_shares``), as 0-dim tensors: the means
    over its mixed groups (some but not all successes) of the successes, the two kept shares and the push
    sum, and per success count k the two kept shares (``cw/kept_positive_k{k}``). NaN where no group
    qualifies: the caller leaves those out of the step's means."""
    k = rows[:, 0]
    mixed = (k > 0) & (k < group_size)

    def mean(values: Tensor, where: Tensor) -> Tensor:
        ok = where & torch.isfinite(values)  # a group with a non-finite advantage or weight says nothing
        n = ok.sum()
        return torch.where(n > 0, torch.where(ok, values, 0.0).sum() / n.clamp(min=1), torch.nan)

    out = {f"cw/group_{name}": mean(rows[:, i], mixed) for i, name in enumerate(KEPT_SHARE_COLUMNS)}
    for successes in range(1, group_size):
        at = k == successes
        out[f"cw/kept_positive_k{successes}"] = mean(rows[:, 1], at)
        out[f"cw/kept_negative_k{successes}"] = mean(rows[:, 2], at)
    return out
