"""Step-time ratio CW-GRPO / GRPO, measured side by side in one process: the tiny model on CPU.

What is timed: the loss and backward pass of ``CWGRPOTrainer`` on one fixed micro-batch (the part of a
training step that the method changes; generation and reward scoring are identical for both methods
and would only add noise). Methods are interleaved repetition by repetition so that machine load hits
both alike; the ratio of medians is reported. ``cw_diagnostics`` (the logging) is timed separately.

    python benchmarks/bench_step_ratio.py [--reps 40] [--out benchmarks/results/step_ratio.json]

The paper's 1.5B architecture on a GPU: ``benchmarks/gpu_acceptance.py`` (a full step per method, its
peak memory and the CW-GRPO / GRPO ratio).
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

import torch
from bench_common import command_line, write_report


def _trainer(model_dir: Path, out: Path, **options):
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from cwgrpo.trainer import CWGRPOConfig, CWGRPOTrainer

    config = CWGRPOConfig(
        output_dir=str(out), report_to="none", loss_type="grpo", seed=0, use_cpu=True, bf16=False,
        num_generations=8, per_device_train_batch_size=128, max_completion_length=24, **options,
    )  # fmt: skip
    data = Dataset.from_list([{"prompt": [{"role": "user", "content": "1+1"}]}] * 8)
    trainer = CWGRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32),
        args=config,
        train_dataset=data,
        reward_funcs=lambda completions, **kw: [0.0] * len(completions),
        processing_class=AutoTokenizer.from_pretrained(model_dir),
    )
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = 1
    return trainer


def _batch(vocab: int, b: int = 128, p: int = 8, t: int = 24) -> dict:
    """A fixed micro-batch."""
    gen = torch.Generator().manual_seed(0)
    lengths = torch.randint(4, t + 1, (b,), generator=gen)
    mask = (torch.arange(t)[None, :] < lengths[:, None]).long()
    prompt, advantages = torch.randint(4, vocab, (b, p), generator=gen), torch.randn(b, generator=gen)
    return {
        "prompt_ids": prompt,
        "prompt_mask": torch.ones(b, p, dtype=torch.long),
        "completion_ids": torch.randint(4, vocab, (b, t), generator=gen),
        "completion_mask": mask,
        "advantages": advantages,
        "num_items_in_batch": mask.sum(),
    }


def main() -> None:
    parser = command_line(__doc__)
    parser.add_argument("--reps", type=int, default=40)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/step_ratio.json"))
    args = parser.parse_args()
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
                start = time.perf_counter()
                trainer.model.zero_grad(set_to_none=True)
                trainer.compute_loss(trainer.model, dict(batch)).backward()
                if rep >= 3:  # warm-up repetitions are dropped
                    times[name].append(time.perf_counter() - start)
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
