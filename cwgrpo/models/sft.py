"""Supervised warm-up of a tiny model into the tiny preset's "base" model (``cwgrpo sft``).

The tiny preset's stand-in for the paper's distilled base model: a short supervised run on worked
solutions, stopped once greedy dev accuracy reaches ``target_dev_accuracy`` (accuracy jumps at a
seed-dependent step). Measured settings: docs/tiny-calibration.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import time
from collections.abc import Sequence
from dataclasses import field
from pathlib import Path
from typing import Any

from cwgrpo.configs import ConfigError, add_config_arguments, config_from_args, config_hash, describe_options

logger = logging.getLogger(__name__)

__all__ = ["SftConfig", "configure_parser", "greedy_accuracy", "render_prompt", "run", "train_sft"]


@dataclasses.dataclass
class SftConfig:
    """Options of ``cwgrpo sft``."""

    lr: float = field(
        default=1e-3,
        metadata={"help": "peak AdamW learning rate, constant after warm-up (3e-3 plateaued on some seeds)"},
    )
    warmup_steps: int = field(default=20, metadata={"help": "linear learning-rate warm-up steps"})
    adam_beta2: float = field(
        default=0.95, metadata={"help": "AdamW beta2 (0.95 learned the task faster than torch's 0.999)"}
    )
    weight_decay: float = field(default=0.0, metadata={"help": "AdamW weight decay"})
    max_grad_norm: float = field(default=1.0, metadata={"help": "gradient clipping norm (0 disables)"})
    batch_size: int = field(default=32, metadata={"help": "training sequences per optimiser step"})
    max_steps: int = field(default=1000, metadata={"help": "cap on optimiser steps"})
    eval_every: int = field(
        default=25,
        metadata={
            "help": "measure greedy dev accuracy every this many steps (and at max_steps); accuracy can jump "
            "from 0.4 to 0.9 within 50 steps"
        },
    )
    target_dev_accuracy: float = field(
        default=0.4,
        metadata={"help": "stop as soon as greedy dev accuracy reaches this (1.0 or more: never stop early)"},
    )
    train_max_level: int = field(
        default=0,
        metadata={
            "help": "train only on problems with at most this many operations (0: all); 1 makes a warm-up "
            "of seconds reach ~25% on level 1 (smoke settings)"
        },
    )
    dev_limit: int = field(default=100, metadata={"help": "use at most this many dev problems (0: all)"})
    eval_batch_size: int = field(default=256, metadata={"help": "prompts per generate() call on the dev set"})
    max_new_tokens: int = field(
        default=96,
        metadata={"help": "generation cap on dev (a level-5 worked solution is 54 tokens with EOS)"},
    )
    length_grouping: int = field(
        default=16,
        metadata={
            "help": "sort each run of this many batches by length before batching, so little compute goes to "
            "padding (1: plain shuffled batches)"
        },
    )
    prompt_set: str = field(
        default="tiny",
        metadata={"help": "prompt set (cwgrpo.data.prompts) rendering the problems; as in `train`"},
    )
    seed: int = field(default=0, metadata={"help": "seed of torch and of the data order"})
    torch_threads: int = field(
        default=0,
        metadata={
            "help": "torch.set_num_threads; results depend on it. 0 leaves torch's default, which follows "
            "OMP_NUM_THREADS (Snakemake sets it to the job's threads). Never more threads than free cores: "
            "2 threads on a busy 2-core machine ran 7x slower than 1"
        },
    )

    def __post_init__(self) -> None:
        for name in (
            "batch_size",
            "max_steps",
            "eval_every",
            "eval_batch_size",
            "max_new_tokens",
            "length_grouping",
        ):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.lr <= 0:
            raise ConfigError(f"lr must be > 0, got {self.lr}")
        if min(self.warmup_steps, self.dev_limit, self.torch_threads, self.train_max_level) < 0:
            raise ConfigError("warmup_steps, dev_limit, torch_threads and train_max_level must be >= 0")


def render_prompt(tokenizer: Any, problem: str, prompt_set: str = "tiny") -> str:
    """The chat-template prompt for one problem, exactly as ``cwgrpo train`` renders it."""
    from cwgrpo.data.prompts import train_messages

    return tokenizer.apply_chat_template(
        train_messages(prompt_set, problem), tokenize=False, add_generation_prompt=True
    )


def _encode(tokenizer: Any, records: Sequence[dict], prompt_set: str) -> list[tuple[list[int], list[int]]]:
    """(prompt ids, completion ids) per record; the completion is the worked solution plus EOS."""
    from cwgrpo.data.synthetic import worked_solution

    out = []
    for rec in records:
        solution = worked_solution(rec["problem"])
        if not solution.endswith(f"\\boxed{{{rec['answer']}}}"):
            raise ValueError(f"record {rec.get('id')}: answer {rec['answer']!r} disagrees with {solution!r}")
        prompt = tokenizer(render_prompt(tokenizer, rec["problem"], prompt_set), add_special_tokens=False)
        prompt = prompt["input_ids"]
        completion = tokenizer(solution + tokenizer.eos_token, add_special_tokens=False)["input_ids"]
        out.append((prompt, completion))
    return out


def _pack(examples: list[tuple[list[int], list[int]]], pad_id: int) -> tuple[Any, Any, Any]:
    """Right-padded (input_ids, attention_mask, labels) tensors, (N, T); labels -100 off the completion."""
    import torch

    width = max(len(p) + len(c) for p, c in examples)
    ids = torch.full((len(examples), width), pad_id, dtype=torch.long)
    labels = torch.full((len(examples), width), -100, dtype=torch.long)
    mask = torch.zeros((len(examples), width), dtype=torch.long)
    for i, (p, c) in enumerate(examples):
        seq = p + c
        ids[i, : len(seq)] = torch.tensor(seq)
        labels[i, len(p) : len(seq)] = torch.tensor(c)
        mask[i, : len(seq)] = 1
    return ids, mask, labels


def _epoch_batches(lengths: Any, batch_size: int, grouping: int, gen: Any) -> list[Any]:
    """One epoch of full index batches: shuffle, sort runs of ``grouping`` batches by length, shuffle."""
    import torch

    order = torch.randperm(len(lengths), generator=gen)
    span = batch_size * grouping
    batches = []
    for start in range(0, len(order) - batch_size + 1, span):
        run = order[start : start + span]
        run = run[torch.argsort(lengths[run], stable=True)]
        batches += [run[i : i + batch_size] for i in range(0, len(run) - batch_size + 1, batch_size)]
    return [batches[i] for i in torch.randperm(len(batches), generator=gen).tolist()]


def greedy_accuracy(
    model: Any,
    tokenizer: Any,
    records: Sequence[dict],
    max_new_tokens: int = 96,
    batch_size: int = 256,
    prompt_set: str = "tiny",
) -> float:
    """Share of ``records`` whose greedy completion's answer equals the gold answer."""
    import torch

    from cwgrpo.grading.scoring import grade

    was_training = model.training
    model.eval()
    correct = 0
    old_side, tokenizer.padding_side = tokenizer.padding_side, "left"
    try:
        for start in range(0, len(records), batch_size):
            chunk = records[start : start + batch_size]
            prompts = [render_prompt(tokenizer, r["problem"], prompt_set) for r in chunk]
            enc = tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
            with torch.no_grad():
                out = model.generate(
                    **enc,
                    do_sample=False,
                    max_new_tokens=max_new_tokens,
                    pad_token_id=tokenizer.pad_token_id,
                    eos_token_id=tokenizer.eos_token_id,
                )
            texts = tokenizer.batch_decode(out[:, enc["input_ids"].shape[1] :], skip_special_tokens=True)
            correct += sum(grade(t, r["answer"]) for t, r in zip(texts, chunk, strict=True))
    finally:
        tokenizer.padding_side = old_side
        model.train(was_training)
    return correct / max(len(records), 1)


def train_sft(
    model: Any, tokenizer: Any, train_records: Sequence[dict], dev_records: Sequence[dict], cfg: SftConfig
) -> dict[str, Any]:
    """Train ``model`` in place until dev accuracy reaches the target or ``max_steps``."""
    import torch
    from tqdm.auto import tqdm

    ids, mask, labels = _pack(_encode(tokenizer, train_records, cfg.prompt_set), tokenizer.pad_token_id)
    lengths = mask.sum(dim=1)
    gen = torch.Generator().manual_seed(cfg.seed)
    opt = torch.optim.AdamW(
        model.parameters(), lr=cfg.lr, betas=(0.9, cfg.adam_beta2), weight_decay=cfg.weight_decay
    )
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / (cfg.warmup_steps + 1)))
    if len(ids) < cfg.batch_size:
        raise ConfigError(
            f"batch_size={cfg.batch_size} is larger than the training set ({len(ids)} problems)"
        )
    model.train()
    batches: list[Any] = []
    evals, loss_ema = [], None
    acc, step = 0.0, 0
    bar = tqdm(total=cfg.max_steps, desc="sft", unit="step", mininterval=2.0)
    for step in range(1, cfg.max_steps + 1):
        if not batches:  # new epoch, drawn from the same generator
            batches = _epoch_batches(lengths, cfg.batch_size, cfg.length_grouping, gen)
        idx = batches.pop()
        width = int(lengths[idx].max())
        out = model(input_ids=ids[idx, :width], attention_mask=mask[idx, :width], labels=labels[idx, :width])
        opt.zero_grad(set_to_none=True)
        out.loss.backward()
        if cfg.max_grad_norm > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.max_grad_norm)
        opt.step()
        sched.step()
        loss = float(out.loss.detach())
        loss_ema = loss if loss_ema is None else 0.95 * loss_ema + 0.05 * loss
        bar.update(1)
        bar.set_postfix(loss=f"{loss_ema:.3f}", dev=f"{acc:.2f}", refresh=False)
        if step % cfg.eval_every == 0 or step == cfg.max_steps:
            acc = greedy_accuracy(
                model, tokenizer, dev_records, cfg.max_new_tokens, cfg.eval_batch_size, cfg.prompt_set
            )
            evals.append({"step": step, "dev_accuracy": acc, "train_loss": round(loss_ema, 6)})
            logger.info("step %d: train loss %.4f, greedy dev accuracy %.3f", step, loss_ema, acc)
            if acc >= cfg.target_dev_accuracy:
                break
    bar.close()
    reached = acc >= cfg.target_dev_accuracy
    if not reached and cfg.target_dev_accuracy < 1.0:
        logger.warning(
            "dev accuracy %.3f below target %.3f after max_steps=%d", acc, cfg.target_dev_accuracy, step
        )
    model.eval()
    return {"steps": step, "dev_accuracy": acc, "reached_target": reached, "evals": evals}


OUTPUTS = ("out_dir", "marker")  # every other path argument is read (cwgrpo.cli)


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model-dir", required=True, type=Path, help="initial tiny model (build-tiny output)"
    )
    parser.add_argument("--train-data", required=True, type=Path, help="training problems (JSONL records)")
    parser.add_argument(
        "--dev-data", required=True, type=Path, help="dev problems for early stopping (JSONL)"
    )
    parser.add_argument("--out-dir", required=True, type=Path, help="folder for the warmed-up base model")
    parser.add_argument("--marker", required=True, type=Path, help="marker JSON, written after the model")
    add_config_arguments(parser)
    parser.epilog = describe_options(SftConfig)


def run(args: argparse.Namespace) -> int:
    import torch
    from transformers import AutoModelForCausalLM

    from cwgrpo.data.registry import load_records
    from cwgrpo.generation import check_model_dir
    from cwgrpo.io import check_replaceable_dir, write_json
    from cwgrpo.models.tiny import load_tokenizer, save_pretrained_atomic
    from cwgrpo.provenance import provenance
    from cwgrpo.seeding import seed_everything

    cfg = config_from_args(SftConfig, args)
    check_replaceable_dir(args.out_dir)  # before minutes of training
    check_model_dir(args.model_dir)
    train, dev = load_records(args.train_data), load_records(args.dev_data)  # none: an error
    if cfg.train_max_level:
        from cwgrpo.data.synthetic import level

        train = [r for r in train if level(r["problem"]) <= cfg.train_max_level]
        if not train:
            raise ConfigError(
                f"no training problem has at most train_max_level={cfg.train_max_level} operations"
            )
    if cfg.dev_limit:
        dev = dev[: cfg.dev_limit]
    if cfg.torch_threads:
        torch.set_num_threads(cfg.torch_threads)
    seed_everything(cfg.seed)
    tokenizer = load_tokenizer(args.model_dir)
    model = AutoModelForCausalLM.from_pretrained(args.model_dir, dtype=torch.float32)
    logger.info("sft: %d training problems, %d dev problems, config %s", len(train), len(dev), cfg)
    t0 = time.perf_counter()
    result = train_sft(model, tokenizer, train, dev, cfg)
    logger.info(
        "sft: %d steps in %.1f s, dev accuracy %.3f",
        result["steps"],
        time.perf_counter() - t0,
        result["dev_accuracy"],
    )
    save_pretrained_atomic(args.out_dir, model, tokenizer)
    config = dataclasses.asdict(cfg)
    marker = {
        "path": str(args.out_dir),
        **result,
        "n_train": len(train),
        "n_dev": len(dev),
        "init": str(args.model_dir),
        "config": config,
        "provenance": provenance(config_hash=config_hash(config)),
    }
    write_json(args.marker, marker)
    return 0
