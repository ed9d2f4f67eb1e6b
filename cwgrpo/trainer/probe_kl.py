"""How far each optimiser step moves the policy: the KL between consecutive policies on a probe set.

Logged as ``probe/kl_consecutive`` and ``probe/kl_from_start`` (``cw_probe_prompts``): the first training
prompts, each with one greedy completion of the policy at train begin, scored after every optimiser step
over the full next-token distributions. The probe set and the start's log-probs are kept in the run's
``live/`` folder (``PROBE_FILE``), so a resumed run logs the uninterrupted run's values; without it, it
fixes a new probe set and logs ``probe/restarted: 1``.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import torch
from transformers import GenerationConfig, TrainerCallback

from cwgrpo.io import atomic_path

logger = logging.getLogger(__name__)

KEYS = ("probe/kl_consecutive", "probe/kl_from_start")
RESTARTED = "probe/restarted"
PROBE_FILE = "probe_set.pt"  # in the run's live/ folder: the probe set and the start's log-probs
MAX_PROBE_BYTES = 8 * 2**30  # the start's and the previous step's log-probs together


def probe_count(requested: int, dataset_size: int, completion_tokens: int, vocab_size: int) -> int:
    """``requested`` cut to the training set, with a warning; a ValueError over ``MAX_PROBE_BYTES``."""
    n = min(requested, dataset_size)
    if n < requested:
        logger.warning(
            "cw_probe_prompts=%d is more than the %d training prompts: the probe uses all %d",
            requested,
            dataset_size,
            n,
        )
    size = 2 * n * completion_tokens * vocab_size * 4
    if size > MAX_PROBE_BYTES:
        raise ValueError(
            f"cw_probe_prompts={requested}: {n} probes x {completion_tokens} completion tokens x {vocab_size} "
            f"vocabulary would keep {size / 2**30:.1f} GiB of log-probs (at most {MAX_PROBE_BYTES / 2**30:.0f}); "
            "use fewer probe prompts"
        )
    return n


def mean_token_kl(prev_logps: torch.Tensor, new_logps: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of ``KL(prev || new)`` (over the last axis) where ``mask`` is nonzero; 0 with none."""
    if prev_logps.shape != new_logps.shape or prev_logps.shape[:-1] != mask.shape:
        raise ValueError(
            f"log-probs {tuple(prev_logps.shape)} and {tuple(new_logps.shape)}, mask {tuple(mask.shape)}: "
            "the log-probs must agree and the mask must be their shape without the vocabulary"
        )
    prev, new = prev_logps.double(), new_logps.double()
    p = prev.exp()
    per_token = torch.where(p > 0, p * (prev - new), torch.zeros_like(p)).sum(-1)
    valid = mask.bool()
    if not valid.any():
        return per_token.new_zeros(())
    return per_token[valid].mean()


def completion_mask(completion_ids: torch.Tensor, eos_ids: list[int], pad_id: int | None) -> torch.Tensor:
    """1 for each completion token up to and including its first EOS, 0 after it and on padding."""
    is_eos = torch.isin(completion_ids, torch.tensor(eos_ids, device=completion_ids.device))
    after_eos = (is_eos.long().cumsum(-1) - is_eos.long()) > 0  # strictly after the first EOS
    mask = ~after_eos
    if pad_id is not None and pad_id not in eos_ids:
        mask &= completion_ids != pad_id
    return mask.long()


class ProbeKL(TrainerCallback):
    """The probe set and its per-step KL for one ``CWGRPOTrainer`` (built by it when ``cw_probe_prompts`` > 0)."""

    def __init__(self, trainer: Any, n_prompts: int, chunk: int = 8) -> None:
        self.trainer, self.n_prompts, self.chunk = trainer, n_prompts, chunk
        self.inputs: dict[str, torch.Tensor] | None = None
        self.start: torch.Tensor | None = None
        self.prev: torch.Tensor | None = None
        self.restarted = False  # a resume without the saved probe set: marked at its first step

    @torch.no_grad()
    def _build_probes(self, model) -> dict[str, torch.Tensor]:
        """Prompt ids as the trainer builds them, left-padded, plus one greedy completion each."""
        t = self.trainer
        if len(t.train_dataset) < 1:
            raise ValueError("cw_probe_prompts: the training dataset has no prompt to probe with")
        vocab = model.config.get_text_config().vocab_size
        n = probe_count(self.n_prompts, len(t.train_dataset), t.max_completion_length, vocab)
        prompts = [t.train_dataset[i]["prompt"] for i in range(n)]  # rows as TRL's sampler yields them
        prompt_ids, _, _ = t._tokenize_prompts(prompts)
        device = t.accelerator.device
        width = max(len(p) for p in prompt_ids)
        ids = torch.full((n, width), t._tokenizer.pad_token_id, dtype=torch.long, device=device)
        attention = torch.zeros((n, width), dtype=torch.long, device=device)
        for row, p in enumerate(prompt_ids):  # left padding, as TRL generates
            ids[row, width - len(p) :] = torch.tensor(p, dtype=torch.long, device=device)
            attention[row, width - len(p) :] = 1
        config = GenerationConfig(
            max_new_tokens=t.max_completion_length,
            do_sample=False,
            eos_token_id=list(t.eos_token_ids),
            pad_token_id=t._tokenizer.pad_token_id,
        )
        out = model.generate(input_ids=ids, attention_mask=attention, generation_config=config)
        completion = out[:, ids.size(1) :]
        mask = completion_mask(completion, list(t.eos_token_ids), t._tokenizer.pad_token_id)
        return {
            "input_ids": torch.cat([ids, completion], dim=1),
            "attention_mask": torch.cat([attention, mask.to(attention.dtype)], dim=1),
            "completion_mask": mask,
        }

    @torch.no_grad()
    def _logps(self, model) -> torch.Tensor:
        """(N, C, V) float32 log-softmax of the unscaled logits at every completion position."""
        assert self.inputs is not None
        ids, attention = self.inputs["input_ids"], self.inputs["attention_mask"]
        width = self.inputs["completion_mask"].size(1)
        positions = (attention.long().cumsum(-1) - 1).clamp(min=0)  # left padding: count real tokens
        parts = []
        for s in range(0, ids.size(0), self.chunk):
            logits = model(
                input_ids=ids[s : s + self.chunk],
                attention_mask=attention[s : s + self.chunk],
                position_ids=positions[s : s + self.chunk],
            ).logits
            parts.append(torch.log_softmax(logits[:, -width - 1 : -1].float(), dim=-1))
        return torch.cat(parts)

    def _score(self, model) -> torch.Tensor:
        """The log-probs in eval mode (no dropout), the model's mode restored afterwards."""
        was_training = model.training
        model.eval()
        try:
            if self.inputs is None:
                self.inputs = self._build_probes(model)
            return self._logps(model)
        finally:
            model.train(was_training)

    def _save(self, path: Path) -> None:
        assert self.inputs is not None and self.start is not None
        state = {"n_prompts": self.n_prompts, "inputs": {k: v.cpu() for k, v in self.inputs.items()}}
        with atomic_path(path) as tmp:
            torch.save({**state, "start": self.start.cpu()}, tmp)

    def _load(self, path: Path) -> bool:
        """The probe set and start saved by this run's first start, if readable and of this probe."""
        try:
            state = torch.load(path, map_location=self.trainer.accelerator.device, weights_only=True)
        except Exception as err:  # missing, truncated, not torch's: any of them means start afresh, marked
            logger.warning("the probe set of this run (%s) is unreadable: %s", path, err)
            return False
        if not isinstance(state, dict) or state.get("n_prompts") != self.n_prompts:
            logger.warning("the probe set in %s is of another cw_probe_prompts", path)
            return False
        self.inputs, self.start = state["inputs"], state["start"]
        return True

    def on_train_begin(self, args, state, control, **kwargs):
        path = Path(args.output_dir) / "live" / PROBE_FILE  # train_config.LIVE
        self.restarted = False
        if state.global_step > 0 and self._load(path):
            self.prev = self._score(self.trainer.model)
            return
        self.start = self.prev = self._score(self.trainer.model)
        if state.global_step > 0:
            logger.warning(
                "step %d: the probe set of this run's start is missing (%s): probe/kl_from_start is measured "
                "from this resume point (logged as %s)",
                state.global_step,
                path,
                RESTARTED,
            )
            self.restarted = True
        elif self.trainer.accelerator.is_main_process:
            self._save(path)

    def on_step_end(self, args, state, control, **kwargs):
        assert self.inputs is not None and self.prev is not None and self.start is not None
        new = self._score(self.trainer.model)
        mask = self.inputs["completion_mask"]
        values = torch.stack([mean_token_kl(self.prev, new, mask), mean_token_kl(self.start, new, mask)])
        metrics = self.trainer._metrics["train"]  # read by TRL's log() at this step's log line
        for key, value in zip(KEYS, values.cpu().tolist(), strict=True):
            metrics[key].append(value)
        if self.restarted:
            metrics[RESTARTED].append(1.0)
            self.restarted = False
        self.prev = new
