"""The options of the covariance-aware methods (``cw_*``, Clip-Cov's and KL-Cov's), checked by one validator.

``CWOptions`` holds every option ``CWGRPOConfig`` adds to TRL's ``GRPOConfig`` and their rules
(``problems``); the rule that needs TRL's batch geometry is ``CWGRPOConfig``'s.
"""

from __future__ import annotations

import math
import os
import sys
from dataclasses import dataclass, field
from typing import Any

from cwgrpo.trainer.learning_signal import SignalOptions, check_no_signal_steps

# The choices of the method options, named here so that the workflow's parse-time check runs without torch
# (it cost 2 of a dry run's 5 CPU-seconds, and every Slurm job parses again). cwgrpo.weighting, which imports
# nothing outside itself, holds the methods and these choices as its own; tests/unit/test_trainer_options.py
# checks that both name the same ones.
METHOD_NAMES = ("clip_cov", "cw_grpo", "grpo", "kl_cov")
CW_VARIANTS = ("released", "described")
CENTRINGS = ("batch", "sequence")  # the log-prob centring: micro-batch (described) or per sequence (released)
NORMALISERS = ("valid", "padded")  # Z = N (valid tokens) or Z = B*T (padding counted)

SAMPLES_FILE = "cov_samples.jsonl"  # cw_samples_path's default, in the run's output folder (samples_path)


def samples_path(folder: str | os.PathLike) -> str:
    """``cw_samples_path``'s default in ``folder``."""
    return os.path.join(folder, SAMPLES_FILE)


def method_names() -> list[str]:
    """The methods a run may name: the package's and any registered in this process (the user's own)."""
    registry = sys.modules.get("cwgrpo.weighting.registry")
    return sorted({*METHOD_NAMES, *(registry.METHODS if registry else ())})


@dataclass
class CWOptions(SignalOptions):
    """``CWGRPOConfig``'s own options; every default lives here, once. Built alone, it checks itself."""

    cw_method: str = field(
        default="cw_grpo",
        metadata={
            "help": "Per-token advantage method, a name registered in cwgrpo.weighting.METHODS "
            f"({', '.join(METHOD_NAMES)}; spec method.md §2-§3)."
        },
    )
    cw_variant: str = field(
        default="released",
        metadata={
            "help": "CW-GRPO variant (spec method.md §2 table): 'released' (the authors' code: per-sequence "
            "log-prob centring, padded normaliser, gradient through the weights; produced the paper's "
            "numbers) or 'described' (the paper's text: micro-batch centring, mean weight 1, detached)."
        },
    )
    cw_centring: str | None = field(
        default=None,
        metadata={
            "help": "Override the variant's log-prob centring: 'batch' (described) or 'sequence' (released); "
            "None keeps the variant's. One knob of the study's released-versus-described ablation."
        },
    )
    cw_normaliser: str | None = field(
        default=None,
        metadata={
            "help": "Override the variant's weight normaliser Z: 'valid' (N, described) or 'padded' (B*T, "
            "released); None keeps the variant's."
        },
    )
    cw_weight_gradient: bool | None = field(
        default=None,
        metadata={
            "help": "Override whether gradient flows through the weight (released: true, described: false); "
            "None keeps the variant's."
        },
    )
    clip_cov_ratio: float = field(
        default=2e-4,
        metadata={"help": "Clip-Cov: share r of valid tokens whose loss is zeroed (Cui et al.)."},
    )
    clip_cov_lb: float = field(
        default=1.0, metadata={"help": "Clip-Cov: lower covariance bound of candidates."}
    )
    clip_cov_ub: float = field(
        default=5.0, metadata={"help": "Clip-Cov: upper covariance bound of candidates."}
    )
    kl_cov_ratio: float = field(
        default=2e-3,
        metadata={"help": "KL-Cov: share k of valid tokens (top by covariance) that get the penalty."},
    )
    kl_cov_coef: float = field(
        default=1.0,
        metadata={"help": "KL-Cov: coefficient of the |logp - logp_old| penalty on selected tokens."},
    )
    cw_logprob_temperature: float | None = field(
        default=None,
        metadata={
            "help": "Temperature dividing the logits of the loss's log-probs, the reference log-probs and the "
            "logged entropy. None: TRL 1.16's choice, the sampling `temperature`. 1.0: the released run "
            "(TRL 0.15.2 sampled at `temperature` but scored unscaled logits; spec method.md §2)."
        },
    )
    cw_one_group_per_micro_batch: bool = field(
        default=False,
        metadata={
            "help": "Require every loss micro-batch to be exactly one prompt's num_generations completions, as "
            "in the released run (the CW-GRPO weight's mean_A is then 0 and sigma is per group). Needs "
            "per_device_train_batch_size == num_generations and steps_per_generation == 1 (TRL 1.16 otherwise "
            "generates several micro-batches at once and shuffles groups across them); checked again at "
            "every micro-batch."
        },
    )
    max_prompt_length: int | None = field(
        default=None,
        metadata={
            "help": "Keep only the last this many prompt tokens for the loss and the reference log-probs, "
            "after generation (TRL 0.15.2's `max_prompt_length`, as in the released run; generation sees the "
            "whole prompt). None: no cut. No prompt is ever dropped."
        },
    )
    cw_rollout_add_special_tokens: bool = field(
        default=False,
        metadata={
            "help": "Generate each rollout after the prompt ids with the tokenizer's own special tokens added, "
            "as the released run's vLLM 0.7.2 tokenised its text prompts: a second BOS with DeepSeek-R1-Distill "
            "(paper preset: true for 1.5B). The loss and the reference log-probs keep TRL's ids (one BOS), as "
            "released. Applies whichever engine generates."
        },
    )
    cw_diagnostics: bool = field(
        default=True,
        metadata={"help": "Log covariance and weight diagnostics under 'cw/' every micro-batch."},
    )
    cw_probe_prompts: int = field(
        default=0,
        metadata={
            "help": "Log how far each optimiser step moves the policy: on the first this many training prompts, "
            "each with one greedy completion of the policy at train begin, the mean per-token KL between the "
            "policies before and after the step ('probe/kl_consecutive') and between the start and now "
            "('probe/kl_from_start'); cwgrpo.trainer.probe_kl. 0: off."
        },
    )
    cw_sample_every: int = field(
        default=0,
        metadata={
            "help": "Write a sample of (covariance, weight) pairs to cw_samples_path at step 1 and every this "
            "many optimiser steps (0: every save_steps; -1: never)."
        },
    )
    cw_sample_size: int = field(default=4096, metadata={"help": "Tokens per (covariance, weight) sample."})
    cw_samples_path: str | None = field(
        default=None, metadata={"help": "Where samples go (default: <output_dir>/cov_samples.jsonl)."}
    )

    def __post_init__(self) -> None:
        self.check_cw_options()

    def check_cw_options(self) -> None:
        """Raise ``ValueError`` naming every broken rule (one per line, each starting ``option=value``)."""
        found = self.problems()
        if found:
            raise ValueError("\n".join(found))

    def problems(self) -> list[str]:
        """Every broken rule of these options, one message each, starting ``option=value``."""
        found: list[str] = []
        choices = {  # (valid values, and null's meaning where null is allowed)
            "cw_method": (method_names(), ""),
            "cw_variant": (list(CW_VARIANTS), ""),
            "cw_centring": (list(CENTRINGS), " or null (the variant's)"),
            "cw_normaliser": (list(NORMALISERS), " or null (the variant's)"),
            "cw_weight_gradient": ([True, False], " or null (the variant's)"),
        }
        for name, (valid, null) in choices.items():
            value = getattr(self, name)
            known = any(value is v if isinstance(v, bool) else value == v for v in valid)
            if not known and not (null and value is None):
                found.append(f"{name}={value!r}; valid: {valid}{null}")
        for name in ("clip_cov_ratio", "kl_cov_ratio"):
            if not _number(getattr(self, name), lambda v: 0.0 < v <= 1.0):
                found.append(f"{name}={getattr(self, name)!r}: must be in (0, 1]")
        lb, ub = self.clip_cov_lb, self.clip_cov_ub
        if not (_number(lb, math.isfinite) and _number(ub, math.isfinite) and lb < ub):
            found.append(
                f"clip_cov_lb={lb!r} must be below clip_cov_ub={ub!r}, both finite numbers: the candidates "
                "are the tokens with lb < covariance < ub"
            )
        if not _number(self.kl_cov_coef, lambda v: v >= 0):
            found.append(f"kl_cov_coef={self.kl_cov_coef!r}: must be >= 0")
        for name, low, rule in _INTEGERS:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                found.append(f"{name}={value!r}: must be {rule}")
        keep = self.max_prompt_length
        if keep is not None and (isinstance(keep, bool) or not isinstance(keep, int) or keep < 1):
            found.append(f"max_prompt_length={keep!r}: must be >= 1, or None for no cut")
        t = self.cw_logprob_temperature
        if t is not None and not _number(t, lambda v: math.isfinite(v) and v > 0):
            found.append(f"cw_logprob_temperature={t!r}: must be a positive number, or None")
        try:
            check_no_signal_steps(self.cw_no_signal_steps)
        except ValueError as err:
            found.append(str(err))
        return found


# Integer options and their lower bound (and what the message says the bound means).
_INTEGERS = (
    ("cw_probe_prompts", 0, "an integer >= 0 (0: off)"),
    ("cw_sample_every", -1, "an integer >= -1 (0: every save_steps; -1: never)"),
    ("cw_sample_size", 1, "an integer >= 1"),
)


def _number(value: Any, rule) -> bool:
    """``value`` is a real number (no bool, no NaN) that keeps ``rule``."""
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and not math.isnan(value)
        and rule(value)
    )
