"""Behaviour of the released run (TRL 0.15.2 as vendored by the authors) reproduced on TRL 1.16.

Each test checks what the loss actually sees on a tiny model, not a config value: a value can match
while the behaviour does not (docs/fidelity.md lists every setting and where these tests guard it).

- one group per loss micro-batch (released: each device micro-step held one prompt's 12 completions);
- log-probs of unscaled logits while sampling at temperature 0.7 (released ``_get_per_token_logps``);
- prompt ids cut from the left to ``max_prompt_length`` for the loss, no prompt dropped;
- the 1.5B rollouts' doubled BOS (vLLM 0.7.2 tokenised the templated text with special tokens), the
  loss's single one.
"""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("trl")

from transformers import AutoModelForCausalLM, AutoTokenizer

from cwgrpo.trainer import CWGRPOConfig, CWGRPOTrainer
from tests.conftest import cpu_run_fields


def _reward(completions, **kwargs):
    """Spread inside each group (so advantages are not all zero) that varies with the completion."""
    return [float(len(c[0]["content"]) % 3) for c in completions]


def _config(tmp_path, **overrides) -> CWGRPOConfig:
    options = dict(max_completion_length=6, learning_rate=1e-3, cw_method="cw_grpo", cw_variant="released")
    return CWGRPOConfig(**{**cpu_run_fields(tmp_path), **options, **overrides})


def _trainer(model_dir, config, prompts=None):
    from datasets import Dataset

    torch.manual_seed(0)
    prompts = prompts or [f"{i}+{i + 1}=" for i in range(12)]
    data = Dataset.from_list([{"prompt": [{"role": "user", "content": p}]} for p in prompts])
    return CWGRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(model_dir),
        args=config,
        train_dataset=data,
        reward_funcs=_reward,
        processing_class=AutoTokenizer.from_pretrained(model_dir),
    )


def _record_micro_batches(trainer) -> list[dict]:
    """Wrap the reweighting hook: a copy of every loss micro-batch the method sees."""
    seen: list[dict] = []
    original = trainer._cw_reweight

    def record(inputs, logps):
        seen.append({k: v.detach().clone() for k, v in inputs.items() if isinstance(v, torch.Tensor)})
        return original(inputs, logps)

    trainer._cw_reweight = record
    return seen


# A paper-shaped geometry, scaled down: G completions per prompt, a per-device batch of G, several
# accumulation steps (paper: G 12, per-device 12, accumulation 4, 3 processes).
PAPER_SHAPED = dict(
    num_generations=4, per_device_train_batch_size=4, gradient_accumulation_steps=3, max_steps=2
)


def test_one_group_per_loss_micro_batch_as_released(tiny_model_dir, tmp_path):
    config = _config(tmp_path, **PAPER_SHAPED, steps_per_generation=1, cw_one_group_per_micro_batch=True)
    trainer = _trainer(tiny_model_dir, config)
    seen = _record_micro_batches(trainer)
    trainer.train()
    assert len(seen) == 2 * 3  # max_steps x accumulation
    for batch in seen:
        ids, mask = batch["prompt_ids"], batch["prompt_mask"]
        assert ids.size(0) == 4
        assert torch.equal(ids, ids[:1].expand_as(ids)) and torch.equal(mask, mask[:1].expand_as(mask))
        # one whole group: the group-normalised advantages sum to 0, so the weight's mean_A is 0
        assert abs(float(batch["advantages"].sum())) < 1e-5
    prompts = {tuple(b["prompt_ids"][0].tolist()) for b in seen}
    assert len(prompts) == 6  # every micro-batch a different prompt


def test_trl_default_geometry_mixes_groups(tiny_model_dir, tmp_path):
    """The control: TRL 1.16's default (steps_per_generation = accumulation) shuffles groups together."""
    trainer = _trainer(tiny_model_dir, _config(tmp_path, **PAPER_SHAPED))
    seen = _record_micro_batches(trainer)
    trainer.train()
    mixed = [
        b for b in seen if not torch.equal(b["prompt_ids"], b["prompt_ids"][:1].expand_as(b["prompt_ids"]))
    ]
    assert mixed, "TRL's default no longer mixes groups: revisit cw_one_group_per_micro_batch"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (dict(per_device_train_batch_size=8, steps_per_generation=1), "per_device_train_batch_size (8)"),
        (dict(per_device_train_batch_size=4), "steps_per_generation must be 1, got 3"),
    ],
)
def test_one_group_geometry_is_checked_before_any_model_loads(tmp_path, overrides, message):
    options = {**PAPER_SHAPED, **overrides, "cw_one_group_per_micro_batch": True}
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        _config(tmp_path, **options)


def _sampled_ids(trainer, length: int = 10) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(1)
    vocab = trainer.model.config.vocab_size
    ids = torch.randint(3, vocab, (3, length), generator=gen)
    return ids, torch.ones_like(ids)


def _plain_logps(model, ids: torch.Tensor, keep: int, temperature: float) -> torch.Tensor:
    """log_softmax of the model's logits / temperature at the last ``keep`` sampled tokens (no TRL code)."""
    with torch.no_grad():
        logits = model(input_ids=ids).logits[:, :-1] / temperature
    logps = torch.log_softmax(logits.float(), dim=-1).gather(-1, ids[:, 1:, None]).squeeze(-1)
    return logps[:, -keep:]


@pytest.mark.parametrize(("logprob_temperature", "expected_temperature"), [(1.0, 1.0), (None, 0.7)])
def test_loss_logps_are_of_the_requested_temperature(
    tiny_model_dir, tmp_path, logprob_temperature, expected_temperature
):
    """Released: sample at 0.7, score unscaled logits. TRL 1.16 (None): score logits / 0.7. Policy and
    reference model alike; the difference between the two is large, so the test tells them apart."""
    config = _config(
        tmp_path,
        temperature=0.7,
        beta=0.04,
        num_generations=2,
        per_device_train_batch_size=2,
        max_steps=1,
        cw_logprob_temperature=logprob_temperature,
    )
    trainer = _trainer(tiny_model_dir, config)
    ids, mask = _sampled_ids(trainer)
    keep = 6
    for model in (trainer.model, trainer.ref_model):
        policy = model is trainer.model  # TRL's reference head computes no entropy
        with torch.no_grad():
            logps, entropy, _ = trainer._get_per_token_logps_and_entropies(
                model, ids, mask, keep, compute_entropy=policy
            )
        expected = _plain_logps(model, ids, keep, expected_temperature)
        other = _plain_logps(model, ids, keep, 0.7 if expected_temperature == 1.0 else 1.0)
        torch.testing.assert_close(logps, expected, atol=1e-5, rtol=1e-5)
        assert (logps - other).abs().max() > 1e-2
        if not policy:
            continue
        with torch.no_grad():
            logits = model(input_ids=ids).logits[:, :-1][:, -keep:] / expected_temperature
        plain_entropy = torch.distributions.Categorical(logits=logits.float()).entropy()
        torch.testing.assert_close(entropy, plain_entropy, atol=1e-4, rtol=1e-4)


def test_generation_keeps_the_sampling_temperature(tiny_model_dir, tmp_path):
    """Only the scoring changes: the rollouts are still sampled at `temperature`."""
    config = _config(
        tmp_path,
        temperature=0.7,
        num_generations=2,
        per_device_train_batch_size=2,
        max_steps=1,
        cw_logprob_temperature=1.0,
    )
    trainer = _trainer(tiny_model_dir, config)
    assert trainer.generation_config.temperature == 0.7


def test_long_prompts_are_cut_from_the_left_not_dropped(tiny_model_dir, tmp_path):
    """Released: ``prompt_ids[:, -max_prompt_length:]`` for the loss; every prompt trains."""
    long_prompt = "1+2+3+4+5+6+7+8+9+10+11+12="
    prompts = [long_prompt, "1+1="] * 2
    config = _config(
        tmp_path,
        num_generations=2,
        per_device_train_batch_size=2,
        max_steps=2,
        steps_per_generation=1,
        cw_one_group_per_micro_batch=True,
        max_prompt_length=8,
        gradient_accumulation_steps=2,
    )
    trainer = _trainer(tiny_model_dir, config, prompts=prompts)
    tokenizer = trainer.processing_class
    full = tokenizer.apply_chat_template(
        [{"role": "user", "content": long_prompt}], add_generation_prompt=True, tokenize=True
    )
    full = full if isinstance(full, list) else full["input_ids"]  # transformers 5: a BatchEncoding
    assert len(full) > 8
    seen = _record_micro_batches(trainer)
    trainer.train()
    assert len(seen) == 4
    widths = [b["prompt_mask"].sum(1).max().item() for b in seen]
    assert max(widths) == 8
    cut = [b["prompt_ids"][0][b["prompt_mask"][0].bool()].tolist() for b in seen]
    assert list(full[-8:]) in cut


def test_prompt_order_is_the_released_samplers(tiny_model_dir, tmp_path):
    """With no prompt dropped, TRL 1.16's sampler visits the prompts in the released order: the vendored
    TRL 0.15.2 ``RepeatRandomSampler`` (grpo_trainer.py:82) yields ``randperm(n, seed)``, each index
    ``num_generations`` times in a row."""
    config = _config(tmp_path, **PAPER_SHAPED, steps_per_generation=1, cw_one_group_per_micro_batch=True)
    trainer = _trainer(tiny_model_dir, config)
    ours = list(trainer._get_train_sampler())
    n = len(trainer.train_dataset)
    generator = torch.Generator().manual_seed(config.seed)
    released = [
        i for i in torch.randperm(n, generator=generator).tolist() for _ in range(config.num_generations)
    ]
    assert ours == released


def test_covariance_sample_skips_groups_with_equal_rewards(tiny_model_dir, tmp_path):
    """One group per micro-batch: a group whose rewards are all equal has c = 0 everywhere; the step's
    sample is the first micro-batch with a nonzero covariance, or its last micro-batch if none has one."""
    config = _config(tmp_path, **PAPER_SHAPED, steps_per_generation=1, cw_one_group_per_micro_batch=True)
    trainer = _trainer(tiny_model_dir, config)
    trainer.current_gradient_accumulation_steps = 3
    mask = torch.ones(4, 5)
    zero, nonzero = torch.zeros(4, 5), torch.zeros(4, 5).index_fill_(1, torch.tensor([2]), 0.5)

    def ask(step: int, micro: int, cov: torch.Tensor) -> bool:
        trainer.state.global_step, trainer._cw_micro_step = step - 1, micro
        return trainer._cw_should_sample(cov, mask)

    assert [ask(1, 1, zero), ask(1, 2, nonzero), ask(1, 3, nonzero)] == [False, True, False]
    assert [ask(2, 1, zero), ask(2, 2, zero), ask(2, 3, zero)] == [False, False, False]  # not a sampled step
    step = config.save_steps  # the next sampled step: no micro-batch has a covariance, the last one is kept
    assert [ask(step, 1, zero), ask(step, 2, zero), ask(step, 3, zero)] == [False, False, True]


@pytest.mark.parametrize("option", [True, False])
def test_rollouts_see_the_released_doubled_bos_and_the_loss_one(tiny_model_dir, tmp_path, option):
    """With an R1-Distill-like tokenizer (it adds a BOS, its chat template emits one):
    ``cw_rollout_add_special_tokens`` generates after two BOS, as the released vLLM rollouts did; the loss
    and reference log-probs keep one, as released; without the option both see one."""
    import shutil

    from cwgrpo.models.tiny import build_tokenizer

    model_dir = tmp_path / "r1-like"
    shutil.copytree(tiny_model_dir, model_dir)
    build_tokenizer(add_bos=True).save_pretrained(model_dir)
    config = _config(tmp_path, num_generations=2, per_device_train_batch_size=2, max_steps=1,
                     cw_rollout_add_special_tokens=option)  # fmt: skip
    trainer = _trainer(model_dir, config, prompts=["1+2=", "3+4="])
    tokenizer = trainer.processing_class
    bos, user = tokenizer.bos_token_id, tokenizer.convert_tokens_to_ids("<|user|>")
    rollouts = []
    generate = trainer.model.generate

    def record(input_ids, attention_mask, **kwargs):
        rollouts.extend(ids[m.bool()].tolist() for ids, m in zip(input_ids, attention_mask, strict=True))
        return generate(input_ids=input_ids, attention_mask=attention_mask, **kwargs)

    trainer.model.generate = record
    seen = _record_micro_batches(trainer)
    trainer.train()
    loss_prompts = [
        ids[m.bool()].tolist() for b in seen for ids, m in zip(b["prompt_ids"], b["prompt_mask"], strict=True)
    ]
    assert rollouts and loss_prompts
    assert all(p[:2] == [bos, user] and p.count(bos) == 1 for p in loss_prompts)
    assert all(r == ([bos] if option else []) + p for r, p in zip(rollouts, loss_prompts, strict=True))
