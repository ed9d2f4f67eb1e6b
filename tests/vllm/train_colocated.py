"""Run in vLLM's environment: `cwgrpo train` on the paper-1gpu preset's options, shrunk to the tiny model.

    python tests/vllm/train_colocated.py MODEL_DIR WORK_DIR OUT.json METHOD

METHOD (a key of the preset's ``methods``: grpo, cw_grpo) trains a few steps with TRL's colocated
vLLM engine (``vllm_mode: colocate``) on the CPU. Around every weight sync the script measures vLLM's
log-probabilities of one fixed sequence (``prompt_logprobs``) and the trainer model's own (a float32
forward pass), before and after the sync, and the completion lengths vLLM returned; OUT.json holds them.
One method per process: TRL builds one engine per trainer, with process-wide distributed state. vLLM's CPU build cannot sync without ``keep_cpu_linear_weights`` (tests/vllm/
cpu_linear_without_prepacking.py), applied here before any engine is built.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PRESET = REPO / "config" / "paper-1gpu.yaml"

# The preset's training options that a CPU and a tiny model cannot take, and the run's size.
SHRUNK = {
    "model_init_kwargs": {},  # float32 on the CPU, no flash-attention
    "bf16": False,
    "use_cpu": True,
    "gradient_checkpointing": False,
    "launcher": "none",  # this process trains (no accelerate, no DeepSpeed)
    "prompt_set": "tiny",
    # the random tiny model never earns the accuracy or format reward: all-zero rewards give zero advantages
    # and (at step 0, policy = reference) a zero gradient, so the weights would never move
    "reward_funcs": ["accuracy", "tests.vllm.train_colocated:text_hash_reward"],
    "reward_weights": [1.0, 1.0],
    "num_generations": 4,
    "per_device_train_batch_size": 4,  # one group per micro-batch, as the preset
    "gradient_accumulation_steps": 2,  # two prompts per step
    "max_prompt_length": 8,  # shorter than every prompt (9-21 tokens): cut for the loss, whole for vLLM
    "max_completion_length": 32,
    "vllm_max_model_length": 64,  # generation_kwargs {max_tokens: null}: the rest of this context
    "learning_rate": 1.0e-2,  # large, so each step moves the log-probs far beyond the tolerance
    "warmup_steps": 0,
    "max_steps": 3,  # syncs before the generations of steps 0, 1 and 2
    "save_steps": 3,
    "report_to": "none",
}


def text_hash_reward(completions, **kwargs) -> list[float]:
    """A reward that differs between distinct completions (a hash of the text, 0-7), deterministic."""
    import zlib

    from cwgrpo.grading.rewards import completion_text

    return [float(zlib.crc32(completion_text(c).encode()) % 8) for c in completions]


def fixed_sequence(tokenizer) -> list[int]:
    from cwgrpo.data.prompts import train_messages

    text = tokenizer.apply_chat_template(
        train_messages("tiny", "12+35-8"), tokenize=False, add_generation_prompt=True
    )
    return tokenizer(text + "12+35=47, 47-8=39. The answer is 39", add_special_tokens=False)["input_ids"]


def instrument(records: list[dict]) -> None:
    """Wrap TRL's colocated sync and generation to record log-probs around each sync and completion lengths."""
    import torch
    from trl.generation import vllm_generation
    from vllm import SamplingParams

    cls = vllm_generation.VLLMGeneration
    sync, generate = cls.sync_weights, cls.generate

    def vllm_logprobs(self, ids: list[int]) -> list[float]:
        params = SamplingParams(max_tokens=1, temperature=1.0, prompt_logprobs=0)
        out = self.llm.generate([{"prompt_token_ids": ids}], params, use_tqdm=False)[0]
        return [entry[token].logprob for token, entry in zip(ids[1:], out.prompt_logprobs[1:], strict=True)]

    def trainer_logprobs(self, ids: list[int]) -> list[float]:
        model, training = self.model, self.model.training
        model.eval()
        with torch.no_grad():
            logits = model(torch.tensor([ids], device=model.device)).logits[0, :-1].float()
        model.train(training)
        return logits.log_softmax(-1).gather(-1, torch.tensor(ids[1:])[:, None]).squeeze(-1).tolist()

    def recorded_sync(self):
        ids = fixed_sequence(self.processing_class)
        before = vllm_logprobs(self, ids)
        sync(self)
        after, trainer = vllm_logprobs(self, ids), trainer_logprobs(self, ids)
        records.append(
            {
                "before": max(abs(a - b) for a, b in zip(before, trainer, strict=True)),
                "after": max(abs(a - b) for a, b in zip(after, trainer, strict=True)),
                "tokens": len(ids) - 1,
                "vllm_dtype": str(self.llm.llm_engine.model_config.dtype),
            }
        )

    def recorded_generate(self, prompts, *args, **kwargs):
        out = generate(self, prompts, *args, **kwargs)
        eos = self.processing_class.eos_token_id
        records.append(
            {
                "prompt_lengths": [len(p) for p in out[0]],
                "completion_lengths": [len(c) for c in out[1]],
                "ends_with_eos": [bool(c) and c[-1] == eos for c in out[1]],
            }
        )
        return out

    cls.sync_weights, cls.generate = recorded_sync, recorded_generate


def main(model_dir: str, work_dir: str, out_path: str, method: str) -> None:
    import yaml

    from cwgrpo.cli import main as cwgrpo
    from cwgrpo.data.synthetic import generate_split
    from cwgrpo.io import write_jsonl
    from tests.vllm.cpu_linear_without_prepacking import keep_cpu_linear_weights

    keep_cpu_linear_weights()
    preset = yaml.safe_load(PRESET.read_text(encoding="utf-8"))
    work = Path(work_dir)
    write_jsonl(work / "train.jsonl", generate_split("syn_train")[:32])
    options = preset["train"] | preset["methods"][method] | SHRUNK
    config = work / f"{method}.yaml"
    config.write_text(yaml.safe_dump(options), encoding="utf-8")
    records: list[dict] = []
    instrument(records)
    args = ["train", "--model-dir", model_dir, "--train-data", str(work / "train.jsonl")]
    code = cwgrpo([*args, "--run-dir", str(work / method), "--config", str(config)])
    result = {"exit": code, "records": records, "options": options}
    Path(out_path).write_text(json.dumps(result), encoding="utf-8")


if __name__ == "__main__":  # vLLM's engine starts with spawn: the guard is required
    main(*sys.argv[1:])
