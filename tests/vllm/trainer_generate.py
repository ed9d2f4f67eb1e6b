"""Run in vLLM's environment (tests/vllm/test_server.py): the trainer's own generation step against a
running ``trl vllm-serve``, with a preset's training options; print each completion's lengths as JSON.

Argument: a JSON file {options, model_dir, run_dir, prompts}. The server's ports come from the
environment, as the launcher gives them to its training processes (cwgrpo.launch.vllm_server.apply_endpoints).
The weight sync is skipped: TRL pushes weights to the server over NCCL, which a CPU cannot run.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def skip_nccl_weight_sync() -> None:
    """Test-only: TRL's server mode opens an NCCL group and broadcasts the weights before generating; on
    a CPU neither can run. Generation itself is untouched."""
    from trl.generation.vllm_client import VLLMClient
    from trl.generation.vllm_generation import VLLMGeneration

    VLLMClient.init_communicator = lambda self, device=None: None
    VLLMGeneration.sync_weights = lambda self: None


def main(spec_path: str) -> None:
    from datasets import Dataset
    from transformers import AutoModelForCausalLM

    from cwgrpo.launch.vllm_server import apply_endpoints
    from cwgrpo.models.tiny import load_tokenizer
    from cwgrpo.train.options import build_train_config
    from cwgrpo.trainer import CWGRPOTrainer

    spec = json.loads(Path(spec_path).read_text())
    skip_nccl_weight_sync()
    config = build_train_config(spec["options"], Path(spec["run_dir"])).trl
    apply_endpoints(config, os.environ)
    tokenizer = load_tokenizer(spec["model_dir"])
    trainer = CWGRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(spec["model_dir"]),
        args=config,
        train_dataset=Dataset.from_list([{"prompt": p} for p in spec["prompts"]]),
        reward_funcs=[lambda completions, **_: [0.0] * len(completions)],
        processing_class=tokenizer,
    )
    trainer.model.train()  # the training step's generation (num_generations per prompt)
    # TRL's batch: each prompt once per completion, as the 3 training processes' gather hands it to rank 0
    batch = [p for p in spec["prompts"] for _ in range(config.num_generations)]
    prompt_ids, completion_ids, *_ = trainer._generate(batch)
    rows = [
        {"prompt": len(p), "completion": len(c), "eos": bool(c) and c[-1] == tokenizer.eos_token_id}
        for p, c in zip(prompt_ids, completion_ids, strict=True)
    ]
    print(json.dumps(rows))


if __name__ == "__main__":
    main(sys.argv[1])
