"""cwgrpo.trainer.grpo.fused_head_temperature: while TRL's ``__init__`` runs, the fused LM heads it adds
score the loss's log-probs at ``cw_logprob_temperature`` (None: TRL's own, the sampling temperature);
afterwards TRL's function is its own again. (The trainer's policy and reference log-probs: tests/parity.)"""

from __future__ import annotations

import pytest
import torch

from cwgrpo.models.tiny import build_model, build_tokenizer
from cwgrpo.trainer.grpo import fused_head_temperature

IDS = torch.tensor([[1, 5, 9, 12, 7, 3]])


@pytest.mark.parametrize(("temperature", "scored_at"), [(1.0, 1.0), (0.5, 0.5), (None, 0.7)])
def test_the_head_added_inside_scores_at_the_requested_temperature(temperature, scored_at):
    from trl.trainer import grpo_trainer, utils

    model = build_model("small", len(build_tokenizer()), seed=0)
    with torch.no_grad():
        logits = model(input_ids=IDS).logits[:, :-1]
    with fused_head_temperature(temperature):
        grpo_trainer.add_fused_lm_head(model, temperature=0.7)  # as TRL calls it: the sampling temperature
    assert grpo_trainer.add_fused_lm_head is utils.add_fused_lm_head
    with torch.no_grad():
        log_probs = model(input_ids=IDS, labels=IDS, fused_lm_head=True).log_probs
    expected = torch.log_softmax(logits / scored_at, dim=-1).gather(-1, IDS[:, 1:, None]).squeeze(-1)
    torch.testing.assert_close(log_probs, expected)


def test_trls_function_is_restored_when_init_fails():
    from trl.trainer import grpo_trainer, utils

    with pytest.raises(RuntimeError, match="init failed"), fused_head_temperature(1.0):
        assert grpo_trainer.add_fused_lm_head is not utils.add_fused_lm_head
        raise RuntimeError("init failed")
    assert grpo_trainer.add_fused_lm_head is utils.add_fused_lm_head
