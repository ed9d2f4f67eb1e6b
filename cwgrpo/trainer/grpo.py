"""TRL adapter: ``CWGRPOTrainer`` is ``GRPOTrainer`` with per-token advantage reweighting.

Switching a TRL script to CW-GRPO is one line plus one field::

    from cwgrpo.trainer import CWGRPOConfig, CWGRPOTrainer   # instead of GRPOConfig, GRPOTrainer
    args = CWGRPOConfig(..., cw_method="cw_grpo")            # or "grpo", "clip_cov", "kl_cov"

TRL 1.16 (pinned) computes the policy's log-probs in ``_get_per_token_logps_and_entropies`` before
``_compute_loss`` reads ``inputs["advantages"]``, which may be (B, T); so that hook runs the
:mod:`cwgrpo.weighting` method on the very log-probs the loss differentiates and replaces ``A[i]`` by
``A[i] * multipliers[i, t]``, copying no parent code. The options that reproduce the released run are off
by default, so a plain TRL script keeps TRL's behaviour (docs/fidelity.md).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import os
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from trl import GRPOConfig, GRPOTrainer
from trl.trainer.utils import get_config_model_id

from cwgrpo import weighting
from cwgrpo.generation import context_budget, with_special_tokens
from cwgrpo.io import append_jsonl
from cwgrpo.trainer import learning_signal
from cwgrpo.trainer.options import CWOptions, samples_path
from cwgrpo.trainer.probe_kl import ProbeKL
from cwgrpo.trainer.trl_loss import TRL_LOSS_TYPES, aggregate_like_trl
from cwgrpo.weighting.kept_share import group_kept_shares, kept_share_metrics

logger = logging.getLogger(__name__)


@dataclass
class CWGRPOConfig(CWOptions, GRPOConfig):
    """``GRPOConfig`` plus ``CWOptions`` (first among the bases so ``output_dir`` stays the first field)."""

    def __post_init__(self) -> None:
        GRPOConfig.__post_init__(self)
        self.check_cw_options()
        if self.loss_type not in TRL_LOSS_TYPES:  # TRL itself only notices at the first loss computation
            raise ValueError(f"loss_type={self.loss_type!r}; valid in TRL 1.16: {list(TRL_LOSS_TYPES)}")
        if self.cw_method == "kl_cov" and self.num_iterations == 1:
            logger.warning(
                "cw_method='kl_cov' with num_iterations=1: the policy that sampled equals the current one, so the "
                "|logp - logp_old| penalty and its gradient are 0 and KL-Cov trains exactly like GRPO."
            )
        if self.cw_samples_path is None:  # the one default, resolved once TRL has set output_dir
            self.cw_samples_path = samples_path(self.output_dir)

    def problems(self) -> list[str]:
        """``CWOptions``' broken rules and the one that needs TRL's batch geometry, all at once."""
        found = super().problems()
        if self.cw_one_group_per_micro_batch:
            geometry = one_group_geometry_problem(
                self.per_device_train_batch_size, self.num_generations, self.steps_per_generation
            )
            found += [geometry] if geometry else []
        return found

    def method_options(self, epsilon_low: float, epsilon_high: float) -> weighting.MethodOptions:
        """The options every method receives, with the PPO clip range the trainer applies."""
        clip = {"epsilon_low": epsilon_low, "epsilon_high": epsilon_high}
        names = [f.name for f in dataclasses.fields(weighting.MethodOptions) if f.name != "cw_knobs"]
        knobs = weighting.variant_knobs(
            self.cw_variant, self.cw_centring, self.cw_normaliser, self.cw_weight_gradient
        )
        values = {n: clip[n] if n in clip else getattr(self, n) for n in names}
        return weighting.MethodOptions(**values, cw_knobs=knobs)


def default_config(model: Any) -> CWGRPOConfig:
    """The config of a trainer built without ``args``; ``use_cpu`` without an accelerator (no bf16 there)."""
    name = model if isinstance(model, str) else get_config_model_id(model.config)
    use_cpu = not torch.accelerator.is_available()
    if use_cpu:
        logger.info("CWGRPOTrainer without args and without an accelerator: default config with use_cpu=True")
    return CWGRPOConfig(f"{name.split('/')[-1]}-CW-GRPO", use_cpu=use_cpu)


@contextlib.contextmanager
def fused_head_temperature(temperature: float | None) -> Iterator[None]:
    """While TRL's ``__init__`` runs, build its fused LM heads (policy and reference) with ``temperature``."""
    if temperature is None:
        yield
        return
    from trl.trainer import grpo_trainer

    original = grpo_trainer.add_fused_lm_head

    def with_temperature(model, **kwargs: Any):  # TRL passes every option by keyword
        return original(model, **{**kwargs, "temperature": float(temperature)})

    grpo_trainer.add_fused_lm_head = with_temperature
    try:
        yield
    finally:
        grpo_trainer.add_fused_lm_head = original


def one_group_geometry_problem(
    per_device_train_batch_size: int, num_generations: int, steps_per_generation: int
) -> str | None:
    """What breaks the batch geometry under which TRL 1.16 hands the loss one whole group per micro-batch,
    or None."""
    if per_device_train_batch_size != num_generations:
        return (
            f"cw_one_group_per_micro_batch: per_device_train_batch_size ({per_device_train_batch_size}) "
            f"must equal num_generations ({num_generations}), so that each loss micro-batch is one "
            "group; raise gradient_accumulation_steps to keep the prompts per optimiser step"
        )
    if steps_per_generation != 1:
        return (
            f"cw_one_group_per_micro_batch: steps_per_generation must be 1, got {steps_per_generation} "
            "(TRL 1.16 defaults it to gradient_accumulation_steps, then shuffles the generated rows across "
            "that many micro-batches); set steps_per_generation: 1"
        )
    return None


def check_one_group(inputs: dict[str, Any], group_size: int) -> None:
    """Raise unless the micro-batch holds exactly one prompt's ``group_size`` completions."""
    prompt_ids, prompt_mask = inputs["prompt_ids"], inputs["prompt_mask"]
    rows = prompt_ids.size(0)
    same = bool(((prompt_ids == prompt_ids[:1]) | (prompt_mask == 0)).all()) and bool(
        (prompt_mask == prompt_mask[:1]).all()
    )
    if rows != group_size or not same:
        raise RuntimeError(
            f"cw_one_group_per_micro_batch: a loss micro-batch holds {rows} completions "
            f"{'of one prompt' if same else 'of several prompts'}, expected one prompt's {group_size}; "
            "the batch geometry or TRL's sampler no longer gives one group per micro-batch"
        )


def per_completion_means(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Each row's mean of ``values`` over its valid tokens (0 without any): the released run's statistics."""
    mask = mask.to(values.dtype)
    return (values * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)


def k3_kl(logps: torch.Tensor, ref_logps: torch.Tensor) -> torch.Tensor:
    """Per-token k3 estimate of KL(policy || reference), as the released loss computes it (no correction)."""
    log_ratio = ref_logps - logps
    return torch.exp(log_ratio) - log_ratio - 1


class CWGRPOTrainer(GRPOTrainer):
    """``GRPOTrainer`` that applies ``args.cw_method`` to the advantages inside the loss."""

    # TRL's model card: tags, trainer name and the paper to cite
    _tag_names: ClassVar[list[str]] = ["trl", "grpo", "cw-grpo"]
    _name = "CW-GRPO"
    _paper: ClassVar[dict[str, str]] = {
        "title": "Taming Extreme Tokens: Covariance-Aware GRPO with Gaussian-Kernel Advantage Reweighting",
        "id": "2605.11538",
        # docstyle-ignore
        "citation": textwrap.dedent("""\
            @inproceedings{wang2026taming,
                title     = {{Taming Extreme Tokens: Covariance-Aware GRPO with Gaussian-Kernel Advantage Reweighting}},
                author    = {Cheng Wang and Qin Liu and Wenxuan Zhou and Muhao Chen},
                booktitle = {Proceedings of the 64th Annual Meeting of the Association for Computational Linguistics (Volume 2: Short Papers)},
                pages     = {540--546},
                year      = 2026,
                eprint    = {arXiv:2605.11538},
            }"""),
    }

    # The model card names the method a run trained and the paper that introduced it (a baseline is not CW-GRPO).
    _METHOD_NAMES: ClassVar[dict[str, str]] = {
        "grpo": "GRPO",
        "cw_grpo": "CW-GRPO",
        "clip_cov": "Clip-Cov",
        "kl_cov": "KL-Cov",
    }
    _COVARIANCE_PAPER: ClassVar[dict[str, str]] = {
        "title": "The Entropy Mechanism of Reinforcement Learning for Reasoning Language Models",
        "id": "2505.22617",
        # docstyle-ignore
        "citation": textwrap.dedent("""\
            @article{cui2025entropy,
                title   = {{The Entropy Mechanism of Reinforcement Learning for Reasoning Language Models}},
                author  = {Ganqu Cui and others},
                journal = {arXiv preprint arXiv:2505.22617},
                year    = 2025,
            }"""),
    }

    def create_model_card(
        self, model_name: str | None = None, dataset_name: str | None = None, tags: Any = None
    ) -> None:
        """TRL's model card, naming the method, its paper and base model (TRL's: ``None`` for a folder)."""
        from trl.trainer import base_trainer

        method = self.args.cw_method
        self._name = self._METHOD_NAMES.get(method, method)
        self._paper = {
            "cw_grpo": CWGRPOTrainer._paper,
            "grpo": GRPOTrainer._paper,
            "clip_cov": self._COVARIANCE_PAPER,
            "kl_cov": self._COVARIANCE_PAPER,
        }.get(method, {})
        self._tag_names = ["trl", "grpo", method.replace("_", "-")]
        base = get_config_model_id(self.model.config)
        original = base_trainer.generate_model_card

        def filled(**fields: Any) -> Any:
            fields["base_model"] = fields.get("base_model") or base
            fields["hub_model_id"] = fields.get("hub_model_id") or self.args.output_dir
            return original(**fields)

        base_trainer.generate_model_card = filled
        try:
            super().create_model_card(
                model_name or os.path.basename(self.args.output_dir), dataset_name, tags
            )
        finally:
            base_trainer.generate_model_card = original

    def __init__(
        self, model: Any, reward_funcs: Any = None, args: Any = None, *rest: Any, **kwargs: Any
    ) -> None:
        if args is None:
            args = default_config(model)
        if not isinstance(args, CWGRPOConfig):
            raise TypeError(
                f"CWGRPOTrainer needs a CWGRPOConfig (or none, for the defaults), got {type(args).__name__}"
            )
        with fused_head_temperature(args.cw_logprob_temperature):
            super().__init__(model, reward_funcs, args, *rest, **kwargs)
        self.add_callback(learning_signal.monitor(self.args.cw_no_signal_steps))
        if self.args.cw_probe_prompts > 0:
            self.add_callback(ProbeKL(self, self.args.cw_probe_prompts))
        client = getattr(getattr(self, "vllm_generation", None), "vllm_client", None)  # server mode, rank 0
        if self.use_vllm and self.vllm_mode == "server" and client is not None:
            context_budget.fit_client_to_context(client)  # each request: the rest of the server's context
        self._cw_method = weighting.get_method(self.args.cw_method)
        if self.args.cw_method in weighting.UNCLIPPED:
            # e.g. Cui et al.'s KL-Cov: no PPO ratio clip for any token (spec method.md §3); with infinite
            # bounds TRL's clamp is the identity. Clip-Cov keeps the clip (and skips the tokens it caught).
            self.epsilon_low = self.epsilon_high = math.inf
        self._cw_options = self.args.method_options(self.epsilon_low, self.epsilon_high)
        self._cw_pending: dict[str, Any] | None = None  # the micro-batch whose loss is being computed
        self._cw_penalty: torch.Tensor | None = None
        self._cw_micro_step = 0  # micro-batches seen in this optimiser step (seeds Clip-Cov picks)
        self._cw_last_step = -1
        self._cw_sampled_step = -1  # the last optimiser step whose (covariance, weight) sample was written

    def _compute_loss(self, model, inputs):
        inputs = dict(inputs)  # advantages are replaced per micro-batch; never touch TRL's buffered copy
        self._cw_pending, self._cw_penalty = inputs, None
        try:
            loss = super()._compute_loss(model, inputs)
        finally:
            self._cw_pending = None
        if self._cw_penalty is not None:
            loss = loss + aggregate_like_trl(
                self._cw_penalty,
                self._cw_mask(inputs),
                loss_type=self.loss_type,
                training=self.model.training,
                gradient_accumulation_steps=self.current_gradient_accumulation_steps,
                max_completion_length=self.max_completion_length,
                num_items_in_batch=inputs.get("num_items_in_batch"),
                num_processes=self.accelerator.num_processes,
                steps_per_generation=self.args.steps_per_generation,
            )
            self._cw_penalty = None
        return loss

    def _get_per_token_logps_and_entropies(
        self, model, input_ids, attention_mask, logits_to_keep, *args, **kwargs
    ):
        logps, entropies, aux = super()._get_per_token_logps_and_entropies(
            model, input_ids, attention_mask, logits_to_keep, *args, **kwargs
        )
        inputs = self._cw_pending
        if inputs is not None:  # called from the loss (not from generation/reference scoring)
            self._cw_pending = None  # exactly once per loss call
            self._log_released_stats(inputs, logps, entropies)
            self._cw_reweight(inputs, logps)
        return logps, entropies, aux

    def _generate(self, prompts: list):
        """TRL's generation, then the released run's prompt cut (``max_prompt_length``) for the loss."""
        out = super()._generate(prompts)
        keep = self.args.max_prompt_length
        if keep is None:
            return out
        prompt_ids, *rest = out
        return ([ids[-keep:] for ids in prompt_ids], *rest)

    def _generate_single_turn(self, prompt_ids, *args, **kwargs):
        """TRL's generation from ``rollout_prompt_ids``; the loss keeps TRL's ``prompt_ids``."""
        return super()._generate_single_turn(self.rollout_prompt_ids(prompt_ids), *args, **kwargs)

    def rollout_prompt_ids(self, prompt_ids: list[list[int]]) -> list[list[int]]:
        """The prompt ids generation sees (``cw_rollout_add_special_tokens``: the released run's)."""
        if not self.args.cw_rollout_add_special_tokens:
            return prompt_ids
        return [with_special_tokens(self._tokenizer, list(ids)) for ids in prompt_ids]

    @staticmethod
    def _cw_mask(inputs: dict[str, Any]) -> torch.Tensor:
        mask = inputs["completion_mask"]
        return mask if "tool_mask" not in inputs else mask * inputs["tool_mask"]

    def _cw_generator(self) -> torch.Generator:
        """A CPU generator seeded by (seed, optimiser step, micro-batch): reproducible, also after a resume."""
        step = self.state.global_step
        if step != self._cw_last_step:
            self._cw_last_step, self._cw_micro_step = step, 0
        self._cw_micro_step += 1
        seed = (self.args.seed * 1_000_003 + step * 10_007 + self._cw_micro_step) % (2**63)
        return torch.Generator(device="cpu").manual_seed(seed)

    def _cw_reweight(self, inputs: dict[str, Any], logps: torch.Tensor) -> None:
        mask = self._cw_mask(inputs)
        advantages = inputs["advantages"]
        if advantages.dim() != 1:
            raise ValueError(
                "CWGRPOTrainer expects TRL's per-completion advantages of shape (B,), got "
                f"{tuple(advantages.shape)}: another subclass already made them per-token"
            )
        if self.args.cw_one_group_per_micro_batch:
            check_one_group(inputs, self.args.num_generations)
        old_logps = inputs.get("old_per_token_logps")
        batch = weighting.MethodInputs(logps, old_logps, advantages, mask, self._cw_generator())
        out = self._cw_method(batch, self._cw_options)
        inputs["advantages"] = advantages.unsqueeze(1) * out.multipliers.to(advantages.dtype)
        self._cw_penalty = out.penalty
        if self.args.cw_diagnostics:
            self._cw_log(batch, out)

    @torch.no_grad()
    def _log_released_stats(self, inputs: dict[str, Any], logps: torch.Tensor, entropies) -> None:
        """Entropy (and KL) as the released run logs them: the mean of per-completion means."""
        mask = self._cw_mask(inputs)
        stats = {}
        if entropies is not None:
            stats["entropy_per_completion"] = per_completion_means(entropies, mask)
        ref_logps = inputs.get("ref_per_token_logps")
        if self.beta != 0.0 and ref_logps is not None:
            kl = k3_kl(logps, ref_logps)
            stats["kl_per_completion"] = per_completion_means(kl, mask)
        mode = "train" if self.model.training else "eval"
        for name, rows in stats.items():
            self._metrics[mode][name].append(self.accelerator.gather_for_metrics(rows.float()).mean().item())

    @torch.no_grad()
    def _cw_log(self, batch: weighting.MethodInputs, out: weighting.MethodOutput) -> None:
        """Append diagnostics to TRL's metrics (one host sync per micro-batch) and maybe save a sample."""
        metrics, cov, weights = weighting.method_diagnostics(batch, self._cw_options, out)
        mask = batch.mask
        # Groups are known only where a micro-batch is one prompt's group (checked): TRL shuffles the rows of
        # a generation batch before it splits them, so several groups in one micro-batch are mixed.
        one_group = self.args.cw_one_group_per_micro_batch
        groups = (
            group_kept_shares(batch.advantages, weights, mask, self.args.num_generations)
            if one_group
            else None
        )
        if groups is not None:
            metrics.update(kept_share_metrics(groups, self.args.num_generations))
        names = list(metrics)
        values = torch.stack([metrics[n].detach().float().reshape(()) for n in names]).cpu().tolist()
        mode = "train" if self.model.training else "eval"
        for name, value in zip(names, values, strict=True):
            if not math.isnan(value):  # a kept share of an outcome this micro-batch does not hold
                self._metrics[mode][name].append(value)
        if mode == "train" and self._cw_should_sample(cov, mask):
            self._cw_write_sample(cov, weights, mask)

    def _cw_should_sample(self, cov: torch.Tensor, mask: torch.Tensor) -> bool:
        """Whether this micro-batch is the step's (covariance, weight) sample: on step 1 and every
        ``cw_sample_every`` (0: ``save_steps``), the first one with a nonzero covariance, else the last."""
        every = self.args.cw_sample_every
        if every < 0 or not self.accelerator.is_main_process:
            return False
        step = self.state.global_step + 1  # the optimiser step this micro-batch contributes to
        every = every or self.args.save_steps
        if not (step == 1 or (every > 0 and step % every == 0)) or self._cw_sampled_step == step:
            return False
        last = self._cw_micro_step >= self.current_gradient_accumulation_steps
        if last or bool(((cov != 0) & mask.bool()).any()):  # one host sync, on sampled steps only
            self._cw_sampled_step = step
            return True
        return False

    def _cw_write_sample(self, cov: torch.Tensor, weights: torch.Tensor, mask: torch.Tensor) -> None:
        valid = mask.bool()
        cov_v, w_v = cov[valid].float().cpu(), weights[valid].float().cpu()
        if cov_v.numel() > self.args.cw_sample_size:
            gen = torch.Generator().manual_seed(self.args.seed + self.state.global_step)
            keep = torch.randperm(cov_v.numel(), generator=gen)[: self.args.cw_sample_size]
            cov_v, w_v = cov_v[keep], w_v[keep]
        path = self.args.cw_samples_path
        record = {
            "step": self.state.global_step + 1,
            "cov": [round(v, 6) for v in cov_v.tolist()],
            "weight": [round(v, 6) for v in w_v.tolist()],
        }
        append_jsonl(path, record)
