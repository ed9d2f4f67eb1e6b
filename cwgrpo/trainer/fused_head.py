"""The temperature of TRL 1.16's fused LM head, set for the loss's log-probs (``cw_logprob_temperature``)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def fused_head_temperature(temperature: float | None) -> Iterator[None]:
    """While TRL's ``__init__`` runs, build its fused LM heads with ``temperature`` (None: TRL's own).

    TRL 1.16 computes every log-prob and entropy of the loss through a fused LM head whose temperature is
    fixed when ``GRPOTrainer.__init__`` calls ``add_fused_lm_head(model, temperature=args.temperature)``
    (policy and reference model alike); generation is unaffected. Swapping the function TRL's module
    looks up, only for the duration of ``__init__``, changes that one argument and nothing else.
    """
    if temperature is None:
        yield
        return
    from trl.trainer import grpo_trainer

    original = grpo_trainer.add_fused_lm_head

    def with_temperature(model, **kwargs: Any):  # TRL passes every option by keyword
        return original(model, **{**kwargs, "temperature": float(temperature)})

    grpo_trainer.add_fused_lm_head = with_temperature
    try:
        yield
    finally:
        grpo_trainer.add_fused_lm_head = original
