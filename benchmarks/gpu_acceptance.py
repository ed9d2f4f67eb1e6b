"""GPU acceptance: the paper's generation paths and one paper-shaped training step, on one GPU, in one command.

For a first hour on a GPU box (and for us whenever a GPU is lent). Run from the repository root in the
GPU training environment (envs/train.yaml: CUDA torch, vLLM 0.31, TRL 1.16)::

    python benchmarks/gpu_acceptance.py                 # writes benchmarks/results/gpu_acceptance.json

What it runs (about 10 minutes on one large GPU; estimate, never run on a GPU here):

- the model: a randomly initialised model of DeepSeek-R1-Distill-Qwen-1.5B's architecture
  (``ARCHS``; no download) over the tiny tokenizer, bf16, flash-attention 2 if
  ``flash_attn`` is installed; sampling is restricted to the tokenizer's ids and ignores EOS, so every
  completion must run to the end of its context (512 prompt + 4096 completion tokens by default);
- colocated path (``paper-1gpu``: TRL's in-process vLLM engine, ``vllm_gpu_memory_utilization`` 0.3): one
  full training step (generation, weight sync, loss, optimiser) of GRPO and one of CW-GRPO, each in a
  process of its own (one engine per process), with the preset's training options;
- server path (``paper``: ``trl vllm-serve`` started as ``cwgrpo.launch.launcher`` starts it, with the paper's
  engine flags, ``--gpu_memory_utilization`` lowered to ``--server-memory`` because it shares the one
  GPU): TRL's client as the trainer uses it (``cwgrpo.generation.context_budget``), the paper's generation settings,
  one generation batch of G = 12;
- weight push (``sync``, 2 GPUs or more: NCCL cannot join two processes on one GPU, and no CPU backend
  exists): the server on GPU 1, this process as the trainer on GPU 0, as the paper preset's fourth GPU
  and its training processes; the weights are changed here and pushed as TRL's trainer pushes them
  (``update_named_param`` over NCCL), and the server's greedy completion of a prompt must change; on one
  GPU the JSON says it was not run;
- checks: every completion reaches its budget (the rest of the context, capped by max_completion_length);
  the JSON holds peak GPU memory, step times and the CW-GRPO / GRPO step-time ratio.

``--arch tiny`` with small ``--prompt-tokens``/``--completion-tokens``, ``--model-dir`` and ``--server-url``
run the server path on CPU against a running server (tests/vllm/test_server.py does so); the colocated
path needs a GPU (vLLM's CPU build cannot take TRL's weight sync).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "benchmarks")]

import yaml  # noqa: E402
from bench_common import command_line  # noqa: E402

from cwgrpo.generation.context_budget import completion_budget  # noqa: E402

GROUP = 12  # the paper's G: one prompt's completions per generation batch
# The paper's 1.5B architecture (DeepSeek-R1-Distill-Qwen-1.5B's config) and a small stand-in for CPU.
ARCHS = {
    "qwen2-1.5b": dict(
        hidden_size=1536, num_hidden_layers=28, num_attention_heads=12, num_key_value_heads=2,
        intermediate_size=8960, vocab_size=151936, max_position_embeddings=131072, rope_theta=10000.0,
        tie_word_embeddings=False,
    ),
    "tiny": dict(
        hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        intermediate_size=128, vocab_size=512, max_position_embeddings=4096, tie_word_embeddings=False,
    ),
}  # fmt: skip


def preset_train(name: str) -> dict[str, Any]:
    return yaml.safe_load((REPO / "config" / f"{name}.yaml").read_text())["train"]


def sampling_kwargs(vocab: int) -> dict[str, Any]:
    """The preset's generation_kwargs (max_tokens null), plus: no early EOS, and only ids the tokenizer
    knows (the random model's vocabulary is the real model's, larger than the tiny tokenizer's)."""
    return {"max_tokens": None, "ignore_eos": True, "allowed_token_ids": list(range(vocab))}


def build_model(arch: str, out: Path, cuda: bool) -> Path:
    """The tiny tokenizer, then a randomly initialised model of ``arch`` over it."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from cwgrpo.models.tiny import save_tiny

    save_tiny(out, "small", seed=0)
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(Qwen2Config(**ARCHS[arch]))
    model.to(torch.bfloat16 if cuda else torch.float32).save_pretrained(out)
    return out


def prompt_text(tokenizer: Any, tokens: int) -> tuple[str, int]:
    """A prompt of about ``tokens`` tokens, and its exact length as the tokenizer counts it."""
    text = " a" * (tokens // 2) + ("b" if tokens % 2 else "")
    return text, len(tokenizer(text, add_special_tokens=False)["input_ids"])


def check_lengths(prompt_lengths: list[int], lengths: list[int], context: int, cap: int) -> dict[str, Any]:
    """Each completion against its budget (the rest of the context, capped by ``cap``)."""
    budgets = [completion_budget(p, context, cap) for p in prompt_lengths]
    return {
        "completion_lengths": sorted(set(lengths)),
        "budgets": sorted(set(budgets)),
        "all_reach_budget": lengths == budgets,
    }


# -- colocated path: one training step per method, each in its own process ---------------------------------
def colocated_step(method: str, model_dir: Path, args: argparse.Namespace, out: Path) -> dict[str, Any]:
    """One full training step of ``method`` with the paper-1gpu preset's options (this process)."""
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM

    from cwgrpo.models.tiny import load_tokenizer
    from cwgrpo.train.options import build_train_config
    from cwgrpo.trainer import CWGRPOTrainer

    tokenizer = load_tokenizer(model_dir)
    text, prompt_len = prompt_text(tokenizer, args.prompt_tokens)
    context = args.prompt_tokens + args.completion_tokens
    attention = "flash_attention_2" if importlib.util.find_spec("flash_attn") else "sdpa"
    options = {
        **preset_train("paper-1gpu"),
        "cw_method": method,
        "max_steps": 1,
        "save_strategy": "no",
        "max_completion_length": args.completion_tokens,
        "vllm_max_model_length": context,
        "generation_kwargs": sampling_kwargs(len(tokenizer)),
        "model_init_kwargs": {"dtype": "bfloat16", "attn_implementation": attention},
        "gradient_accumulation_steps": 1,
    }
    config = build_train_config(options, out / method).trl
    trainer = CWGRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(model_dir, **config.model_init_kwargs),
        args=config,
        train_dataset=Dataset.from_list([{"prompt": text}] * GROUP),
        reward_funcs=[lambda completions, **_: [float(i % 2) for i in range(len(completions))]],
        processing_class=tokenizer,
    )
    torch.cuda.synchronize()
    start = time.perf_counter()
    trainer.train()
    torch.cuda.synchronize()
    logged = next(row for row in trainer.state.log_history if "completions/min_length" in row)
    lengths = [int(logged["completions/min_length"]), int(logged["completions/max_length"])]
    return {
        "step_s": time.perf_counter() - start,
        "peak_memory_gib": torch.cuda.max_memory_allocated() / 2**30,
        "attention": attention,
        **check_lengths([prompt_len] * 2, lengths, context, args.completion_tokens),
    }


def colocated(model_dir: Path, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    results = {}
    sizes = [f"--prompt-tokens={args.prompt_tokens}", f"--completion-tokens={args.completion_tokens}"]
    for method in args.methods:
        part = tmp / f"colocated-{method}.json"
        command = [sys.executable, __file__, "--one", method, f"--model-dir={model_dir}", f"--out={part}"]
        done = subprocess.run([*command, *sizes], check=False)
        results[method] = json.loads(part.read_text()) if done.returncode == 0 else {"exit": done.returncode}
    if all("step_s" in results.get(m, {}) for m in ("grpo", "cw_grpo")):
        results["ratio_cw_grpo_over_grpo"] = results["cw_grpo"]["step_s"] / results["grpo"]["step_s"]
    return results


# -- server path: the launcher's server, TRL's client as the trainer uses it -------------------------------
def start_server(
    stack: contextlib.ExitStack, model_dir: Path, context: int, memory: float, gpu: str | None = None
) -> tuple[str, int]:
    """``trl vllm-serve`` with the paper preset's engine flags, as ``cwgrpo.launch.launcher`` builds and starts it
    (ports claimed through ``cwgrpo.launch.devices``), on ``gpu`` (default: this process's GPU); stopped when
    ``stack`` closes. Returns its URL and the port of its weight-sync group."""
    from cwgrpo.launch.devices import lease
    from cwgrpo.launch.launcher import plan
    from cwgrpo.launch.multinode import ports_needed
    from cwgrpo.launch.vllm_server import wait_for_server
    from cwgrpo.train.options import split_options

    options = {
        **preset_train("paper"),
        "vllm_max_model_length": context,
        "vllm_gpu_memory_utilization": memory,
    }
    job, trl_options = split_options(options)
    ports = stack.enter_context(lease(0, ports_needed(job))).ports
    gpus = [str(i) for i in range(job.vllm_server_gpu + 1)]  # names only: the server shares this GPU
    command, _, _, _ = plan(["train"], job, gpus, str(model_dir), ports, trl_options)
    env = None if gpu is None else {**os.environ, "CUDA_VISIBLE_DEVICES": gpu}
    server = subprocess.Popen(command, env=env)
    stack.callback(lambda: (server.terminate(), server.wait(timeout=60)))
    url = f"http://localhost:{ports[1]}"
    wait_for_server(f"{url}/health", server)
    return url, ports[2]


def served(model_dir: Path, args: argparse.Namespace) -> dict[str, Any]:
    from trl.generation.vllm_client import VLLMClient

    from cwgrpo.generation.context_budget import fit_client_to_context
    from cwgrpo.models.tiny import load_tokenizer

    context = args.prompt_tokens + args.completion_tokens
    started = time.perf_counter()
    with contextlib.ExitStack() as stack:
        url = args.server_url or start_server(stack, model_dir, context, args.server_memory)[0]
        client = VLLMClient(base_url=url, connection_timeout=60)
        served_context = fit_client_to_context(client)
        tokenizer = load_tokenizer(model_dir)
        # prompts of different lengths, as the training processes' prompts reach the server together
        texts = [prompt_text(tokenizer, args.prompt_tokens - 2 * i)[0] for i in range(3)]
        prompts = [tokenizer(text, add_special_tokens=False)["input_ids"] for text in texts]
        start = time.perf_counter()
        output = client.generate(
            prompts=prompts, n=GROUP, temperature=preset_train("paper")["temperature"],
            max_tokens=args.completion_tokens, generation_kwargs=sampling_kwargs(len(tokenizer)),
        )  # fmt: skip
        elapsed = time.perf_counter() - start
    lengths = [len(c) for c in output["completion_ids"]]
    prompt_lengths = [len(p) for p in prompts for _ in range(GROUP)]
    return {
        "server_context": served_context,
        "generate_s": elapsed,
        "wall_with_start_s": time.perf_counter() - started,
        "tokens_per_s": sum(lengths) / elapsed,
        **check_lengths(prompt_lengths, lengths, served_context, args.completion_tokens),
    }


# -- weight push: the trainer's NCCL push into the server (the one step no CPU can take) -------------------
def synced(model_dir: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Push changed weights from GPU 0 into a server on GPU 1 as TRL's trainer does; the server's greedy
    completion must change (and, bf16 rounding aside, start as this process's own completion does)."""
    import torch
    from transformers import AutoModelForCausalLM
    from trl.generation.vllm_client import VLLMClient

    from cwgrpo.models.tiny import load_tokenizer

    if torch.cuda.device_count() < 2:
        return {"run": False, "why": "needs 2 GPUs: NCCL cannot join two processes on one GPU"}
    tokenizer = load_tokenizer(model_dir)
    prompt = tokenizer(prompt_text(tokenizer, args.prompt_tokens)[0], add_special_tokens=False)["input_ids"]
    greedy = {"n": 1, "temperature": 0.0, "max_tokens": 16}
    with contextlib.ExitStack() as stack:
        url, group_port = start_server(stack, model_dir, args.prompt_tokens + 16, args.server_memory, gpu="1")
        client = VLLMClient(base_url=url, group_port=group_port, connection_timeout=60)
        before = client.generate(prompts=[prompt], **greedy)["completion_ids"][0]
        client.init_communicator(device=0)
        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.bfloat16).to("cuda:0")
        with torch.no_grad():
            for param in model.parameters():
                param.mul_(-1.0)  # a change no rounding can hide
        started = time.perf_counter()
        with client.weight_update():
            for name, param in model.named_parameters():
                client.update_named_param(name, param.data)
        pushed_s = time.perf_counter() - started
        client.reset_prefix_cache()
        after = client.generate(prompts=[prompt], **greedy)["completion_ids"][0]
        here = model.generate(torch.tensor([prompt], device="cuda:0"), do_sample=False, max_new_tokens=1)
    return {
        "run": True,
        "push_s": pushed_s,
        "changed": after != before,
        "first_token_as_here": bool(after) and after[0] == int(here[0, -1]),
    }


def argument_problems(args: argparse.Namespace) -> list[str]:
    """What is wrong with the arguments, each as its message: checked before any model is built."""
    from cwgrpo.weighting import METHODS

    problems = []
    if not 0 < args.server_memory <= 1:  # NaN too
        problems.append(f"--server-memory {args.server_memory}: a share of the GPU's memory, in (0, 1]")
    if args.model_dir is None and args.arch not in ARCHS:
        problems.append(f"--arch {args.arch!r}: one of {', '.join(ARCHS)}, or give --model-dir")
    if args.model_dir is not None and not (args.model_dir / "config.json").is_file():
        problems.append(f"--model-dir {args.model_dir}: no config.json there; name a model folder")
    unknown = [m for m in args.methods if m not in METHODS]
    if unknown:
        problems.append(f"--methods: unknown {unknown}; known: {', '.join(METHODS)}")
    if args.out.is_dir():
        problems.append(f"--out {args.out}: a folder; name the JSON file to write")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = command_line(__doc__)
    parser.add_argument("--arch", default="qwen2-1.5b", help="ARCHS: qwen2-1.5b or tiny")
    parser.add_argument("--prompt-tokens", type=int, default=512)
    parser.add_argument("--completion-tokens", type=int, default=4096)
    parser.add_argument(
        "--paths", nargs="+", choices=["colocated", "server", "sync"], default=["colocated", "server", "sync"]
    )
    parser.add_argument("--methods", nargs="+", default=["grpo", "cw_grpo"])
    parser.add_argument("--server-memory", type=float, default=0.45, help="the server's share of the GPU")
    parser.add_argument("--model-dir", type=Path, help="a model folder to use instead of a random --arch")
    parser.add_argument("--server-url", help="a running server to use instead of starting one")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "gpu_acceptance.json")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # internal: one colocated step of this method
    args = parser.parse_args(argv)
    if args.prompt_tokens < 2 or args.completion_tokens < 1:
        parser.error("--prompt-tokens must be >= 2 and --completion-tokens >= 1")
    problems = argument_problems(args)
    if problems:  # before an hour of GPU time, not after it
        parser.error("; ".join(problems))
    import torch

    cuda = torch.cuda.is_available()
    if args.one:
        with tempfile.TemporaryDirectory() as tmp:
            result = colocated_step(args.one, args.model_dir, args, Path(tmp))
        args.out.write_text(json.dumps(result))
        return 0
    if "colocated" in args.paths and not cuda:
        parser.error("the colocated path needs a CUDA GPU (vLLM's CPU build cannot take TRL's weight sync)")
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = args.model_dir or build_model(args.arch, Path(tmp) / "model", cuda)
        result: dict[str, Any] = {
            "arch": args.arch if args.model_dir is None else str(args.model_dir),
            "device": torch.cuda.get_device_name() if cuda else "cpu",
            "prompt_tokens": args.prompt_tokens,
            "completion_tokens": args.completion_tokens,
        }
        if "server" in args.paths:
            result["server"] = served(model_dir, args)
        if "colocated" in args.paths:
            result["colocated"] = colocated(model_dir, args, Path(tmp))
        if "sync" in args.paths and cuda:
            result["sync"] = synced(model_dir, args)
    checks = [result["server"]["all_reach_budget"]] if "server" in result else []
    checks += [result["sync"]["changed"]] if result.get("sync", {}).get("run") else []
    checks += [
        r.get("all_reach_budget", False) for m, r in result.get("colocated", {}).items() if m in args.methods
    ]
    result["passed"] = bool(checks) and all(checks)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0 if result["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
