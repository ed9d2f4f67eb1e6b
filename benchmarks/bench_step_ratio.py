"""Step-time ratio CW-GRPO / GRPO, measured side by side in one process: the tiny model on CPU, or the
1.5B's architecture at the paper's micro-batch on a GPU.

What is timed: the loss and backward pass of ``CWGRPOTrainer`` on one fixed micro-batch (the part of a
training step that the method changes; generation and reward scoring are identical for both methods
and would only add noise). Methods are interleaved repetition by repetition so that machine load hits
both alike; the ratio of medians is reported. ``cw_diagnostics`` (the logging) is timed separately.

    python benchmarks/bench_step_ratio.py [--reps 40] [--out benchmarks/results/step_ratio.json]

``--gpu`` times the paper's loss step instead: a randomly initialised model of DeepSeek-R1-Distill-
Qwen-1.5B's architecture (Qwen2: hidden 1536, 28 layers, 12 heads, 2 KV heads, intermediate 8960,
vocabulary 151,936; no download), bf16, gradient checkpointing, the paper's micro-batch of one group (12
completions, 512 prompt and up to 4,096 completion tokens), the released log-prob temperature 1.0, for
GRPO, CW-GRPO (both variants) and Clip-Cov; it reports each median, the CW/GRPO ratios (goal <= 1.02)
and the peak GPU memory of each (absolute, with all four models resident, and the step's own on top of
what was allocated before it; no method's gradients are held during another's step). ``--gpu --arch tiny`` runs the same code path on a small Qwen2 on CPU,
which is how it is checked on a machine without a GPU:

    python benchmarks/bench_step_ratio.py --gpu --reps 10 --out benchmarks/results/step_ratio_gpu.json
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from pathlib import Path

import torch
from bench_common import command_line, write_report


def _trainer(model_dir: Path, out: Path, device: torch.device | None = None, **options):
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from cwgrpo.trainer import CWGRPOConfig, CWGRPOTrainer

    defaults = dict(
        use_cpu=True, bf16=False, num_generations=8, per_device_train_batch_size=128, max_completion_length=24
    )
    config = CWGRPOConfig(
        output_dir=str(out), report_to="none", loss_type="grpo", seed=0, **{**defaults, **options}
    )
    init = config.model_init_kwargs or {}
    dtype = getattr(torch, init.get("dtype", "float32"))
    data = Dataset.from_list([{"prompt": [{"role": "user", "content": "1+1"}]}] * 8)
    trainer = CWGRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype).to(device or "cpu"),
        args=config,
        train_dataset=data,
        reward_funcs=lambda completions, **kw: [0.0] * len(completions),
        processing_class=AutoTokenizer.from_pretrained(model_dir),
    )
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = 1
    return trainer


def _batch(
    vocab: int,
    b: int = 128,
    p: int = 8,
    t: int = 24,
    one_prompt: bool = False,
    device: torch.device | None = None,
) -> dict:
    """A fixed micro-batch; ``one_prompt``: one group (one prompt's rows, advantages summing to 0)."""
    gen = torch.Generator().manual_seed(0)
    lengths = torch.randint(4, t + 1, (b,), generator=gen)
    mask = (torch.arange(t)[None, :] < lengths[:, None]).long()
    prompt = torch.randint(4, vocab, (1 if one_prompt else b, p), generator=gen).expand(b, p)
    advantages = torch.randn(b, generator=gen)
    if one_prompt:
        advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-4)
    batch = {
        "prompt_ids": prompt.contiguous(),
        "prompt_mask": torch.ones(b, p, dtype=torch.long),
        "completion_ids": torch.randint(4, vocab, (b, t), generator=gen),
        "completion_mask": mask,
        "advantages": advantages,
        "num_items_in_batch": mask.sum(),
    }
    return {k: v.to(device or "cpu") for k, v in batch.items()}


def _time(trainer, batch) -> float:
    sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
    sync()
    start = time.perf_counter()
    trainer.model.zero_grad(set_to_none=True)
    trainer.compute_loss(trainer.model, dict(batch)).backward()
    sync()
    return time.perf_counter() - start


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
GPU_METHODS = {
    "grpo": {"cw_method": "grpo"},
    "cw_grpo_released": {"cw_method": "cw_grpo", "cw_variant": "released"},
    "cw_grpo_described": {"cw_method": "cw_grpo", "cw_variant": "described"},
    "clip_cov": {"cw_method": "clip_cov"},
}


def _paper_step(args, tmp: Path) -> dict:
    """Median loss + backward time and peak memory per method at the paper's micro-batch."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from cwgrpo.models.tiny import save_tiny

    cuda = torch.cuda.is_available() and args.arch != "tiny"
    if args.arch != "tiny" and not cuda:
        raise SystemExit(
            "--gpu with the 1.5B architecture needs a CUDA device (use --arch tiny to check the code)"
        )
    device = torch.device("cuda" if cuda else "cpu")
    model_dir = tmp / "model"  # the tiny tokenizer (the batch is made of token ids), then our model over it
    save_tiny(model_dir, "small", seed=0)
    torch.manual_seed(0)
    config = Qwen2Config(**ARCHS[args.arch], use_cache=False)
    Qwen2ForCausalLM(config).to(torch.bfloat16 if cuda else torch.float32).save_pretrained(model_dir)
    group, prompt, completion = args.group, args.prompt_tokens, args.completion_tokens
    options = dict(
        use_cpu=not cuda, bf16=cuda, gradient_checkpointing=cuda, gradient_checkpointing_kwargs={"use_reentrant": False},
        num_generations=group, per_device_train_batch_size=group, steps_per_generation=1,
        cw_one_group_per_micro_batch=True, max_completion_length=completion, cw_logprob_temperature=1.0,
        model_init_kwargs={"dtype": "bfloat16" if cuda else "float32"}, cw_sample_every=-1,
    )  # fmt: skip
    trainers = {
        name: _trainer(model_dir, tmp / name, device=device, **options, **method)
        for name, method in GPU_METHODS.items()
    }
    batch = _batch(config.vocab_size, b=group, p=prompt, t=completion, one_prompt=True, device=device)
    times: dict[str, list[float]] = {name: [] for name in trainers}
    peaks: dict[str, int] = {}
    step_peaks: dict[str, int] = {}  # over what was allocated before the step (the four models' weights)
    for rep in range(args.reps + 2):
        for name, trainer in trainers.items():
            if cuda:
                trainer.model.zero_grad(set_to_none=True)
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
                before = torch.cuda.memory_allocated()
            elapsed = _time(trainer, batch)
            if rep >= 2:
                times[name].append(elapsed)
            if cuda:
                peak = torch.cuda.max_memory_allocated()
                peaks[name] = max(peaks.get(name, 0), peak)
                step_peaks[name] = max(step_peaks.get(name, 0), peak - before)
            trainer.model.zero_grad(set_to_none=True)  # no method's gradients held during another's step
    medians = {name: statistics.median(values) for name, values in times.items()}
    return {
        "what": f"loss + backward of one group ({group} x ({prompt} + {completion}) tokens), arch {args.arch}, "
        f"{'bf16 on ' + torch.cuda.get_device_name() if cuda else 'float32 on CPU'}, gradient checkpointing "
        f"{cuda}, interleaved",
        "reps": args.reps,
        "median_s": medians,
        "ratio_over_grpo": {name: medians[name] / medians["grpo"] for name in medians},
        "goal_ratio_at_most": 1.02,
        "goal_met": {n: medians[n] / medians["grpo"] <= 1.02 for n in medians if n.startswith("cw_grpo")},
        "peak_memory_gib": {name: peak / 2**30 for name, peak in peaks.items()},
        "peak_step_memory_gib": {name: peak / 2**30 for name, peak in step_peaks.items()},
        "device": torch.cuda.get_device_name() if cuda else "cpu",
    }


def main() -> None:
    parser = command_line(__doc__)
    parser.add_argument("--reps", type=int, default=40)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/step_ratio.json"))
    parser.add_argument("--gpu", action="store_true", help="the paper's loss step (see the module docstring)")
    parser.add_argument("--arch", choices=sorted(ARCHS), default="qwen2-1.5b", help="with --gpu")
    parser.add_argument("--group", type=int, default=12, help="with --gpu: completions per micro-batch (G)")
    parser.add_argument("--prompt-tokens", type=int, default=512, help="with --gpu")
    parser.add_argument(
        "--completion-tokens", type=int, default=4096, help="with --gpu: the longest completion"
    )
    args = parser.parse_args()
    if args.gpu:
        with tempfile.TemporaryDirectory() as tmp:
            result = _paper_step(args, Path(tmp))
        write_report(args.out, result)
        print(json.dumps(result, indent=2))
        return
    torch.set_num_threads(1)

    from cwgrpo.models.tiny import save_tiny

    with tempfile.TemporaryDirectory() as tmp:
        model_dir = Path(tmp) / "model"
        save_tiny(model_dir, "small", seed=0)
        variants = {
            "grpo": _trainer(model_dir, Path(tmp) / "a", cw_method="grpo", cw_diagnostics=False),
            "cw_grpo": _trainer(model_dir, Path(tmp) / "b", cw_method="cw_grpo", cw_diagnostics=False),
            "cw_grpo+diagnostics": _trainer(
                model_dir, Path(tmp) / "c", cw_method="cw_grpo", cw_sample_every=-1
            ),
        }
        batch = _batch(variants["grpo"].model.config.vocab_size)
        times: dict[str, list[float]] = {name: [] for name in variants}
        for rep in range(args.reps + 3):
            for name, trainer in variants.items():
                elapsed = _time(trainer, batch)
                if rep >= 3:  # warm-up repetitions are dropped
                    times[name].append(elapsed)
    medians = {name: statistics.median(values) for name, values in times.items()}
    result = {
        "what": "loss + backward of one 128 x 24 micro-batch, tiny 'small' model, 1 thread, interleaved",
        "reps": args.reps,
        "median_s": medians,
        "ratio_cw_grpo_over_grpo": medians["cw_grpo"] / medians["grpo"],
        "ratio_with_diagnostics_over_grpo": medians["cw_grpo+diagnostics"] / medians["grpo"],
    }
    write_report(args.out, result)
    for name, value in medians.items():
        print(f"{name:<22} {value * 1e3:8.2f} ms")
    print(f"ratio cw_grpo / grpo: {result['ratio_cw_grpo_over_grpo']:.3f}")
    print(f"ratio cw_grpo+diagnostics / grpo: {result['ratio_with_diagnostics_over_grpo']:.3f}")


if __name__ == "__main__":
    main()
