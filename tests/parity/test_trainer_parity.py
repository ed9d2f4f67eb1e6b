"""Parity of the TRL adapter with stock TRL 1.16.

With ``cw_method="grpo"`` the loss and every parameter's gradient of ``CWGRPOTrainer`` must equal
``GRPOTrainer``'s, for each loss aggregation. ``aggregate_like_trl`` (used for KL-Cov's penalty) must
reduce a per-token loss exactly like TRL does. Both are checked on one hand-built micro-batch, so no
generation runs.
"""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("trl")

from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import GRPOConfig, GRPOTrainer

from cwgrpo.trainer import CWGRPOConfig, CWGRPOTrainer
from cwgrpo.trainer.trl_loss import aggregate_like_trl

LOSS_TYPES = ["grpo", "sapo", "bnpo", "dr_grpo", "dapo", "cispo", "vespo", "luspo"]
B, P, T = 4, 5, 7


def _zero_reward(completions, **kwargs):
    return [0.0] * len(completions)


def _common(tmp_path, loss_type: str, beta: float) -> dict:
    return dict(
        output_dir=str(tmp_path),
        use_cpu=True,
        bf16=False,
        report_to="none",
        loss_type=loss_type,
        beta=beta,
        num_generations=2,
        per_device_train_batch_size=4,
        max_completion_length=T,
        learning_rate=1e-3,
        seed=0,
    )


def _trainer(cls, config, model_dir):
    from datasets import Dataset

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    data = Dataset.from_list([{"prompt": [{"role": "user", "content": "1+1"}]}] * 8)
    trainer = cls(
        model=model, args=config, train_dataset=data, reward_funcs=_zero_reward, processing_class=tokenizer
    )
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = 2  # exercise the accumulation normaliser
    return trainer


def _batch(vocab: int, beta: float) -> dict:
    gen = torch.Generator().manual_seed(1)
    completion_mask = torch.ones(B, T, dtype=torch.long)
    completion_mask[1, 4:] = 0
    completion_mask[3, 2:] = 0
    batch = {
        "prompt_ids": torch.randint(4, vocab, (B, P), generator=gen),
        "prompt_mask": torch.ones(B, P, dtype=torch.long),
        "completion_ids": torch.randint(4, vocab, (B, T), generator=gen),
        "completion_mask": completion_mask,
        "advantages": torch.tensor([1.0, -0.5, 0.25, -1.5]),
        "num_items_in_batch": completion_mask.sum(),
    }
    if beta:
        batch["ref_per_token_logps"] = -3.0 + 0.1 * torch.randn(B, T, generator=gen)
    return batch


def _loss_and_grads(trainer, batch):
    trainer.model.zero_grad()
    loss = trainer.compute_loss(trainer.model, dict(batch))
    loss.backward()
    grads = {n: p.grad.clone() for n, p in trainer.model.named_parameters() if p.grad is not None}
    return loss.detach(), grads


@pytest.mark.parametrize("beta", [0.0, 0.04])
@pytest.mark.parametrize("loss_type", LOSS_TYPES)
def test_grpo_method_matches_stock_trainer(tiny_model_dir, tmp_path, loss_type, beta):
    stock = _trainer(GRPOTrainer, GRPOConfig(**_common(tmp_path / "a", loss_type, beta)), tiny_model_dir)
    ours = _trainer(
        CWGRPOTrainer,
        CWGRPOConfig(**_common(tmp_path / "b", loss_type, beta), cw_method="grpo"),
        tiny_model_dir,
    )
    batch = _batch(stock.model.config.vocab_size, beta)
    loss_a, grads_a = _loss_and_grads(stock, batch)
    loss_b, grads_b = _loss_and_grads(ours, batch)
    torch.testing.assert_close(loss_b, loss_a, rtol=0, atol=0)
    assert grads_a.keys() == grads_b.keys() and len(grads_a) > 0
    for name in grads_a:
        torch.testing.assert_close(grads_b[name], grads_a[name], rtol=0, atol=0, msg=name)


def _loss_and_logp_grads(trainer, batch):
    """Loss, parameter gradients and the gradient of the loss with respect to each token's log-prob."""
    seen = []
    hook = trainer._get_per_token_logps_and_entropies

    def record(*args, **kwargs):
        logps, entropies, aux = hook(*args, **kwargs)
        logps.retain_grad()
        seen.append(logps)
        return logps, entropies, aux

    trainer._get_per_token_logps_and_entropies = record
    try:
        loss, grads = _loss_and_grads(trainer, batch)
    finally:
        del trainer._get_per_token_logps_and_entropies
    (logps,) = seen  # the loss's own forward pass, once
    return loss, grads, logps.grad


@pytest.mark.parametrize("loss_type", LOSS_TYPES)
def test_cw_grpo_changes_the_gradient_but_not_its_sign_structure(tiny_model_dir, tmp_path, loss_type):
    """The ``described`` weights w > 0 carry no gradient and scale each token's advantage, so the loss's
    gradient with respect to a token's log-prob is GRPO's times w: the same sign on every valid token,
    a different size, and so a different gradient of the parameters."""
    stock = _trainer(GRPOTrainer, GRPOConfig(**_common(tmp_path / "a", loss_type, 0.0)), tiny_model_dir)
    ours = _trainer(
        CWGRPOTrainer,
        CWGRPOConfig(**_common(tmp_path / "b", loss_type, 0.0), cw_method="cw_grpo", cw_variant="described"),
        tiny_model_dir,
    )
    batch = _batch(stock.model.config.vocab_size, 0.0)
    loss_a, grads_a, token_grad_a = _loss_and_logp_grads(stock, batch)
    loss_b, grads_b, token_grad_b = _loss_and_logp_grads(ours, batch)
    assert torch.isfinite(loss_b) and not torch.equal(loss_a, loss_b)
    valid = batch["completion_mask"].bool()
    assert bool((token_grad_a[valid] != 0).all())  # every advantage is nonzero: no sign is vacuous
    assert torch.equal(token_grad_b[valid].sign(), token_grad_a[valid].sign())
    assert bool((token_grad_b[~valid] == 0).all()) and bool((token_grad_a[~valid] == 0).all())
    assert not torch.allclose(token_grad_b[valid], token_grad_a[valid])
    assert any(not torch.equal(grads_a[name], grads_b[name]) for name in grads_a)
    assert any(k.startswith("cw/weight_mean") for k in ours._metrics["train"])


@pytest.mark.parametrize("loss_type", LOSS_TYPES)
def test_aggregate_like_trl_reduces_like_trl(tiny_model_dir, tmp_path, loss_type):
    """With zero advantages TRL's loss is exactly its reduction of beta * per-token KL: ours must agree."""
    beta = 0.04
    stock = _trainer(GRPOTrainer, GRPOConfig(**_common(tmp_path, loss_type, beta)), tiny_model_dir)
    batch = _batch(stock.model.config.vocab_size, beta)
    batch["advantages"] = torch.zeros(B)
    with torch.no_grad():
        trl_loss = stock.compute_loss(stock.model, dict(batch))
        input_ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)
        attention = torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1)
        logps, _, _ = stock._get_per_token_logps_and_entropies(stock.model, input_ids, attention, T)
        ref = batch["ref_per_token_logps"]
        per_token_kl = torch.exp(ref - logps) - (ref - logps) - 1
        if stock.args.use_bias_correction_kl:
            per_token_kl = per_token_kl * 1.0  # the on-policy ratio is exactly 1
        ours = aggregate_like_trl(
            beta * per_token_kl,
            batch["completion_mask"],
            loss_type=loss_type,
            training=True,
            gradient_accumulation_steps=2,
            max_completion_length=T,
            num_items_in_batch=batch["num_items_in_batch"],
            num_processes=1,
            steps_per_generation=stock.args.steps_per_generation,
        )
    torch.testing.assert_close(ours, trl_loss, rtol=1e-6, atol=1e-7)


def test_kl_cov_loss_is_unclipped_ratio_loss_plus_penalty_on_top_k(tiny_model_dir, tmp_path):
    """KL-Cov (spec §3): -A*ratio for every token (no PPO clip) + coef*|logp - logp_old| on the top-k."""
    from cwgrpo.weighting import kl_cov_select, token_covariance

    config = CWGRPOConfig(
        **_common(tmp_path, "grpo", 0.0), cw_method="kl_cov", num_iterations=2, kl_cov_ratio=0.2
    )
    trainer = _trainer(CWGRPOTrainer, config, tiny_model_dir)
    batch = _batch(trainer.model.config.vocab_size, 0.0)
    input_ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)
    attention = torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1)
    with torch.no_grad():
        logps, _, _ = GRPOTrainer._get_per_token_logps_and_entropies(
            trainer, trainer.model, input_ids, attention, T
        )
    old = logps + 0.5 * torch.randn(
        B, T, generator=torch.Generator().manual_seed(3)
    )  # ratios far outside 1 ± 0.2
    batch["old_per_token_logps"] = old
    loss = trainer.compute_loss(trainer.model, dict(batch)).detach()

    mask = batch["completion_mask"].float()
    adv = batch["advantages"]
    selected = kl_cov_select(token_covariance(logps, adv, mask, centring="batch"), mask, ratio=0.2)
    per_token = -adv[:, None] * torch.exp(logps - old) + selected * (logps - old).abs()
    expected = ((per_token * mask).sum(-1) / mask.sum(-1)).mean() / 2  # loss_type grpo, accumulation 2
    assert selected.sum() == int(0.2 * mask.sum())
    torch.testing.assert_close(loss, expected, rtol=1e-5, atol=1e-6)
