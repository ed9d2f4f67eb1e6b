"""Checks on a real pretrained model (SmolLM2-135M-Instruct: ChatML template, pad = EOS = ``<|im_end|>``).

One training step per log-prob temperature records what the trainer really used (the loss's micro-batch and
the log-probs it differentiated); each test then checks one property of those tensors against the model's
own tokenizer and a fresh forward pass:

- the prompts are the model's own chat template, token for token;
- a completion stops at the model's EOS, and its mask covers the tokens up to that EOS and nothing after;
- the pad token (equal to EOS here) is never taken for EOS: ``<|im_end|>`` inside a prompt stays unmasked,
  left padding is masked, and the completion mask keeps the EOS that ends the answer;
- the loss's log-probs equal a fresh, unpadded forward pass's on the same tokens, at ``cw_logprob_temperature``
  1.0 (the released run) and at TRL's default (the sampling temperature).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

pytestmark = pytest.mark.slow

# Two prompts of different lengths, so that the micro-batch holds left padding; short answers, so that most
# completions end with EOS within max_completion_length.
PROBLEMS = ["Reply with one word: is 7 larger than 3?", "Say hello."]
SAMPLING_TEMPERATURE = 0.7


def _train_one_step(model_dir: Path, run_dir: Path, logprob_temperature: float | None) -> dict:
    """Run one CW-GRPO step; return the loss's inputs, the log-probs it used and the model, as recorded."""
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from cwgrpo.data.prompts import train_messages
    from cwgrpo.grading.rewards import get_reward
    from cwgrpo.trainer import CWGRPOConfig, CWGRPOTrainer

    seen: dict = {}

    class Recording(CWGRPOTrainer):
        def _compute_loss(self, model, inputs):
            seen.setdefault("inputs", {k: v for k, v in inputs.items() if torch.is_tensor(v)})
            return super()._compute_loss(model, inputs)

        def _get_per_token_logps_and_entropies(
            self, model, input_ids, attention_mask, logits_to_keep, *a, **kw
        ):
            logps, entropies, aux = super()._get_per_token_logps_and_entropies(
                model, input_ids, attention_mask, logits_to_keep, *a, **kw
            )
            if "inputs" in seen and "logps" not in seen:  # the first call from the loss
                seen["logps"] = logps.detach().clone()
                seen["state"] = {k: v.detach().clone() for k, v in model.state_dict().items()}
            return logps, entropies, aux

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    dataset = Dataset.from_list([{"prompt": train_messages("tiny", p), "answer": "yes"} for p in PROBLEMS])
    config = CWGRPOConfig(
        output_dir=str(run_dir),
        report_to="none",
        use_cpu=True,
        bf16=False,
        gradient_checkpointing=False,
        learning_rate=1e-6,
        beta=0.0,
        loss_type="grpo",
        temperature=SAMPLING_TEMPERATURE,
        num_generations=2,
        per_device_train_batch_size=4,  # both prompts in one micro-batch: left padding in the prompt
        steps_per_generation=1,
        gradient_accumulation_steps=1,
        max_completion_length=16,
        max_steps=1,
        save_strategy="no",
        logging_steps=1,
        seed=0,
        cw_logprob_temperature=logprob_temperature,
        cw_sample_every=-1,
    )
    trainer = Recording(
        model=AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32),
        args=config,
        train_dataset=dataset,
        reward_funcs=[get_reward("format")],
        processing_class=tokenizer,
    )
    trainer.train()
    return {**seen, "tokenizer": tokenizer, "model": trainer.model}


@pytest.fixture(scope="module", params=[1.0, None], ids=["logprob_t1", "trl_default"])
def recorded(request, real_model_dir, tmp_path_factory):
    out = _train_one_step(real_model_dir, tmp_path_factory.mktemp("real-step"), request.param)
    out["logprob_temperature"] = request.param or SAMPLING_TEMPERATURE
    return out


def _rows(recorded):
    """Per row: (prompt ids, prompt mask, completion ids, completion mask) as lists."""
    inp = recorded["inputs"]
    return [
        (p.tolist(), pm.tolist(), c.tolist(), cm.tolist())
        for p, pm, c, cm in zip(
            inp["prompt_ids"], inp["prompt_mask"], inp["completion_ids"], inp["completion_mask"], strict=True
        )
    ]


def test_model_folder_is_plain_float_model_with_chatml(real_model_dir):
    import json

    config = json.loads((real_model_dir / "config.json").read_text())
    assert "quantization_config" not in config  # rebuilt: loads without the GGUF file
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(real_model_dir)
    assert tok.eos_token == tok.pad_token == "<|im_end|>" and tok.eos_token_id == tok.pad_token_id
    generation = json.loads((real_model_dir / "generation_config.json").read_text())
    assert generation["eos_token_id"] == tok.eos_token_id


def test_prompts_are_the_models_own_chat_template(recorded):
    from cwgrpo.data.prompts import train_messages

    tok = recorded["tokenizer"]
    expected = {
        tuple(
            tok.apply_chat_template(
                train_messages("tiny", p), add_generation_prompt=True, tokenize=True, return_dict=False
            )
        )
        for p in PROBLEMS
    }
    used = {tuple(t for t, m in zip(p, pm, strict=True) if m) for p, pm, _, _ in _rows(recorded)}
    assert used == expected
    text = tok.decode(next(iter(expected)))
    assert text.startswith("<|im_start|>system\n") and text.endswith("<|im_start|>assistant\n")


def test_completion_stops_at_eos_and_mask_ends_there(recorded):
    eos = recorded["tokenizer"].eos_token_id
    stopped = 0
    for _, _, ids, mask in _rows(recorded):
        if eos in ids:
            end = ids.index(eos)
            stopped += 1
            assert mask[: end + 1] == [1] * (end + 1)  # the answer and its EOS are trained on
            assert not any(mask[end + 1 :])  # nothing after the first EOS
        else:
            assert all(mask)  # cut at max_completion_length: every token counts
    assert stopped >= 1, "no completion ended with EOS: the check would be vacuous"


def test_pad_equal_to_eos_is_not_taken_for_eos(recorded):
    tok = recorded["tokenizer"]
    eos = tok.eos_token_id
    assert tok.pad_token_id == eos
    lengths = set()
    for prompt, pmask, _, _ in _rows(recorded):
        real = [t for t, m in zip(prompt, pmask, strict=True) if m]
        lengths.add(len(real))
        assert real.count(eos) == 2  # the system and user turns' <|im_end|> stay in the prompt
        first = pmask.index(1)
        assert not any(pmask[:first]) and all(pmask[first:])  # left padding only, masked
        assert all(t == tok.pad_token_id for t in prompt[:first])
    assert len(lengths) == 2, "both prompt lengths in one micro-batch: padding was exercised"


def test_trainer_logprobs_equal_a_fresh_unpadded_forward(recorded):
    """The loss's log-probs against each row scored alone, without padding, by the same weights."""
    model, temperature = recorded["model"], recorded["logprob_temperature"]
    model.load_state_dict(recorded["state"])  # the weights at the moment of the loss (before the update)
    model.eval()
    logps = recorded["logps"]
    worst = 0.0
    with torch.no_grad():
        for i, (prompt, pmask, ids, mask) in enumerate(_rows(recorded)):
            p = [t for t, m in zip(prompt, pmask, strict=True) if m]
            c = [t for t, m in zip(ids, mask, strict=True) if m]
            seq = torch.tensor([p + c])
            logits = model(input_ids=seq).logits[0, len(p) - 1 : -1].float() / temperature
            fresh = torch.log_softmax(logits, dim=-1).gather(-1, torch.tensor(c)[:, None])[:, 0]
            used = logps[i][torch.tensor(mask, dtype=torch.bool)]
            worst = max(worst, (fresh - used).abs().max().item())
    assert worst < 1e-3, f"trainer log-probs differ from a fresh forward by up to {worst:.2e} nats"
